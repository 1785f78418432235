package engine

import (
	"fmt"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// budgeted is a conversation on a priced openai agent whose worst case per call is
// about USD 0.3 (see TestCaps/budget), capped at maxCost.
func budgeted(maxCost flowv1.Decimal) def {
	maxTokens := int32(200)
	return conversation(func(j *flowv1.JourneySpec) {
		j.Agents = []flowv1.AgentSpec{{Name: "bot", Provider: flowv1.ProviderOpenAI, Model: "m", MaxTokens: &maxTokens,
			Pricing: &flowv1.Pricing{PromptPerMTok: "100", CompletionPerMTok: "1000"}}}
		j.Limits.Budget = &flowv1.SessionBudget{MaxCostUSD: maxCost}
	})
}

func TestBudgetOverrideResumes(t *testing.T) {
	s := newSession(t, budgeted("1.0"))
	l := &llm{usage: agent.Usage{PromptTokens: 1000, CompletionTokens: 200, CostUSD: 0.45},
		pathway: func(req agent.PathwayRequest) (agent.PathwayResponse, error) {
			return agent.PathwayResponse{Reply: "re: " + req.Message, ResultType: flowv1.ResultSuccess}, nil
		}}
	s.answer = l.answer
	for i := range 3 {
		s.say(fmt.Sprintf("m%d", i), fmt.Sprintf("hello %d", i))
	}
	s.settle()
	if s.stalled() != flowv1.ReasonBudgetExceeded || l.calls[flowv1.EffectRunPathway] != 2 || s.st.Turn == nil {
		t.Fatalf("stalled %q after %d calls, turn %v", s.stalled(), l.calls[flowv1.EffectRunPathway], s.st.Turn)
	}
	stalled := s.st.DeepCopy()

	// An override that does not lift the cap changes nothing.
	s.spec.Limits = &flowv1.SessionLimits{Budget: &flowv1.SessionBudget{MaxCostUSD: "1.0"}}
	s.settle()
	if s.stalled() != flowv1.ReasonBudgetExceeded || s.st.Step != stalled.Step || l.calls[flowv1.EffectRunPathway] != 2 {
		t.Fatalf("an override at the same cap moved the session: stalled %q step %d -> %d", s.stalled(), stalled.Step, s.st.Step)
	}

	// Raised: the stalled turn goes on with the message it stopped at, then the next.
	s.spec.Limits.Budget.MaxCostUSD = "5"
	s.settle()
	if s.stalled() != "" || l.calls[flowv1.EffectRunPathway] != 3 || s.st.ProcessedMessages != 3 {
		t.Fatalf("after the override: stalled %q, %d calls, %d processed", s.stalled(), l.calls[flowv1.EffectRunPathway], s.st.ProcessedMessages)
	}
	if lt := s.st.LastTurn; lt.FinishReason != flowv1.FinishSuccess || lt.AssistantText != "re: hello 2" || len(lt.Failures) != 0 {
		t.Errorf("resumed turn %s", dump(lt))
	}
	evs := Events(stalled, s.st)
	found := false
	for _, e := range evs {
		found = found || e.Reason == flowv1.ReasonLimitsOverridden
	}
	if !found {
		t.Errorf("no %s event in %+v", flowv1.ReasonLimitsOverridden, evs)
	}
}

func TestTurnLimitOverride(t *testing.T) {
	s := newSession(t, conversation(func(j *flowv1.JourneySpec) { j.Limits.MaxTurns = 1 }))
	s.say("m1", "hi").say("m2", "again")
	s.settle()
	if s.stalled() != flowv1.ReasonTurnLimit || s.st.ProcessedMessages != 1 {
		t.Fatalf("stalled %q processed %d", s.stalled(), s.st.ProcessedMessages)
	}
	s.spec.Limits = &flowv1.SessionLimits{MaxTurns: 5}
	s.settle()
	if s.stalled() != "" || s.st.ProcessedMessages != 2 {
		t.Fatalf("stalled %q processed %d", s.stalled(), s.st.ProcessedMessages)
	}
}

func TestWorstCaseSumsThePipeline(t *testing.T) {
	hundred := int32(100)
	priced := &flowv1.Pricing{PromptPerMTok: "0", CompletionPerMTok: "1000"}
	eff := newEffect(flowv1.EffectRunPathway, []flowv1.AgentSpec{
		{Name: "a", Provider: flowv1.ProviderOpenAI, MaxTokens: &hundred, Pricing: priced},
		{Name: "b", Provider: flowv1.ProviderBuiltin},
		{Name: "c", Provider: flowv1.ProviderOpenAI, Pricing: priced},
	}, flowv1.PipelineSequential, agent.PathwayRequest{Pathway: "p", Message: "hi"})
	tokens, cost := worstCase(eff)
	// Answers: 100 + 1024 tokens at USD 0.001 each; the builtin agent costs nothing.
	if cost != 1124*1_000_000 {
		t.Errorf("cost %d nano-dollars, want %d", cost, 1124*1_000_000)
	}
	if tokens <= 1124 {
		t.Errorf("tokens %d must include the prompts", tokens)
	}
}
