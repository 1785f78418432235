package controller

import (
	"context"
	"errors"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// outcomeKind is how a reconcile ended.
type outcomeKind int

const (
	// done: nothing more to do until the object or what it watches changes.
	done outcomeKind = iota
	// requeue: reconcile again after outcome.after (a TTL, a slow retry, the requeue
	// advance mode).
	requeue
	// conflict: the status write lost the optimistic lock to another writer; nothing
	// was written. Reconcile again shortly on fresh data.
	conflict
	// transient: an error that may pass (the API server, an agent's 5xx); returned for
	// controller-runtime's backoff.
	transient
	// terminal: an error retrying cannot fix; the object says so in its status.
	terminal
)

// outcome is what a reconcile ended with; computeResult turns it into what
// controller-runtime does next.
type outcome struct {
	kind  outcomeKind
	after time.Duration
	err   error
}

// conflictRetry is how soon a reconcile whose status write lost the optimistic lock is
// tried again. The write that won is usually our own previous one, not yet in the
// cache: a short wait gets fresh data without the backoff an error would add.
const conflictRetry = 50 * time.Millisecond

// computeResult is the result of a reconcile that ended with o.
func computeResult(o outcome) (ctrl.Result, error) {
	switch o.kind {
	case done:
		return ctrl.Result{}, nil
	case requeue:
		return ctrl.Result{RequeueAfter: o.after}, nil
	case conflict:
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case transient:
		return ctrl.Result{}, o.err
	case terminal:
		return ctrl.Result{}, reconcile.TerminalError(o.err)
	}
	return ctrl.Result{}, nil
}

// failed is the outcome of an error: transient when err is set, else done.
func failed(err error) outcome {
	if err != nil {
		return outcome{kind: transient, err: err}
	}
	return outcome{}
}

// writeStatus is the one way the reconcilers write status: a merge patch of the status
// subresource from before to obj, under the optimistic lock (a reconcile that read a
// stale object writes nothing), and no API call at all when the status is unchanged.
// It returns ok when the status was written or needed no write, else the outcome of
// the failed write: a conflict is tried again shortly, another error with backoff.
func writeStatus(ctx context.Context, c client.Client, before, obj client.Object, unchanged bool) (outcome, bool) {
	if unchanged {
		return outcome{}, true
	}
	return patchStatus(ctx, c, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// writeSessionStatus is writeStatus for a Session stepped from before: its patch is
// conditioned on the status the step read, not on the spec (see sessionStatusPatch).
// A Session with no status step yet is written under the resourceVersion lock; when
// that fails, live (read from the API server) tells a spec change, which leaves the
// status as the step read it and the write is made again on live, from another
// status writer.
func writeSessionStatus(ctx context.Context, c client.Client, live client.Reader, before, s *flowv1.Session, unchanged bool) (outcome, bool) {
	if unchanged {
		return outcome{}, true
	}
	s.Status.Writes = before.Status.Writes + 1
	patch, err := sessionStatusPatch(before, s)
	if err != nil {
		return failed(err), false
	}
	if patch != nil {
		return patchSessionStatus(ctx, c, s, patch)
	}
	out, ok := writeStatus(ctx, c, before, s, false)
	if ok || out.kind != conflict {
		return out, ok
	}
	var cur flowv1.Session
	if err := live.Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
		return failed(client.IgnoreNotFound(err)), false
	}
	if cur.UID != s.UID || !equality.Semantic.DeepEqual(cur.Status, before.Status) {
		return out, false
	}
	next := cur.DeepCopy()
	next.Status = s.Status
	if out, ok = writeStatus(ctx, c, &cur, next, false); ok {
		s.ResourceVersion = next.ResourceVersion
	}
	return out, ok
}

// patchSessionStatus applies patch to s's status subresource and asks for the
// written object's metadata back, not the whole Session: the API server encodes, and
// the manager decodes, a few hundred bytes instead of the Session (up to 256 KiB). s
// keeps the status it wrote and the spec its step read, and takes the written
// object's resourceVersion and generation.
func patchSessionStatus(ctx context.Context, c client.Client, s *flowv1.Session, patch client.Patch) (outcome, bool) {
	written := &metav1.PartialObjectMetadata{}
	written.SetGroupVersionKind(flowv1.GroupVersion.WithKind("Session"))
	written.Namespace, written.Name = s.Namespace, s.Name
	out, ok := patchStatus(ctx, c, written, patch)
	if ok {
		s.ResourceVersion, s.Generation = written.ResourceVersion, written.Generation
	}
	return out, ok
}

// patchStatus applies patch to obj's status subresource. A failed test of a JSON
// patch means another writer changed what the patch was conditioned on: a conflict.
func patchStatus(ctx context.Context, c client.Client, obj client.Object, patch client.Patch) (outcome, bool) {
	err := c.Status().Patch(ctx, obj, patch)
	switch {
	case err == nil:
		return outcome{}, true
	case apierrors.IsConflict(err), failedTest(patch, err):
		log.FromContext(ctx).V(4).Info("Status conflict, retrying on fresh data", "object", klog.KObj(obj))
		return outcome{kind: conflict}, false
	}
	return failed(err), false
}

// reconcileStatus is a reconciler that gets an object, computes its status and writes
// it once: compute changes obj's status (status returns it, for the comparison) and
// says how the reconcile ended; a failed write decides instead.
func reconcileStatus[T client.Object, S any](ctx context.Context, c client.Client, req ctrl.Request, obj T,
	status func(T) *S, compute func(context.Context, T) outcome) (ctrl.Result, error) {
	if err := c.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := obj.DeepCopyObject().(T)
	out := compute(ctx, obj)
	if werr, ok := writeStatus(ctx, c, before, obj, equality.Semantic.DeepEqual(status(before), status(obj))); !ok {
		out = werr
	}
	return computeResult(out)
}

// failedTest reports whether err is the API server refusing a JSON patch it could not
// apply: one of its test operations failed, or a path it changes is no longer there,
// both because the stored status is no longer the one the patch was made from. The API
// server answers either with a 422 that carries no field causes (since 1.37 it drops
// the message, which said "testing value ... failed"); a status refused by validation
// is a 422 naming its fields.
func failedTest(patch client.Patch, err error) bool {
	if patch.Type() != types.JSONPatchType {
		return false
	}
	if strings.Contains(err.Error(), "testing value") {
		return true
	}
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) {
		return false
	}
	details := st.Status().Details
	return details == nil || len(details.Causes) == 0
}
