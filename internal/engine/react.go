package engine

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/truncate"
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
	return truncate.Bytes(args, maxArgumentsBytes, "")
}

// reactive reports whether pathway p, run by agents, offers its agents tools: one
// agent, or a Sequential pipeline whose agents each run their own loop in turn.
func reactive(p *flowv1.PathwaySpec, agents []flowv1.AgentSpec) bool {
	return len(p.Tools) > 0 && (len(agents) == 1 || sequential(p))
}

func sequential(p *flowv1.PathwaySpec) bool {
	return p.Pipeline == "" || p.Pipeline == flowv1.PipelineSequential
}

// toolPipeline refuses tools on pathway name when remote agents run it as a
// Parallel, Router or Ensemble pipeline: their agents answer the same question
// side by side, and cannot share one conversation of calls.
func (c *checker) toolPipeline(j *flowv1.JourneySpec, name flowv1.Name, p *flowv1.PathwaySpec) {
	if len(p.Tools) == 0 || len(p.Agents) < 2 || sequential(p) {
		return
	}
	for _, n := range p.Agents {
		for _, a := range j.Agents {
			if a.Name == n && a.Provider == flowv1.ProviderOpenAI {
				c.add("pathway %s: tools are offered to one agent or to a Sequential pipeline, and this one runs a %s pipeline of %d agents (%s): "+
					"make it Sequential, give the tools to a pathway of its own, or remove them from this one",
					name, p.Pipeline, len(p.Agents), joinNames(p.Agents))
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

// runReAct runs a pathway turn whose agents may call tools (see above). The agents
// of a Sequential pipeline run one after the other, each its own loop of calls, as
// RunPipeline runs them: each sees the outputs of the ones before it in its inputs
// and context; the turn's outputs merge in order, its reply is the last one given.
// The turn records which agent runs and what the earlier ones answered, so a step
// picks up where the last one stopped.
func (r *run) runReAct(p *flowv1.PathwaySpec, agents []flowv1.AgentSpec, req agent.PathwayRequest) stageResult {
	req.ToolSpecs = r.snap.toolSpecs(p)
	pipeline := cmp.Or(p.Pipeline, flowv1.PipelineSequential)
	if len(agents) > 1 {
		pipeline = flowv1.PipelineSequential
	}
	turn := r.st.Turn
	for {
		i := min(int(turn.PipelineAgent), len(agents)-1)
		rec, res := r.reactAgent(p, agents[i:i+1], pipeline, r.pipelineRequest(req))
		if rec == nil {
			return res
		}
		if rec.Result.Failure != nil || i == len(agents)-1 {
			return r.applyPipelineAnswer(rec)
		}
		if res, ok := r.nextPipelineAgent(rec); !ok {
			return res
		}
	}
}

// reactAgent runs the tool loop of one agent: it settles the agent's calls and asks
// it again until it answers. rec is its final answer, or nil when the step ends
// with res.
func (r *run) reactAgent(p *flowv1.PathwaySpec, agents []flowv1.AgentSpec, pipeline flowv1.Pipeline, req agent.PathwayRequest) (*flowv1.EffectRecord, stageResult) {
	turn := r.st.Turn
	for {
		calls := turn.ToolCalls[min(int(turn.PipelineFirstCall), len(turn.ToolCalls)):]
		for i := range calls {
			if res, settled := r.settleCall(&calls[i], req.Context); !settled {
				return nil, res
			}
		}
		req.ToolExchanges = toolExchanges(calls)
		rec, res := r.remote(flowv1.EffectRunPathway, agents, pipeline, req)
		if rec == nil || rec.Result.Failure != nil || len(rec.Result.ToolCalls) == 0 {
			return rec, res
		}
		r.addUsage(rec.Result.Usage)
		first := len(turn.ToolCalls)
		for _, mc := range rec.Result.ToolCalls {
			res, planned := r.planModelCall(p, mc, req.Context)
			if first < len(turn.ToolCalls) {
				// What the model wrote with its calls is given back with them.
				turn.ToolCalls[first].AssistantText = preview(strings.TrimSpace(rec.Result.Reply), maxAssistantTextBytes)
			}
			if !planned {
				return nil, res
			}
		}
	}
}

// pipelineRequest is req for the pipeline agent that runs now: after the first, the
// earlier agents' outputs are merged into its inputs and context.
func (r *run) pipelineRequest(req agent.PathwayRequest) agent.PathwayRequest {
	if r.st.Turn.PipelineAgent == 0 {
		return req
	}
	outputs, _ := decodeJSON(r.st.Turn.PipelineOutputs)
	req.Inputs, req.Context = merged(req.Inputs, outputs), merged(req.Context, outputs)
	return req
}

// nextPipelineAgent records the final answer of the pipeline agent that ran and
// hands the turn to the next one. ok is false when the answer's outputs are not a
// JSON object: the turn is then over.
func (r *run) nextPipelineAgent(rec *flowv1.EffectRecord) (stageResult, bool) {
	turn := r.st.Turn
	outputs, err := r.pipelineOutputs(rec)
	if err != nil {
		return r.applyPipelineAnswer(rec), false
	}
	r.addUsage(rec.Result.Usage)
	if len(outputs) > 0 {
		turn.PipelineOutputs = toJSON(outputs)
	}
	turn.PipelineReply = cmp.Or(rec.Result.Reply, turn.PipelineReply)
	turn.PipelineAgent++
	turn.PipelineFirstCall = int32(len(turn.ToolCalls))
	return stageResult{}, true
}

// pipelineOutputs are the earlier agents' outputs with rec's merged over them.
func (r *run) pipelineOutputs(rec *flowv1.EffectRecord) (map[string]any, error) {
	earlier, err := decodeJSON(r.st.Turn.PipelineOutputs)
	if err != nil {
		return nil, err
	}
	own, err := decodeJSON(rec.Result.Outputs)
	if err != nil {
		return nil, err
	}
	return merged(earlier, own), nil
}

// applyPipelineAnswer applies the last pipeline agent's answer (or a failed one)
// as the turn's, with the earlier agents' outputs and reply under its own.
func (r *run) applyPipelineAnswer(rec *flowv1.EffectRecord) stageResult {
	turn := r.st.Turn
	if turn.PipelineAgent == 0 || rec.Result.Failure != nil {
		return r.applyAnswer(rec)
	}
	outputs, err := r.pipelineOutputs(rec)
	if err != nil {
		return r.applyAnswer(rec) // reports the outputs that are not an object
	}
	ans := rec.DeepCopy()
	ans.Result.Reply = cmp.Or(ans.Result.Reply, turn.PipelineReply)
	ans.Result.Outputs = nil
	if len(outputs) > 0 {
		ans.Result.Outputs = toJSON(outputs)
	}
	return r.applyAnswer(ans)
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
// for approval, approved or rejected, made, answered, or settled when its outcome is
// unknown (unknown.go). settled is false when the
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
	if c.State == flowv1.ToolCallPending && r.applyToolAnswer(c) && c.State == flowv1.ToolCallFailed {
		r.addFailure(toolFailure(c))
	}
	if res, wait := r.awaitInput(c); wait {
		return res, false
	}
	if res, wait := r.unknownOutcome(c, true); wait {
		return res, false
	}
	if c.State != flowv1.ToolCallPending {
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

// merged returns a copy of base with extra's keys set over it.
func merged(base, extra map[string]any) map[string]any {
	m := make(map[string]any, len(base)+len(extra))
	maps.Copy(m, base)
	maps.Copy(m, extra)
	return m
}
