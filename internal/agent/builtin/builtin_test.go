package builtin

import (
	"context"
	"errors"
	"reflect"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/expr"
)

func TestRunPathway(t *testing.T) {
	spec := &flowv1.PathwaySpec{
		Signature: flowv1.Signature{Intent: "Match patient with a specialist"},
		Builtin: &flowv1.BuiltinPathway{
			Outputs: []flowv1.BuiltinOutput{
				{Name: "doctor", Expression: `{"id": "dr" + string(size(context.rejected) + 1)}`},
				{Name: "count", Expression: `size(context.rejected) + 1`},
				{Name: "label", Expression: `outputs.doctor.id + "@" + session.pathway`},
			},
			Reply:    `Hello {{ default "friend" .context.name }}, try {{ .outputs.doctor.id }} (turn {{ .session.turns }}, seen {{ join .context.rejected ", " }}){{ .context.missing }}.`,
			Complete: `session.pathwayTurns >= 1`,
		},
	}
	req := agent.PathwayRequest{
		Pathway: "booking",
		Spec:    spec,
		Message: "show me doctors",
		Context: map[string]any{"rejected": []any{"dr1"}},
		Session: agent.SessionInfo{Name: "s", Pathway: "booking", Iteration: 1, Turns: 3, PathwayTurns: 0},
	}
	a := New(flowv1.AgentSpec{Name: "matcher"})
	got, err := a.RunPathway(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := agent.PathwayResponse{
		Reply:      "Hello friend, try dr2 (turn 3, seen dr1).",
		Outputs:    map[string]any{"doctor": map[string]any{"id": "dr2"}, "count": float64(2), "label": "dr2@booking"},
		ResultType: flowv1.ResultSuccess,
		Complete:   false,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RunPathway:\n got %#v\nwant %#v", got, want)
	}
	req.Session.PathwayTurns = 1
	got, _ = a.RunPathway(context.Background(), req)
	if !got.Complete {
		t.Error("complete expression: want true on the second turn")
	}
}

func TestOutcome(t *testing.T) {
	run := func(b *flowv1.BuiltinPathway, ctx map[string]any) (agent.PathwayResponse, error) {
		return Run(agent.PathwayRequest{Pathway: "p", Spec: &flowv1.PathwaySpec{Builtin: b}, Context: ctx})
	}
	tests := []struct {
		name string
		b    *flowv1.BuiltinPathway
		ctx  map[string]any
		want flowv1.ResultType
	}{
		{"default success", &flowv1.BuiltinPathway{}, nil, flowv1.ResultSuccess},
		{"outcome output", &flowv1.BuiltinPathway{Outputs: []flowv1.BuiltinOutput{{Name: "outcome", Expression: `context.failures > 2 ? "failure" : "partial_success"`}}},
			map[string]any{"failures": float64(1)}, flowv1.ResultPartialSuccess},
		{"outcome expression wins", &flowv1.BuiltinPathway{
			Outputs: []flowv1.BuiltinOutput{{Name: "outcome", Expression: `"failure"`}},
			Outcome: `"unclear"`}, nil, flowv1.ResultUnclear},
	}
	for _, tt := range tests {
		got, err := run(tt.b, tt.ctx)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got.ResultType != tt.want {
			t.Errorf("%s: resultType %q, want %q", tt.name, got.ResultType, tt.want)
		}
	}
}

func TestInvalid(t *testing.T) {
	bad := []*flowv1.BuiltinPathway{
		{Outputs: []flowv1.BuiltinOutput{{Name: "x", Expression: `context.`}}},
		{Outputs: []flowv1.BuiltinOutput{{Name: "x", Expression: `context.nope.deeper`}}},
		{Outcome: `"great"`},
		{Outcome: `42`},
		{Outputs: []flowv1.BuiltinOutput{{Name: "outcome", Expression: `"ok"`}}},
		{Complete: `"yes"`},
		{Reply: `{{ .message `},
		{Reply: `{{ index .context "a" "b" }}`},
	}
	for i, b := range bad {
		_, err := New(flowv1.AgentSpec{Name: "bot"}).RunPathway(context.Background(),
			agent.PathwayRequest{Pathway: "p", Spec: &flowv1.PathwaySpec{Builtin: b}, Context: map[string]any{"a": "x"}})
		var ae *agent.Error
		if !errors.As(err, &ae) {
			t.Errorf("case %d: want an *agent.Error, got %v", i, err)
			continue
		}
		if ae.Class != agent.Invalid || ae.Source != flowv1.FailureSystem || ae.Kind != flowv1.FailureValidation || ae.Agent != "bot" {
			t.Errorf("case %d: got %+v", i, ae)
		}
	}
}

func TestEcho(t *testing.T) {
	got, err := Run(agent.PathwayRequest{Pathway: "faq", Spec: &flowv1.PathwaySpec{Signature: flowv1.Signature{Intent: "Answer questions"}}, Message: "what is this?"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Reply != "Answer questions: what is this?" || got.ResultType != flowv1.ResultSuccess || !got.Complete {
		t.Errorf("echo: %+v", got)
	}
	got, _ = Run(agent.PathwayRequest{Pathway: "faq"})
	if got.Reply != "faq" {
		t.Errorf("echo without spec: %q", got.Reply)
	}
}

func TestDecide(t *testing.T) {
	req := agent.DecisionRequest{Decision: &flowv1.Decision{AllowedDestinations: []flowv1.Name{"staging", "fix"}}}
	got, _ := New(flowv1.AgentSpec{Name: "d", Builtin: &flowv1.BuiltinAgent{Confidence: "0.65"}}).Decide(context.Background(), req)
	if got.Destination != "staging" || got.Confidence != 0.65 {
		t.Errorf("Decide = %+v", got)
	}
	got, _ = New(flowv1.AgentSpec{Name: "d"}).Decide(context.Background(), req)
	if got.Confidence != 1 {
		t.Errorf("default confidence = %v", got.Confidence)
	}
	got, _ = New(flowv1.AgentSpec{Name: "d"}).Decide(context.Background(), agent.DecisionRequest{Decision: &flowv1.Decision{}})
	if got.Destination != "" {
		t.Errorf("no allowed destinations: got %q", got.Destination)
	}
}

func TestClassifyIntent(t *testing.T) {
	req := agent.IntentRequest{Intents: []agent.Intent{
		{Name: "faq", Patterns: []string{"what is", "why"}},
		{Name: "reject", Patterns: []string{"don't want"}},
	}}
	a := New(flowv1.AgentSpec{Name: "i"})
	for msg, want := range map[string]string{
		"What is the copay?":     "faq",
		"Mr Whyte is my doctor":  agent.NoIntent,
		"I don’t want Dr. Smith": "reject",
		"":                       agent.NoIntent,
	} {
		req.Message = msg
		got, _ := a.ClassifyIntent(context.Background(), req)
		if got.Intent != want {
			t.Errorf("ClassifyIntent(%q) = %q, want %q", msg, got.Intent, want)
		}
	}
}

func TestTemplateCache(t *testing.T) {
	a, err := Parse("{{ .message }}")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Parse("{{ .message }}")
	if a != b {
		t.Error("the same source parsed twice")
	}
	if _, err := Parse("{{"); err == nil {
		t.Error("want a parse error")
	}
}

// native must agree with expr.ToNative on every JSON-like value.
func TestNativeMatchesToNative(t *testing.T) {
	vars := expr.Vars{Context: map[string]any{"l": []any{1.5, "x", map[string]any{"k": []any{}}}, "n": nil}}
	for _, src := range []string{
		`1`, `1u`, `2.5`, `-0.0`, `"s"`, `true`, `null`, `[1, "a", [true, null], {"k": 2}]`, `{"a": {"b": [1.5]}}`,
		`context.l`, `context`, `b"bytes"`, `timestamp("2026-01-02T03:04:05Z")`, `duration("90s")`, `[b"x"]`, `{"t": duration("1s")}`,
	} {
		prg, err := expr.Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		act := vars.Activation()
		out, _, err := prg.Eval(act)
		if err != nil {
			t.Fatal(err)
		}
		want, werr := expr.ToNative(out)
		got, gerr := native(out)
		if (werr != nil) != (gerr != nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: native %#v (%v), ToNative %#v (%v)", src, got, gerr, want, werr)
		}
	}
}
