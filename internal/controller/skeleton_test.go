package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/revision"
)

// entryPathway returns a Pathway that runs as soon as it is entered (no message needed) and
// moves on to next.
func entryPathway(ns, name, next string) *flowv1.Pathway {
	return &flowv1.Pathway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: flowv1.PathwaySpec{
			RunOn:   flowv1.RunOnEntry,
			Next:    flowv1.Name(next),
			Builtin: &flowv1.BuiltinPathway{Reply: "done with " + name},
		},
	}
}

func threeStepJourney(ns string) []*flowv1.Pathway {
	return []*flowv1.Pathway{entryPathway(ns, "first", "second"), entryPathway(ns, "second", "third"), entryPathway(ns, "third", "")}
}

func journeyOf(ns, name string, pathways ...*flowv1.Pathway) *flowv1.Journey {
	j := &flowv1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	j.Spec.EntryPathway = flowv1.Name(pathways[0].Name)
	for _, p := range pathways {
		j.Spec.Pathways = append(j.Spec.Pathways, flowv1.PathwayEntry{Name: flowv1.Name(p.Name), PathwayRef: p.Name})
	}
	return j
}

func sessionOf(ns, name, journey string) *flowv1.Session {
	return &flowv1.Session{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: journey}},
	}
}

func TestSessionCompletesThroughEntryPathways(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	pathways := threeStepJourney(ns)
	for _, p := range pathways {
		create(t, p)
	}
	create(t, journeyOf(ns, "three", pathways...), sessionOf(ns, "s1", "three"))

	eventually(t, 30*time.Second, func() error {
		s := get(t, ns, "s1", &flowv1.Session{})
		if s.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %q, pathway %q", s.Status.Phase, s.Status.CurrentPathway)
		}
		return nil
	})
	s := get(t, ns, "s1", &flowv1.Session{})
	var path []string
	for _, h := range s.Status.History {
		path = append(path, h.From+"->"+h.To+":"+string(h.Action))
	}
	if got, want := fmt.Sprint(path), "[first->second:Advance second->third:Advance third->:Close]"; got != want {
		t.Errorf("history = %s, want %s", got, want)
	}
	if s.Status.CurrentPathway != "third" || s.Status.Iteration != 1 {
		t.Errorf("ended in %q iteration %d, want third iteration 1", s.Status.CurrentPathway, s.Status.Iteration)
	}
	if s.Status.CompletionTime == nil || s.Status.ObservedGeneration != s.Generation {
		t.Errorf("completionTime %v, observedGeneration %d (generation %d)", s.Status.CompletionTime, s.Status.ObservedGeneration, s.Generation)
	}
	if s.Status.JourneyRevision == "" {
		t.Error("journeyRevision not pinned")
	}
	if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionReady); c == nil || c.Reason != flowv1.ReasonCompleted {
		t.Errorf("Ready condition = %+v, want reason Completed", c)
	}
	// Three observable steps at least: one per pathway.
	if s.Status.Step < 3 {
		t.Errorf("status.step = %d, want >= 3", s.Status.Step)
	}

	// A finished Session reconciled again is left alone: no write, same resourceVersion.
	r := &SessionReconciler{Client: k8sClient, APIReader: k8sClient, Recorder: &events.FakeRecorder{}, Clock: clock.RealClock{}, Agents: DefaultAgents(), snapshots: revision.NewCache(4)}
	rv := s.ResourceVersion
	for range 2 {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: clientKey(ns, "s1")}); err != nil {
			t.Fatal(err)
		}
	}
	if again := get(t, ns, "s1", &flowv1.Session{}); again.ResourceVersion != rv {
		t.Errorf("resourceVersion changed from %s to %s on a finished Session", rv, again.ResourceVersion)
	}
}

func TestSessionWithMissingJourney(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	create(t, sessionOf(ns, "lost", "nowhere"))
	eventually(t, 20*time.Second, func() error {
		s := get(t, ns, "lost", &flowv1.Session{})
		c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != flowv1.ReasonJourneyNotFound {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})

	// Creating the Journey afterwards lets the Session start.
	pathways := threeStepJourney(ns)
	for _, p := range pathways {
		create(t, p)
	}
	create(t, journeyOf(ns, "nowhere", pathways...))
	eventually(t, 30*time.Second, func() error {
		if s := get(t, ns, "lost", &flowv1.Session{}); s.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %q", s.Status.Phase)
		}
		return nil
	})
}

func TestJourneyWithMissingPathway(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	p := entryPathway(ns, "only", "")
	j := journeyOf(ns, "broken", p)
	j.Spec.Pathways = append(j.Spec.Pathways, flowv1.PathwayEntry{Name: "ghost", PathwayRef: "ghost-pathway"})
	create(t, p, j)
	eventually(t, 20*time.Second, func() error {
		got := get(t, ns, "broken", &flowv1.Journey{})
		c := apimeta.FindStatusCondition(got.Status.Conditions, flowv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != flowv1.ReasonPathwayNotFound {
			return fmt.Errorf("Ready = %+v", c)
		}
		if len(got.Status.Issues) != 1 {
			return fmt.Errorf("issues = %q", got.Status.Issues)
		}
		return nil
	})
}

// revisionLag is a cache that has not seen the Journey's revisions yet: the Journey
// informer delivered the status that names a new revision before the ControllerRevision
// informer delivered the revision.
type revisionLag struct{ client.Client }

func (c revisionLag) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*appsv1.ControllerRevision); ok {
		return apierrors.NewNotFound(appsv1.Resource("controllerrevisions"), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// A Session that starts when its Journey's status names a revision the cache has not
// seen yet starts on it (read live) instead of stalling as if the revision were gone;
// a revision that is gone still stalls the Session.
func TestSessionStartsOnARevisionNotCachedYet(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	mgr := startManager(t, ns, Options{})
	pathways := threeStepJourney(ns)
	for _, p := range pathways {
		create(t, p)
	}
	create(t, journeyOf(ns, "j", pathways...))
	waitJourneyReady(t, ns, "j")
	if err := mgr.Stop(); err != nil { // the reconciles below are the test's own
		t.Fatal(err)
	}
	r := &SessionReconciler{Client: revisionLag{k8sClient}, APIReader: k8sClient, Recorder: &events.FakeRecorder{}, Clock: clock.RealClock{}, Agents: DefaultAgents(), snapshots: revision.NewCache(4)}
	reconcileOnce := func(name string) (*flowv1.Session, error) {
		t.Helper()
		_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: clientKey(ns, name)})
		return get(t, ns, name, &flowv1.Session{}), err
	}

	create(t, sessionOf(ns, "fresh", "j"))
	s, err := reconcileOnce("fresh")
	if err != nil {
		t.Fatal(err)
	}
	if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		t.Fatalf("the Session stalled: %+v", c)
	}
	if s.Status.JourneyRevision == "" || s.Status.Phase == flowv1.PhasePending || s.Status.Step == 0 {
		t.Fatalf("the Session did not start: phase %q, revision %q, step %d", s.Status.Phase, s.Status.JourneyRevision, s.Status.Step)
	}

	// A revision that is gone from the API server too stalls the Session, saying so.
	j := get(t, ns, "j", &flowv1.Journey{})
	create(t, sessionOf(ns, "orphan", "j"))
	orphan := get(t, ns, "orphan", &flowv1.Session{})
	orphan.Status.JourneyRevision = j.Status.ReadyRevision + "-gone"
	if err := k8sClient.Status().Update(context.Background(), orphan); err != nil {
		t.Fatal(err)
	}
	orphan, err = reconcileOnce("orphan")
	if !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Errorf("reconciling a Session on a revision that is gone: %v; want a terminal error", err)
	}
	if c := apimeta.FindStatusCondition(orphan.Status.Conditions, flowv1.ConditionStalled); c == nil || c.Reason != flowv1.ReasonRevisionNotFound ||
		!strings.Contains(c.Message, "no longer exists") {
		t.Fatalf("a Session on a revision that is gone: conditions %+v", orphan.Status.Conditions)
	}
}
