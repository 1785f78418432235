package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/engine"
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
	// APIReader reads Secrets without caching them (RBAC: get only).
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Agents builds the agent that answers for an AgentSpec.
	Agents AgentFactory
	Clock  clock.PassiveClock
	// Advance is how Running Sessions get their next step (default watch).
	Advance AdvanceMode
	// MaxConcurrentReconciles bounds parallel steps (default DefaultMaxConcurrentReconciles).
	MaxConcurrentReconciles int
	// Shard, when set, limits the reconciler to the Sessions whose labels match it.
	Shard labels.Selector

	snapshots *snapshotCache
}

// +kubebuilder:rbac:groups=flow.journey.dev,resources=sessions,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=flow.journey.dev,resources=sessions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=flow.journey.dev,resources=journeys,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func (r *SessionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var s flowv1.Session
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() || !r.inShard(&s) {
		return ctrl.Result{}, nil
	}
	now := r.Clock.Now()

	if s.Status.Phase.IsTerminal() {
		return r.expire(ctx, &s, now)
	}

	revision := s.Status.JourneyRevision
	if revision == "" {
		var reason, msg string
		revision, reason, msg = r.pin(ctx, &s)
		if revision == "" {
			// The Journey watch wakes us when it appears or becomes Ready.
			return ctrl.Result{}, r.writeConditionOnly(ctx, &s, metav1.ConditionFalse, reason, msg)
		}
	}
	snap, err := r.snapshots.get(ctx, r.Client, s.Namespace, revision)
	if apierrors.IsNotFound(err) {
		msg := fmt.Sprintf("Journey revision %s no longer exists", revision)
		if werr := r.writeStalled(ctx, &s, flowv1.ReasonRevisionNotFound, msg); werr != nil {
			return ctrl.Result{}, werr
		}
		return ctrl.Result{}, reconcile.TerminalError(errors.New(msg))
	}
	if err != nil {
		return ctrl.Result{}, err
	}

	status, effect := engine.Step(snap, engine.Input{
		Spec: &s.Spec, Status: &s.Status, Now: now,
		SessionName: s.Name, SessionUID: string(s.UID), CreationTime: s.CreationTimestamp.Time,
	})
	journey := s.Spec.JourneyRef.Name
	if effect != nil {
		resp, err := r.perform(ctx, s.Namespace, effect)
		switch agent.ClassOf(err) {
		case agent.Transient:
			if err != nil {
				stepsTotal.WithLabelValues(journey, "error").Inc()
				reason := flowv1.ReasonAgentError
				var ae *agent.Error
				if errors.As(err, &ae) && ae.Kind == flowv1.FailureRateLimit {
					reason = flowv1.ReasonRateLimited
				} else if errors.As(err, &ae) && ae.Kind == flowv1.FailureTimeout {
					reason = flowv1.ReasonAgentTimeout
				}
				// Nothing is journaled: the next attempt repeats the same step.
				if werr := r.writeAgentCondition(ctx, &s, metav1.ConditionFalse, reason, err.Error()); werr != nil {
					return ctrl.Result{}, werr
				}
				return ctrl.Result{}, err
			}
		case agent.Terminal:
			// Retrying at once cannot help (a refused key, an unknown model), but a person
			// can fix it without touching the Session (the Secret, the endpoint), and we
			// do not watch Secrets: so try again slowly.
			stepsTotal.WithLabelValues(journey, "error").Inc()
			msg := fmt.Sprintf("%v (retried every %s, or at the next change to the Session)", err, terminalRetry)
			if werr := r.writeStalled(ctx, &s, flowv1.ReasonAgentTerminalError, msg); werr != nil {
				return ctrl.Result{}, werr
			}
			return ctrl.Result{RequeueAfter: terminalRetry}, nil
		}
		// An answer, or an Invalid one that the engine turns into an unclear decision or
		// no intent: journaled before the next step acts on it.
		status.PendingEffect = effect.Record(string(s.UID), status.Step, resp, err)
		AppendJournal(status, status.PendingEffect, snap.Journey().Limits.MaxJournal)
		SetCondition(status, flowv1.ConditionAgentAvailable, metav1.ConditionTrue, flowv1.ReasonAgentReady, "The last agent call answered", now)
	}
	status.ObservedGeneration = s.Generation

	if equality.Semantic.DeepEqual(&s.Status, status) {
		stepsTotal.WithLabelValues(journey, "blocked").Inc()
		return ctrl.Result{}, nil
	}
	patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
	old := s.Status.DeepCopy()
	s.Status = *status
	if err := r.Status().Patch(ctx, &s, patch); err != nil {
		if apierrors.IsConflict(err) {
			// Someone wrote first: drop this step, nothing was applied. Try again on fresh data.
			logger.V(4).Info("Status conflict, step dropped", "session", klog.KObj(&s))
			return ctrl.Result{RequeueAfter: 50 * time.Millisecond}, nil
		}
		return ctrl.Result{}, err
	}
	if effect != nil {
		stepsTotal.WithLabelValues(journey, "effect").Inc()
	} else {
		stepsTotal.WithLabelValues(journey, "changed").Inc()
	}
	r.emit(&s, old, status)

	if status.Phase == flowv1.PhaseRunning && r.Advance == AdvanceRequeue {
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	if status.Phase.IsTerminal() {
		return r.expire(ctx, &s, now)
	}
	return ctrl.Result{}, nil
}

// terminalRetry is how often a Session stalled by a terminal agent error tries again.
const terminalRetry = 5 * time.Minute

// DefaultMaxJournal is how many agent answers status.journal keeps by default.
const DefaultMaxJournal = 100

// AppendJournal appends an answer to status.journal, dropping the oldest past the limit
// (limits.maxJournal, nil for the default).
func AppendJournal(status *flowv1.SessionStatus, rec *flowv1.EffectRecord, limit *int32) {
	n := DefaultMaxJournal
	if limit != nil {
		n = int(*limit)
	}
	status.Journal = append(status.Journal, *rec.DeepCopy())
	if over := len(status.Journal) - n; over > 0 {
		status.Journal = append([]flowv1.EffectRecord(nil), status.Journal[over:]...)
		status.JournalDropped += int32(over)
	}
}

// pin returns the Journey revision a new Session starts on, or why it cannot start.
func (r *SessionReconciler) pin(ctx context.Context, s *flowv1.Session) (revision, reason, msg string) {
	var j flowv1.Journey
	err := r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.JourneyRef.Name}, &j)
	if err != nil {
		return "", flowv1.ReasonJourneyNotFound, fmt.Sprintf("Journey %q not found: %v", s.Spec.JourneyRef.Name, client.IgnoreNotFound(err))
	}
	ready := apimeta.FindStatusCondition(j.Status.Conditions, flowv1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || j.Status.CurrentRevision == "" {
		why := "it has not been validated yet"
		if ready != nil && ready.Message != "" {
			why = ready.Message
		}
		return "", flowv1.ReasonJourneyNotReady, fmt.Sprintf("Journey %q is not Ready: %s", j.Name, why)
	}
	return j.Status.CurrentRevision, "", ""
}

// expire deletes a finished Session once its ttlSecondsAfterFinished has passed.
func (r *SessionReconciler) expire(ctx context.Context, s *flowv1.Session, now time.Time) (ctrl.Result, error) {
	if s.Spec.TTLSecondsAfterFinished == nil || s.Status.CompletionTime == nil {
		return ctrl.Result{}, nil
	}
	deadline := s.Status.CompletionTime.Add(time.Duration(*s.Spec.TTLSecondsAfterFinished) * time.Second)
	if wait := deadline.Sub(now); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	log.FromContext(ctx).Info("Deleting finished Session after its TTL", "session", klog.KObj(s))
	return ctrl.Result{}, client.IgnoreNotFound(r.Delete(ctx, s, client.Preconditions{UID: &s.UID}))
}

// SetCondition sets a Session condition at now, its message capped for status.
func SetCondition(status *flowv1.SessionStatus, typ string, st metav1.ConditionStatus, reason, msg string, now time.Time) {
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	apimeta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: typ, Status: st, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now),
	})
}

// writeStatus patches status from the Session's current state when fn changed it.
func (r *SessionReconciler) writeStatus(ctx context.Context, s *flowv1.Session, fn func(*flowv1.SessionStatus)) error {
	status := s.Status.DeepCopy()
	fn(status)
	status.ObservedGeneration = s.Generation
	if equality.Semantic.DeepEqual(&s.Status, status) {
		return nil
	}
	patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
	s.Status = *status
	// A conflict is returned too: the reconcile is retried on fresh data.
	return r.Status().Patch(ctx, s, patch)
}

func (r *SessionReconciler) writeConditionOnly(ctx context.Context, s *flowv1.Session, st metav1.ConditionStatus, reason, msg string) error {
	return r.writeStatus(ctx, s, func(status *flowv1.SessionStatus) {
		if status.Phase == "" {
			status.Phase = flowv1.PhasePending
		}
		if c := apimeta.FindStatusCondition(status.Conditions, flowv1.ConditionReady); c != nil && c.Reason == reason && c.Message == msg {
			return
		}
		SetCondition(status, flowv1.ConditionReady, st, reason, msg, r.Clock.Now())
	})
}

func (r *SessionReconciler) writeAgentCondition(ctx context.Context, s *flowv1.Session, st metav1.ConditionStatus, reason, msg string) error {
	return r.writeStatus(ctx, s, func(status *flowv1.SessionStatus) {
		if c := apimeta.FindStatusCondition(status.Conditions, flowv1.ConditionAgentAvailable); c != nil && c.Status == st && c.Reason == reason {
			return
		}
		SetCondition(status, flowv1.ConditionAgentAvailable, st, reason, msg, r.Clock.Now())
	})
}

func (r *SessionReconciler) writeStalled(ctx context.Context, s *flowv1.Session, reason, msg string) error {
	now := r.Clock.Now()
	r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, reason, "Stall", "%s", msg)
	return r.writeStatus(ctx, s, func(status *flowv1.SessionStatus) {
		SetCondition(status, flowv1.ConditionStalled, metav1.ConditionTrue, reason, msg, now)
		SetCondition(status, flowv1.ConditionReady, metav1.ConditionFalse, reason, msg, now)
		apimeta.RemoveStatusCondition(&status.Conditions, flowv1.ConditionReconciling)
	})
}

// emit records an Event for each transition, block and escalation of the step, and
// counts transitions.
func (r *SessionReconciler) emit(s *flowv1.Session, old, status *flowv1.SessionStatus) {
	for _, e := range engine.Events(old, status) {
		r.Recorder.Eventf(s, nil, e.Type, e.Reason, "Step", "%s", e.Message)
	}
	if n := len(status.History); n > 0 && status.Transitions > old.Transitions {
		added := int(status.Transitions - old.Transitions)
		for i := max(0, n-added); i < n; i++ {
			transitionsTotal.WithLabelValues(s.Spec.JourneyRef.Name, string(status.History[i].Action)).Inc()
		}
	}
}

// perform makes the agent call an effect asks for.
func (r *SessionReconciler) perform(ctx context.Context, namespace string, eff *engine.Effect) (any, error) {
	agents := make([]agent.Agent, 0, len(eff.Agents))
	for _, spec := range eff.Agents {
		a, err := r.Agents.Agent(ctx, r.APIReader, namespace, spec)
		if err != nil {
			return nil, err
		}
		agents = append(agents, a)
	}
	if len(agents) == 0 {
		return nil, &agent.Error{Class: agent.Terminal, Kind: flowv1.FailureValidation, Source: flowv1.FailureSystem, Err: errors.New("effect names no agent")}
	}
	provider, role := string(eff.Agents[0].Provider), string(eff.Kind)
	start := time.Now()
	resp, err := r.call(ctx, agents, eff)
	result := "ok"
	if err != nil {
		result = string(agent.ClassOf(err))
	}
	agentDuration.WithLabelValues(provider, role, result).Observe(time.Since(start).Seconds())
	if u := usageOf(resp); u != nil {
		agentTokens.WithLabelValues(provider, "prompt").Add(float64(u.PromptTokens))
		agentTokens.WithLabelValues(provider, "completion").Add(float64(u.CompletionTokens))
	}
	return resp, err
}

func (r *SessionReconciler) call(ctx context.Context, agents []agent.Agent, eff *engine.Effect) (any, error) {
	switch eff.Kind {
	case flowv1.EffectClassifyIntent:
		return agents[0].ClassifyIntent(ctx, *eff.Intent)
	case flowv1.EffectDecide:
		if len(agents) > 1 {
			return agent.DecideEnsemble(ctx, agents, *eff.Decision)
		}
		return agents[0].Decide(ctx, *eff.Decision)
	case flowv1.EffectRunPathway:
		return agent.RunPipeline(ctx, agents, eff.Pipeline, *eff.Pathway)
	}
	return nil, fmt.Errorf("unknown effect kind %q", eff.Kind)
}

func usageOf(resp any) *agent.Usage {
	switch v := resp.(type) {
	case agent.PathwayResponse:
		return &v.Usage
	case agent.DecisionResponse:
		return &v.Usage
	case agent.IntentResponse:
		return &v.Usage
	}
	return nil
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
	r.snapshots = newSnapshotCache(256)
	registerMetrics(mgr.GetCache())
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &flowv1.Session{}, indexJourneyRef, func(o client.Object) []string {
		return []string{o.(*flowv1.Session).Spec.JourneyRef.Name}
	}); err != nil {
		return err
	}
	sessionEvents := predicate.Or[client.Object](predicate.GenerationChangedPredicate{})
	if r.Advance == AdvanceWatch {
		sessionEvents = predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				s, ok := e.ObjectNew.(*flowv1.Session)
				return ok && s.Status.Phase == flowv1.PhaseRunning
			},
		})
	}
	inShard := predicate.NewPredicateFuncs(r.inShard)
	return ctrl.NewControllerManagedBy(mgr).
		For(&flowv1.Session{}, builder.WithPredicates(inShard, sessionEvents)).
		Watches(&flowv1.Journey{}, handler.EnqueueRequestsFromMapFunc(r.waitingSessions)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Named("session").
		Complete(r)
}

// inShard reports whether o belongs to this reconciler's shard.
func (r *SessionReconciler) inShard(o client.Object) bool {
	return r.Shard == nil || r.Shard.Matches(labels.Set(o.GetLabels()))
}

// waitingSessions maps a Journey to the Sessions that have not pinned a revision yet.
func (r *SessionReconciler) waitingSessions(ctx context.Context, o client.Object) []reconcile.Request {
	var list flowv1.SessionList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexJourneyRef: o.GetName()}); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Status.JourneyRevision == "" && r.inShard(&list.Items[i]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}
