package engine

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func TestValidate(t *testing.T) {
	if issues := Validate(healthcare().j, healthcare().p); len(issues) != 0 {
		t.Fatalf("the healthcare journey has issues: %v", issues)
	}
	for _, d := range []def{workflow(), planner(), qualityGate(), fuzzJourney(flowv1.ErrorRecoveryGraceful, true), bigJourney()} {
		if issues := Validate(d.j, d.p); len(issues) != 0 {
			t.Fatalf("issues: %v", issues)
		}
	}
	broken := func(mod func(d def)) []string {
		d := healthcare()
		mod(d)
		return Validate(d.j, d.p)
	}
	tests := []struct {
		name string
		mod  func(d def)
		want string
	}{
		{"missing pathway spec", func(d def) { delete(d.p, "faq") }, `pathway faq: Pathway "faq" was not resolved`},
		{"unknown next", func(d def) { d.p["intake"].Next = "nowhere" }, `pathway intake: next: pathway "nowhere" is not one of spec.pathways`},
		{"unknown transition target", func(d def) { d.j.Transitions[0].To = "nowhere" }, `transition faq-detour: to: pathway "nowhere"`},
		{"unknown from", func(d def) { d.j.Transitions[1].From = "nowhere" }, `transition reject-doctor: from: pathway "nowhere"`},
		{"unknown outcome target", func(d def) {
			d.p["booking"].Transitions = &flowv1.OutcomeTransitions{OnFailure: str("nowhere")}
		}, `pathway booking: transitions.onFailure: to: pathway "nowhere"`},
		{"unknown allowed destination", func(d def) {
			d.p["booking"].Transitions = &flowv1.OutcomeTransitions{OnPartialSuccess: choose("", "faq", "nowhere")}
		}, `pathway booking: transitions.onPartialSuccess: allowedDestinations: pathway "nowhere"`},
		{"rule outside allowed", func(d def) {
			c := choose("", "faq")
			c.Decision.Rules = []flowv1.DecisionRule{{When: "true", To: "booking"}}
			d.p["booking"].Transitions = &flowv1.OutcomeTransitions{OnPartialSuccess: c}
		}, `rules[0].to "booking" is not one of allowedDestinations`},
		{"string form for partial", func(d def) {
			d.p["booking"].Transitions = &flowv1.OutcomeTransitions{OnPartialSuccess: str("faq")}
		}, `transitions.onPartialSuccess: must use the decision form`},
		{"unknown escalation pathway", func(d def) { d.j.EscalationPathway = "nowhere" }, `spec.escalationPathway: pathway "nowhere"`},
		{"unreachable", func(d def) {
			d.j.Pathways = append(d.j.Pathways, flowv1.PathwayEntry{Name: "island", PathwayRef: "island"})
			d.p["island"] = &flowv1.PathwaySpec{}
		}, `pathway island is unreachable from the entry pathway intake`},
		{"undeclared pathway agent", func(d def) { d.p["faq"].Agents = []flowv1.Name{"ghost"} }, `pathway faq: agents: agent "ghost" is not declared`},
		{"undeclared decision agent", func(d def) {
			d.p["booking"].Transitions = &flowv1.OutcomeTransitions{OnPartialSuccess: choose("ghost", "faq")}
		}, `decision.agent: agent "ghost" is not declared`},
		{"undeclared classifier", func(d def) { d.j.IntentDetection = &flowv1.IntentDetection{Agent: "ghost"} }, `spec.intentDetection: agent "ghost"`},
		{"condition does not compile", func(d def) { d.j.Transitions[3].Trigger.Condition = "context." }, `transition escalate: condition: CEL "context."`},
		{"rule does not compile", func(d def) {
			c := choose("", "faq")
			c.Decision.Rules = []flowv1.DecisionRule{{When: "outputs.(", To: "faq"}}
			d.p["booking"].Transitions = &flowv1.OutcomeTransitions{OnPartialSuccess: c}
		}, `rules[0].when: CEL "outputs.("`},
		{"builtin output does not compile", func(d def) {
			d.p["intake"].Builtin.Outputs[0].Expression = "{"
		}, `pathway intake: builtin output patient_info: CEL "{"`},
		{"builtin outcome does not compile", func(d def) { d.p["intake"].Builtin.Outcome = "1 +" }, `pathway intake: builtin outcome`},
		{"builtin complete does not compile", func(d def) { d.p["faq"].Builtin.Complete = "((" }, `pathway faq: builtin complete`},
		{"reply does not parse", func(d def) { d.p["intake"].Builtin.Reply = "{{ .outputs" }, `pathway intake: builtin reply`},
		{"threshold order", func(d def) {
			c := choose("", "faq")
			c.Decision.ConfidenceThresholds = &flowv1.ConfidenceThresholds{AutoAdvance: "0.5", RequireApproval: "0.7"}
			d.p["booking"].Transitions = &flowv1.OutcomeTransitions{OnPartialSuccess: c}
		}, `autoAdvance must be greater than or equal to requireApproval`},
		{"bad confidence", func(d def) {
			d.j.IntentDetection = &flowv1.IntentDetection{Agent: "rag-faq-agent", ConfidenceThreshold: "1.5"}
		}, `"1.5" is not a decimal between 0 and 1`},
		{"external with agents", func(d def) { d.p["faq"].Executor = flowv1.ExecutorExternal }, `pathway faq: an External pathway has no agents`},
	}
	for _, tt := range tests {
		issues := broken(tt.mod)
		found := false
		for _, i := range issues {
			if strings.Contains(i, tt.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: want an issue containing %q, got %q", tt.name, tt.want, issues)
		}
	}
	if got := Validate(nil, nil); len(got) != 1 {
		t.Errorf("nil journey: %v", got)
	}
	// NewSnapshot refuses a journey with issues and reports them all.
	d := healthcare()
	d.p["intake"].Next = "nowhere"
	delete(d.p, "faq")
	_, err := NewSnapshot("rev-9", d.j, d.p)
	var ie *InvalidError
	if !errors.As(err, &ie) || len(ie.Issues) != 5 || ie.Revision != "rev-9" || !strings.Contains(err.Error(), "pathway booking is unreachable") {
		t.Errorf("NewSnapshot: %v", err)
	}
}

func TestSnapshotCopiesItsInputs(t *testing.T) {
	d := healthcare()
	snap, err := NewSnapshot("rev", d.j, d.p)
	if err != nil {
		t.Fatal(err)
	}
	d.p["intake"].Next = "faq"
	d.j.Agents[0].Provider = flowv1.ProviderOpenAI
	if p, _ := snap.Pathway("intake"); p.Next != "booking" {
		t.Error("the snapshot shares its pathway specs with the caller")
	}
	if a, ok := snap.Agent("document-processor"); !ok || a.Provider != flowv1.ProviderBuiltin {
		t.Error("the snapshot shares its agents with the caller")
	}
	if _, ok := snap.Agent("nobody"); ok {
		t.Error("Agent found an undeclared agent")
	}
	if snap.Revision() != "rev" || snap.Journey().EntryPathway != "intake" {
		t.Error("revision or journey")
	}
	// Global transitions are ordered by priority, then declaration.
	var names []string
	for _, tr := range snap.transitions {
		names = append(names, string(tr.Name))
	}
	if want := []string{"escalate", "faq-detour", "reject-doctor", "hesitation"}; !reflect.DeepEqual(names, want) {
		t.Errorf("order %v, want %v", names, want)
	}
}

func TestMergeRules(t *testing.T) {
	base := map[string]any{
		"name":     "Ann",
		"rejected": []any{map[string]any{"id": "dr1"}, "x"},
		"prefs":    map[string]any{"time": "am", "loc": map[string]any{"city": "Oslo"}},
		"count":    1.0,
		"tags":     []any{"a"},
	}
	upd := map[string]any{
		"name":     "Bob",                                                                // scalar replaces
		"rejected": []any{map[string]any{"id": "dr1"}, map[string]any{"id": "dr2"}, "x"}, // lists append de-duplicated
		"prefs":    map[string]any{"loc": map[string]any{"zip": "0150"}},                 // maps deep-merge
		"count":    []any{2.0},                                                           // a type change replaces
		"tags":     []any{"b", "b"},
		"new":      true,
	}
	want := map[string]any{
		"name":     "Bob",
		"rejected": []any{map[string]any{"id": "dr1"}, "x", map[string]any{"id": "dr2"}},
		"prefs":    map[string]any{"time": "am", "loc": map[string]any{"city": "Oslo", "zip": "0150"}},
		"count":    []any{2.0},
		"tags":     []any{"a", "b"},
		"new":      true,
	}
	before := string(encodeJSON(base))
	got := mergeObject(base, upd)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merge:\n got %s\nwant %s", encodeJSON(got), encodeJSON(want))
	}
	if string(encodeJSON(base)) != before {
		t.Error("merge modified its base")
	}
	// The set path for long lists gives the same result as the pairwise one.
	var long, add []any
	for i := range 100 {
		long = append(long, map[string]any{"id": float64(i)})
	}
	for i := 90; i < 120; i++ {
		add = append(add, map[string]any{"id": float64(i)}, map[string]any{"id": float64(i)})
	}
	if got := appendUnique(long, add); len(got) != 120 {
		t.Errorf("appendUnique: %d items, want 120", len(got))
	}
}

func TestContextCapAndVersions(t *testing.T) {
	d := conversation(func(j *flowv1.JourneySpec) { j.Limits.MaxContextBytes = 1024 })
	d.p["chat"].Accumulate = []string{"notes", "last"}
	d.p["chat"].Builtin.Outputs = []flowv1.BuiltinOutput{
		{Name: "notes", Expression: `[message]`},
		{Name: "last", Expression: `message`},
	}
	s := newSession(t, d)
	s.spec.InitialContext = raw(`{"user":"ann"}`)
	s.say("m1", "first").say("m2", "second")
	s.settle()
	if s.st.ContextVersion != 2 || !reflect.DeepEqual(s.context()["notes"], []any{"first", "second"}) {
		t.Fatalf("context v%d %v", s.st.ContextVersion, s.context())
	}
	// A message that would overflow the context is an error, not a truncation.
	s.say("m3", strings.Repeat("z", 1000))
	s.settle()
	if s.st.ContextVersion != 2 || len(s.st.Context.Raw) > 1024 {
		t.Fatalf("context changed past its cap: v%d, %d bytes", s.st.ContextVersion, len(s.st.Context.Raw))
	}
	if f := s.st.LastTurn.Failures; len(f) != 1 || !strings.Contains(f[0].Message, "over maxContextBytes 1024") {
		t.Errorf("failures %s", dump(f))
	}
	s.expect(flowv1.PhaseWaitingForInput, "chat")

	// Each change is a version holding the previous values of the keys it changed (null:
	// the key was absent), so it can be undone.
	want := []flowv1.ContextVersion{
		{Version: 1, Pathway: "chat", Keys: []string{"last", "notes"}, Previous: raw(`{"last":null,"notes":null}`)},
		{Version: 2, Pathway: "chat", Keys: []string{"last", "notes"}, Previous: raw(`{"last":"first","notes":["first"]}`)},
	}
	if got := s.st.ContextHistory; !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("contextHistory %s, want %s", dump(got), dump(want))
	}
	// FailFast fails the Session instead.
	d.j.ErrorRecovery = flowv1.ErrorRecoveryFailFast
	s = newSession(t, d)
	s.say("m1", strings.Repeat("z", 1000))
	s.settle()
	s.expect(flowv1.PhaseFailed, "chat")
	if c := s.condition(flowv1.ConditionReady); c.Reason != flowv1.ReasonContextTooLarge {
		t.Errorf("Ready %+v", c)
	}
}

func TestContextHistoryIsBounded(t *testing.T) {
	d := conversation()
	d.p["chat"].Accumulate = []string{"n"}
	d.p["chat"].Builtin.Outputs = []flowv1.BuiltinOutput{{Name: "n", Expression: `session.turns`}}
	s := newSession(t, d)
	for i := range 25 {
		s.say("m"+string(rune('a'+i)), "hi")
	}
	s.settle()
	if s.st.ContextVersion != 25 || len(s.st.ContextHistory) != MaxContextVersions || s.st.ContextHistory[0].Version != 16 {
		t.Errorf("version %d, %d versions kept from %d", s.st.ContextVersion, len(s.st.ContextHistory), s.st.ContextHistory[0].Version)
	}
}

func TestDetourWithoutPreservingContext(t *testing.T) {
	d := fuzzJourney(flowv1.ErrorRecoveryGraceful, true)
	s := newSession(t, d)
	s.answer = (&llm{
		intent: func(intentReq) (intentResp, error) { return intentResp{Intent: "none", Confidence: 1}, nil },
		pathway: func(req pathwayReq) (pathwayResp, error) {
			if req.Pathway == "help" {
				return pathwayResp{Outputs: map[string]any{"items": []any{"from-help"}}, ResultType: flowv1.ResultSuccess, Complete: true}, nil
			}
			return pathwayResp{Outputs: map[string]any{"items": []any{"from-booking"}}, ResultType: flowv1.ResultSuccess, Complete: false}, nil
		},
	}).answer
	s.say("m1", "hello").say("m2", "book something")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "booking")
	s.say("m3", "I need help")
	s.settle()
	// help is a detour that does not preserve context: its items are gone after the return.
	s.expect(flowv1.PhaseWaitingForInput, "booking")
	if got := s.context()["items"]; !reflect.DeepEqual(got, []any{"from-booking"}) {
		t.Errorf("items %v", got)
	}
	if got := s.path(); got != "intake>booking>help>booking" {
		t.Errorf("path %s", got)
	}
}
