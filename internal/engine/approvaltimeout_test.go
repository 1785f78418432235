package engine

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func hasEvent(evs []Event, reason string) bool {
	for _, e := range evs {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

func TestDecisionApprovalTimeout(t *testing.T) {
	start := func(t *testing.T, on flowv1.ApprovalTimeoutAction) *session {
		d := planner()
		dec := d.p["seek-approval"].Transitions.OnSuccess.Decision
		dec.OnRejected = "outline"
		dec.Approval = &flowv1.ApprovalTimeout{Timeout: metav1.Duration{Duration: time.Hour}, OnTimeout: on}
		s := newSession(t, d)
		s.spec.InitialContext = raw(`{"collect":"sufficient_context","outline_ok_at":2,"schedule":"success"}`)
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval")
		if ws := s.st.LastDecision.WaitingSince; ws == nil || !ws.Time.Equal(t0) {
			t.Fatalf("waitingSince %v", ws)
		}
		if at := s.snap.NextDeadline(&s.spec, s.st, t0); !at.Equal(t0.Add(time.Hour)) {
			t.Fatalf("next deadline %v, want the approval's at %v", at, t0.Add(time.Hour))
		}
		s.now = t0.Add(time.Hour)
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval") // not before the deadline
		s.now = t0.Add(time.Hour + time.Second)
		return s
	}
	t.Run("Reject goes to onRejected", func(t *testing.T) {
		s := start(t, flowv1.ApprovalTimeoutReject)
		before := s.st.DeepCopy()
		s.step()
		ld := s.st.LastDecision
		if ld.State != flowv1.DecisionRejected || ld.Source != flowv1.SourceTimeout || ld.To != "outline" ||
			ld.Reasoning != "rejected by the system: no approval within 1h0m0s" {
			t.Fatalf("lastDecision %s", dump(ld))
		}
		if h := s.st.History[len(s.st.History)-1]; h.To != "outline" || h.Source != flowv1.SourceTimeout {
			t.Errorf("history %s", dump(h))
		}
		if !hasEvent(Events(before, s.st), flowv1.ReasonApprovalTimeout) {
			t.Errorf("no ApprovalTimeout event: %+v", Events(before, s.st))
		}
		if s.st.CurrentPathway != "outline" || s.st.Phase == flowv1.PhaseAwaitingApproval {
			t.Errorf("in %s, phase %s", s.st.CurrentPathway, s.st.Phase)
		}
	})
	t.Run("Escalate makes the Session Escalated", func(t *testing.T) {
		s := start(t, flowv1.ApprovalTimeoutEscalate)
		before := s.st.DeepCopy()
		s.settle()
		s.expect(flowv1.PhaseEscalated, "seek-approval")
		ld := s.st.LastDecision
		if ld.State != flowv1.DecisionEscalated || ld.Source != flowv1.SourceTimeout || !strings.HasPrefix(ld.Reasoning, "no approval within 1h0m0s: escalated") {
			t.Fatalf("lastDecision %s", dump(ld))
		}
		evs := Events(before, s.st)
		if !hasEvent(evs, flowv1.ReasonApprovalTimeout) || !hasEvent(evs, flowv1.ReasonEscalated) {
			t.Errorf("events %+v", evs)
		}
		if at := s.snap.NextDeadline(&s.spec, s.st, t0); !at.Equal(s.snap.Deadline(t0)) {
			t.Errorf("an Escalated Session has no approval deadline: next %v", at)
		}
		// A person still decides.
		s.approve(ld.ID, true, "")
		s.settle()
		s.expect(flowv1.PhaseCompleted, "complete")
	})
	t.Run("an approval sent in time wins", func(t *testing.T) {
		s := start(t, flowv1.ApprovalTimeoutReject)
		s.approve(s.st.LastDecision.ID, true, "")
		s.settle()
		s.expect(flowv1.PhaseCompleted, "complete")
		if s.st.LastDecision.Source != flowv1.SourceApproval {
			t.Errorf("lastDecision %s", dump(s.st.LastDecision))
		}
	})
}

func TestToolApprovalTimeout(t *testing.T) {
	guarded := func(on flowv1.ApprovalTimeoutAction) func(j *flowv1.JourneySpec, _ *flowv1.PathwaySpec) {
		return func(j *flowv1.JourneySpec, _ *flowv1.PathwaySpec) {
			j.Tools[1].Approval = flowv1.ToolApprovalAlways
			j.Tools[1].ApprovalTimeout = &flowv1.ApprovalTimeout{Timeout: metav1.Duration{Duration: 10 * time.Minute}, OnTimeout: on}
		}
	}
	waiting := func(t *testing.T, on flowv1.ApprovalTimeoutAction) *session {
		s := toolSession(t, clinicTools(twoCalls, guarded(on)), `{"patient": {}}`)
		s.say("m1", "book")
		s.settle()
		if s.st.Phase != flowv1.PhaseAwaitingApproval || len(s.effects) != 1 {
			t.Fatalf("phase %s, effects %d", s.st.Phase, len(s.effects))
		}
		if at := s.snap.NextDeadline(&s.spec, s.st, t0); !at.Equal(t0.Add(10 * time.Minute)) {
			t.Fatalf("next deadline %v", at)
		}
		s.now = t0.Add(10*time.Minute + time.Millisecond)
		return s
	}
	t.Run("Reject: never called, rejected", func(t *testing.T) {
		s := waiting(t, flowv1.ApprovalTimeoutReject)
		before := s.st.DeepCopy()
		s.settle()
		for _, e := range s.effects {
			if e.Tool.Tool == "book_slot" {
				t.Fatalf("the timed-out call was made")
			}
		}
		calls := s.st.LastTurn.ToolCalls
		if len(calls) != 2 || calls[1].State != flowv1.ToolCallRejected || calls[1].Error != "rejected by the system: no approval within 10m0s" {
			t.Fatalf("tool calls %s", dump(calls))
		}
		if s.st.Phase == flowv1.PhaseAwaitingApproval || s.st.LastDecision.Source != flowv1.SourceTimeout {
			t.Errorf("phase %s, lastDecision %s", s.st.Phase, dump(s.st.LastDecision))
		}
		if !hasEvent(Events(before, s.st), flowv1.ReasonApprovalTimeout) {
			t.Errorf("no ApprovalTimeout event")
		}
	})
	t.Run("Escalate: waits, Escalated", func(t *testing.T) {
		s := waiting(t, flowv1.ApprovalTimeoutEscalate)
		s.settle()
		if s.st.Phase != flowv1.PhaseEscalated || s.st.LastDecision.State != flowv1.DecisionEscalated || len(s.effects) != 1 {
			t.Fatalf("phase %s, decision %s, effects %d", s.st.Phase, dump(s.st.LastDecision), len(s.effects))
		}
		s.approve(s.st.LastDecision.ID, true, "")
		s.settle()
		if len(s.effects) != 2 || s.effects[1].Tool.Tool != "book_slot" {
			t.Fatalf("after a person's approval: effects %s", dump(s.effects))
		}
	})
}
