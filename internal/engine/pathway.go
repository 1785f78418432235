package engine

import (
	"cmp"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// runPathway is the Run stage: the current pathway runs the turn, builtin inline or
// through its remote agents. External pathways do not run on messages: the message
// only routes.
func (r *run) runPathway() stageResult {
	st := r.st
	name := st.CurrentPathway
	p := r.current()
	if p == nil {
		r.fail(flowv1.ReasonInvalidSpec, fmt.Sprintf("pathway %q is not in journey revision %s", name, r.snap.revision), nil)
		return turnOver
	}
	st.Turn.Pathway = name
	if st.LastTurn != nil {
		st.LastTurn.Pathway = name
	}
	if p.IsExternal() {
		return turnOver
	}
	text := ""
	if st.Turn.Trigger == flowv1.TurnMessage {
		text, _ = r.message(st.Turn.MessageID)
	}
	req := r.pathwayRequest(name, p, text)
	agents, remote := r.snap.pathwayAgents(p)
	if remote {
		return r.runRemote(p, agents, req)
	}
	if p.Builtin != nil && len(p.Builtin.ToolCalls) > 0 {
		results, res, ok := r.builtinTools(p, req)
		if !ok {
			return res
		}
		req.Tools = results
	}
	resp, err := r.runBuiltin(p, req)
	if err != nil {
		f := failureOf(err, name)
		return r.applyResult(agent.PathwayResponse{}, &f)
	}
	return r.applyResult(resp, nil)
}

// runRemote runs the pathway through its remote agents: it waits on their answer,
// then applies the journaled answer.
func (r *run) runRemote(p *flowv1.PathwaySpec, agents []flowv1.AgentSpec, req agent.PathwayRequest) stageResult {
	if reactive(p, agents) {
		return r.runReAct(p, agents, req)
	}
	rec, res := r.remote(flowv1.EffectRunPathway, agents, cmp.Or(p.Pipeline, flowv1.PipelineSequential), req)
	if rec == nil {
		return res
	}
	return r.applyAnswer(rec)
}

// applyAnswer applies the journaled final answer of the pathway's agents.
func (r *run) applyAnswer(rec *flowv1.EffectRecord) stageResult {
	ans := rec.Result
	r.addUsage(ans.Usage)
	if ans.Failure != nil {
		return r.applyResult(agent.PathwayResponse{}, ans.Failure)
	}
	outputs, err := decodeJSON(ans.Outputs)
	if err != nil {
		return r.applyResult(agent.PathwayResponse{}, &flowv1.Failure{Source: flowv1.FailureLLM, Component: rec.Agent, Kind: flowv1.FailureValidation, Message: "outputs: " + err.Error()})
	}
	complete := ans.Complete == nil || *ans.Complete
	return r.applyResult(agent.PathwayResponse{Reply: ans.Reply, Outputs: outputs, ResultType: ans.ResultType, Complete: complete}, nil)
}

// pathwayRequest is the question a pathway's agents answer for one turn.
func (r *run) pathwayRequest(name string, p *flowv1.PathwaySpec, text string) agent.PathwayRequest {
	ctx := r.context()
	req := agent.PathwayRequest{
		Pathway:  name,
		Spec:     p,
		Message:  text,
		Context:  ctx,
		Session:  r.sessionInfo(name),
		Feedback: r.feedback(name),
	}
	if len(p.Signature.Inputs) > 0 {
		req.Inputs = make(map[string]any, len(p.Signature.Inputs))
		for _, in := range p.Signature.Inputs {
			if v, ok := ctx[in.Name]; ok {
				req.Inputs[in.Name] = v
			} else if in.Default != nil {
				if v, err := decodeValue(in.Default.Raw); err == nil {
					req.Inputs[in.Name] = v
				}
			} else if text != "" && isMessageInput(in.Name) {
				req.Inputs[in.Name] = text
			}
		}
	}
	// The conversation so far: the user's messages and the replies, oldest first.
	req.History = r.history()
	// What decisions with messaging handed over, by the pathway that produced it.
	if m, ok := ctx["messages"].(map[string]any); ok && len(m) > 0 {
		req.HandedOver = m
	}
	return req
}

// isMessageInput says whether a signature input receives the user's message when the
// context has no value for it: "message", "question" or a name ending in "_message".
func isMessageInput(name string) bool {
	return name == "message" || name == "question" || len(name) > 8 && name[len(name)-8:] == "_message"
}

// applyResult applies a pathway turn's result: the typed outcome in lastTurn,
// accumulation into the context, then, for a complete turn, the Decide stage. A
// failure (an agent error after its retries, an invalid builtin expression) is a turn
// with result failure.
func (r *run) applyResult(resp agent.PathwayResponse, failure *flowv1.Failure) stageResult {
	st := r.st
	lt := st.LastTurn
	st.PathwayTurns++
	if failure != nil {
		return r.executionFailed(*failure)
	}
	rt := cmp.Or(resp.ResultType, flowv1.ResultSuccess)
	lt.AssistantText = resp.Reply
	if strings.TrimSpace(resp.Reply) == "" {
		lt.AssistantText = "" // an empty answer: the turn answers with its fallback reply
	}
	lt.ResultType = rt
	lt.Complete = resp.Complete
	var outputs *apiextensionsv1.JSON
	if len(resp.Outputs) > 0 {
		outputs = toJSON(resp.Outputs)
	}
	lt.Outputs = outputs
	if !r.accumulate(r.current(), resp.Outputs) || !resp.Complete {
		return turnOver
	}
	st.Turn.ResultType = rt
	st.Turn.Outputs = outputs
	return goTo(flowv1.StageDecide)
}

// executionFailed applies a pathway run that failed (an agent error after its
// retries, a builtin expression that failed): a turn with result failure and the typed
// failure in lastTurn. It takes onFailure like any failed turn; with no onFailure it is
// a recoverable error: Graceful stays (the turn answers with its fallback reply,
// answer.go), FailFast fails.
func (r *run) executionFailed(f flowv1.Failure) stageResult {
	lt := r.st.LastTurn
	lt.ResultType = flowv1.ResultFailure
	if tr, _ := r.current().Transitions.ForResult(flowv1.ResultFailure); tr != nil {
		r.addFailure(f)
		lt.FinishReason = flowv1.FinishError
		r.st.Turn.ResultType = flowv1.ResultFailure
		r.st.Turn.Outputs = nil
		return goTo(flowv1.StageDecide)
	}
	if r.recoverable(flowv1.ReasonFailed, f) {
		lt.FinishReason = flowv1.FinishError
	}
	return turnOver
}
