package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// createSessions creates sessions with workers in parallel and returns the rate.
func createSessions(ctx context.Context, c client.Client, workers int, sessions []*flowv1.Session) (float64, error) {
	start := time.Now()
	err := testenv.Parallel(workers, len(sessions), func(i int) error {
		return c.Create(ctx, sessions[i])
	})
	return float64(len(sessions)) / time.Since(start).Seconds(), err
}

// statuses runs the sample's conversation through the pure engine and returns the
// status after each step that changed it: exactly what the operator writes.
func statuses(smp *sample) ([]flowv1.SessionStatus, error) {
	pathways := map[string]*flowv1.PathwaySpec{}
	byName := map[string]*flowv1.PathwaySpec{}
	for _, p := range smp.pathways {
		byName[p.Name] = &p.Spec
	}
	for _, e := range smp.journey.Spec.Pathways {
		if p, ok := byName[e.PathwayRef]; ok {
			pathways[string(e.Name)] = p
		}
	}
	snap, err := engine.NewSnapshot(smp.journey.Name+"-bench", &smp.journey.Spec, pathways)
	if err != nil {
		return nil, err
	}
	var out []flowv1.SessionStatus
	st := &flowv1.SessionStatus{}
	now := time.Now()
	for range 1000 {
		next, eff := engine.Step(snap, engine.Input{Spec: &smp.session.Spec, Status: st, Now: now, SessionName: "plain", SessionUID: "plain", CreationTime: now})
		if eff != nil {
			return nil, fmt.Errorf("the sample asks for a remote agent; the plain baseline needs a builtin journey")
		}
		if equality.Semantic.DeepEqual(next, st) {
			break
		}
		out = append(out, *next)
		st = next
	}
	return out, nil
}

// plainWrites is how many status writes one Session of the sample takes.
func plainWrites(smp *sample) int {
	steps, _ := statuses(smp)
	return len(steps)
}

// plainStatusRate measures how fast a plain client, with workers in parallel, can make
// the status writes of n Sessions of the sample: the statuses the engine produces
// step by step, each written as the operator writes it (a merge patch from the
// previous status with the resourceVersion precondition), with no cache, no engine
// and no events. It is the physical limit of one write per step on this API server.
func plainStatusRate(ctx context.Context, c client.Client, smp *sample, namespace string, n, workers int) (float64, error) {
	steps, err := statuses(smp)
	if err != nil {
		return 0, err
	}
	sessions := make([]*flowv1.Session, n)
	for i := range sessions {
		sessions[i] = &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("plain-%05d", i)}}
		sessions[i].Spec = *smp.session.Spec.DeepCopy()
	}
	if _, err := createSessions(ctx, c, 16, sessions); err != nil {
		return 0, err
	}
	start := time.Now()
	err = testenv.Parallel(workers, n, func(i int) error {
		s := sessions[i]
		for k := range steps {
			patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
			s.Status = *steps[k].DeepCopy()
			if err := c.Status().Patch(ctx, s, patch); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return float64(n*len(steps)) / time.Since(start).Seconds(), nil
}
