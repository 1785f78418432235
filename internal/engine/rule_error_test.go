package engine

import (
	"strings"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// TestRuleErrorNamesTheRuleAndTheValues: a decision rule whose CEL fails to evaluate
// is skipped, and the turn's failure says which rule it was and what the fields it
// reads held, since CEL's own error ("no such overload") names neither.
func TestRuleErrorNamesTheRuleAndTheValues(t *testing.T) {
	d := workflow()
	review := d.p["review"]
	review.Transitions.OnFailure.Decision.Rules = append([]flowv1.DecisionRule{
		{When: `outputs.score > 0.5 && context.plan != ''`, To: "revise", Action: flowv1.ActionJumpBack},
		{When: `outputs.grade == 'A'`, To: "revise", Action: flowv1.ActionJumpBack},
	}, review.Transitions.OnFailure.Decision.Rules...)
	s := newSession(t, d)
	s.settle()
	s.post("plan", 1, flowv1.ResultSuccess, `{"plan":"p"}`)
	s.settle()
	s.post("generate", 1, flowv1.ResultSuccess, "")
	s.settle()
	s.post("review", 1, flowv1.ResultFailure, `{"score":"high"}`)
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "revise") // the rule after the failing ones

	var got []string
	for _, f := range s.st.LastTurn.Failures {
		got = append(got, f.Component+": "+f.Message)
	}
	want := []string{
		`review.onFailure.rules[0]: rule 0 (to revise): CEL "outputs.score > 0.5 && context.plan != ''": no such overload; outputs.score is "high" (string), context.plan is not set`,
		`review.onFailure.rules[1]: rule 1 (to revise): CEL "outputs.grade == 'A'": no such key: grade; outputs.grade is not set`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("failures:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
