package webhook_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// outcomeOf is an outcome for pathway draft, iteration 1, with n bytes of data.
func outcomeOf(attempt int32, n int) flowv1.ExternalOutcome {
	data := fmt.Sprintf(`{"log":%q}`, strings.Repeat("x", max(n-10, 0)))
	return flowv1.ExternalOutcome{Pathway: "draft", Iteration: 1, Attempt: attempt, ResultType: flowv1.ResultSuccess,
		Data: &apiextensionsv1.JSON{Raw: []byte(data)}}
}

// updateSpec changes the stored Session's spec as user and updates it.
func updateSpec(user string, s *flowv1.Session, change func(*flowv1.SessionSpec)) error {
	ctx := context.Background()
	var cur flowv1.Session
	if err := users[user].Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
		return err
	}
	change(&cur.Spec)
	return users[user].Update(ctx, &cur)
}

// setProcessed plays the controller: it counts n outcomes and m approvals as processed.
func setProcessed(t *testing.T, s *flowv1.Session, outcomes, approvals int32, d *flowv1.DecisionRecord) {
	t.Helper()
	ctx := context.Background()
	var cur flowv1.Session
	if err := admin.Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.ProcessedOutcomes, cur.Status.ProcessedApprovals = outcomes, approvals
	if d != nil {
		cur.Status.Phase, cur.Status.LastDecision = flowv1.PhaseAwaitingApproval, d
	}
	if err := admin.Status().Update(ctx, &cur); err != nil {
		t.Fatalf("writing status: %v", err)
	}
}

// spec.outcomes is bounded in bytes at admission, with a message that says what to do,
// and a processed prefix may leave it (never a pending outcome), so a Session takes
// outcomes for as long as it runs.
func TestOutcomesAreBoundedAndProcessedOnesLeave(t *testing.T) {
	t.Parallel()
	s := newSession(t, nil)
	err := updateSpec("alice", s, func(sp *flowv1.SessionSpec) { sp.Outcomes = append(sp.Outcomes, outcomeOf(1, 13000)) })
	wantDenied(t, err, "spec.outcomes[0]", "more than 12 KiB", "this outcome alone is too large; send less data")

	for a := int32(1); a <= 2; a++ {
		if err := updateSpec("alice", s, func(sp *flowv1.SessionSpec) { sp.Outcomes = append(sp.Outcomes, outcomeOf(a, 5000)) }); err != nil {
			t.Fatalf("outcome %d of 5,000 bytes: %v", a, err)
		}
	}
	err = updateSpec("alice", s, func(sp *flowv1.SessionSpec) { sp.Outcomes = append(sp.Outcomes, outcomeOf(3, 5000)) })
	wantDenied(t, err, "spec.outcomes[2]", "more than 12 KiB",
		"drop the processed outcomes from the front of spec.outcomes and raise spec.outcomesDropped by as many")

	// Dropping an outcome the Session has not processed is refused.
	err = updateSpec("alice", s, func(sp *flowv1.SessionSpec) {
		sp.Outcomes, sp.OutcomesDropped = append(sp.Outcomes[1:], outcomeOf(3, 5000)), 1
	})
	wantDenied(t, err, "only processed outcomes can be dropped")

	// Once the first is processed it may leave, in the update that appends the third.
	setProcessed(t, s, 1, 0, nil)
	if err := updateSpec("alice", s, func(sp *flowv1.SessionSpec) {
		sp.Outcomes, sp.OutcomesDropped = append(sp.Outcomes[1:], outcomeOf(3, 5000)), 1
	}); err != nil {
		t.Fatalf("dropping the processed outcome while appending: %v", err)
	}
	// Moving or changing a kept outcome is still refused.
	err = updateSpec("alice", s, func(sp *flowv1.SessionSpec) { sp.Outcomes[0].Message = "changed" })
	wantDenied(t, err, "outcomes are append-only")
	var cur flowv1.Session
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(s), &cur); err != nil {
		t.Fatal(err)
	}
	if cur.Spec.OutcomeCount() != 3 || cur.Spec.OutcomesDropped != 1 || cur.Spec.Outcomes[0].Attempt != 2 {
		t.Errorf("outcomes %d (%d dropped), first kept attempt %d", cur.Spec.OutcomeCount(), cur.Spec.OutcomesDropped, cur.Spec.Outcomes[0].Attempt)
	}
}

// A processed approval may leave spec.approvals in the update that answers the next
// decision; the webhook stamps and checks the new approval, not the ones kept.
func TestProcessedApprovalsLeaveAndNewOnesAreStillChecked(t *testing.T) {
	t.Parallel()
	s := newSession(t, draftDecision())
	if _, err := approve("alice", s, flowv1.Approval{DecisionID: "d-3", Approve: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
	next := draftDecision()
	next.ID = "d-4"
	// Dropping the approval before it is processed is refused.
	err := updateSpec("alice", s, func(sp *flowv1.SessionSpec) {
		sp.Approvals, sp.ApprovalsDropped = []flowv1.Approval{{DecisionID: "d-4", Approve: ptr.To(true)}}, 1
	})
	wantDenied(t, err, "only processed approvals can be dropped")

	setProcessed(t, s, 0, 1, next)
	// A forged approval is refused at its new index.
	err = updateSpec("alice", s, func(sp *flowv1.SessionSpec) {
		sp.Approvals, sp.ApprovalsDropped = []flowv1.Approval{{DecisionID: "d-4", Approve: ptr.To(true), By: "bob"}}, 1
	})
	wantDenied(t, err, "spec.approvals[0].by", "approval forged")
	if err := updateSpec("bob", s, func(sp *flowv1.SessionSpec) {
		sp.Approvals, sp.ApprovalsDropped = []flowv1.Approval{{DecisionID: "d-4", Approve: ptr.To(false)}}, 1
	}); err != nil {
		t.Fatalf("answering d-4 while dropping the processed approval: %v", err)
	}
	var cur flowv1.Session
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(s), &cur); err != nil {
		t.Fatal(err)
	}
	if len(cur.Spec.Approvals) != 1 || cur.Spec.ApprovalsDropped != 1 || cur.Spec.Approvals[0].By != "bob" || cur.Spec.Approvals[0].At == nil {
		t.Errorf("approvals %+v, %d dropped", cur.Spec.Approvals, cur.Spec.ApprovalsDropped)
	}

	// What spec.approvals holds is bounded in bytes by the schema.
	s = newSession(t, draftDecision())
	long := strings.Repeat("r", 1000)
	err = updateSpec("alice", s, func(sp *flowv1.SessionSpec) {
		for i := range 7 {
			sp.Approvals = append(sp.Approvals, flowv1.Approval{DecisionID: fmt.Sprintf("d-%d", i), Approve: ptr.To(true), Reason: long})
		}
	})
	wantDenied(t, err, "spec.approvals would hold more than 6 KiB")
}
