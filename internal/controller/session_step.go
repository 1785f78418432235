package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/audit"
	"github.com/journeyops/journey-operator/internal/budget"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/step"
	"github.com/journeyops/journey-operator/internal/tracing"
)

// terminalRetry is how often a Session stalled by a terminal agent error tries again.
// Retrying at once cannot help (a refused key, an unknown model), but a person can fix
// it without touching the Session: a change to its Journey (the endpoint) retries at
// once, but Secrets are not watched.
const terminalRetry = 5 * time.Minute

// moreSteps is how many steps that call nothing one status write may carry after its
// first, besides the steps that apply answers (see step.Loop.MoreSteps).
const moreSteps = 16

// sessionStep is what one reconcile of a Session computed: the status to write, and
// how the reconcile ends once it is written.
type sessionStep struct {
	// status is the Session's next status; nil when there is nothing to write.
	status *flowv1.SessionStatus
	// step is what the engine step did, "" when none ran.
	step step.Outcome
	// stall, when set, is the reason of a Warning Event, message its note.
	stall, message string
	// then is how the reconcile ends when the step did not advance the Session.
	then outcome
	// trace records the step's span once its status is written (nil: not traced).
	trace *tracing.Step
	// progress is the tool progress the step wrote while a call ran (nil: none): the
	// status the step's write starts from holds it.
	progress *flowv1.ToolProgress
	// forked, for a fork's first status, is the note of its Forked Event (its
	// other Events are its source's).
	forked string
	// deadline is the earliest time the Session times out without input
	// (limits.sessionTimeout, or limits.idleTimeout while it waits for input); zero
	// when the step did not run.
	deadline time.Time
	// notices are what the step's agents learned about their endpoints, each said
	// once by the agent: Normal Events on the Session.
	notices []agent.Notice
	// upgradeBlocked is the note of the Event saying the Journey's upgradePolicy
	// found the Session's replay diverging ("" for none).
	upgradeBlocked string
	// upgradeWaits says the upgradePolicy waits for the Session's turn (or its
	// interventions) to end before it replays the Session.
	upgradeWaits bool
}

// noticeLog collects the notices of a step's agent calls.
type noticeLog struct {
	mu   sync.Mutex
	list []agent.Notice
}

func (l *noticeLog) add(n agent.Notice) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, n)
}

func (l *noticeLog) all() []agent.Notice {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list)
}

// step computes the Session's next status: the Journey revision it runs on (pinned at
// its first step), then one step of the protocol with at most one agent call.
func (r *SessionReconciler) step(ctx context.Context, s *flowv1.Session, now time.Time) sessionStep {
	rev := s.Status.JourneyRevision
	if rev == "" && s.Spec.ForkOf != nil {
		return r.fork(ctx, s, now)
	}
	if rev == "" {
		var reason, msg string
		if rev, reason, msg = r.pin(ctx, s); rev == "" {
			// The Journey watch wakes us when it appears or becomes Ready.
			status := s.Status.DeepCopy()
			engine.Wait(status, reason, msg, now)
			return sessionStep{status: status}
		}
	}
	// The step starts from the status the Journey's upgradePolicy left: on the
	// revision it moved the Session to.
	status := s.Status.DeepCopy()
	policy, err := r.policyUpgrade(ctx, s, status, now)
	if err != nil {
		return sessionStep{then: failed(err)}
	}
	if policy.moved {
		rev = status.JourneyRevision
	}
	snap, gone := r.revision(ctx, s, rev, now)
	if snap == nil {
		return gone
	}
	progress := &progressWriter{client: r.Client, key: client.ObjectKeyFromObject(s), step: s.Status.Step, clock: r.Clock,
		interval: cmp.Or(r.ToolProgressInterval, DefaultToolProgressInterval)}
	loop := step.Loop{Performer: r.performer(s.Namespace, s.Spec.JourneyRef.Name, progress), StallRetry: terminalRetry, MoreSteps: moreSteps,
		WriteFirst: func(ctx context.Context, status *flowv1.SessionStatus) error {
			return r.writeFirst(ctx, s, status, progress)
		}}
	if r.fault != nil {
		key := client.ObjectKeyFromObject(s)
		loop.Fault = func(ctx context.Context, at step.FaultPoint, eff *engine.Effect) error {
			return r.fault(ctx, key, at, eff)
		}
	}
	in := step.InputOf(s, now)
	in.Status = status // writeFirst changes s.Status; the step reads what it started from
	if r.Budgets != nil {
		if in.Budgets, err = r.Budgets.Rooms(ctx, s, now); err != nil {
			return sessionStep{then: failed(err)}
		}
		if len(in.Budgets) > 0 {
			loop.Budgets = sessionLedger{r.Budgets, s}
		}
	}
	if in.Upgrade, err = r.upgradeCheck(ctx, s); err != nil {
		return sessionStep{then: failed(err)}
	}
	if in.Upgrade != nil {
		// The steps after the upgrade run on the new revision: the next write's.
		loop.MoreSteps = 0
	}
	ctx, tr := r.Tracing.Begin(ctx, s)
	notices := &noticeLog{}
	res, err := loop.Step(agent.WithNotices(ctx, notices.add), snap, in)
	var wf *writeFirstError
	if errors.As(err, &wf) {
		return sessionStep{then: wf.out, notices: notices.all()}
	}
	if err != nil {
		return sessionStep{then: failed(err), progress: progress.progress(), notices: notices.all()}
	}
	if tr != nil {
		block, _ := engine.Blocked(res.Status)
		tr.Result(tracing.Result{Status: res.Status, Changed: res.Outcome != step.Unchanged, Outcome: string(res.Outcome),
			Effect: effectKind(res.Effect), Err: res.Err, Events: tracing.EventsOf(engine.Events(&s.Status, res.Status)), Block: block})
	}
	if res.Outcome == step.Unchanged && (policy.moved || policy.blocked != "") {
		// The policy changed the status the step started from.
		res.Outcome = step.Changed
	}
	st := sessionStep{status: res.Status, step: res.Outcome, trace: tr, deadline: snap.NextDeadline(&s.Spec, res.Status, s.CreationTimestamp.Time),
		progress: progress.progress(), notices: notices.all(), upgradeBlocked: policy.blocked, upgradeWaits: policy.waits}
	switch res.Outcome {
	case step.AgentRetry:
		// Nothing is journaled: the next attempt repeats the same step.
		st.then = failed(res.Err)
	case step.AgentStalled:
		st.stall, st.message = res.Reason, res.Message
		st.then = outcome{kind: requeue, after: terminalRetry}
	}
	return st
}

// revision returns the compiled revision rev of s's journey; nil, with how the step
// ends, when it cannot be read.
func (r *SessionReconciler) revision(ctx context.Context, s *flowv1.Session, rev string, now time.Time) (*engine.Snapshot, sessionStep) {
	snap, err := r.snapshots.Get(ctx, r.Client, s.Namespace, rev)
	if apierrors.IsNotFound(err) {
		// The Journey's status can reach the cache before the revision it names: a
		// live read tells a revision not cached yet from one that is gone.
		snap, err = r.snapshots.Get(ctx, r.APIReader, s.Namespace, rev)
	}
	if apierrors.IsNotFound(err) {
		msg := fmt.Sprintf("Journey revision %s no longer exists", rev)
		status := s.Status.DeepCopy()
		engine.Stall(status, flowv1.ReasonRevisionNotFound, msg, now)
		return nil, sessionStep{status: status, stall: flowv1.ReasonRevisionNotFound, message: msg,
			then: outcome{kind: terminal, err: errors.New(msg)}}
	}
	if err != nil {
		return nil, sessionStep{then: failed(err)}
	}
	return snap, sessionStep{}
}

// writeFirst writes status before the step makes a call that must not be made twice
// (to a server without idempotency keys: status marks it sent), as finish writes, with
// its Events; the step's own write (and the call's progress) follows from it. The
// step's input is not changed: s takes the written status and resourceVersion.
func (r *SessionReconciler) writeFirst(ctx context.Context, s *flowv1.Session, status *flowv1.SessionStatus, progress *progressWriter) error {
	old, before := s.Status.DeepCopy(), s.DeepCopy()
	next := status.DeepCopy()
	engine.Observe(next, s.Generation)
	if r.Audit != nil {
		next.Audit = r.Audit.Cursor(s)
	}
	s.Status = *next
	if out, ok := writeSessionStatus(ctx, r.Client, r.APIReader, before, s, false); !ok {
		*s = *before
		return &writeFirstError{out: out}
	}
	r.wrote(s)
	progress.wrote(next.Step)
	r.emit(s, old, next)
	return nil
}

// writeFirstError is a write before a call that failed: the reconcile ends with out,
// the call not made.
type writeFirstError struct{ out outcome }

func (e *writeFirstError) Error() string {
	if e.out.err != nil {
		return "writing a tool call as sent: " + e.out.err.Error()
	}
	return "writing a tool call as sent: the status changed meanwhile"
}

// finish writes the step's status (the reconcile's one write), counts the step, emits
// its Events, and says how the reconcile ends.
func (r *SessionReconciler) finish(ctx context.Context, s *flowv1.Session, st sessionStep, now time.Time) outcome {
	journey := s.Spec.JourneyRef.Name
	if st.step == step.AgentRetry || st.step == step.AgentStalled {
		stepsTotal.WithLabelValues(journey, "error").Inc()
	}
	for _, n := range st.notices {
		r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, n.Reason, "Step", "%s", n.Message)
	}
	if st.stall != "" {
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, st.stall, "Stall", "%s", st.message)
	}
	if st.upgradeBlocked != "" {
		r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, flowv1.ReasonReplayDiverged, "Upgrade", "%s", st.upgradeBlocked)
	}
	if st.progress != nil {
		s.Status.ToolProgress = st.progress
	}
	if st.status == nil {
		r.Budgets.Release(s.UID)
		return st.then
	}
	if st.status.Phase == "" {
		// Stalled or suspended before its first step: still Pending, never blank.
		st.status.Phase = flowv1.PhasePending
	}
	engine.Observe(st.status, s.Generation)
	old, before := s.Status.DeepCopy(), s.DeepCopy()
	unchanged := equality.Semantic.DeepEqual(old, st.status)
	if !unchanged && r.Audit != nil {
		// What the sink acknowledged rides in this write (see audit.Trail).
		st.status.Audit = r.Audit.Cursor(s)
	}
	s.Status = *st.status
	if out, ok := writeSessionStatus(ctx, r.Client, r.APIReader, before, s, unchanged); !ok {
		// On a conflict someone wrote first: the step is dropped, nothing was applied.
		r.Budgets.Release(s.UID)
		return out
	}
	// What the write charged is in the ledger now, and its calls hold nothing more.
	r.Budgets.Settle(s)
	if !unchanged {
		r.wrote(s)
	}
	if err := r.Audit.Sync(ctx, s); err != nil {
		// Written again, with the same ids, before the next step.
		st.trace.End()
		return failed(err)
	}
	st.trace.End()
	switch st.step {
	case step.Unchanged:
		stepsTotal.WithLabelValues(journey, "unchanged").Inc()
	case step.Performed, step.Changed:
		if st.forked != "" {
			stepsTotal.WithLabelValues(journey, "changed").Inc()
			r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, flowv1.ReasonForked, "Fork", "%s", st.forked)
			break
		}
		label := "changed"
		if st.step == step.Performed {
			label = "effect"
		}
		stepsTotal.WithLabelValues(journey, label).Inc()
		r.emit(s, old, st.status)
	}
	out, expire := afterWrite(st, r.Advance, now)
	if expire {
		return r.expire(ctx, s, now)
	}
	return out
}

// afterWrite is how a reconcile ends once its step's status is written: the step's own
// ending when it set one (an agent error, a slow retry, a revision that is gone); a
// Session the step finished expires after its TTL (expire); a Running Session in the
// requeue advance mode is requeued at once (in the watch mode, the status just written
// brings the next step); a waiting Session is requeued at its earliest deadline
// (session or idle timeout), so the timeout fires with no edit and no restart (a
// restart recomputes it from the revision, the creation time and the status). A
// blocked Session, or one past its deadline and still not blocked (suspended), waits
// for a change.
func afterWrite(st sessionStep, advance AdvanceMode, now time.Time) (out outcome, expire bool) {
	if st.then != (outcome{}) || st.status == nil {
		return st.then, false
	}
	phase := st.status.Phase
	if st.upgradeWaits && (st.step == step.Performed || st.step == step.Changed) && !phase.IsTerminal() && st.status.Turn == nil {
		// The turn the Journey's upgradePolicy waited for ended: it replays now.
		return outcome{kind: requeue, after: time.Millisecond}, false
	}
	if st.step == step.Performed || st.step == step.Changed {
		switch {
		case phase.IsTerminal():
			return outcome{}, true
		case phase == flowv1.PhaseRunning && advance == AdvanceRequeue:
			return outcome{kind: requeue, after: time.Millisecond}, false
		}
	}
	if st.deadline.IsZero() || phase.IsTerminal() {
		return outcome{}, false
	}
	if _, blocked := engine.Blocked(st.status); blocked {
		return outcome{}, false
	}
	wait := st.deadline.Sub(now)
	if wait < 0 {
		return outcome{}, false
	}
	// Just after the deadline: the step times out strictly after it.
	return outcome{kind: requeue, after: wait + 10*time.Millisecond}, false
}

// pin returns the Journey revision a new Session starts on (its readyRevision, or
// under a rollout its stable or canary revision), or why it cannot start.
func (r *SessionReconciler) pin(ctx context.Context, s *flowv1.Session) (revision, reason, msg string) {
	// A live read, once per Session: the Journey's status may reach the cache after the
	// Session does, and a Session created once the Journey said it serves a revision
	// must start on that one, not on the one before.
	reader := client.Reader(r.Client)
	if r.APIReader != nil {
		reader = r.APIReader
	}
	var j flowv1.Journey
	err := reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.JourneyRef.Name}, &j)
	if apierrors.IsNotFound(err) {
		return "", flowv1.ReasonJourneyNotFound, fmt.Sprintf("Journey %q not found in namespace %q; the Session starts once it exists and is Ready", s.Spec.JourneyRef.Name, s.Namespace)
	}
	if err != nil {
		return "", flowv1.ReasonJourneyNotFound, fmt.Sprintf("Journey %q could not be read: %v", s.Spec.JourneyRef.Name, err)
	}
	// The last valid revision serves even while the Journey's latest edit is invalid;
	// during a rollout, the stable or the canary revision, by a hash of the UID.
	if rev := j.Status.RevisionFor(s.UID); rev != "" {
		return rev, "", ""
	}
	why := "it has not been validated yet"
	if ready := apimeta.FindStatusCondition(j.Status.Conditions, flowv1.ConditionReady); ready != nil && ready.Message != "" {
		why = ready.Message
	}
	return "", flowv1.ReasonJourneyNotReady, fmt.Sprintf("Journey %q is not Ready: %s", j.Name, why)
}

// expire deletes a finished Session once its ttlSecondsAfterFinished (its own, else
// its Journey revision's sessionDefaults) has passed, after writing its archive to the
// audit sink, if any: a failed archive keeps the Session.
func (r *SessionReconciler) expire(ctx context.Context, s *flowv1.Session, now time.Time) outcome {
	ttl := r.ttl(ctx, s)
	if ttl == nil || s.Status.CompletionTime == nil {
		return outcome{}
	}
	deadline := s.Status.CompletionTime.Add(time.Duration(*ttl) * time.Second)
	if wait := deadline.Sub(now); wait > 0 {
		return outcome{kind: requeue, after: wait}
	}
	if s.ForgetRequest() != "" {
		// Being erased: its deletion follows, and nothing it held is kept.
		return outcome{}
	}
	if err := r.Audit.Write(ctx, s, audit.ArchiveOf(s, now)); err != nil {
		return failed(err)
	}
	log.FromContext(ctx).Info("Deleting finished Session after its TTL", "session", klog.KObj(s))
	return failed(client.IgnoreNotFound(r.Delete(ctx, s, client.Preconditions{UID: &s.UID})))
}

// ttl is the ttlSecondsAfterFinished of s: its own, else the sessionDefaults of the
// Journey revision it ran on; nil when neither says.
func (r *SessionReconciler) ttl(ctx context.Context, s *flowv1.Session) *int32 {
	if s.Spec.TTLSecondsAfterFinished != nil || s.Status.JourneyRevision == "" {
		return s.Spec.TTLSecondsAfterFinished
	}
	snap, err := r.snapshots.Get(ctx, r.Client, s.Namespace, s.Status.JourneyRevision)
	if apierrors.IsNotFound(err) {
		snap, err = r.snapshots.Get(ctx, r.APIReader, s.Namespace, s.Status.JourneyRevision)
	}
	if err != nil {
		return nil
	}
	if d := snap.Journey().SessionDefaults; d != nil {
		return d.TTLSecondsAfterFinished
	}
	return nil
}

// emit records an Event for each transition, block and escalation of the step, and
// for the first trim of its transcript, and counts transitions.
func (r *SessionReconciler) emit(s *flowv1.Session, old, status *flowv1.SessionStatus) {
	for _, e := range engine.Events(old, status) {
		r.Recorder.Eventf(s, nil, e.Type, e.Reason, "Step", "%s", e.Message)
	}
	r.emitTrimmed(s, old, status)
	if n := len(status.History); n > 0 && status.Transitions > old.Transitions {
		added := int(status.Transitions - old.Transitions)
		for i := max(0, n-added); i < n; i++ {
			transitionsTotal.WithLabelValues(s.Spec.JourneyRef.Name, string(status.History[i].Action)).Inc()
		}
	}
}

// performer performs the effects of a Session of journey in namespace: agents built
// by r.Agents with the Journey's current connection settings, tools called by r.Tools,
// each call measured (and traced, for tools).
func (r *SessionReconciler) performer(namespace, journey string, progress *progressWriter) step.Performer {
	return &step.Agents{
		Progress:  progress.report,
		Namespace: namespace, Factory: r.Agents, Secrets: r.APIReader, Tools: r.Tools,
		Connect: func(ctx context.Context, spec flowv1.AgentSpec) flowv1.AgentSpec {
			return r.connected(ctx, namespace, journey, spec)
		},
		Around: measure,
	}
}

// measure makes the call of eff and records its duration and tokens; a tool call is
// also a span of the step's trace.
func measure(ctx context.Context, eff *engine.Effect, call func(context.Context) (any, error)) (any, error) {
	if eff.Kind == flowv1.EffectCallTool {
		return traceTool(ctx, eff, call)
	}
	provider, role := "", string(eff.Kind)
	if len(eff.Agents) > 0 {
		provider = string(eff.Agents[0].Provider)
	}
	start := time.Now()
	resp, err := call(ctx)
	result := "ok"
	if err != nil {
		result = string(agent.ClassOf(err))
	}
	agentDuration.WithLabelValues(provider, role, result).Observe(time.Since(start).Seconds())
	if u := step.UsageOf(resp); u != nil {
		agentTokens.WithLabelValues(provider, "prompt").Add(float64(u.PromptTokens))
		agentTokens.WithLabelValues(provider, "completion").Add(float64(u.CompletionTokens))
	}
	return resp, err
}

// effectKind is the kind of eff, "" for none.
func effectKind(eff *engine.Effect) string {
	if eff == nil {
		return ""
	}
	return string(eff.Kind)
}

// sessionLedger is Session s's port to the ledger of its Budgets.
type sessionLedger struct {
	ledger *budget.Ledger
	s      *flowv1.Session
}

func (l sessionLedger) Reserve(key string, need engine.Spend) ([]engine.BudgetRoom, bool) {
	return l.ledger.Reserve(l.s.UID, key, need)
}

func (l sessionLedger) Wait(need engine.Spend) { l.ledger.Wait(l.s, need) }
