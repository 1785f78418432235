package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"

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
		{"redaction pattern not a regexp", func(d def) {
			d.j.Redact = &flowv1.Redaction{Patterns: []string{`INS-[0-9]{6}`, `INS-(`}}
		}, `redact.patterns[1] "INS-(" is not a regular expression: error parsing regexp: missing closing ): ` + "`INS-(`"},
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

// ValidateKnown keeps what is wrong whatever Pathways are created later, and leaves
// out what a missing Pathway may change: the missing one itself, and reachability.
func TestValidateKnown(t *testing.T) {
	d := healthcare()
	d.p["intake"].Next = "nowhere"
	if got, want := ValidateKnown(d.j, d.p), Validate(d.j, d.p); !slices.Equal(got, want) {
		t.Errorf("with every Pathway: %q; want Validate's %q", got, want)
	}
	delete(d.p, "booking") // everything after booking is unreachable without it
	d.p["faq"] = nil
	got := ValidateKnown(d.j, d.p)
	if want := []string{`pathway intake: next: pathway "nowhere" is not one of spec.pathways`}; !slices.Equal(got, want) {
		t.Errorf("with booking and faq missing: %q; want %q", got, want)
	}
	if all := Validate(d.j, d.p); len(all) <= len(got) {
		t.Errorf("Validate %q: want the missing Pathways and reachability besides", all)
	}
}
