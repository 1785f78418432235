package builtin

import (
	"context"
	"errors"
	"math"
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
	faq := agent.Intent{
		Name:        "faq",
		Description: "The patient asks about costs and copays, or whether the insurance plan covers a visit.",
		Patterns:    []string{"what is", "why"},
	}
	reject := agent.Intent{Name: "reject", Patterns: []string{"don't want"}}
	shipping := agent.Intent{Name: "shipping", Description: "Where a parcel is, its delivery date, a lost package.", Patterns: []string{"tracking number"}}
	billing := agent.Intent{Name: "billing", Description: "Invoices, refunds and the plan a customer pays for."}
	both := []agent.Intent{faq, reject}
	tests := []struct {
		name    string
		intents []agent.Intent
		message string
		want    string
		conf    float64
	}{
		// Patterns first, on word boundaries, in the order given.
		{"pattern", both, "What is the copay?", "faq", 1},
		{"pattern, typographic apostrophe", both, "I don’t want Dr. Smith", "reject", 1},
		{"first pattern in order", both, "Why don't want?", "faq", 1},
		// Then the words the message shares with the description and patterns.
		{"every word", both, "Is it covered by my insurance plan?", "faq", 1},
		{"stems and case", both, "COSTS of VISITS", "faq", 1},
		{"two words of three", both, "Does my plan cover parking?", "faq", 2.0 / 3},
		{"one word of three", both, "Does my insurance pay for parking?", "faq", 1.0 / 3},
		{"a pattern's words count", both, "What about Dr. Smith?", "faq", 1.0 / 3},
		{"the best intent wins", []agent.Intent{faq, shipping, billing}, "My parcel delivery is late", "shipping", 2.0 / 3},
		{"a shared word counts half", []agent.Intent{faq, billing}, "my plan", "faq", 0.5},
		{"ties go to the first", []agent.Intent{billing, faq}, "my plan", "billing", 0.5},
		{"possessive", []agent.Intent{shipping}, "the parcel's delivery", "shipping", 1},
		// Nothing scores: none.
		{"no shared word", both, "Mr Whyte is my doctor", agent.NoIntent, 1},
		{"function words only", both, "Is it that?", agent.NoIntent, 1},
		{"empty message", both, "", agent.NoIntent, 1},
		{"no intents", nil, "insurance plan", agent.NoIntent, 1},
	}
	a := New(flowv1.AgentSpec{Name: "i"})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := agent.IntentRequest{Message: tc.message, Intents: tc.intents}
			got, err := a.ClassifyIntent(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got.Intent != tc.want || math.Abs(got.Confidence-tc.conf) > 1e-9 {
				t.Errorf("ClassifyIntent(%q) = %q (%v, %q), want %q (%v)", tc.message, got.Intent, got.Confidence, got.Reasoning, tc.want, tc.conf)
			}
			if got.Confidence < 0 || got.Confidence > 1 || got.Reasoning == "" {
				t.Errorf("confidence %v out of [0,1] or no reasoning %q", got.Confidence, got.Reasoning)
			}
			if again := Classify(req); !reflect.DeepEqual(again, got) {
				t.Errorf("asked twice: %+v, then %+v", got, again)
			}
		})
	}
}

// The more of the message's words an intent has, the higher its confidence, so a
// threshold keeps the weak matches out.
func TestClassifyConfidenceOrder(t *testing.T) {
	intents := []agent.Intent{{Name: "coverage", Description: "whether the insurance plan covers a specialist visit"}}
	var last float64
	for i, msg := range []string{
		"Tell me about parking, opening hours and the weather",   // 0 of 5
		"Tell me about parking, opening hours and the insurance", // 1 of 5
		"Is parking covered by insurance?",                       // 2 of 3
		"Is my specialist visit covered by insurance?",           // 4 of 4
	} {
		got := Classify(agent.IntentRequest{Message: msg, Intents: intents})
		conf := got.Confidence
		if got.Intent == agent.NoIntent {
			conf = 0
		}
		if i > 0 && conf <= last {
			t.Errorf("%q: confidence %v, want more than the previous message's %v", msg, conf, last)
		}
		last = conf
	}
	if last != 1 {
		t.Errorf("a message made of the description's words: confidence %v, want 1", last)
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
