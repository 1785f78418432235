package controller

import (
	"context"
	"math/big"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/rollout"
)

// indexJourneyRevision indexes Sessions by the Journey revision they are pinned to
// (status.journeyRevision), so a rollout counts a revision's Sessions from the cache.
const indexJourneyRevision = ".status.journeyRevision"

func journeyRevisionIndex(o client.Object) []string {
	if rev := o.(*flowv1.Session).Status.JourneyRevision; rev != "" {
		return []string{rev}
	}
	return nil
}

// rollout takes one step of the Journey's canary (package rollout), with the Session
// counts of its stable and canary revisions, and reports the transition as an Event.
func (r *JourneyReconciler) rollout(ctx context.Context, j *flowv1.Journey) outcome {
	st := &j.Status
	if j.Spec.Rollout == nil && st.StableRevision == "" && st.CanaryRevision == "" && st.Rollout == nil {
		return outcome{}
	}
	now := r.Clock.Now()
	var counts flowv1.RolloutCounts
	if st.CanaryRevision != "" && j.Spec.Rollout != nil {
		var err error
		if counts, err = r.count(ctx, j, now); err != nil {
			return failed(err)
		}
	}
	res := rollout.Step(st, rollout.Input{
		Spec: j.Spec.Rollout, Generation: j.Generation, Counts: counts, Now: now,
		Promote: j.Annotations[flowv1.AnnotationRolloutPromote], Abort: j.Annotations[flowv1.AnnotationRolloutAbort],
		UpgradePolicy: j.Spec.UpgradePolicy,
	})
	for _, e := range res.Events {
		kind := "Normal"
		if e.Warning {
			kind = "Warning"
		}
		r.Recorder.Eventf(j, nil, kind, e.Reason, "Rollout", "%s", e.Message)
	}
	if res.RequeueAfter > 0 {
		return outcome{kind: requeue, after: res.RequeueAfter}
	}
	return outcome{}
}

// count counts the Sessions of the stable and canary revisions created since the
// canary started (and within the analysis window), from the cache's index.
func (r *JourneyReconciler) count(ctx context.Context, j *flowv1.Journey, now time.Time) (flowv1.RolloutCounts, error) {
	var since time.Time
	if ro := j.Status.Rollout; ro != nil && ro.StartTime != nil {
		since = ro.StartTime.Time
	}
	if a := j.Spec.Rollout.Analysis; a != nil && a.Window != nil {
		if w := now.Add(-a.Window.Duration); w.After(since) {
			since = w
		}
	}
	var c flowv1.RolloutCounts
	for _, rc := range []struct {
		rev string
		out *flowv1.RevisionCounts
	}{{j.Status.StableRevision, &c.Stable}, {j.Status.CanaryRevision, &c.Canary}} {
		var list flowv1.SessionList
		if err := r.List(ctx, &list, client.InNamespace(j.Namespace), client.MatchingFields{indexJourneyRevision: rc.rev}); err != nil {
			return c, err
		}
		cost := new(big.Rat)
		for i := range list.Items {
			s := &list.Items[i]
			if s.Spec.JourneyRef.Name != j.Name || s.CreationTimestamp.Time.Before(since) {
				continue
			}
			countSession(rc.out, s, cost)
		}
		if cost.Sign() != 0 {
			rc.out.CostUSD = cost.FloatString(6)
		}
	}
	return c, nil
}

// countSession adds a Session to its revision's counts.
func countSession(c *flowv1.RevisionCounts, s *flowv1.Session, cost *big.Rat) {
	c.Started++
	switch s.Status.Phase {
	case flowv1.PhaseCompleted:
		c.Completed++
	case flowv1.PhaseFailed:
		c.Failed++
	case flowv1.PhaseEscalated:
		c.Escalated++
	}
	if s.Status.Phase.IsTerminal() {
		c.Finished++
	}
	c.Turns += int64(s.Status.Turns)
	if usd, ok := new(big.Rat).SetString(s.Status.Usage.CostUSD); ok {
		cost.Add(cost, usd)
	}
}

// journeyOfSession wakes the Journey of a Session whose revision is in a running
// canary, as Sessions start and finish: the analysis counts them.
func (r *JourneyReconciler) journeyOfSession(ctx context.Context, o client.Object) []reconcile.Request {
	s, ok := o.(*flowv1.Session)
	if !ok || s.Status.JourneyRevision == "" {
		return nil
	}
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.JourneyRef.Name}
	var j flowv1.Journey
	if err := r.Get(ctx, key, &j); err != nil || j.Status.CanaryRevision == "" {
		return nil
	}
	if rev := s.Status.JourneyRevision; rev != j.Status.CanaryRevision && rev != j.Status.StableRevision {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// sessionCounted passes the Session events that change a rollout's counts: a Session
// pinned to a revision, or changing phase.
var sessionCounted = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, oko := e.ObjectOld.(*flowv1.Session)
		cur, okn := e.ObjectNew.(*flowv1.Session)
		return oko && okn && (old.Status.Phase != cur.Status.Phase || old.Status.JourneyRevision != cur.Status.JourneyRevision)
	},
	DeleteFunc:  func(e event.DeleteEvent) bool { return true },
	GenericFunc: func(e event.GenericEvent) bool { return false },
}
