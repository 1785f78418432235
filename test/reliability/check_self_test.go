package reliability

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// goodSession is a settled Session whose status satisfies every invariant.
func goodSession() flowv1.Session {
	s := flowv1.Session{ObjectMeta: metav1.ObjectMeta{Name: "good"}}
	s.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "a question"}, {ID: "m2", Text: "my order"}, {ID: "m3", Text: "bye"}}
	s.Status = flowv1.SessionStatus{
		Phase: flowv1.PhaseCompleted, CurrentPathway: "shipping", ProcessedMessages: 3, Turns: 3, Transitions: 4, Step: 4,
		History: []flowv1.HistoryEntry{
			{Step: 1, From: "triage", To: "faq", Action: flowv1.ActionAdvance, Source: flowv1.SourceTransition, Transition: "faq-detour", MessageID: "m1"},
			{Step: 1, From: "faq", To: "triage", Action: flowv1.ActionAdvance, Source: flowv1.SourceReturn, Transition: "return", MessageID: "m1"},
			{Step: 3, From: "triage", To: "shipping", Action: flowv1.ActionAdvance, Source: flowv1.SourceAgent, Transition: "onPartialSuccess", MessageID: "m2"},
			{Step: 4, From: "shipping", Action: flowv1.ActionClose, Source: flowv1.SourceNext, MessageID: "m3"},
		},
		LastTurn:     &flowv1.TurnOutcome{MessageID: "m3"},
		LastDecision: &flowv1.DecisionRecord{ID: "d-3", From: "triage", To: "shipping", Source: flowv1.SourceAgent, State: flowv1.DecisionApplied, AllowedDestinations: []string{"billing", "shipping"}},
	}
	return s
}

// TestCheckCatchesViolations shows that the invariants of the chaos test fail on the
// faults they are meant to catch.
func TestCheckCatchesViolations(t *testing.T) {
	if v := check([]flowv1.Session{goodSession()}); len(v.problems) > 0 {
		t.Fatalf("a good Session fails the check: %v", v.problems)
	}
	cases := []struct {
		name   string
		break_ func(s *flowv1.Session)
		count  func(v verdict) int
	}{
		{"message not processed", func(s *flowv1.Session) {
			s.Status.ProcessedMessages = 2
			s.Status.Turns = 2
			s.Status.LastTurn.MessageID = "m2"
		},
			func(v verdict) int { return v.lost }},
		{"message processed twice", func(s *flowv1.Session) { s.Status.Turns = 4 }, func(v verdict) int { return v.duplicated }},
		{"old message acted on again", func(s *flowv1.Session) { s.Status.History[3].MessageID = "m1" }, func(v verdict) int { return v.duplicated }},
		{"transition applied twice", func(s *flowv1.Session) {
			s.Status.History = append(s.Status.History[:3], s.Status.History[2:]...)
			s.Status.Transitions = 5
		}, func(v verdict) int { return v.duplicated }},
		{"transition applied again in a later step", func(s *flowv1.Session) {
			again := s.Status.History[2]
			again.Step = 4
			s.Status.History = append(s.Status.History[:3], again, s.Status.History[3])
			s.Status.Transitions = 5
		}, func(v verdict) int { return v.duplicated }},
		{"history going back in steps", func(s *flowv1.Session) { s.Status.History[2].Step = 0 }, func(v verdict) int { return v.duplicated }},
		{"transition counted but not recorded", func(s *flowv1.Session) { s.Status.Transitions = 7 }, func(v verdict) int { return v.duplicated }},
		{"decision outside allowedDestinations", func(s *flowv1.Session) { s.Status.History[2].To = "refunds"; s.Status.LastDecision.To = "refunds" },
			func(v verdict) int { return v.escaped }},
		{"decision to the escalation pathway without escalating", func(s *flowv1.Session) { s.Status.History[2].To = "human" },
			func(v verdict) int { return v.escaped }},
		{"unknown intent taken", func(s *flowv1.Session) { s.Status.History[0].Transition = "refund-everything" }, func(v verdict) int { return v.escaped }},
		{"left running", func(s *flowv1.Session) { s.Status.Phase = flowv1.PhaseRunning }, func(v verdict) int { return v.unsettled }},
		{"journal entry left over", func(s *flowv1.Session) { s.Status.PendingEffect = &flowv1.EffectRecord{ID: "x"} }, func(v verdict) int { return v.unsettled }},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			s := goodSession()
			tc.break_(&s)
			if v := check([]flowv1.Session{s}); tc.count(v) == 0 {
				t.Errorf("not caught; problems: %v", v.problems)
			}
		})
	}
}
