package openai

import (
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// The engine's budget check reads the answer cap from agent.MaxTokens: it must be
// the cap this provider sends.
func TestMaxTokensAgreesWithBudgetCheck(t *testing.T) {
	hundred := int32(100)
	for _, spec := range []flowv1.AgentSpec{{Name: "x", Model: "m"}, {Name: "x", Model: "m", MaxTokens: &hundred}} {
		a, err := New(spec, "")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := agent.MaxTokens(spec), int64(a.maxTokens); got != want {
			t.Errorf("agent.MaxTokens = %d, provider sends %d", got, want)
		}
	}
}
