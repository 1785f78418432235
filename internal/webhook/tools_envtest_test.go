package webhook_test

import (
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"k8s.io/utils/ptr"
)

// toolCallDecision is a tool call of pathway review waiting for approval, as the
// engine records it.
func toolCallDecision() *flowv1.DecisionRecord {
	return &flowv1.DecisionRecord{
		ID: "t-7-1", From: "review", Transition: "tool:publish_release", State: flowv1.DecisionPending,
		Reasoning: `call publish_release {"version":"1.2.0"} (args sha256 0123456789ab)`,
	}
}

// TestToolCallApprovals: a tool call waiting for approval is answered like a decision:
// stamped, forgeries refused, and the pathway's approvers apply.
func TestToolCallApprovals(t *testing.T) {
	t.Parallel()
	s := newSession(t, toolCallDecision())
	_, err := approve("carol", s, flowv1.Approval{DecisionID: "t-7-1", Approve: ptr.To(true), By: "dave"})
	wantDenied(t, err, "approval forged")
	_, err = approve("alice", s, flowv1.Approval{DecisionID: "t-7-1", Approve: ptr.To(true)})
	wantDenied(t, err, `user "alice" may not answer decision t-7-1`)
	_, err = approve("carol", s, flowv1.Approval{DecisionID: "t-7-0", Approve: ptr.To(true)})
	wantDenied(t, err, `decision "t-7-0" is not pending`)
	got, err := approve("carol", s, flowv1.Approval{DecisionID: "t-7-1", Approve: ptr.To(false), Reason: "not during the freeze"})
	if err != nil {
		t.Fatalf("carol rejecting the tool call: %v", err)
	}
	if a := got.Spec.Approvals[0]; a.By != "carol" || a.Approves() {
		t.Errorf("approval %+v", a)
	}
}
