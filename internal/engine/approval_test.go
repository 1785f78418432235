package engine

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func TestApprovals(t *testing.T) {
	start := func(t *testing.T) *session {
		s := newSession(t, planner())
		s.spec.InitialContext = raw(`{"collect":"sufficient_context","outline_ok_at":2,"schedule":"success"}`)
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval")
		if c := s.condition(flowv1.ConditionAwaitingApproval); c == nil || c.Status != metav1.ConditionTrue {
			t.Fatalf("AwaitingApproval %+v", c)
		}
		return s
	}
	t.Run("approved", func(t *testing.T) {
		s := start(t)
		id := s.st.LastDecision.ID
		s.say("m1", "any news?") // messages wait while a decision is pending
		s.approve("d-999", true, "")
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval")
		if f := s.st.LastTurn.Failures; len(f) != 1 || s.st.LastTurn.FinishReason != flowv1.FinishPolicyDenied {
			t.Errorf("unknown decision: %s", dump(s.st.LastTurn))
		}
		if s.st.ProcessedMessages != 0 {
			t.Error("a message was processed while awaiting approval")
		}
		s.approve(id, true, "")
		s.settle()
		s.expect(flowv1.PhaseCompleted, "complete")
		if d := s.st.History[len(s.st.History)-2]; d.Source != flowv1.SourceApproval || d.To != "complete" || d.Reason != "approved by alice" {
			t.Errorf("history %s", dump(d))
		}
		if s.st.ProcessedApprovals != 2 {
			t.Errorf("processedApprovals %d", s.st.ProcessedApprovals)
		}
	})
	t.Run("sent back with a destination", func(t *testing.T) {
		s := start(t)
		s.approve(s.st.LastDecision.ID, true, "roadmap") // not allowed: ignored
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval")
		s.approve(s.st.LastDecision.ID, true, "outline")
		s.step()
		s.expect(flowv1.PhaseRunning, "outline")
		if s.st.LastDecision.State != flowv1.DecisionApproved || s.st.LastDecision.To != "outline" {
			t.Errorf("lastDecision %s", dump(s.st.LastDecision))
		}
	})
	t.Run("rejected", func(t *testing.T) {
		s := start(t)
		id := s.st.LastDecision.ID
		s.approve(id, false, "")
		s.step()
		// Rejected goes back to the pathway before the deciding one, with the
		// rejection as feedback (the rejected draft is drafted again).
		if ld := s.st.LastDecision; ld.State != flowv1.DecisionRejected || ld.To != "schedule" || ld.Reasoning != "rejected by alice" {
			t.Errorf("lastDecision %s", dump(ld))
		}
		if (&run{st: s.st, snap: s.snap}).feedback("schedule") != "rejected by alice" {
			t.Errorf("schedule runs without the rejection as feedback")
		}
		// The work is done again and asked again, under a new decision id.
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval")
		if s.st.LastDecision.ID == id || s.st.LastDecision.State != flowv1.DecisionPending {
			t.Errorf("new decision %s", dump(s.st.LastDecision))
		}
		// Approving the old id now does nothing.
		s.approve(id, true, "")
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval")
	})
	t.Run("rejected to onRejected", func(t *testing.T) {
		d := planner()
		d.p["seek-approval"].Transitions.OnSuccess.Decision.OnRejected = "outline"
		s := newSession(t, d)
		s.spec.InitialContext = raw(`{"collect":"sufficient_context","outline_ok_at":2,"schedule":"success"}`)
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval")
		s.approve(s.st.LastDecision.ID, false, "")
		s.step()
		if ld := s.st.LastDecision; ld.State != flowv1.DecisionRejected || ld.To != "outline" {
			t.Errorf("lastDecision %s", dump(ld))
		}
		if h := s.st.History[len(s.st.History)-1]; h.From != "seek-approval" || h.To != "outline" || h.Source != flowv1.SourceApproval {
			t.Errorf("history %s", dump(h))
		}
	})
	t.Run("restricted approvers", func(t *testing.T) {
		d := planner()
		d.p["seek-approval"].Transitions.OnSuccess.Decision.Approvers = &flowv1.Approvers{Users: []string{"bob"}}
		s := newSession(t, d)
		s.spec.InitialContext = raw(`{"collect":"sufficient_context","outline_ok_at":2,"schedule":"success"}`)
		s.settle()
		s.approve(s.st.LastDecision.ID, true, "") // by alice
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval")
		s.spec.Approvals = append(s.spec.Approvals, flowv1.Approval{DecisionID: s.st.LastDecision.ID, Approve: ptr.To(true), By: "bob"})
		s.settle()
		s.expect(flowv1.PhaseCompleted, "complete")
	})
}
