package webhook

import (
	"strings"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func TestCheckLimits(t *testing.T) {
	old := &flowv1.Session{}
	old.Name = "patient"
	old.Status.Turns = 4
	old.Status.Usage = flowv1.Usage{PromptTokens: 900, CompletionTokens: 100, CostUSD: "0.25", ToolCalls: 3}
	for _, tc := range []struct {
		name   string
		limits *flowv1.SessionLimits
		want   []string
	}{
		{"unset", nil, nil},
		{"at what was used", &flowv1.SessionLimits{MaxTurns: 4, Budget: &flowv1.SessionBudget{MaxTokens: 1000, MaxCostUSD: "0.25"}}, nil},
		{"raised", &flowv1.SessionLimits{MaxTurns: 40, Budget: &flowv1.SessionBudget{MaxTokens: 5000, MaxCostUSD: "3"}}, nil},
		{"turns below", &flowv1.SessionLimits{MaxTurns: 3}, []string{`Session "patient" has used 4 turns`, "spec.limits.maxTurns 3 is below that"}},
		{"tokens below", &flowv1.SessionLimits{Budget: &flowv1.SessionBudget{MaxTokens: 999}}, []string{"has used 1000 tokens", "spec.limits.budget.maxTokens 999"}},
		{"cost below", &flowv1.SessionLimits{Budget: &flowv1.SessionBudget{MaxCostUSD: "0.2"}}, []string{"has used USD 0.25", "spec.limits.budget.maxCostUSD 0.2"}},
		{"tool calls at what was used", &flowv1.SessionLimits{Budget: &flowv1.SessionBudget{MaxToolCalls: 3}}, nil},
		{"tool calls below", &flowv1.SessionLimits{Budget: &flowv1.SessionBudget{MaxToolCalls: 2}}, []string{"has used 3 tool calls", "spec.limits.budget.maxToolCalls 2"}},
		{"cost not a number", &flowv1.SessionLimits{Budget: &flowv1.SessionBudget{MaxCostUSD: "lots"}}, []string{"not a decimal"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := old.DeepCopy()
			s.Spec.Limits = tc.limits
			errs := checkLimits(old, s)
			if len(tc.want) == 0 {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) == 0 {
				t.Fatal("admitted")
			}
			for _, w := range tc.want {
				if !strings.Contains(errs.ToAggregate().Error(), w) {
					t.Errorf("%q does not say %q", errs.ToAggregate().Error(), w)
				}
			}
		})
	}
	// An unchanged override is not checked again, whatever was used since.
	s := old.DeepCopy()
	s.Spec.Limits = &flowv1.SessionLimits{MaxTurns: 1}
	o := s.DeepCopy()
	if errs := checkLimits(o, s); len(errs) > 0 {
		t.Errorf("unchanged limits refused: %v", errs)
	}
}
