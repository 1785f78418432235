package webhook_test

import (
	"strings"
	"testing"
)

// A rollout's analysis conditions are CEL over canary and stable: one that does not
// compile is refused at admission with a caret, one that reads a count that does not
// exist names the counts there are, and a valid one is accepted.
func TestRolloutConditionsAdmission(t *testing.T) {
	t.Parallel()
	ns := testEnv.Namespace(t)
	if out, ok := kubectl(t, ns, greetPathway+"---\n"+askPathway, "apply", "-f", "-"); !ok {
		t.Fatalf("applying the pathways: %s", out)
	}
	withRollout := func(cond string) string {
		return careJourney + "  rollout:\n    canary: {steps: [{weight: 25, pause: 1h}]}\n    analysis: {minSessions: 5, failureCondition: '" + cond + "'}\n"
	}
	for _, tc := range []struct {
		cond string
		want []string
	}{
		{"canary.failed = 3", []string{
			`The Journey "care" is invalid: spec: Invalid value: spec.rollout.analysis.failureCondition: CEL "canary.failed = 3": ERROR: <input>:1:15: Syntax error`,
			"\n | canary.failed = 3\n | ..............^",
		}},
		{"canary.faild > 3", []string{`spec.rollout.analysis.failureCondition: CEL "canary.faild > 3": no such key: faild (canary and stable have [started completed failed escalated finished turns costUSD])`}},
		{"canary.failed", []string{`spec.rollout.analysis.failureCondition: CEL "canary.failed": want a bool, the expression gives double`}},
	} {
		out, ok := kubectl(t, ns, withRollout(tc.cond), "apply", "--dry-run=server", "-f", "-")
		if ok {
			t.Fatalf("a Journey with failureCondition %q was accepted: %s", tc.cond, out)
		}
		for _, want := range tc.want {
			if !strings.Contains(out, want) {
				t.Errorf("failureCondition %q: output does not contain %q:\n%s", tc.cond, want, out)
			}
		}
	}
	if out, ok := kubectl(t, ns, withRollout("canary.failed / canary.finished > stable.failed / stable.finished + 0.1"), "apply", "-f", "-"); !ok {
		t.Fatalf("a valid rollout was refused: %s", out)
	}
}
