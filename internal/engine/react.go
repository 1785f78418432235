package engine

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// The ReAct loop. A pathway that lists tools and runs on one remote agent offers the
// agent its tools (validation refuses tools on a pathway that several remote agents
// run as a pipeline): the model answers either with the final structured answer or
// with tool calls. An answer with tool calls is journaled like any answer; the step
// that applies it checks every call in Go (a tool of the pathway, arguments that
// match the pinned input schema, prerequisites, limits) and writes a record for
// each: refused calls are Failed at once, with a typed failure, and their refusal
// goes back to the model as the call's result; the others are made one per step
// through the write-ahead protocol of tools.go. Once every call of the answer has a
// result, the model is asked again with the turn's calls and their results, and the
// text it wrote with each answer's calls, until it answers or a limit stops the
// turn. A crash never asks the model again for an answer that was journaled: its
// calls are planned from the journal, and the step that planned them writes them
// before any is made. The turn's calls are kept in its transcript exchange (see
// transcript.go).

// maxArgumentsBytes bounds the journaled arguments of a model's tool call; longer
// arguments are cut, which makes them invalid JSON and the call refused.
const maxArgumentsBytes = 8192

// maxModelToolCalls bounds the journaled tool calls of one model answer.
const maxModelToolCalls = 64

// maxAssistantTextBytes bounds the text a model wrote with its tool calls, as the
// turn keeps it; longer text is cut and says so.
const maxAssistantTextBytes = 1024

// cutArguments bounds a model's tool call arguments for the journal.
func cutArguments(args string) string {
	return truncate(args, maxArgumentsBytes)
}

// reactive reports whether pathway p, run by agents, offers its agent tools.
func reactive(p *flowv1.PathwaySpec, agents []flowv1.AgentSpec) bool {
	return len(p.Tools) > 0 && len(agents) == 1
}

// toolPipeline refuses tools on pathway name when remote agents run it as a
// pipeline of several agents: a model may call tools only when it runs the turn
// alone. Re-asking a pipeline after each round of calls would run every agent of
// it again, and its agents cannot share one conversation of calls.
func (c *checker) toolPipeline(j *flowv1.JourneySpec, name flowv1.Name, p *flowv1.PathwaySpec) {
	if len(p.Tools) == 0 || len(p.Agents) < 2 {
		return
	}
	for _, n := range p.Agents {
		for _, a := range j.Agents {
			if a.Name == n && a.Provider == flowv1.ProviderOpenAI {
				c.add("pathway %s: tools are offered only to a pathway run by one agent, and this one runs a %s pipeline of %d agents (%s): "+
					"give the tools to a pathway of its own with one agent, or remove them from this one",
					name, cmp.Or(p.Pipeline, flowv1.PipelineSequential), len(p.Agents), joinNames(p.Agents))
				return
			}
		}
	}
}

func joinNames(names []flowv1.Name) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

// runReAct runs a pathway turn whose agent may call tools (see above).
func (r *run) runReAct(p *flowv1.PathwaySpec, agents []flowv1.AgentSpec, req agent.PathwayRequest) stageResult {
	req.ToolSpecs = r.snap.toolSpecs(p)
	for {
		for i := range r.st.Turn.ToolCalls {
			if res, settled := r.settleCall(&r.st.Turn.ToolCalls[i], req.Context); !settled {
				return res
			}
		}
		req.ToolExchanges = toolExchanges(r.st.Turn.ToolCalls)
		rec, res := r.remote(flowv1.EffectRunPathway, agents, cmp.Or(p.Pipeline, flowv1.PipelineSequential), req)
		if rec == nil {
			return res
		}
		if rec.Result.Failure != nil || len(rec.Result.ToolCalls) == 0 {
			return r.applyAnswer(rec)
		}
		r.addUsage(rec.Result.Usage)
		first := len(r.st.Turn.ToolCalls)
		for _, mc := range rec.Result.ToolCalls {
			res, planned := r.planModelCall(p, mc, req.Context)
			if first < len(r.st.Turn.ToolCalls) {
				// What the model wrote with its calls is given back with them.
				r.st.Turn.ToolCalls[first].AssistantText = preview(strings.TrimSpace(rec.Result.Reply), maxAssistantTextBytes)
			}
			if !planned {
				return res
			}
		}
	}
}

// planModelCall plans a tool call the model asked for. A refused call is recorded as
// a typed failure with source Tool; the turn goes on.
func (r *run) planModelCall(p *flowv1.PathwaySpec, mc flowv1.ModelToolCall, ctx map[string]any) (stageResult, bool) {
	var args map[string]any
	refused := ""
	if s := strings.TrimSpace(mc.Arguments); s != "" {
		if err := json.Unmarshal([]byte(s), &args); err != nil || args == nil {
			args, refused = nil, fmt.Sprintf("tool %s: the arguments are not a JSON object", mc.Name)
		}
	}
	res, planned := r.planCall(p, mc.Name, args, ctx, refused)
	if planned {
		if c := &r.st.Turn.ToolCalls[len(r.st.Turn.ToolCalls)-1]; c.State == flowv1.ToolCallFailed {
			r.addFailure(toolFailure(c))
		}
	}
	return res, planned
}

// settleCall brings call c of a ReAct turn as far as it can go in this step: shown
// for approval, approved or rejected, made, or answered. settled is false when the
// step ends on it; res is then what the stage does.
func (r *run) settleCall(c *flowv1.ToolCallProgress, ctx map[string]any) (res stageResult, settled bool) {
	if c.State == flowv1.ToolCallPending && c.AwaitingApproval {
		if d := r.st.LastDecision; d == nil || d.ID != c.ID || d.State != flowv1.DecisionPending {
			r.holdForApproval(c)
			return stageResult{pause: true}, false
		}
		res, goOn := r.toolApproval(c)
		if !goOn {
			return res, false
		}
		if c.State == flowv1.ToolCallRejected {
			r.addFailure(toolFailure(c))
		}
	}
	if c.State != flowv1.ToolCallPending {
		return turnOver, true
	}
	if r.applyToolAnswer(c) {
		if c.State == flowv1.ToolCallFailed {
			r.addFailure(toolFailure(c))
		}
		return turnOver, true
	}
	if r.wroteAhead(c) {
		return stageResult{pause: true}, false
	}
	return r.waitTool(c, ctx), false
}

// toolExchanges are the turn's calls as the model is told about them: the calls of
// one model answer (planned in one step, so their ids share the step) in one round,
// the first with the text the model wrote with them.
func toolExchanges(calls []flowv1.ToolCallProgress) []agent.ToolExchange {
	if len(calls) == 0 {
		return nil
	}
	out := make([]agent.ToolExchange, 0, len(calls))
	round, last := 0, ""
	for _, c := range calls {
		if step := c.ID[:max(0, strings.LastIndexByte(c.ID, '-'))]; step != last {
			round, last = round+1, step
		}
		ex := agent.ToolExchange{Round: round, ID: c.ID, Tool: c.Tool, Arguments: "{}", Result: cmp.Or(c.Error, "tool call "+string(c.State)),
			AssistantText: c.AssistantText}
		if c.Args != nil {
			ex.Arguments = string(c.Args.Raw)
		}
		if c.State == flowv1.ToolCallDone && c.Result != nil {
			ex.Result = string(c.Result.Raw)
		}
		out = append(out, ex)
	}
	return out
}

// toolSpecs are the tools of pathway p as its agent sees them: the journey's
// description, else the server's, and the input schema the revision pins.
func (s *Snapshot) toolSpecs(p *flowv1.PathwaySpec) []agent.ToolSpec {
	out := make([]agent.ToolSpec, 0, len(p.Tools))
	for _, n := range p.Tools {
		t, ok := s.tool(string(n))
		if !ok {
			continue
		}
		spec := agent.ToolSpec{Name: string(n), Description: t.Description}
		if info, ok := s.serverTools[string(n)]; ok {
			spec.InputSchema = info.InputSchema
			spec.Description = cmp.Or(spec.Description, info.Description)
		}
		out = append(out, spec)
	}
	return out
}
