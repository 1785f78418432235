package webhook_test

import (
	"context"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// sessionFile is a Session as a GitOps repository holds it, with one outcome and one
// approval of its own.
const sessionFile = `apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: gitops, namespace: approvals}
spec:
  journeyRef: {name: release}
  outcomes:
  - {pathway: draft, iteration: 1, resultType: partial_success}
`

const sessionFileWithApproval = sessionFile + `  approvals:
  - {decisionID: d-3, approve: true, reason: from the repository}
`

// applyFile server-side applies a manifest as alice with field manager gitops, forced,
// as Flux and Argo CD do.
func applyFile(t *testing.T, manifest string) error {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatal(err)
	}
	return users["alice"].Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner("gitops"), client.ForceOwnership)
}

// appendItem appends to a spec list the way kubectl journey does: a JSON patch adding
// at the end, conditional on the resourceVersion read.
func appendItem(t *testing.T, user, field string, item any) {
	t.Helper()
	ctx := context.Background()
	var s flowv1.Session
	if err := users[user].Get(ctx, types.NamespacedName{Namespace: ns, Name: "gitops"}, &s); err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/metadata/resourceVersion", "value": s.ResourceVersion},
		{"op": "add", "path": "/spec/" + field + "/-", "value": item},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := users[user].Patch(ctx, &s, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner("kubectl-journey")); err != nil {
		t.Fatalf("%s appending to %s: %v", user, field, err)
	}
}

func setDecision(t *testing.T, d *flowv1.DecisionRecord) {
	t.Helper()
	var s flowv1.Session
	if err := admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "gitops"}, &s); err != nil {
		t.Fatal(err)
	}
	s.Status.Phase, s.Status.LastDecision = flowv1.PhaseAwaitingApproval, d
	if err := admin.Status().Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
}

// Outcomes and approvals are maps keyed by pathway, iteration and attempt, and by
// decisionID: re-applying the unchanged file with server-side apply, forced, after the
// plugin appended to both lists keeps what the plugin appended and the stamps of the
// webhook, and passes the append-only rules.
func TestForcedServerSideApplyKeepsAppendedItems(t *testing.T) {
	t.Parallel()
	if err := applyFile(t, sessionFile); err != nil {
		t.Fatalf("applying the Session: %v", err)
	}
	setDecision(t, draftDecision())
	if err := applyFile(t, sessionFileWithApproval); err != nil {
		t.Fatalf("applying the Session with its approval: %v", err)
	}

	appendItem(t, "bob", "outcomes", flowv1.ExternalOutcome{Pathway: "draft", Iteration: 1, Attempt: 2, ResultType: flowv1.ResultSuccess})
	d := draftDecision()
	d.ID = "d-4"
	setDecision(t, d)
	appendItem(t, "bob", "approvals", flowv1.Approval{DecisionID: "d-4", Approve: ptr.To(true)})

	for range 2 {
		if err := applyFile(t, sessionFileWithApproval); err != nil {
			t.Fatalf("re-applying the unchanged file, forced: %v", err)
		}
	}
	var s flowv1.Session
	if err := admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "gitops"}, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Spec.Outcomes) != 2 || s.Spec.Outcomes[0].Attempt != 1 || s.Spec.Outcomes[1].Attempt != 2 ||
		s.Spec.Outcomes[1].ResultType != flowv1.ResultSuccess {
		t.Errorf("outcomes after the re-apply: %+v", s.Spec.Outcomes)
	}
	if len(s.Spec.Approvals) != 2 {
		t.Fatalf("approvals after the re-apply: %+v", s.Spec.Approvals)
	}
	if a := s.Spec.Approvals[0]; a.DecisionID != "d-3" || a.By != "alice" || a.At == nil || a.Reason != "from the repository" {
		t.Errorf("the file's approval lost its stamps or changed: %+v", a)
	}
	if a := s.Spec.Approvals[1]; a.DecisionID != "d-4" || a.By != "bob" {
		t.Errorf("the plugin's approval: %+v", a)
	}
}

// An approval without approve is refused by the API server: a client that forgets the
// field does not send a rejection.
func TestApprovalWithoutApproveIsRefused(t *testing.T) {
	t.Parallel()
	s := newSession(t, draftDecision())
	_, err := approve("alice", s, flowv1.Approval{DecisionID: "d-3", Reason: "forgot approve"})
	wantDenied(t, err, "spec.approvals[0].approve", "Required value")
}
