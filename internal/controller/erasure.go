package controller

import (
	"context"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/audit"
)

// indexForget indexes Sessions by the erasure request they are marked with.
const indexForget = ".metadata.annotations.forget"

// erasureWait is how long the Sessions of an erasure request that are being deleted
// wait for the others marked with it (`forget` marks them all, then deletes them) so
// that one record names them all. A request whose deletes stopped half way (the
// plugin was killed) is recorded with the Sessions deleted by then.
const erasureWait = 30 * time.Second

// erasureRetry is how soon the Sessions of a request are looked at again while some
// of them are not being deleted yet.
const erasureRetry = time.Second

// forgetIndex is the index function of indexForget.
func forgetIndex(o client.Object) []string {
	if req := o.(*flowv1.Session).ForgetRequest(); req != "" {
		return []string{req}
	}
	return nil
}

// erase lets go of Session s, being deleted and held by the erasure finalizer: it
// writes the erasure record of the request s is marked with, naming every Session of
// that request being deleted, then removes their finalizers. Nothing of what they held
// is written: no archive. Without an audit sink, or without a request, it only removes
// the finalizer.
func (r *SessionReconciler) erase(ctx context.Context, s *flowv1.Session, now time.Time) outcome {
	req := s.ForgetRequest()
	group := []*flowv1.Session{s}
	if req != "" && r.Audit != nil {
		var list flowv1.SessionList
		if err := r.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingFields{indexForget: req}); err != nil {
			return failed(err)
		}
		by := s.Annotations[flowv1.AnnotationForgetBy]
		group = group[:0]
		waiting := false
		for i := range list.Items {
			x := &list.Items[i]
			if x.Annotations[flowv1.AnnotationForgetBy] != by || !controllerutil.ContainsFinalizer(x, flowv1.FinalizerErasure) {
				continue
			}
			if x.DeletionTimestamp.IsZero() {
				waiting = true
				continue
			}
			group = append(group, x)
		}
		if !slices.ContainsFunc(group, func(x *flowv1.Session) bool { return x.UID == s.UID }) {
			group = append(group, s)
		}
		if waiting && now.Sub(s.DeletionTimestamp.Time) < erasureWait {
			return outcome{kind: requeue, after: erasureRetry}
		}
		key := s.Namespace + "/" + req
		if done, busy := r.erasures.LoadOrStore(key, false); busy {
			if !done.(bool) {
				// Another worker is writing the record: release after it has.
				return outcome{kind: requeue, after: erasureRetry}
			}
		} else {
			rec := audit.ErasureOf(group, req, by, s.Annotations[flowv1.AnnotationForgetReason], now)
			if err := r.Audit.Write(ctx, s, rec); err != nil {
				r.erasures.Delete(key)
				return failed(err)
			}
			r.erasures.Store(key, true)
			log.FromContext(ctx).Info("Wrote the erasure record", "session", klog.KObj(s), "request", req, "sessions", len(group))
		}
	}
	// The Session of the smallest UID, which names the record, goes last: a retry
	// after a partial release writes a record with the same id.
	slices.SortFunc(group, func(a, b *flowv1.Session) int { return -strings.Compare(string(a.UID), string(b.UID)) })
	for _, x := range group {
		if err := r.release(ctx, x); err != nil {
			return failed(err)
		}
	}
	return outcome{}
}

// release removes the erasure finalizer from s, under the optimistic lock.
func (r *SessionReconciler) release(ctx context.Context, s *flowv1.Session) error {
	if !controllerutil.ContainsFinalizer(s, flowv1.FinalizerErasure) {
		return nil
	}
	before := s.DeepCopy()
	controllerutil.RemoveFinalizer(s, flowv1.FinalizerErasure)
	err := r.Patch(ctx, s, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
