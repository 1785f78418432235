// Package builtin is the offline, deterministic agent provider: pathway turns computed
// from the Pathway's builtin section (CEL outputs, a text/template reply, CEL outcome
// and completion), decisions that take the first allowed destination, and intents
// classified by their patterns, then by the words the message shares with each
// intent's description and patterns, with a confidence (Classify). It reads no clock,
// makes no network call and uses no randomness, so the engine may apply its answers
// inside a step without journaling them. Templates and CEL programs are compiled once
// per source text.
package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"text/template"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/expr"
)

// Agent is a builtin agent. The zero value answers decisions with confidence 1.
type Agent struct {
	name       string
	confidence float64
	// own is what the agent adds to pathway turns (outputs, reply, routing
	// patterns); nil for none.
	own *flowv1.BuiltinAgent
}

var _ agent.Agent = (*Agent)(nil)

// New returns the builtin agent declared by spec. Its decisions report
// spec.builtin.confidence (default 1).
func New(spec flowv1.AgentSpec) *Agent {
	return &Agent{name: string(spec.Name), confidence: Confidence(spec), own: spec.Builtin.DeepCopy()}
}

// RoutingPatterns are the patterns that make the first agent of a Router pipeline
// choose this agent.
func (a *Agent) RoutingPatterns() []string {
	if a.own == nil {
		return nil
	}
	return a.own.Patterns
}

// withOwn is req with the agent's own outputs after the pathway's builtin outputs, and
// its own reply, if any, in place of the pathway's.
func (a *Agent) withOwn(req agent.PathwayRequest) agent.PathwayRequest {
	if a.own == nil || (len(a.own.Outputs) == 0 && a.own.Reply == "") {
		return req
	}
	spec := &flowv1.PathwaySpec{}
	if req.Spec != nil {
		spec = req.Spec.DeepCopy()
	}
	if spec.Builtin == nil {
		spec.Builtin = &flowv1.BuiltinPathway{}
	}
	spec.Builtin.Outputs = append(spec.Builtin.Outputs, a.own.Outputs...)
	if a.own.Reply != "" {
		spec.Builtin.Reply = a.own.Reply
	}
	req.Spec = spec
	return req
}

// Confidence is the confidence the builtin agent declared by spec reports for
// decisions no rule decided: spec.builtin.confidence, default 1.
func Confidence(spec flowv1.AgentSpec) float64 {
	if spec.Builtin == nil || spec.Builtin.Confidence == "" {
		return 1
	}
	c, err := strconv.ParseFloat(string(spec.Builtin.Confidence), 64)
	if err != nil || c < 0 || c > 1 {
		return 1
	}
	return c
}

// RunPathway answers one pathway turn (see Run), with the agent's own outputs and
// reply.
func (a *Agent) RunPathway(_ context.Context, req agent.PathwayRequest) (agent.PathwayResponse, error) {
	resp, err := Run(a.withOwn(req))
	if err != nil {
		var ae *agent.Error
		if errors.As(err, &ae) && ae.Agent == "" {
			ae.Agent = a.name
		}
	}
	return resp, err
}

// Decide returns the first allowed destination with the agent's confidence. Decision
// rules are evaluated by the engine before any agent is asked.
func (a *Agent) Decide(_ context.Context, req agent.DecisionRequest) (agent.DecisionResponse, error) {
	return Decide(req, a.confidence), nil
}

// ClassifyIntent classifies the message offline (see Classify).
func (a *Agent) ClassifyIntent(_ context.Context, req agent.IntentRequest) (agent.IntentResponse, error) {
	return Classify(req), nil
}

// Decide is the builtin decision: the first allowed destination, or an unclear (empty)
// one when there is none.
func Decide(req agent.DecisionRequest, confidence float64) agent.DecisionResponse {
	if req.Decision == nil || len(req.Decision.AllowedDestinations) == 0 {
		return agent.DecisionResponse{Reasoning: "no allowed destination"}
	}
	return agent.DecisionResponse{
		Destination: string(req.Decision.AllowedDestinations[0]),
		Confidence:  confidence,
		Reasoning:   "builtin: first allowed destination",
	}
}

// Run computes a pathway turn from req.Spec.Builtin:
//
//   - outputs in declared order, each a CEL expression over message, context, inputs,
//     outputs (those computed so far) and session;
//   - the reply, a text/template over .message .context .inputs .outputs .session with
//     the functions join and default (a missing key renders empty);
//   - the result type from the outcome expression, else an output named "outcome",
//     else success; it must be success, failure, partial_success or unclear;
//   - completeness from the complete expression, default true.
//
// Without a builtin section the reply echoes the signature's intent (or the pathway's
// name) and the message; the turn is a complete success. Every CEL or template error
// is an agent.Error of class Invalid (source System, kind Validation).
func Run(req agent.PathwayRequest) (agent.PathwayResponse, error) {
	var spec *flowv1.BuiltinPathway
	if req.Spec != nil {
		spec = req.Spec.Builtin
	}
	if spec == nil {
		return agent.PathwayResponse{Reply: echo(req), ResultType: flowv1.ResultSuccess, Complete: true}, nil
	}
	vars := expr.Vars{
		Context: req.Context,
		Message: req.Message,
		Inputs:  req.Inputs,
		Session: SessionVars(req.Session),
		Tools:   req.Tools,
	}
	outputs := make(map[string]any, len(spec.Outputs))
	vars.Outputs = outputs
	act := vars.Activation()
	for _, o := range spec.Outputs {
		v, err := eval(string(o.Expression), act)
		if err != nil {
			return agent.PathwayResponse{}, invalid(fmt.Errorf("output %s: %w", o.Name, err))
		}
		outputs[o.Name] = v
	}
	resp := agent.PathwayResponse{Outputs: outputs, ResultType: flowv1.ResultSuccess, Complete: true}
	if len(outputs) == 0 {
		resp.Outputs = nil
	}
	switch {
	case spec.Outcome != "":
		v, err := eval(string(spec.Outcome), act)
		if err != nil {
			return agent.PathwayResponse{}, invalid(fmt.Errorf("outcome: %w", err))
		}
		rt, err := resultType(v)
		if err != nil {
			return agent.PathwayResponse{}, invalid(fmt.Errorf("outcome: %w", err))
		}
		resp.ResultType = rt
	case outputs["outcome"] != nil:
		rt, err := resultType(outputs["outcome"])
		if err != nil {
			return agent.PathwayResponse{}, invalid(fmt.Errorf("output outcome: %w", err))
		}
		resp.ResultType = rt
	}
	if spec.Complete != "" {
		v, err := eval(string(spec.Complete), act)
		if err != nil {
			return agent.PathwayResponse{}, invalid(fmt.Errorf("complete: %w", err))
		}
		done, ok := v.(bool)
		if !ok {
			return agent.PathwayResponse{}, invalid(fmt.Errorf("complete: CEL %q: want a bool, got %T", spec.Complete, v))
		}
		resp.Complete = done
	}
	if spec.Reply != "" {
		reply, err := Render(spec.Reply, map[string]any{
			"message": req.Message,
			"context": orEmpty(req.Context),
			"inputs":  orEmpty(req.Inputs),
			"outputs": outputs,
			"session": vars.Session,
			"tools":   orEmpty(req.Tools),
			"history": history(req.History),
		})
		if err != nil {
			return agent.PathwayResponse{}, invalid(fmt.Errorf("reply: %w", err))
		}
		resp.Reply = reply
	}
	return resp, nil
}

// SessionVars is the session variable of CEL expressions and templates.
func SessionVars(s agent.SessionInfo) map[string]any {
	return map[string]any{
		"name":         s.Name,
		"pathway":      s.Pathway,
		"iteration":    int64(s.Iteration),
		"turns":        int64(s.Turns),
		"pathwayTurns": int64(s.PathwayTurns),
	}
}

func echo(req agent.PathwayRequest) string {
	head := req.Pathway
	if req.Spec != nil && req.Spec.Signature.Intent != "" {
		head = req.Spec.Signature.Intent
	}
	if req.Message == "" {
		return head
	}
	return head + ": " + req.Message
}

func resultType(v any) (flowv1.ResultType, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("want a result type string, got %T", v)
	}
	switch rt := flowv1.ResultType(s); rt {
	case flowv1.ResultSuccess, flowv1.ResultFailure, flowv1.ResultPartialSuccess, flowv1.ResultUnclear:
		return rt, nil
	}
	return "", fmt.Errorf("%q is not one of success, failure, partial_success, unclear", s)
}

func invalid(err error) error {
	return &agent.Error{Class: agent.Invalid, Source: flowv1.FailureSystem, Kind: flowv1.FailureValidation, Err: err}
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// The text a nil value renders as; rendered empty instead.
const noValue = "<no value>"

type parsed struct {
	tmpl *template.Template
	err  error
}

var templates sync.Map // source -> *parsed

var funcs = template.FuncMap{
	// join joins a list's items with sep: {{ join .context.tags ", " }}.
	"join": func(list any, sep string) string {
		switch l := list.(type) {
		case []any:
			parts := make([]string, len(l))
			for i, v := range l {
				parts[i] = fmt.Sprint(v)
			}
			return strings.Join(parts, sep)
		case []string:
			return strings.Join(l, sep)
		case nil:
			return ""
		}
		return fmt.Sprint(list)
	},
	// default returns value unless it is empty (nil, "", false, 0, empty list or map):
	// {{ default "friend" .context.name }}.
	"default": func(def, value any) any {
		switch v := value.(type) {
		case nil:
			return def
		case string:
			if v == "" {
				return def
			}
		case bool:
			if !v {
				return def
			}
		case float64:
			if v == 0 {
				return def
			}
		case int64:
			if v == 0 {
				return def
			}
		case []any:
			if len(v) == 0 {
				return def
			}
		case map[string]any:
			if len(v) == 0 {
				return def
			}
		}
		return value
	},
}

// Parse returns the compiled template for src, parsing it on first use.
func Parse(src string) (*template.Template, error) {
	if p, ok := templates.Load(src); ok {
		return p.(*parsed).tmpl, p.(*parsed).err
	}
	t, err := template.New("reply").Option("missingkey=zero").Funcs(funcs).Parse(src)
	p, _ := templates.LoadOrStore(src, &parsed{tmpl: t, err: err})
	return p.(*parsed).tmpl, p.(*parsed).err
}

// Render executes the template src over data. A missing key renders empty.
func Render(src string, data map[string]any) (string, error) {
	t, err := Parse(src)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", err
	}
	out := b.String()
	if strings.Contains(out, noValue) {
		out = strings.ReplaceAll(out, noValue, "")
	}
	return out, nil
}

// history is the conversation for reply templates: a list of {role, text}, oldest
// first.
func history(h []agent.Exchange) []any {
	out := make([]any, 0, len(h))
	for _, ex := range h {
		out = append(out, map[string]any{"role": ex.Role, "text": ex.Text})
	}
	return out
}
