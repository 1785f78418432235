package validation

import (
	"context"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// An operator before status.journal and status.history were stored one string an
// entry stored each answer and each transition as a JSON object. Upgrading the CRD
// must not lose them: the API server prunes what a schema does not describe when it
// reads an object, so the entries' schema keeps what it holds, and the Session
// decodes both forms. The test stores an answer and a transition as objects under a
// schema that takes objects, puts back the CRD of config/crd/bases, and reads both
// whole. It runs on a control plane of its own, since it changes the Session CRD.
func TestEntriesStoredAsObjectsSurviveTheCRDUpgrade(t *testing.T) {
	env := testenv.New(t)
	scheme := testenv.NewScheme()
	if err := apiextv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const name = "sessions.flow.journey.dev"
	var crd apiextv1.CustomResourceDefinition
	if err := c.Get(ctx, types.NamespacedName{Name: name}, &crd); err != nil {
		t.Fatal(err)
	}
	current := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.DeepCopy()

	// The earlier schema: answers and transitions are objects.
	setItems(t, c, func(list string, items *apiextv1.JSONSchemaProps) {
		*items = apiextv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	})
	if err := env.CreateNamespace("upgrade"); err != nil {
		t.Fatal(err)
	}
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "upgrade", Name: "s"},
		Spec: flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "j"}}}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	answer := map[string]any{"id": "e-1", "kind": "RunPathway", "step": int64(3), "inputHash": "h1",
		"result": map[string]any{"reply": "hello"}}
	transition := map[string]any{"step": int64(4), "from": "intake", "to": "triage", "action": "Advance",
		"source": "Agent", "confidence": "0.9", "reason": "booked"}
	// Until the API server serves the earlier schema, a schema that takes no objects
	// refuses them.
	writeEntries(t, c, s, answer, transition)

	// The upgrade: the CRD as this version installs it. It is served once a Session's
	// journal and history take entries as strings, which the earlier schema refuses.
	setItems(t, c, func(list string, items *apiextv1.JSONSchemaProps) {
		*items = *current.Properties["status"].Properties[list].Items.Schema
	})
	probe := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "upgrade", Name: "probe"},
		Spec: flowv1.SessionSpec{JourneyRef: s.Spec.JourneyRef}}
	if err := c.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	writeEntries(t, c, probe, `{"id":"e-1","kind":"RunPathway","step":1,"inputHash":"h"}`, `{"step":1,"to":"intake"}`)

	got := &flowv1.Session{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(s), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Journal) != 1 {
		t.Fatalf("journal after the upgrade: %d answers, want 1", len(got.Status.Journal))
	}
	a := got.Status.Journal[0]
	if a.ID != "e-1" || a.Kind != "RunPathway" || a.Step != 3 || a.InputHash != "h1" || a.Result.Reply != "hello" {
		t.Errorf("answer after the upgrade: %+v, want the one stored (e-1, RunPathway, step 3, h1, reply hello)", a)
	}
	if len(got.Status.History) != 1 {
		t.Fatalf("history after the upgrade: %d transitions, want 1", len(got.Status.History))
	}
	h := got.Status.History[0]
	if h.Step != 4 || h.From != "intake" || h.To != "triage" || h.Action != flowv1.ActionAdvance || h.Source != flowv1.SourceAgent ||
		h.Confidence != "0.9" || h.Reason != "booked" {
		t.Errorf("transition after the upgrade: %+v, want the one stored (step 4, intake to triage, Advance, Agent, 0.9, booked)", h)
	}
}

// storedLists are the status lists stored one string an entry.
var storedLists = []string{"journal", "history"}

// setItems changes the schema of the items of each of storedLists in the Session CRD.
func setItems(t *testing.T, c client.Client, set func(list string, items *apiextv1.JSONSchemaProps)) {
	t.Helper()
	ctx := context.Background()
	var crd apiextv1.CustomResourceDefinition
	if err := c.Get(ctx, types.NamespacedName{Name: "sessions.flow.journey.dev"}, &crd); err != nil {
		t.Fatal(err)
	}
	status := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	for _, list := range storedLists {
		l := status.Properties[list]
		set(list, l.Items.Schema)
		status.Properties[list] = l
	}
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"] = status
	if err := c.Update(ctx, &crd); err != nil {
		t.Fatal(err)
	}
}

// writeEntries writes status.journal of s as one answer and status.history as one
// transition, stored as given, until the API server takes them (it refuses them
// while it serves a schema that does not).
func writeEntries(t *testing.T, c client.Client, s *flowv1.Session, answer, transition any) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true,
		func(ctx context.Context) (bool, error) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(flowv1.GroupVersion.WithKind("Session"))
			if err := c.Get(ctx, client.ObjectKeyFromObject(s), u); err != nil {
				return false, err
			}
			if err := unstructured.SetNestedSlice(u.Object, []any{answer}, "status", "journal"); err != nil {
				return false, err
			}
			if err := unstructured.SetNestedSlice(u.Object, []any{transition}, "status", "history"); err != nil {
				return false, err
			}
			last = c.Status().Update(ctx, u)
			return last == nil, nil
		})
	if err != nil {
		t.Fatalf("writing the journal and history of %s: %v (last: %v)", s.Name, err, last)
	}
}
