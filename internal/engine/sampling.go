package engine

import (
	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// Sampling: a tool server with toolServers[].sampling may ask, during a call, for
// completions from the model of the agent it names. The tool call's request carries
// that agent and the call's cap of completion tokens; the step answers the requests
// (see step.Agents); what they used is journaled with the call's answer and added to
// the Session's usage when the answer is applied, as a model call's is. Before the
// call is made, the budget is checked with the worst case of its sampling: a prompt
// the size of an agent's overhead and the whole token cap, at the agent's pricing.

// sampling is how the tool calls of server s answer sampling requests, nil when
// they refuse them.
func (s *Snapshot) sampling(server *flowv1.ToolServer) *agent.ToolSampling {
	if server.Sampling == nil {
		return nil
	}
	spec, _ := s.resolveAgent(string(server.Sampling.Agent))
	return &agent.ToolSampling{Agent: spec, MaxTokens: server.Sampling.TokenCap()}
}

// samplingUnaffordable reports whether the worst case of a tool call's sampling
// could take the Session over its budget, and why.
func (r *run) samplingUnaffordable(s *agent.ToolSampling) (string, bool) {
	if s == nil {
		return "", false
	}
	return r.unaffordable(samplingEffect(s))
}

// samplingEffect is the worst case of a tool call's sampling as an effect: its agent
// answering with the whole token cap.
func samplingEffect(s *agent.ToolSampling) *Effect {
	spec := *s.Agent.DeepCopy()
	capped := int32(s.MaxTokens)
	spec.MaxTokens = &capped
	return &Effect{Kind: flowv1.EffectCallTool, Agents: []flowv1.AgentSpec{spec}}
}

// toolWorstCase is the most a tool call with sampling s (nil for none) can spend:
// one tool call, and the tokens and cost of its sampling's worst case. A server's
// sampling requests are not model calls: limits.modelCalls does not count them.
func toolWorstCase(s *agent.ToolSampling) Spend {
	need := Spend{ToolCalls: 1}
	if s != nil {
		need.Tokens, need.CostNano = worstCase(samplingEffect(s))
	}
	return need
}
