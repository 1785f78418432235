package webhook_test

import (
	"context"
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/revision"
)

// postOutcome appends an outcome for pathway as alice, as kubectl journey outcome does.
func postOutcome(s *flowv1.Session, pathway string) error {
	return updateSpec("alice", s, func(sp *flowv1.SessionSpec) {
		sp.Outcomes = append(sp.Outcomes, flowv1.ExternalOutcome{Pathway: flowv1.Name(pathway), Iteration: 1,
			Attempt: int32(len(sp.Outcomes) + 1), ResultType: flowv1.ResultSuccess})
	})
}

// An outcome the Session would never read is refused at admission, naming the
// pathway's executor: one for a pathway its agents run, or for a pathway the Journey
// does not have. The pathway is the one the Session runs on: its pinned revision's,
// else the live Journey's. An outcome whose Journey cannot be read is let through.
func TestOutcomesAreOnlyForExternalPathways(t *testing.T) {
	t.Parallel()
	// No revision pinned yet: the live Journey, where draft is External.
	s := newSession(t, nil)
	if err := postOutcome(s, "draft"); err != nil {
		t.Fatalf("an outcome for the External pathway draft: %v", err)
	}
	wantDenied(t, postOutcome(s, "review"), "spec.outcomes[1].pathway", "pathway review runs with executor Agent",
		"would never be read", "outcomes are for External pathways")
	wantDenied(t, postOutcome(s, "nope"), "spec.outcomes[1].pathway", `journey release has no pathway "nope"`)

	// A create that carries an outcome is checked the same way.
	bad := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "s-"}, Spec: flowv1.SessionSpec{
		JourneyRef: flowv1.JourneyReference{Name: "release"},
		Outcomes:   []flowv1.ExternalOutcome{{Pathway: "publish", Iteration: 1, ResultType: flowv1.ResultSuccess}},
	}}
	wantDenied(t, users["alice"].Create(context.Background(), bad), "spec.outcomes[0].pathway", "pathway publish runs with executor Agent")

	// Pinned to a revision in which review is External and draft is not.
	ctx := context.Background()
	raw, err := json.Marshal(revision.Data{
		Journey: flowv1.JourneySpec{EntryPathway: "draft", Pathways: []flowv1.PathwayEntry{
			{Name: "draft", PathwayRef: "draft"}, {Name: "review", PathwayRef: "review"}}},
		Pathways: map[string]*flowv1.PathwaySpec{
			"draft":  {Executor: flowv1.ExecutorAgent},
			"review": {Executor: flowv1.ExecutorExternal},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rev := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "release-outcomes"},
		Data: runtime.RawExtension{Raw: raw}, Revision: 1}
	if err := admin.Create(ctx, rev); err != nil {
		t.Fatal(err)
	}
	s = newSession(t, nil)
	s.Status.JourneyRevision = rev.Name
	if err := admin.Status().Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := postOutcome(s, "review"); err != nil {
		t.Fatalf("an outcome for review, External in the pinned revision: %v", err)
	}
	wantDenied(t, postOutcome(s, "draft"), "pathway draft runs with executor Agent")
	wantDenied(t, postOutcome(s, "publish"), `revision release-outcomes has no pathway "publish"`)

	// A Session whose Journey does not exist (yet) takes the outcome: nothing to check.
	orphan := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "s-"}, Spec: flowv1.SessionSpec{
		JourneyRef: flowv1.JourneyReference{Name: "not-yet"},
		Outcomes:   []flowv1.ExternalOutcome{{Pathway: "build", Iteration: 1, ResultType: flowv1.ResultSuccess}},
	}}
	if err := users["alice"].Create(ctx, orphan); err != nil {
		t.Fatalf("a Session of a Journey that does not exist yet, with an outcome: %v", err)
	}
}
