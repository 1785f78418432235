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
	for _, spec := range []flowv1.AgentSpec{{}, {MaxTokens: &hundred}} {
		if got, want := agent.MaxTokens(spec), int64(MaxTokens(spec)); got != want {
			t.Errorf("agent.MaxTokens = %d, provider sends %d", got, want)
		}
		if got, want := agent.WorstCaseCost(&flowv1.Pricing{PromptPerMTok: "1", CompletionPerMTok: "10"}, 1000, agent.MaxTokens(spec)),
			WorstCaseCost(flowv1.AgentSpec{MaxTokens: spec.MaxTokens, Pricing: &flowv1.Pricing{PromptPerMTok: "1", CompletionPerMTok: "10"}}, 4000); got != want {
			t.Errorf("worst case %v, provider's %v", got, want)
		}
	}
}
