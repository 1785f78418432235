package step

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/engine"
)

// The ports of the step protocol: how agents are built and how tools of servers are
// called. The controller plugs in the real ones; tests plug in their own.

// AgentFactory builds the agent that answers for an AgentSpec in a namespace.
type AgentFactory interface {
	Agent(ctx context.Context, secrets client.Reader, namespace string, spec flowv1.AgentSpec) (agent.Agent, error)
}

// AgentFactoryFunc adapts a function to AgentFactory.
type AgentFactoryFunc func(ctx context.Context, secrets client.Reader, namespace string, spec flowv1.AgentSpec) (agent.Agent, error)

// Agent calls f.
func (f AgentFactoryFunc) Agent(ctx context.Context, secrets client.Reader, namespace string, spec flowv1.AgentSpec) (agent.Agent, error) {
	return f(ctx, secrets, namespace, spec)
}

// ToolCaller performs calls to the tools of servers.
type ToolCaller interface {
	CallTool(ctx context.Context, namespace string, req agent.ToolRequest) (agent.ToolResponse, error)
}

// Agents is the Performer of a Session's effects: it builds the effect's agents with
// Factory and calls them through the effect's Kind, computes builtin tools, and calls
// the tools of servers with Tools. Every effect is performed here.
type Agents struct {
	// Namespace is the Session's namespace.
	Namespace string
	// Factory builds agents; Secrets is what it reads API keys with.
	Factory AgentFactory
	Secrets client.Reader
	// Tools calls the tools of servers.
	Tools ToolCaller
	// Connect, when set, gives a pinned agent spec the connection settings to use now
	// (the Journey's current endpoint and key).
	Connect func(ctx context.Context, spec flowv1.AgentSpec) flowv1.AgentSpec
	// Around, when set, wraps every call (metrics, traces): it must call call once and
	// return what it returned.
	Around func(ctx context.Context, eff *engine.Effect, call func(context.Context) (any, error)) (any, error)
	// Progress, when set, is told the progress notifications of a server's tool
	// call in flight (see engine.ToolProgress).
	Progress func(eff *engine.Effect, p agent.ToolProgress)
}

// Perform performs eff. An agent's or tool's error is the answer's, never Perform's.
func (a *Agents) Perform(ctx context.Context, eff *engine.Effect) (Answer, error) {
	call := func(ctx context.Context) (any, error) { return a.call(ctx, eff) }
	var resp any
	var err error
	if a.Around != nil {
		resp, err = a.Around(ctx, eff, call)
	} else {
		resp, err = call(ctx)
	}
	return Answer{Response: resp, Err: err}, nil
}

func (a *Agents) call(ctx context.Context, eff *engine.Effect) (any, error) {
	if eff.Kind == flowv1.EffectCallTool {
		if eff.Tool.Server == nil {
			return Call(ctx, nil, eff) // builtin: computed, it is pure
		}
		req := *eff.Tool
		req.Hooks = a.hooks(eff)
		return a.Tools.CallTool(ctx, a.Namespace, req)
	}
	agents := make([]agent.Agent, 0, len(eff.Agents))
	for _, spec := range eff.Agents {
		if a.Connect != nil {
			spec = a.Connect(ctx, spec)
		}
		ag, err := a.Factory.Agent(ctx, a.Secrets, a.Namespace, spec)
		if err != nil {
			return nil, err
		}
		agents = append(agents, ag)
	}
	if len(agents) == 0 {
		return nil, &agent.Error{Class: agent.Terminal, Kind: flowv1.FailureValidation, Source: flowv1.FailureSystem, Err: errors.New("effect names no agent")}
	}
	return Call(ctx, agents, eff)
}

// hooks answer what the server of eff's tool call sends during the call: progress
// goes to Progress, sampling requests to the sampling agent of the server, if any.
func (a *Agents) hooks(eff *engine.Effect) *agent.ToolHooks {
	h := &agent.ToolHooks{}
	if a.Progress != nil {
		h.Progress = func(p agent.ToolProgress) { a.Progress(eff, p) }
	}
	if s := eff.Tool.Sampling; s != nil {
		h.Sample = a.sampler(*s)
	}
	return h
}

// sampler answers sampling requests with the agent of s, within the completion
// tokens s allows one tool call in all: each request's cap is what is left of them,
// and a request once they are used up is refused.
func (a *Agents) sampler(s agent.ToolSampling) func(context.Context, agent.SampleRequest) (agent.SampleResponse, error) {
	var mu sync.Mutex
	left := s.MaxTokens
	return func(ctx context.Context, req agent.SampleRequest) (agent.SampleResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		if left <= 0 {
			return agent.SampleResponse{}, fmt.Errorf("the tool call has used its %d sampling tokens (toolServers[].sampling.maxTokens)", s.MaxTokens)
		}
		spec := s.Agent
		if a.Connect != nil {
			spec = a.Connect(ctx, spec)
		}
		ag, err := a.Factory.Agent(ctx, a.Secrets, a.Namespace, spec)
		if err != nil {
			return agent.SampleResponse{}, err
		}
		sampler, ok := ag.(agent.Sampler)
		if !ok {
			return agent.SampleResponse{}, fmt.Errorf("agent %s cannot answer sampling requests", spec.Name)
		}
		if req.MaxTokens <= 0 || req.MaxTokens > left {
			req.MaxTokens = left
		}
		resp, err := sampler.Sample(ctx, req)
		left -= int(resp.Usage.CompletionTokens)
		return resp, err
	}
}
