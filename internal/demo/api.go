package demo

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// The stories run in namespace default.
const namespace = "default"

// What the demo only creates, waits for or reads to decide what comes next, and does
// not show, it asks the API server for directly with the cluster's client: a person
// reads the commands the demo shows, which run with real kubectl; starting a kubectl
// process for each unseen read would only cost time.
const (
	// waitTimeout bounds each wait, as the --timeout=30s of a kubectl wait would.
	waitTimeout = 30 * time.Second
	// pollInterval is how often a wait reads the object again.
	pollInterval = 50 * time.Millisecond
)

// create creates the object that the JSON manifest describes, as kubectl create -f
// does (through the admission webhooks), without showing it.
func (k kubectl) create(ctx context.Context, manifest string) error {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(manifest)); err != nil {
		return fmt.Errorf("the demo's manifest: %w", err)
	}
	if err := k.c.Env.Client.Create(ctx, u); err != nil {
		return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// get reads the object name of namespace default into obj.
func (k kubectl) get(ctx context.Context, name string, obj client.Object) error {
	return k.c.Env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
}

// waitUntil reads the object name into obj until done returns nil, for up to
// waitTimeout; done says what is still missing, and the error names kind, name and
// what done said last.
func (k kubectl) waitUntil(ctx context.Context, kind, name string, obj client.Object, done func() error) error {
	last := fmt.Errorf("not read yet")
	err := wait.PollUntilContextTimeout(ctx, pollInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		if err := k.get(ctx, name, obj); err != nil {
			last = err
			return false, nil
		}
		last = done()
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%s/%s after %s: %w", kind, name, waitTimeout, last)
	}
	return nil
}

// waitCondition waits until the object's condition cond is True for its current
// generation, as kubectl wait --for=condition=COND does.
func (k kubectl) waitCondition(ctx context.Context, kind, name string, obj client.Object, conditions *[]metav1.Condition, cond string) error {
	return k.waitUntil(ctx, kind, name, obj, func() error {
		c := meta.FindStatusCondition(*conditions, cond)
		switch {
		case c == nil:
			return fmt.Errorf("no condition %s yet", cond)
		case c.Status != metav1.ConditionTrue:
			return fmt.Errorf("condition %s is %s (%s: %s)", cond, c.Status, c.Reason, c.Message)
		case c.ObservedGeneration != 0 && c.ObservedGeneration != obj.GetGeneration():
			return fmt.Errorf("condition %s is for generation %d, not %d", cond, c.ObservedGeneration, obj.GetGeneration())
		}
		return nil
	})
}

// waitJourney waits until Journey name's condition cond is True and returns the Journey.
func (k kubectl) waitJourney(ctx context.Context, name, cond string) (*flowv1alpha1.Journey, error) {
	var j flowv1alpha1.Journey
	if err := k.waitCondition(ctx, "journey", name, &j, &j.Status.Conditions, cond); err != nil {
		return nil, err
	}
	return &j, nil
}

// waitRollout waits until the rollout of Journey name is in phase and returns the Journey.
func (k kubectl) waitRollout(ctx context.Context, name string, phase flowv1alpha1.RolloutPhase) (*flowv1alpha1.Journey, error) {
	var j flowv1alpha1.Journey
	err := k.waitUntil(ctx, "journey", name, &j, func() error {
		if j.Status.Rollout == nil || j.Status.Rollout.Phase != phase {
			return fmt.Errorf("status.rollout is %+v, want phase %s", j.Status.Rollout, phase)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &j, nil
}

// waitPhase waits until Session name is in phase (and, when pathway is not empty, in
// that pathway), and returns it.
func (k kubectl) waitPhase(ctx context.Context, name string, phase flowv1alpha1.Phase, pathway string) (*flowv1alpha1.Session, error) {
	var s flowv1alpha1.Session
	err := k.waitUntil(ctx, "session", name, &s, func() error {
		switch {
		case s.Status.Phase != phase:
			return fmt.Errorf("phase %q in pathway %q, want %s", s.Status.Phase, s.Status.CurrentPathway, phase)
		case pathway != "" && s.Status.CurrentPathway != pathway:
			return fmt.Errorf("phase %s in pathway %q, want pathway %q", s.Status.Phase, s.Status.CurrentPathway, pathway)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &s, nil
}
