package step

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/engine"
)

// Kind is what the step protocol knows about one kind of effect, beyond the engine
// that asks for it and journals its answer (engine.Effect.Record): how agents perform
// it, and how its answer is written in a journey test and read back from a journal.
// The controller, `kubectl journey test`, record and replay all go through Kinds, so a
// new kind of effect is one more entry there.
type Kind struct {
	// Name is the kind's name, as effects and journal entries carry it.
	Name flowv1.EffectKind
	// Call performs the effect with its agents, built in the order of eff.Agents.
	Call func(ctx context.Context, agents []agent.Agent, eff *engine.Effect) (any, error)
	// Decode turns a recorded answer (the JSON a journey test holds) into the response
	// the agent would have returned.
	Decode func(raw []byte) (any, error)
	// Fields says what a recorded answer holds, for the error of one that is not valid.
	Fields string
	// Example is a recorded answer in YAML flow style, for error messages.
	Example string
	// Encode turns a journaled result (with its usage) back into a recorded answer.
	Encode func(res *flowv1.AgentResult, usage agent.Usage) any
	// Describe says which call eff is, for a person ("RunPathway of pathway a").
	Describe func(eff *engine.Effect) string
	// Pathway is the pathway the effect is about, "" when none.
	Pathway func(eff *engine.Effect) string
}

// Kinds are the effect kinds the step protocol performs.
var Kinds = []*Kind{
	{
		Name: flowv1.EffectClassifyIntent,
		Call: func(ctx context.Context, agents []agent.Agent, eff *engine.Effect) (any, error) {
			return agents[0].ClassifyIntent(ctx, *eff.Intent)
		},
		Decode:  decodeInto[agent.IntentResponse],
		Fields:  "intent, confidence (a number), reasoning and usage",
		Example: "{intent: <transition name or none>, confidence: 0.9}",
		Encode: func(res *flowv1.AgentResult, usage agent.Usage) any {
			return agent.IntentResponse{Intent: res.Intent, Confidence: confidence(res), Reasoning: res.Reasoning, Usage: usage}
		},
		Describe: func(eff *engine.Effect) string {
			return fmt.Sprintf("ClassifyIntent of %q", Shorten(eff.Intent.Message, 40))
		},
		Pathway: func(*engine.Effect) string { return "" },
	},
	{
		Name: flowv1.EffectRunPathway,
		Call: func(ctx context.Context, agents []agent.Agent, eff *engine.Effect) (any, error) {
			return agent.RunPipeline(ctx, agents, eff.Pipeline, *eff.Pathway)
		},
		Decode:  decodePathway,
		Fields:  "reply, outputs, resultType, complete, usage and toolCalls",
		Example: "{reply: ..., outputs: {...}, resultType: success, complete: true}",
		Encode: func(res *flowv1.AgentResult, usage agent.Usage) any {
			p := PathwayAnswer{Reply: res.Reply, ResultType: res.ResultType, Complete: res.Complete, Usage: usage}
			for _, c := range res.ToolCalls {
				p.ToolCalls = append(p.ToolCalls, agent.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
			}
			if res.Outputs != nil {
				_ = json.Unmarshal(res.Outputs.Raw, &p.Outputs)
			}
			return p
		},
		Describe: func(eff *engine.Effect) string { return "RunPathway of pathway " + eff.Pathway.Pathway },
		Pathway:  func(eff *engine.Effect) string { return eff.Pathway.Pathway },
	},
	{
		Name: flowv1.EffectDecide,
		Call: func(ctx context.Context, agents []agent.Agent, eff *engine.Effect) (any, error) {
			if len(agents) > 1 {
				return agent.DecideEnsemble(ctx, agents, *eff.Decision)
			}
			return agents[0].Decide(ctx, *eff.Decision)
		},
		Decode:  decodeInto[agent.DecisionResponse],
		Fields:  "destination, confidence (a number), reasoning and usage",
		Example: "{destination: ..., confidence: 0.9, reasoning: ...}",
		Encode: func(res *flowv1.AgentResult, usage agent.Usage) any {
			return agent.DecisionResponse{Destination: res.Destination, Confidence: confidence(res), Reasoning: res.Reasoning, Usage: usage}
		},
		Describe: func(eff *engine.Effect) string {
			return fmt.Sprintf("Decide on %s.%s", eff.Decision.Pathway, eff.Decision.Transition)
		},
		Pathway: func(eff *engine.Effect) string { return eff.Decision.Pathway },
	},
	callTool,
}

// PathwayAnswer is a recorded RunPathway answer: a PathwayResponse whose complete
// defaults to true.
type PathwayAnswer struct {
	Reply      string            `json:"reply,omitempty"`
	Outputs    map[string]any    `json:"outputs,omitempty"`
	ResultType flowv1.ResultType `json:"resultType,omitempty"`
	Complete   *bool             `json:"complete,omitempty"`
	Usage      agent.Usage       `json:"usage,omitzero"`
	// ToolCalls are the tools a model asked to call before it answers.
	ToolCalls []agent.ToolCall `json:"toolCalls,omitempty"`
}

func decodePathway(raw []byte) (any, error) {
	var p PathwayAnswer
	if err := StrictJSON(raw, &p); err != nil {
		return nil, err
	}
	r := agent.PathwayResponse{Reply: p.Reply, Outputs: p.Outputs, ResultType: p.ResultType, Complete: true, Usage: p.Usage, ToolCalls: p.ToolCalls}
	if p.Complete != nil {
		r.Complete = *p.Complete
	}
	return r, nil
}

// confidence is the journaled confidence as a number (0 when there is none).
func confidence(res *flowv1.AgentResult) float64 {
	var c float64
	fmt.Sscan(string(res.Confidence), &c)
	return c
}

func decodeInto[T any](raw []byte) (any, error) {
	var v T
	if err := StrictJSON(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// StrictJSON decodes b into into, refusing fields into does not have.
func StrictJSON(b []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

// KindOf returns the Kind named name.
func KindOf(name flowv1.EffectKind) (*Kind, bool) {
	for _, k := range Kinds {
		if k.Name == name {
			return k, true
		}
	}
	return nil, false
}

// KindNames lists the kinds' names for a person: "A, B or C".
func KindNames() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k.Name)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Call performs eff with its agents through the effect's Kind.
func Call(ctx context.Context, agents []agent.Agent, eff *engine.Effect) (any, error) {
	k, ok := KindOf(eff.Kind)
	if !ok {
		return nil, fmt.Errorf("unknown effect kind %q", eff.Kind)
	}
	return k.Call(ctx, agents, eff)
}

// Describe says which call eff is and which agent makes it, for a person.
func Describe(eff *engine.Effect) string {
	who := ""
	if len(eff.Agents) > 0 {
		who = " by agent " + string(eff.Agents[0].Name)
	}
	if k, ok := KindOf(eff.Kind); ok {
		return k.Describe(eff) + who
	}
	return string(eff.Kind) + who
}

// UsageOf returns the usage an agent's response reports, nil for none.
func UsageOf(resp any) *agent.Usage {
	switch v := resp.(type) {
	case agent.PathwayResponse:
		return &v.Usage
	case agent.DecisionResponse:
		return &v.Usage
	case agent.IntentResponse:
		return &v.Usage
	}
	return nil
}

// Shorten puts s on one line and cuts it to n runes, with an ellipsis when cut.
func Shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
