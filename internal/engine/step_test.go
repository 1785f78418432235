package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// conversation is a one-pathway chat journey whose pathway never completes.
func conversation(mods ...func(*flowv1.JourneySpec)) def {
	return journeyOf("chat", map[string]*flowv1.PathwaySpec{
		"chat": {Agents: []flowv1.Name{"bot"}, Builtin: &flowv1.BuiltinPathway{Complete: "false"}},
	}, append([]func(*flowv1.JourneySpec){func(j *flowv1.JourneySpec) {
		j.Agents = []flowv1.AgentSpec{{Name: "bot", Provider: flowv1.ProviderBuiltin}}
	}}, mods...)...)
}

func TestCaps(t *testing.T) {
	t.Run("turn limit", func(t *testing.T) {
		s := newSession(t, conversation(func(j *flowv1.JourneySpec) { j.Limits.MaxTurns = 3 }))
		for i := range 4 {
			s.say(fmt.Sprintf("m%d", i), "hi")
		}
		s.settle()
		if s.stalled() != flowv1.ReasonTurnLimit || s.st.Turns != 3 || s.st.ProcessedMessages != 3 {
			t.Fatalf("stalled %q turns %d processed %d", s.stalled(), s.st.Turns, s.st.ProcessedMessages)
		}
		if s.st.LastTurn.FinishReason != flowv1.FinishTurnLimit {
			t.Errorf("finishReason %s", s.st.LastTurn.FinishReason)
		}
		if s.st.Phase.IsTerminal() {
			t.Errorf("phase %s: a cap is not terminal", s.st.Phase)
		}
	})
	t.Run("wall time", func(t *testing.T) {
		s := newSession(t, conversation(func(j *flowv1.JourneySpec) { j.Limits.SessionTimeout = &metav1.Duration{Duration: 45 * time.Second} }))
		s.say("m1", "hi")
		s.settle()
		s.expect(flowv1.PhaseWaitingForInput, "chat")
		s.now = t0.Add(45 * time.Second)
		s.settle()
		if s.stalled() != "" {
			t.Fatal("timed out at the deadline")
		}
		s.now = t0.Add(46 * time.Second)
		s.settle() // idle, yet the timeout blocks it
		if s.stalled() != flowv1.ReasonSessionTimeout || s.st.LastTurn.FinishReason != flowv1.FinishDeadline {
			t.Fatalf("stalled %q %s", s.stalled(), dump(s.st.LastTurn))
		}
	})
	t.Run("budget", func(t *testing.T) {
		// Each call reports USD 0.9; its worst case at this pricing (a prompt of a few
		// hundred tokens at USD 100 per million plus 200 answer tokens at USD 1000 per
		// million) is about USD 0.3. After two calls USD 0.2 is left: the third call
		// is not made, and the Session never spends past its cap.
		maxTokens := int32(200)
		s := newSession(t, conversation(func(j *flowv1.JourneySpec) {
			j.Agents = []flowv1.AgentSpec{{Name: "bot", Provider: flowv1.ProviderOpenAI, Model: "m", MaxTokens: &maxTokens,
				Pricing: &flowv1.Pricing{PromptPerMTok: "100", CompletionPerMTok: "1000"}}}
			j.Limits.Budget = &flowv1.SessionBudget{MaxCostUSD: "2.0", MaxTokens: 100000}
		}))
		l := &llm{usage: agent.Usage{PromptTokens: 1000, CompletionTokens: 200, CostUSD: 0.9},
			pathway: func(agent.PathwayRequest) (agent.PathwayResponse, error) {
				return agent.PathwayResponse{Reply: "ok", ResultType: flowv1.ResultSuccess}, nil
			}}
		s.answer = l.answer
		for i := range 5 {
			s.say(fmt.Sprintf("m%d", i), "hi")
		}
		s.settle()
		if s.stalled() != flowv1.ReasonBudgetExceeded || l.calls[flowv1.EffectRunPathway] != 2 {
			t.Fatalf("stalled %q after %d calls", s.stalled(), l.calls[flowv1.EffectRunPathway])
		}
		if u := s.st.Usage; u.CostUSD != "1.8" || u.PromptTokens != 2000 || u.CompletionTokens != 400 {
			t.Errorf("usage %+v: the cap of USD 2 must never be exceeded", u)
		}
		if s.st.LastTurn.FinishReason != flowv1.FinishBudgetExceeded || s.st.Turn == nil || s.st.ProcessedMessages != 3 {
			t.Errorf("the unaffordable turn must wait in progress: finish %s turn %v processed %d",
				s.st.LastTurn.FinishReason, s.st.Turn, s.st.ProcessedMessages)
		}
		if c := s.condition(flowv1.ConditionStalled); c == nil || !strings.Contains(c.Message, "could cost up to USD 0.") {
			t.Errorf("Stalled %+v", c)
		}
	})
	t.Run("transition limit", func(t *testing.T) {
		d := journeyOf("a", map[string]*flowv1.PathwaySpec{"a": {RunOn: flowv1.RunOnEntry, Next: "b"}, "b": {RunOn: flowv1.RunOnEntry, Next: "c"}, "c": {RunOn: flowv1.RunOnEntry}},
			func(j *flowv1.JourneySpec) { j.Limits.MaxTransitions = 1 })
		s := newSession(t, d)
		s.settle()
		if s.stalled() != flowv1.ReasonTransitionLimit || s.st.CurrentPathway != "b" {
			t.Fatalf("stalled %q in %s", s.stalled(), s.st.CurrentPathway)
		}
	})
	t.Run("iteration limit", func(t *testing.T) {
		d := workflow()
		d.j.Limits.MaxIterations = 2
		d.j.LoopPrevention.MaxCycleRepeats = 10
		s := newSession(t, d)
		s.post("plan", 1, flowv1.ResultSuccess, "").post("generate", 1, flowv1.ResultSuccess, "")
		s.post("review", 1, flowv1.ResultFailure, "").post("revise", 2, flowv1.ResultSuccess, "").post("review", 2, flowv1.ResultFailure, "")
		s.settle()
		if s.stalled() != flowv1.ReasonIterationLimit || s.st.Iteration != 2 || s.st.LastTurn.FinishReason != flowv1.FinishIterationLimit {
			t.Fatalf("stalled %q iteration %d", s.stalled(), s.st.Iteration)
		}
	})
}

func TestSuspendAndCancel(t *testing.T) {
	s := newSession(t, conversation())
	s.spec.Suspend = true
	s.say("m1", "hi")
	s.settle()
	if s.st.ProcessedMessages != 0 {
		t.Fatal("a suspended session processed a message")
	}
	if c := s.condition(flowv1.ConditionReady); c == nil || c.Reason != flowv1.ReasonSuspended {
		t.Fatalf("Ready %+v", c)
	}
	s.spec.Suspend = false
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "chat")
	if c := s.condition(flowv1.ConditionReady); c.Reason != flowv1.ReasonWaitingForInput {
		t.Errorf("Ready after resume %+v", c)
	}
	s.spec.Cancel = true
	s.say("m2", "hi")
	s.settle()
	s.expect(flowv1.PhaseCancelled, "chat")
	if s.st.ProcessedMessages != 1 || s.st.CompletionTime == nil {
		t.Errorf("cancel: %s", dump(s.st))
	}
}
