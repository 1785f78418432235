package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// RunPipeline runs one pathway turn through several agents, combined as the pathway's
// pipeline says. agents are in the pathway's declared order (req.Spec.Agents names
// them, for the Router). Usage is summed over every call that answered, also when an
// error is returned.
//
//   - Sequential: each agent runs in turn and sees the outputs of the previous ones
//     merged into its Inputs and Context. Outputs merge in order (later wins); the
//     reply, result type and completeness are the last agent's.
//   - Parallel: all agents run concurrently on the same request. Outputs merge in
//     declared order (later wins), replies are joined in declared order, the result
//     type is the common one (unclear if any is unclear, partial_success if they
//     differ) and the turn is complete when every agent says so. The first error in
//     declared order fails the turn.
//   - Router: the first agent classifies the message with the other agents' names as
//     intents (with their routing patterns, for builtin agents); the chosen agent
//     runs the turn. No choice, an unknown one or an invalid
//     answer falls back to the second agent (the first handler).
//   - Ensemble: all agents run concurrently; the answer is the first (in declared
//     order) whose result type is the most common one.
//
// An empty pipeline means Sequential. No agents is an Invalid error.
func RunPipeline(ctx context.Context, agents []Agent, pipeline flowv1.Pipeline, req PathwayRequest) (PathwayResponse, error) {
	if len(agents) == 0 {
		return PathwayResponse{}, &Error{Class: Invalid, Kind: flowv1.FailureValidation, Source: flowv1.FailureSystem,
			Agent: req.Pathway, Err: errors.New("pathway has no agents")}
	}
	switch pipeline {
	case flowv1.PipelineSequential, "":
		return runSequential(ctx, agents, req)
	case flowv1.PipelineParallel:
		return runParallel(ctx, agents, req)
	case flowv1.PipelineRouter:
		return runRouter(ctx, agents, req)
	case flowv1.PipelineEnsemble:
		return runEnsemble(ctx, agents, req)
	default:
		return PathwayResponse{}, &Error{Class: Terminal, Kind: flowv1.FailureValidation, Source: flowv1.FailureSystem,
			Agent: req.Pathway, Err: fmt.Errorf("unknown pipeline %q", pipeline)}
	}
}

func runSequential(ctx context.Context, agents []Agent, req PathwayRequest) (PathwayResponse, error) {
	var out PathwayResponse
	outputs := map[string]any{}
	for i, a := range agents {
		r := req
		if i > 0 {
			r.Inputs = merged(req.Inputs, outputs)
			r.Context = merged(req.Context, outputs)
		}
		resp, err := a.RunPathway(ctx, r)
		out.Usage = out.Usage.Add(resp.Usage)
		if err != nil {
			out.Outputs = outputs
			return out, err
		}
		if len(resp.ToolCalls) > 0 {
			// The agent asks for tools before it answers: the turn waits on them.
			out.ToolCalls, out.Reply = resp.ToolCalls, resp.Reply
			out.Outputs = outputs
			return out, nil
		}
		maps.Copy(outputs, resp.Outputs)
		if resp.Reply != "" {
			out.Reply = resp.Reply
		}
		out.ResultType, out.Complete = resp.ResultType, resp.Complete
	}
	out.Outputs = outputs
	return out, nil
}

// merged returns a copy of base with extra's keys set over it.
func merged(base, extra map[string]any) map[string]any {
	m := make(map[string]any, len(base)+len(extra))
	maps.Copy(m, base)
	maps.Copy(m, extra)
	return m
}

type pathwayResult struct {
	resp PathwayResponse
	err  error
}

// runAll runs every agent concurrently on req and returns the results in declared
// order. The first failure cancels the others. Each agent gets its own copy of the
// Inputs and Context maps.
func runAll(ctx context.Context, agents []Agent, req PathwayRequest) []pathwayResult {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]pathwayResult, len(agents))
	var wg sync.WaitGroup
	for i, a := range agents {
		r := req
		r.Inputs, r.Context = maps.Clone(req.Inputs), maps.Clone(req.Context)
		wg.Go(func() {
			resp, err := a.RunPathway(ctx, r)
			results[i] = pathwayResult{resp, err}
			if err != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	return results
}

func runParallel(ctx context.Context, agents []Agent, req PathwayRequest) (PathwayResponse, error) {
	results := runAll(ctx, agents, req)
	out := PathwayResponse{Outputs: map[string]any{}, Complete: true}
	var replies []string
	var firstErr error
	for i, r := range results {
		out.Usage = out.Usage.Add(r.resp.Usage)
		if r.err != nil {
			// A context error is most likely the echo of another agent's failure.
			if firstErr == nil || (isContextErr(firstErr) && !isContextErr(r.err)) {
				firstErr = r.err
			}
			continue
		}
		maps.Copy(out.Outputs, r.resp.Outputs)
		if r.resp.Reply != "" {
			replies = append(replies, r.resp.Reply)
		}
		out.Complete = out.Complete && r.resp.Complete
		if i == 0 {
			out.ResultType = r.resp.ResultType
		} else {
			out.ResultType = combineResults(out.ResultType, r.resp.ResultType)
		}
	}
	if firstErr != nil {
		return PathwayResponse{Outputs: out.Outputs, Usage: out.Usage}, firstErr
	}
	out.Reply = strings.Join(replies, "\n\n")
	return out, nil
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// combineResults merges two agents' result types: equal stays, unclear wins, any other
// disagreement is a partial success.
func combineResults(a, b flowv1.ResultType) flowv1.ResultType {
	switch {
	case a == b:
		return a
	case a == flowv1.ResultUnclear || b == flowv1.ResultUnclear:
		return flowv1.ResultUnclear
	case a == "":
		return b
	case b == "":
		return a
	default:
		return flowv1.ResultPartialSuccess
	}
}

func runRouter(ctx context.Context, agents []Agent, req PathwayRequest) (PathwayResponse, error) {
	if len(agents) == 1 {
		return agents[0].RunPathway(ctx, req)
	}
	names := agentNames(req.Spec, len(agents))
	handlers := names[1:]
	intents := make([]Intent, len(handlers))
	for i, n := range handlers {
		intents[i] = Intent{Name: n, Description: "The message is for the " + n + " agent."}
		if r, ok := agents[i+1].(router); ok {
			intents[i].Patterns = r.RoutingPatterns()
		}
	}
	choice, err := agents[0].ClassifyIntent(ctx, IntentRequest{Message: req.Message, Intents: intents, Context: req.Context})
	if err != nil && ClassOf(err) != Invalid {
		return PathwayResponse{Usage: choice.Usage}, err
	}
	handler := 1
	if err == nil {
		for i, n := range handlers {
			if n == choice.Intent {
				handler = i + 1
				break
			}
		}
	}
	resp, err := agents[handler].RunPathway(ctx, req)
	resp.Usage = resp.Usage.Add(choice.Usage)
	return resp, err
}

// router is an agent that says which messages a Router pipeline should send it: the
// builtin provider's patterns.
type router interface {
	RoutingPatterns() []string
}

// agentNames are the pathway's agent names when they match the agents given, else
// positional names.
func agentNames(spec *flowv1.PathwaySpec, n int) []string {
	names := make([]string, n)
	for i := range names {
		if spec != nil && len(spec.Agents) == n {
			names[i] = string(spec.Agents[i])
		} else {
			names[i] = fmt.Sprintf("agent-%d", i+1)
		}
	}
	return names
}

func runEnsemble(ctx context.Context, agents []Agent, req PathwayRequest) (PathwayResponse, error) {
	results := runAll(ctx, agents, req)
	var usage Usage
	votes := map[flowv1.ResultType]int{}
	var firstErr error
	for _, r := range results {
		usage = usage.Add(r.resp.Usage)
		if r.err != nil {
			if firstErr == nil || (isContextErr(firstErr) && !isContextErr(r.err)) {
				firstErr = r.err
			}
			continue
		}
		votes[r.resp.ResultType]++
	}
	if firstErr != nil {
		return PathwayResponse{Usage: usage}, firstErr
	}
	best := -1
	for i, r := range results {
		if best < 0 || votes[r.resp.ResultType] > votes[results[best].resp.ResultType] {
			best = i
		}
	}
	out := results[best].resp
	out.Usage = usage
	return out, nil
}

// DecideEnsemble asks every agent the same decision concurrently and returns the
// majority destination (ties go to the destination voted first in declared order),
// with the average confidence of the agents that chose it and the reasoning of the
// first of them. Usage is summed over all agents.
//
// An Invalid answer is an abstention. A Transient or Terminal error from any agent is
// returned (the first in declared order), so the whole decision is retried or stalled
// rather than decided by fewer agents than configured. No valid vote at all is an
// Invalid error: an unclear decision.
func DecideEnsemble(ctx context.Context, agents []Agent, req DecisionRequest) (DecisionResponse, error) {
	if len(agents) == 0 {
		return DecisionResponse{}, &Error{Class: Invalid, Kind: flowv1.FailureValidation, Source: flowv1.FailureSystem,
			Agent: req.Pathway, Err: errors.New("decision has no agents")}
	}
	type result struct {
		resp DecisionResponse
		err  error
	}
	results := make([]result, len(agents))
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Go(func() {
			resp, err := a.Decide(ctx, req)
			results[i] = result{resp, err}
		})
	}
	wg.Wait()

	var usage Usage
	var invalid, failed error
	votes := map[string]int{}
	var order []string // destinations in order of their first vote
	for _, r := range results {
		usage = usage.Add(r.resp.Usage)
		switch {
		case r.err != nil && ClassOf(r.err) == Invalid:
			if invalid == nil {
				invalid = r.err
			}
		case r.err != nil:
			if failed == nil {
				failed = r.err
			}
		case r.resp.Destination == "":
			// An empty destination is an unclear answer: an abstention.
		default:
			if votes[r.resp.Destination] == 0 {
				order = append(order, r.resp.Destination)
			}
			votes[r.resp.Destination]++
		}
	}
	if failed != nil {
		return DecisionResponse{Usage: usage}, failed
	}
	if len(order) == 0 {
		if invalid == nil {
			invalid = &Error{Class: Invalid, Kind: flowv1.FailureValidation, Source: flowv1.FailureLLM,
				Agent: req.Pathway, Err: errors.New("no agent chose a destination")}
		}
		return DecisionResponse{Usage: usage}, invalid
	}
	winner := order[0]
	for _, d := range order[1:] {
		if votes[d] > votes[winner] {
			winner = d
		}
	}
	out := DecisionResponse{Destination: winner, Usage: usage}
	var sum float64
	for _, r := range results {
		if r.err == nil && r.resp.Destination == winner {
			if out.Reasoning == "" {
				out.Reasoning = r.resp.Reasoning
			}
			sum += r.resp.Confidence
		}
	}
	out.Confidence = sum / float64(votes[winner])
	return out, nil
}
