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

// An operator before status.journal was stored one string an answer stored each
// answer as a JSON object. Upgrading the CRD must not lose those answers: the API
// server prunes what a schema does not describe when it reads an object, so the
// answers' schema keeps what it holds, and the Session decodes both forms. The test
// stores an answer as an object under a schema that takes objects, puts back the
// CRD of config/crd/bases, and reads the answer whole. It runs on a control plane of
// its own, since it changes the Session CRD.
func TestJournalOfObjectsSurvivesTheCRDUpgrade(t *testing.T) {
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

	// The earlier schema: answers are objects.
	setJournalItems(t, c, func(items *apiextv1.JSONSchemaProps) {
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
	// Until the API server serves the earlier schema, a schema that takes no objects
	// refuses the answer.
	writeJournal(t, c, s, answer)

	// The upgrade: the CRD as this version installs it. It is served once a Session's
	// journal takes an answer as a string, which the earlier schema refuses.
	setJournalItems(t, c, func(items *apiextv1.JSONSchemaProps) {
		*items = *current.Properties["status"].Properties["journal"].Items.Schema
	})
	probe := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "upgrade", Name: "probe"},
		Spec: flowv1.SessionSpec{JourneyRef: s.Spec.JourneyRef}}
	if err := c.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	writeJournal(t, c, probe, `{"id":"e-1","kind":"RunPathway","step":1,"inputHash":"h"}`)

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
}

// setJournalItems changes the schema of status.journal's items in the Session CRD.
func setJournalItems(t *testing.T, c client.Client, set func(*apiextv1.JSONSchemaProps)) {
	t.Helper()
	ctx := context.Background()
	var crd apiextv1.CustomResourceDefinition
	if err := c.Get(ctx, types.NamespacedName{Name: "sessions.flow.journey.dev"}, &crd); err != nil {
		t.Fatal(err)
	}
	status := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	journal := status.Properties["journal"]
	set(journal.Items.Schema)
	status.Properties["journal"] = journal
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"] = status
	if err := c.Update(ctx, &crd); err != nil {
		t.Fatal(err)
	}
}

// writeJournal writes status.journal of s as one answer, stored as given, until the
// API server takes it (it refuses it while it serves a schema that does not).
func writeJournal(t *testing.T, c client.Client, s *flowv1.Session, answer any) {
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
			last = c.Status().Update(ctx, u)
			return last == nil, nil
		})
	if err != nil {
		t.Fatalf("writing the journal of %s: %v (last: %v)", s.Name, err, last)
	}
}
