package engine

import (
	"context"
	"slices"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
)

// runBuiltin computes a turn of pathway p whose agents are all builtin, inline. When
// one of them has outputs, a reply or routing patterns of its own, they run as the
// pathway's pipeline says, like remote agents: Sequential passes each agent's outputs
// to the next, Parallel merges, Router lets the first agent choose (by the others'
// patterns), Ensemble votes on the result. Builtin agents are deterministic and
// combined in declared order, so the turn is too.
func (r *run) runBuiltin(p *flowv1.PathwaySpec, req agent.PathwayRequest) (agent.PathwayResponse, error) {
	specs := make([]flowv1.AgentSpec, len(p.Agents))
	for i, n := range p.Agents {
		specs[i], _ = r.snap.resolveAgent(string(n))
	}
	if !slices.ContainsFunc(specs, ownsTurn) {
		// Agents with nothing of their own all answer the pathway's builtin section
		// alike: one answer stands for all of them.
		return builtin.Run(req)
	}
	agents := make([]agent.Agent, len(specs))
	for i, s := range specs {
		agents[i] = builtin.New(s)
	}
	return agent.RunPipeline(context.Background(), agents, p.Pipeline, req)
}

// ownsTurn says whether a builtin agent has something of its own in pathway turns:
// outputs, a reply or routing patterns.
func ownsTurn(a flowv1.AgentSpec) bool {
	return a.Builtin != nil && (len(a.Builtin.Outputs) > 0 || a.Builtin.Reply != "" || len(a.Builtin.Patterns) > 0)
}
