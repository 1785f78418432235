package plugin

import (
	"context"
	"strings"
	"testing"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// kubectl journey outcome and approve drop the processed entries of their list in the
// patch that appends, as say does for messages, and never a pending one.
func TestOutcomeAndApprovalPatchesCompact(t *testing.T) {
	s := &flowv1alpha1.Session{}
	s.ResourceVersion = "9"
	s.Spec.OutcomesDropped = 1
	s.Spec.Outcomes = []flowv1alpha1.ExternalOutcome{{Pathway: "a", Iteration: 1, Attempt: 2}, {Pathway: "a", Iteration: 1, Attempt: 3}}
	s.Status.ProcessedOutcomes = 2 // attempt 3 is pending
	p, err := compactingPatch(s, "outcomes", flowv1alpha1.ExternalOutcome{Pathway: "a", Iteration: 1, Attempt: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(p), `{"op":"add","path":"/spec/outcomesDropped","value":2}`) ||
		!strings.Contains(string(p), `"value":[{"pathway":"a","iteration":1,"attempt":3,"resultType":""},{"pathway":"a","iteration":1,"attempt":4,"resultType":""}]`) {
		t.Errorf("outcome patch %s", p)
	}

	yes := true
	s.Spec.Approvals = []flowv1alpha1.Approval{{DecisionID: "d1", Approve: &yes}, {DecisionID: "d2", Approve: &yes}}
	s.Status.ProcessedApprovals = 2
	p, err = compactingPatch(s, "approvals", flowv1alpha1.Approval{DecisionID: "d3", Approve: &yes})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"replace","path":"/metadata/resourceVersion","value":"9"},` +
		`{"op":"add","path":"/spec/approvals","value":[{"decisionID":"d3","approve":true}]},` +
		`{"op":"add","path":"/spec/approvalsDropped","value":2}]`
	if string(p) != want {
		t.Errorf("approval patch\n%s\nwant\n%s", p, want)
	}
	s.Status.ProcessedApprovals = 0
	if p, _ = compactingPatch(s, "approvals", flowv1alpha1.Approval{DecisionID: "d3", Approve: &yes}); strings.Contains(string(p), "approvalsDropped") {
		t.Errorf("nothing processed, yet %s", p)
	}
}

// On a cluster, kubectl journey outcome drops the processed outcomes in the patch that
// appends; the Session's validation accepts it, and attempts go on from the kept ones.
func TestOutcomeCompactsOnCluster(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	newSession(t, "outcome-compact")
	setStatus(t, "outcome-compact", func(st *flowv1alpha1.SessionStatus) {
		st.Phase, st.CurrentPathway, st.Iteration = flowv1alpha1.PhaseWaitingForInput, "test", 1
	})
	for range 2 {
		if _, _, err := kubectlJourney(ctx, "outcome", "outcome-compact", "--pathway", "test", "--result", "failure"); err != nil {
			t.Fatal(err)
		}
	}
	setStatus(t, "outcome-compact", func(st *flowv1alpha1.SessionStatus) { st.ProcessedOutcomes = 1 })
	if _, _, err := kubectlJourney(ctx, "outcome", "outcome-compact", "--pathway", "test", "--result", "success"); err != nil {
		t.Fatal(err)
	}
	s := getSession(t, "outcome-compact")
	if s.Spec.OutcomesDropped != 1 || len(s.Spec.Outcomes) != 2 || s.Spec.Outcomes[0].Attempt != 2 || s.Spec.Outcomes[1].Attempt != 3 {
		t.Errorf("outcomes %+v, %d dropped", s.Spec.Outcomes, s.Spec.OutcomesDropped)
	}
}
