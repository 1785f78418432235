package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/audit"
	"github.com/journeyops/journey-operator/internal/budget"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/revision"
	"github.com/journeyops/journey-operator/internal/step"
	"github.com/journeyops/journey-operator/internal/tools"
	"github.com/journeyops/journey-operator/internal/tracing"
)

// indexJourneyRef indexes Sessions by the Journey they run.
const indexJourneyRef = ".spec.journeyRef.name"

// AdvanceMode is how a Session with more work gets its next step.
type AdvanceMode string

const (
	// AdvanceWatch steps again when the informer delivers our own status write of a
	// Running Session: the cache is fresh by construction, so no stale read and no conflict.
	AdvanceWatch AdvanceMode = "watch"
	// AdvanceRequeue steps again through RequeueAfter; a stale cache is detected and
	// retried shortly.
	AdvanceRequeue AdvanceMode = "requeue"
)

// DefaultMaxConcurrentReconciles is how many Sessions are stepped in parallel by
// default. A step that calls a remote agent holds its worker for the whole call, so
// the workers bound the agent calls in flight: with 4 workers and a 200 ms model the
// bench made 39 steps/s, with 32 it made 95 (the API server's limit on that machine).
// Builtin steps gain nothing from more workers and lose nothing either.
const DefaultMaxConcurrentReconciles = 32

// SessionReconciler runs one engine step per reconcile, performs at most one agent
// call, journals its answer in status and writes status at most once.
type SessionReconciler struct {
	client.Client
	// erasures holds, per namespace/request, whether this manager has written the
	// request's erasure record (true) or is writing it (false): the Sessions of one
	// request are reconciled by several workers at once, and one record is enough.
	erasures sync.Map
	// APIReader reads Secrets without caching them (RBAC: get only), a Journey
	// revision the cache has not seen yet, and the Journey a new Session starts on.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Agents builds the agent that answers for an AgentSpec.
	Agents AgentFactory
	// Tools makes tool calls; nil means a tools.Caller reading Secrets with APIReader.
	Tools step.ToolCaller
	Clock clock.PassiveClock
	// ToolProgressInterval is how often, at most, the progress of a tool call in
	// flight is written (default DefaultToolProgressInterval).
	ToolProgressInterval time.Duration
	// Advance is how Running Sessions get their next step (default watch).
	Advance AdvanceMode
	// MaxConcurrentReconciles bounds parallel steps (default DefaultMaxConcurrentReconciles).
	MaxConcurrentReconciles int
	// Shard, when set, limits the reconciler to the Sessions whose labels match it.
	Shard labels.Selector
	// Tracing, when set, records a trace per Session.
	Tracing *tracing.Provider
	// Audit, when set, writes the audit records of every status write before the
	// Session's next step.
	Audit *audit.Trail
	// Budgets, when set, is the ledger of the Budget objects: each call is reserved
	// in the Budgets that select its Session before it is made.
	Budgets *budget.Ledger

	snapshots *revision.Cache
	// fault, in tests, is called at each point of a step where a crash could stop
	// it (step.Loop.Fault), with the Session's key.
	fault func(ctx context.Context, session client.ObjectKey, at step.FaultPoint, eff *engine.Effect) error
	// written holds, per Session, the status.step of this reconciler's last status
	// write until the cache has seen it (see fresh).
	written sync.Map
}

// +kubebuilder:rbac:groups=flow.journey.dev,resources=sessions,verbs=get;list;watch;delete;patch
// +kubebuilder:rbac:groups=flow.journey.dev,resources=sessions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=flow.journey.dev,resources=journeys,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile takes one step of a Session and writes its status at most once; a finished
// Session only waits for its TTL, unless an intervention waits (a Failed Session may
// resume; the engine refuses it on the others).
func (r *SessionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s flowv1.Session
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		if apierrors.IsNotFound(err) {
			r.written.Delete(req.NamespacedName)
			r.Audit.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !r.fresh(&s) {
		return computeResult(outcome{kind: conflict})
	}
	if !r.inShard(&s) {
		return ctrl.Result{}, nil
	}
	if !s.DeletionTimestamp.IsZero() {
		if controllerutil.ContainsFinalizer(&s, flowv1.FinalizerErasure) {
			return computeResult(r.erase(ctx, &s, r.Clock.Now()))
		}
		return ctrl.Result{}, nil
	}
	// The records of the last status write come before the next step (after a
	// restart, or a sink that failed).
	if err := r.Audit.Sync(ctx, &s); err != nil {
		return computeResult(failed(err))
	}
	now := r.Clock.Now()
	if s.Status.Phase.IsTerminal() && !s.InterventionsPending() {
		return computeResult(r.finished(ctx, &s, now))
	}
	return computeResult(r.finish(ctx, &s, r.step(ctx, &s, now), now))
}

// fresh reports whether the cached s holds this reconciler's last status write. A
// reconcile that starts on an event queued while the previous one ran (a message sent
// while a model was answering) may read the cache before it holds the status that
// reconcile wrote; stepping that stale status would ask the model again, only for
// the write to fail. So it waits for the cache instead, like a conflict. Writes are
// compared by status.writes, not status.step: a retry or a call marked sent is
// written without a new step.
func (r *SessionReconciler) fresh(s *flowv1.Session) bool {
	key := client.ObjectKeyFromObject(s)
	v, ok := r.written.Load(key)
	if !ok {
		return true
	}
	if s.Status.Writes < v.(int64) {
		return false
	}
	r.written.CompareAndDelete(key, v)
	return true
}

// wrote records s's status write (its status.writes), for fresh.
func (r *SessionReconciler) wrote(s *flowv1.Session) {
	r.written.Store(client.ObjectKeyFromObject(s), s.Status.Writes)
}

// finished reconciles a Session that ended: its status only records the generation it
// observed (an edit to a finished Session changes nothing else), then it waits for its
// TTL.
func (r *SessionReconciler) finished(ctx context.Context, s *flowv1.Session, now time.Time) outcome {
	status := s.Status.DeepCopy()
	engine.Observe(status, s.Generation)
	if !equality.Semantic.DeepEqual(&s.Status, status) {
		if r.Audit != nil {
			status.Audit = r.Audit.Cursor(s)
		}
		before := s.DeepCopy()
		s.Status = *status
		if out, ok := writeStatus(ctx, r.Client, before, s, false); !ok {
			return out
		}
	}
	return r.expire(ctx, s, now)
}

// SetupWithManager registers the controller: Sessions (spec changes, and our own
// status writes while Running in watch mode) and the Journeys they wait for.
func (r *SessionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Advance == "" {
		r.Advance = AdvanceWatch
	}
	if r.MaxConcurrentReconciles == 0 {
		r.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if r.Agents == nil {
		r.Agents = DefaultAgents()
	}
	if r.Tools == nil {
		r.Tools = &tools.Caller{Secrets: r.APIReader}
	}
	r.snapshots = revision.NewCache(256)
	if r.Audit != nil && r.Audit.Redact == nil {
		r.Audit.Redact = r.redactor
	}
	registerMetrics(mgr.GetCache())
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &flowv1.Session{}, indexJourneyRef, func(o client.Object) []string {
		return []string{o.(*flowv1.Session).Spec.JourneyRef.Name}
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &flowv1.Session{}, indexForget, forgetIndex); err != nil {
		return err
	}
	// A Session being erased is held by the erasure finalizer until it is reconciled.
	erasing := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !e.ObjectNew.GetDeletionTimestamp().IsZero() && controllerutil.ContainsFinalizer(e.ObjectNew, flowv1.FinalizerErasure)
	}}
	sessionEvents := predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, erasing)
	if r.Advance == AdvanceWatch {
		sessionEvents = predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, erasing, predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				s, ok := e.ObjectNew.(*flowv1.Session)
				return ok && s.Status.Phase == flowv1.PhaseRunning
			},
		})
	}
	inShard := predicate.NewPredicateFuncs(r.inShard)
	b := ctrl.NewControllerManagedBy(mgr).
		For(&flowv1.Session{}, builder.WithPredicates(inShard, sessionEvents)).
		Watches(&flowv1.Journey{}, handler.EnqueueRequestsFromMapFunc(r.waitingSessions))
	if r.Budgets != nil {
		// The ledger wakes a Session that waited for room once its call fits: straight
		// into the controller's queue, which never blocks and keeps no goroutine per
		// Session (a wake before the controller starts is dropped: starting reconciles
		// every Session anyway; after it stops, the queue drops it).
		var (
			mu    sync.Mutex
			queue workqueue.TypedRateLimitingInterface[reconcile.Request]
		)
		r.Budgets.Wake = func(key types.NamespacedName) {
			mu.Lock()
			q := queue
			mu.Unlock()
			if q != nil {
				q.Add(reconcile.Request{NamespacedName: key})
			}
		}
		b = b.WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			mu.Lock()
			defer mu.Unlock()
			queue = q
			return nil
		}))
	}
	return b.
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Named("session").
		Complete(r)
}

// inShard reports whether o belongs to this reconciler's shard.
func (r *SessionReconciler) inShard(o client.Object) bool {
	return r.Shard == nil || r.Shard.Matches(labels.Set(o.GetLabels()))
}

// waitingSessions maps a Journey to the Sessions that have not pinned a revision yet,
// to those Stalled by a terminal agent error (their agents reach the model with the
// Journey's current connection settings, so a fixed endpoint resumes them at once),
// and to those its upgradePolicy would move between turns and has not replayed on
// that revision yet (the others are replayed when their turn ends).
func (r *SessionReconciler) waitingSessions(ctx context.Context, o client.Object) []reconcile.Request {
	var list flowv1.SessionList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexJourneyRef: o.GetName()}); err != nil {
		return nil
	}
	j, _ := o.(*flowv1.Journey)
	var reqs []reconcile.Request
	for i := range list.Items {
		s := &list.Items[i]
		if (s.Status.JourneyRevision == "" || stalledByAgent(s) || upgradable(j, s)) && r.inShard(s) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)})
		}
	}
	return reqs
}

// upgradable reports whether j's upgradePolicy would replay s now: between turns, on
// another revision than the one it moves s to, not yet found diverging there.
func upgradable(j *flowv1.Journey, s *flowv1.Session) bool {
	if j == nil || s.Status.Turn != nil || s.Status.Phase.IsTerminal() {
		return false
	}
	to := j.UpgradeTarget(s.Status.JourneyRevision)
	return to != "" && engine.UpgradeBlockedOn(&s.Status) != to
}
