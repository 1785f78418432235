package engine

import (
	"strings"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// toolBudget caps the Session's tool calls at n.
func toolBudget(n int64) func(*flowv1.JourneySpec, *flowv1.PathwaySpec) {
	return func(j *flowv1.JourneySpec, _ *flowv1.PathwaySpec) {
		j.Limits.Budget = &flowv1.SessionBudget{MaxToolCalls: n}
	}
}

func TestToolCallBudgetStallsAndOverrideResumes(t *testing.T) {
	s := toolSession(t, clinicTools(twoCalls, toolBudget(1)), `{"patient": {"name": "Ada"}}`)
	s.say("m1", "book me")
	s.settle()
	if len(s.effects) != 1 || s.effects[0].Tool.Tool != "find_doctors" {
		t.Fatalf("with a budget of 1 tool call, effects %s", dump(s.effects))
	}
	if s.stalled() != flowv1.ReasonBudgetExceeded || s.st.Turn == nil {
		t.Fatalf("stalled %q, turn %v: want BudgetExceeded with the turn in progress", s.stalled(), s.st.Turn)
	}
	if c := s.condition(flowv1.ConditionStalled); !strings.Contains(c.Message, "tool-call budget is used up") {
		t.Errorf("stalled message %q", c.Message)
	}
	if s.st.Usage.ToolCalls != 1 || s.st.LastTurn.Usage.ToolCalls != 1 {
		t.Errorf("usage %+v, lastTurn usage %+v: want 1 tool call", s.st.Usage, s.st.LastTurn.Usage)
	}
	calls := s.st.Turn.ToolCalls
	if len(calls) != 2 || calls[1].Tool != "book_slot" || calls[1].State != flowv1.ToolCallPending {
		t.Fatalf("turn calls %s: book_slot should wait, pending", dump(calls))
	}

	s.spec.Limits = &flowv1.SessionLimits{Budget: &flowv1.SessionBudget{MaxToolCalls: 2}}
	s.settle()
	if len(s.effects) != 2 || s.effects[1].Tool.Tool != "book_slot" || s.effects[1].Tool.IdempotencyKey != calls[1].IdempotencyKey {
		t.Fatalf("after raising the cap, effects %s", dump(s.effects))
	}
	if s.stalled() != "" || s.st.Turn != nil || s.st.Usage.ToolCalls != 2 {
		t.Fatalf("stalled %q, turn %v, usage %+v", s.stalled(), s.st.Turn, s.st.Usage)
	}
	if lt := s.st.LastTurn; lt.FinishReason != flowv1.FinishSuccess || lt.AssistantText != "Booked dr-cardiology at 09:00" || len(lt.Failures) != 0 {
		t.Errorf("resumed turn %s", dump(lt))
	}
}

// Refused calls and cache hits are not made, so they neither count nor stop the
// Session; failed calls were made and count.
func TestToolCallsCountOnlyMadeCalls(t *testing.T) {
	calls := []flowv1.BuiltinToolCall{
		{Tool: "copay", Args: "{}"},
		{Tool: "copay", Args: "{}"}, // from the Session's cache
		{Tool: "find_doctors", Args: "{'specialty': 'cardiology'}"},
	}
	s := toolSession(t, clinicTools(calls, toolBudget(2)), "")
	s.say("m1", "copay twice")
	s.settle()
	if len(s.effects) != 2 || s.stalled() != "" || s.st.Usage.ToolCalls != 2 {
		t.Fatalf("effects %d, stalled %q, usage %+v: want 2 calls made and counted", len(s.effects), s.stalled(), s.st.Usage)
	}
	if lt := s.st.LastTurn; len(lt.ToolCalls) != 3 || !lt.ToolCalls[1].Cached {
		t.Errorf("lastTurn.toolCalls %s", dump(lt.ToolCalls))
	}

	refused := []flowv1.BuiltinToolCall{{Tool: "book_slot", Args: "{'doctor': 'dr-x'}"}} // requires patient
	s = toolSession(t, clinicTools(refused, toolBudget(1)), "")
	s.say("m1", "book")
	s.settle()
	if len(s.effects) != 0 || s.st.Usage.ToolCalls != 0 || s.stalled() != "" {
		t.Fatalf("refused call: effects %d, usage %+v, stalled %q", len(s.effects), s.st.Usage, s.stalled())
	}

	failing := []flowv1.BuiltinToolCall{{Tool: "find_doctors", Args: "{}"}} // no specialty: the expression fails
	s = toolSession(t, clinicTools(failing), "")
	s.say("m1", "find")
	s.settle()
	if len(s.effects) != 1 || s.st.Usage.ToolCalls != 1 || s.st.LastTurn.ToolCalls[0].State != flowv1.ToolCallFailed {
		t.Fatalf("failed call: effects %d, usage %+v, calls %s", len(s.effects), s.st.Usage, dump(s.st.LastTurn.ToolCalls))
	}
}

// A model's tool call past the budget waits, planned, until the cap is raised; the
// model is not asked again before it is made.
func TestReActToolCallBudget(t *testing.T) {
	s, l := reactTools(t, func(req agent.PathwayRequest) agent.PathwayResponse {
		if len(req.ToolExchanges) == 0 {
			return asks(call("find_doctors", `{"specialty":"cardiology"}`), call("book_slot", `{"doctor":"dr-cardiology"}`))
		}
		return final(req)
	}, toolBudget(1))
	s.say("m1", "book me a cardiologist")
	s.settle()
	if toolEffects(s) != 1 || s.stalled() != flowv1.ReasonBudgetExceeded || s.st.Usage.ToolCalls != 1 || l.calls[flowv1.EffectRunPathway] != 1 {
		t.Fatalf("tool calls %d, stalled %q, usage %+v, model asked %d times", toolEffects(s), s.stalled(), s.st.Usage, l.calls[flowv1.EffectRunPathway])
	}
	s.spec.Limits = &flowv1.SessionLimits{Budget: &flowv1.SessionBudget{MaxToolCalls: 2}}
	s.settle()
	if toolEffects(s) != 2 || s.stalled() != "" || s.st.Usage.ToolCalls != 2 || l.calls[flowv1.EffectRunPathway] != 2 {
		t.Fatalf("after the override: tool calls %d, stalled %q, usage %+v, model asked %d times", toolEffects(s), s.stalled(), s.st.Usage, l.calls[flowv1.EffectRunPathway])
	}
	if lt := s.st.LastTurn; lt.AssistantText != "Booked dr-cardiology at 09:00" || lt.FinishReason != flowv1.FinishSuccess {
		t.Errorf("resumed turn %s", dump(lt))
	}
}
