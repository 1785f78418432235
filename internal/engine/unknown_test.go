package engine

import (
	"fmt"
	"strings"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
)

// unkeyedClinic is the clinic journey whose book_slot is a server tool of a server
// whose idempotency is idem, with onUnknown action (and a lookup_booking probe).
func unkeyedClinic(idem flowv1.ToolIdempotency, action flowv1.OnUnknownAction) def {
	return clinicTools(twoCalls, func(j *flowv1.JourneySpec, p *flowv1.PathwaySpec) {
		j.ToolServers = []flowv1.ToolServer{{Name: "clinic", URL: "http://clinic.test/mcp", Idempotency: idem}}
		j.Tools[1] = flowv1.Tool{Name: "book_slot", Server: "clinic", Approval: flowv1.ToolApprovalNever, OnUnknown: action}
		j.Tools = append(j.Tools, flowv1.Tool{Name: "lookup_booking", Server: "clinic", Approval: flowv1.ToolApprovalNever})
		if action == flowv1.OnUnknownProbe {
			j.Tools[1].Probe = &flowv1.ToolProbe{Tool: "lookup_booking"}
		}
	})
}

// serverSession answers builtin tools with their expressions, book_slot with a
// booking, and the probe with probe (when set).
func serverSession(t *testing.T, d def, probe func() (any, error)) *session {
	s := toolSession(t, d, `{"patient": {"name": "Ada"}}`)
	s.answer = func(e *Effect) (any, error) {
		switch e.Tool.Tool {
		case "book_slot":
			return agent.ToolResponse{Result: map[string]any{"doctor": e.Tool.Args["doctor"], "slot": "10:30"}}, nil
		case "lookup_booking":
			if probe == nil {
				t.Fatalf("unexpected probe %s", dump(e.Tool))
			}
			if e.Tool.Args["idempotencyKey"] != "uid-1-2-1" || !e.ReadOnly {
				t.Errorf("probe request %s (read-only %v): want the call's key", dump(e.Tool), e.ReadOnly)
			}
			r, err := probe()
			return agent.ToolResponse{Result: r}, err
		}
		return builtin.CallTool(*e.Tool)
	}
	return s
}

// sendAndLose takes steps until book_slot is asked for, then loses its answer (the
// manager stopped after sending it), and settles.
func sendAndLose(t *testing.T, s *session) *Effect {
	t.Helper()
	s.say("m1", "book me")
	for i := 0; i < 20; i++ {
		eff := s.step()
		if eff == nil {
			continue
		}
		if eff.Tool.Tool == "book_slot" {
			s.settle()
			return eff
		}
		s.perform(eff)
	}
	t.Fatalf("book_slot was never called: %s", dump(s.st))
	return nil
}

func TestUnkeyedCallMarkedSentBeforeItIsMade(t *testing.T) {
	for _, idem := range []flowv1.ToolIdempotency{"", flowv1.ToolIdempotencyKeyed, flowv1.ToolIdempotencyNone} {
		t.Run(fmt.Sprintf("idempotency %q", idem), func(t *testing.T) {
			s := serverSession(t, unkeyedClinic(idem, ""), nil)
			s.say("m1", "book me")
			var eff *Effect
			for eff == nil || eff.Tool.Tool != "book_slot" {
				if eff != nil {
					s.perform(eff)
				}
				eff = s.step()
			}
			c := s.st.Turn.ToolCalls[1]
			unkeyed := idem == flowv1.ToolIdempotencyNone
			if eff.WriteFirst != unkeyed || (c.SentAt != nil) != unkeyed {
				t.Fatalf("WriteFirst %v, sentAt %v: want both only for idempotency None", eff.WriteFirst, c.SentAt)
			}
			if unkeyed {
				return
			}
			// A Keyed call whose answer was lost is sent again with the same key.
			s.settle()
			if again := s.effects[len(s.effects)-1]; again.Tool.Tool != "book_slot" || again.Tool.IdempotencyKey != eff.Tool.IdempotencyKey {
				t.Fatalf("not sent again with the same key: %s", dump(s.effects))
			}
			if s.st.Turn != nil || s.st.LastTurn.ToolCalls[1].State != flowv1.ToolCallDone {
				t.Fatalf("turn %s", dump(s.st.LastTurn))
			}
		})
	}
}

func TestOutcomeUnknownAskHuman(t *testing.T) {
	lost := func(t *testing.T) *session {
		s := serverSession(t, unkeyedClinic(flowv1.ToolIdempotencyNone, ""), nil)
		eff := sendAndLose(t, s)
		if got := s.stalled(); got != flowv1.ReasonOutcomeUnknown {
			t.Fatalf("stalled %q, want OutcomeUnknown:\n%s", got, dump(s.st.Conditions))
		}
		msg := s.condition(flowv1.ConditionStalled).Message
		for _, want := range []string{"t-2-1", "book_slot", eff.Tool.IdempotencyKey, "sent at", "kubectl journey answer patient-12345 t-2-1"} {
			if !strings.Contains(msg, want) {
				t.Errorf("Stalled message %q does not name %q", msg, want)
			}
		}
		if c := s.st.Turn.ToolCalls[1]; c.State != flowv1.ToolCallOutcomeUnknown || s.st.LastTurn.ToolCalls[1].State != flowv1.ToolCallOutcomeUnknown {
			t.Fatalf("call %s", dump(c))
		}
		for _, e := range s.effects {
			if e.Tool.Tool == "book_slot" {
				t.Fatalf("the call was sent again: %s", dump(s.effects))
			}
		}
		if s.st.Usage.ToolCalls != 2 {
			t.Errorf("usage.toolCalls %d: the call whose outcome is unknown was sent, it counts", s.st.Usage.ToolCalls)
		}
		return s
	}
	t.Run("resume is refused", func(t *testing.T) {
		s := lost(t)
		s.intervene(flowv1.Intervention{Action: flowv1.InterventionResume})
		s.settle()
		if s.stalled() != flowv1.ReasonOutcomeUnknown || !strings.Contains(s.refusal(), "kubectl journey answer") {
			t.Fatalf("resume: stalled %q, refusal %s", s.stalled(), s.refusal())
		}
	})
	t.Run("answer a call that does not wait", func(t *testing.T) {
		s := lost(t)
		s.intervene(flowv1.Intervention{Action: flowv1.InterventionAnswer, Call: "t-2-0", Outcome: flowv1.AnswerDone})
		s.settle()
		if s.stalled() != flowv1.ReasonOutcomeUnknown || !strings.Contains(s.refusal(), "call t-2-1 waits for one") {
			t.Fatalf("stalled %q, refusal %s", s.stalled(), s.refusal())
		}
	})
	t.Run("done", func(t *testing.T) {
		s := lost(t)
		s.intervene(flowv1.Intervention{Action: flowv1.InterventionAnswer, Call: "t-2-1", Outcome: flowv1.AnswerDone, Content: raw(`{"doctor": "dr-who", "slot": "11:00"}`)})
		s.settle()
		if s.stalled() != "" || s.st.Turn != nil || s.st.LastTurn.AssistantText != "Booked dr-who at 11:00" {
			t.Fatalf("stalled %q, last turn %s", s.stalled(), dump(s.st.LastTurn))
		}
		h := s.st.History[len(s.st.History)-1]
		if h.Intervention != flowv1.InterventionAnswer || h.By != "alice" || !strings.Contains(h.Reason, "answered tool call t-2-1: done") {
			t.Errorf("history %s", dump(h))
		}
	})
	t.Run("done with text", func(t *testing.T) {
		s := lost(t)
		s.intervene(flowv1.Intervention{Action: flowv1.InterventionAnswer, Call: "t-2-1", Outcome: flowv1.AnswerDone, Result: "booked by phone"})
		s.settle()
		if c := s.st.LastTurn.ToolCalls[1]; c.State != flowv1.ToolCallDone || s.st.Turn != nil {
			t.Fatalf("call %s", dump(c))
		}
	})
	t.Run("not done: sent again with the same key", func(t *testing.T) {
		s := lost(t)
		s.intervene(flowv1.Intervention{Action: flowv1.InterventionAnswer, Call: "t-2-1", Outcome: flowv1.AnswerNotDone})
		s.settle()
		last := s.effects[len(s.effects)-1]
		if last.Tool.Tool != "book_slot" || last.Tool.IdempotencyKey != "uid-1-2-1" || !last.WriteFirst {
			t.Fatalf("not sent again: %s", dump(s.effects))
		}
		if s.st.Turn != nil || s.st.LastTurn.AssistantText != "Booked dr-cardiology at 10:30" {
			t.Fatalf("last turn %s", dump(s.st.LastTurn))
		}
	})
	t.Run("fail", func(t *testing.T) {
		s := lost(t)
		s.intervene(flowv1.Intervention{Action: flowv1.InterventionAnswer, Call: "t-2-1", Outcome: flowv1.AnswerFail, Reason: "the clinic is closed"})
		s.settle()
		if s.st.Turn != nil || s.stalled() != "" || !strings.Contains(failureMessages(s), "the clinic is closed") {
			t.Fatalf("stalled %q, failures %s", s.stalled(), failureMessages(s))
		}
	})
}

func TestOutcomeUnknownFail(t *testing.T) {
	s := serverSession(t, unkeyedClinic(flowv1.ToolIdempotencyNone, flowv1.OnUnknownFail), nil)
	sendAndLose(t, s)
	if s.stalled() != "" || s.st.Turn != nil || !strings.Contains(failureMessages(s), "onUnknown is Fail") {
		t.Fatalf("stalled %q, failures %s", s.stalled(), failureMessages(s))
	}
}

func TestOutcomeUnknownProbe(t *testing.T) {
	cases := []struct {
		name    string
		answer  any
		err     error
		stalled string
		reply   string
	}{
		{"done", map[string]any{"done": true, "result": map[string]any{"doctor": "dr-probe", "slot": "12:00"}}, nil, "", "Booked dr-probe at 12:00"},
		{"not done", map[string]any{"done": false}, nil, "", "Booked dr-cardiology at 10:30"},
		{"cannot tell", map[string]any{"status": "maybe"}, nil, flowv1.ReasonOutcomeUnknown, ""},
		{"probe fails", nil, &agent.Error{Class: agent.Invalid, Source: flowv1.FailureTool, Kind: flowv1.FailureException, Err: fmt.Errorf("no such key")}, flowv1.ReasonOutcomeUnknown, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := serverSession(t, unkeyedClinic(flowv1.ToolIdempotencyNone, flowv1.OnUnknownProbe), func() (any, error) { return tc.answer, tc.err })
			sendAndLose(t, s)
			if got := s.stalled(); got != tc.stalled {
				t.Fatalf("stalled %q, want %q: %s", got, tc.stalled, dump(s.st.Conditions))
			}
			if tc.stalled != "" {
				if msg := s.condition(flowv1.ConditionStalled).Message; !strings.Contains(msg, "probe lookup_booking") {
					t.Errorf("message %q does not say the probe could not tell", msg)
				}
				return
			}
			if s.st.Turn != nil || s.st.LastTurn.AssistantText != tc.reply {
				t.Fatalf("last turn %s", dump(s.st.LastTurn))
			}
		})
	}
}

func TestOutcomeUnknownAfterLostConnection(t *testing.T) {
	s := serverSession(t, unkeyedClinic(flowv1.ToolIdempotencyNone, ""), nil)
	book := s.answer
	s.answer = func(e *Effect) (any, error) {
		if e.Tool.Tool == "book_slot" {
			return nil, &agent.Error{Class: agent.Invalid, Source: flowv1.FailureTransport, Kind: flowv1.FailureTimeout, Err: fmt.Errorf("no answer within 10s")}
		}
		return book(e)
	}
	s.say("m1", "book me")
	s.settle()
	if s.stalled() != flowv1.ReasonOutcomeUnknown || s.st.Turn.ToolCalls[1].State != flowv1.ToolCallOutcomeUnknown {
		t.Fatalf("a timed-out call to a server without keys: stalled %q, calls %s", s.stalled(), dump(s.st.Turn.ToolCalls))
	}
}

func TestProbeToolMustBeDeclared(t *testing.T) {
	d := unkeyedClinic(flowv1.ToolIdempotencyNone, flowv1.OnUnknownProbe)
	d.j.Tools[1].Probe.Tool = "nowhere"
	if _, err := NewSnapshot("rev-1", d.j, d.p); err == nil || !strings.Contains(err.Error(), `onUnknown probe tool "nowhere" is not declared`) {
		t.Fatalf("err %v", err)
	}
}

func failureMessages(s *session) string {
	if s.st.LastTurn == nil {
		return ""
	}
	var out []string
	for _, f := range s.st.LastTurn.Failures {
		out = append(out, f.Message)
	}
	return strings.Join(out, "; ")
}
