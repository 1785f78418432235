package engine

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// Input is everything a step depends on.
type Input struct {
	// Spec is the Session's spec: messages, outcomes, approvals, suspend and cancel.
	Spec *flowv1.SessionSpec
	// Status is the Session's current status. Step never modifies it.
	Status *flowv1.SessionStatus
	// Now is the step's clock.
	Now time.Time
	// SessionName and SessionUID identify the Session (the name is visible to CEL and
	// agents as session.name).
	SessionName, SessionUID string
	// CreationTime starts the session timeout (status.startTime when zero).
	CreationTime time.Time
	// Budgets are the Budgets that select the Session, with the room each has left:
	// a call whose worst case does not fit in one of them is not made.
	Budgets []BudgetRoom
	// Upgrade is the replay of the Session's journal on the revision its next
	// intervention, an Upgrade, names (nil when none was replayed).
	Upgrade *ReplayCheck
	// ReplayDegraded is, in a replay of the Session's journal, the degradation the
	// journal records for the model call this step makes: the call of the pathway
	// is made again with that agent, for that Budget, when the revision allows it
	// (see Snapshot.Degrade), whatever room Budgets have.
	ReplayDegraded *flowv1.Degradation
}

// Step takes one step of a Session: at most one unit of work (one message, External
// outcome, entry run or approval, with its routing, pathway run and decision), applied
// inline as far as builtin agents allow and stopped at the first remote agent call,
// which it returns as the Effect. It is pure: it reads nothing but its arguments and
// never modifies them; the same inputs give the same outputs. When there is nothing to
// do it returns a status deep-equal to in.Status and no effect.
func Step(snap *Snapshot, in Input) (*flowv1.SessionStatus, *Effect) {
	old := in.Status
	if old == nil {
		old = &flowv1.SessionStatus{}
	}
	spec := in.Spec
	if spec == nil {
		spec = &flowv1.SessionSpec{}
	}
	r := &run{
		snap: snap,
		in:   in,
		spec: spec,
		old:  old,
		st:   old.DeepCopy(),
		now:  metav1.NewTime(in.Now),
		step: old.Step + 1,
	}
	terminal := old.Phase.IsTerminal()
	eff := r.do()
	if eff == nil && r.stalledAgain() {
		return old.DeepCopy(), nil // the override did not lift the cap
	}
	if !terminal || !r.st.Phase.IsTerminal() {
		r.settle() // a Failed Session a Resume lifted settles too
	}
	changed := !statusEqual(r.st, old)
	if !changed && eff == nil {
		return r.st, nil // a deep copy, equal to the input
	}
	if changed {
		r.st.Step = old.Step + 1
		r.st.LastActivityTime = &r.now
	}
	if eff != nil && eff.Decision != nil {
		eff.Decision.ID = decisionID(r.st.Step)
	}
	return r.st, eff
}

func decisionID(step int64) string { return fmt.Sprintf("d-%d", step) }

// run is the state of one step.
type run struct {
	snap *Snapshot
	in   Input
	spec *flowv1.SessionSpec
	old  *flowv1.SessionStatus
	st   *flowv1.SessionStatus
	now  metav1.Time
	step int64 // the number this step gets if it changes the status

	pending *flowv1.EffectRecord // the journaled answer, until a stage consumes it
	ctx     map[string]any       // the decoded context, once needed

	suspended bool
	// lifted is the cap this step tried to lift under spec.limits.
	lifted *liftedCap
	// readyReason and readyMessage explain a failure in the Ready condition.
	readyReason, readyMessage string
	// answered says the pathway run ending in this step has answered (answer).
	answered bool
	// budgetWait is the Budget this step's call waits for, nil for none.
	budgetWait *budgetWait
}

func (r *run) do() *Effect {
	st := r.st
	if st.Phase.IsTerminal() {
		if r.interventionsPending() && !r.spec.Cancel {
			r.intervene() // a Failed Session may resume; the others refuse
		}
		return nil
	}
	if r.spec.Cancel {
		r.cancel()
		return nil
	}
	if r.spec.Suspend {
		r.suspended = true
		return nil
	}
	if !st.Phase.HasStarted() {
		if !r.start() {
			return nil
		}
	}
	// Interventions go first, one a step, between turns (or when a cap stopped a turn;
	// an Upgrade at once: the turn goes on on the revision it moves to; an Answer to
	// the tool call the turn waits on).
	if r.interventionsPending() && (st.Turn == nil || r.blocked() || r.upgradeNext() || r.answerPending()) {
		r.intervene()
		return nil
	}
	if r.blocked() && !r.liftCap() {
		return nil
	}
	r.pending, st.PendingEffect = st.PendingEffect, nil
	if r.timedOut() {
		r.block(flowv1.ReasonSessionTimeout, flowv1.FinishDeadline, nil,
			fmt.Sprintf("the session ran longer than its timeout of %s", r.snap.lim.timeout))
		return nil
	}
	if at, ok := idleDeadline(r.snap.lim, r.spec, r.st); ok && r.in.Now.After(at) {
		r.block(flowv1.ReasonIdleTimeout, flowv1.FinishDeadline, nil,
			fmt.Sprintf("the session waited for input longer than its idle timeout of %s", r.snap.lim.idle))
		return nil
	}
	if r.approvalExpired() && st.Turn == nil {
		return nil
	}
	if st.Turn != nil {
		return r.resume()
	}
	if r.awaiting() {
		if r.approvalsPending() {
			r.approval()
		}
		return nil
	}
	if r.approvalsPending() {
		r.approval()
		return nil
	}
	return r.startTurn()
}

// start begins the Session in the entry pathway. It reports whether the Session can go on.
func (r *run) start() bool {
	st := r.st
	st.Phase = flowv1.PhaseRunning
	st.CurrentPathway = string(r.snap.journey.EntryPathway)
	st.Iteration = 1
	st.StartTime = &r.now
	st.JourneyRevision = r.snap.revision
	var raw []byte
	if r.spec.InitialContext != nil {
		raw = r.spec.InitialContext.Raw
	}
	ctx, err := decodeObject(raw)
	if err != nil {
		r.fail(flowv1.ReasonInvalidSpec, fmt.Sprintf("spec.initialContext: %v", err), nil)
		return false
	}
	if n := sizeOf(ctx); n > r.snap.lim.contextBytes {
		r.fail(flowv1.ReasonContextTooLarge, fmt.Sprintf("spec.initialContext is %d bytes, over maxContextBytes %d", n, r.snap.lim.contextBytes), nil)
		return false
	}
	r.ctx = ctx
	st.Context = nil
	if len(ctx) > 0 {
		st.Context = toJSON(ctx)
	}
	return true
}

func (r *run) cancel() {
	st := r.st
	st.Phase = flowv1.PhaseCancelled
	st.CompletionTime = &r.now
	st.PendingEffect = nil
	if st.Turn != nil {
		st.Turn = nil
		if st.LastTurn != nil {
			st.LastTurn.FinishReason = flowv1.FinishCancelled
		}
	}
	r.readyReason, r.readyMessage = flowv1.ReasonCancelled, "The session was cancelled"
}

// blockReasons are the Stalled reasons the engine sets: the Session stays blocked until
// it is cancelled. Other Stalled reasons (set by the controller) do not stop the engine.
var blockReasons = map[string]bool{
	flowv1.ReasonLoopDetected:    true,
	flowv1.ReasonTurnLimit:       true,
	flowv1.ReasonIterationLimit:  true,
	flowv1.ReasonTransitionLimit: true,
	flowv1.ReasonRetryLimit:      true,
	flowv1.ReasonSessionTimeout:  true,
	flowv1.ReasonIdleTimeout:     true,
	flowv1.ReasonBudgetExceeded:  true,
	flowv1.ReasonOutcomeUnknown:  true,
}

// Blocked reports whether the engine has blocked the Session (a cap or loop
// prevention), and why. A blocked Session takes no more steps until an intervention
// lifts the block or it is cancelled.
func Blocked(st *flowv1.SessionStatus) (reason string, blocked bool) {
	for _, c := range st.Conditions {
		if c.Type == flowv1.ConditionStalled && c.Status == metav1.ConditionTrue && blockReasons[c.Reason] {
			return c.Reason, true
		}
	}
	return "", false
}

func (r *run) blocked() bool {
	_, b := Blocked(r.st)
	return b
}

func (r *run) timedOut() bool {
	start := timeoutStart(r.in.CreationTime, r.st)
	if start.IsZero() {
		return false
	}
	return r.in.Now.After(r.snap.Deadline(start))
}

func (r *run) current() *flowv1.PathwaySpec {
	return r.snap.pathways[r.st.CurrentPathway]
}

// entryDue reports whether the current pathway runs on entry and has not run yet.
func (r *run) entryDue() bool {
	p := r.current()
	if p == nil || p.IsExternal() || r.st.PathwayTurns > 0 {
		return false
	}
	// A pathway sent back with feedback runs again at once.
	return p.RunOn == flowv1.RunOnEntry || r.feedback(r.st.CurrentPathway) != ""
}

func (r *run) external() bool {
	return r.current().IsExternal()
}

// hasWork reports whether a step on the current status would act.
func (r *run) hasWork() bool {
	st := r.st
	if st.Turn != nil || st.PendingEffect != nil || r.approvalsPending() || r.interventionsPending() {
		return true
	}
	if r.awaiting() {
		return false
	}
	if r.entryDue() {
		return true
	}
	if r.external() && st.ProcessedOutcomes < r.spec.OutcomeCount() {
		return true
	}
	return st.ProcessedMessages < r.spec.MessageCount()
}

// addFailure records a failure in the turn's outcome.
func (r *run) addFailure(f flowv1.Failure) {
	if r.st.LastTurn == nil {
		r.st.LastTurn = &flowv1.TurnOutcome{Pathway: r.st.CurrentPathway}
	}
	r.st.LastTurn.Failures = append(r.st.LastTurn.Failures, f)
}

// recoverable applies the journey's errorRecovery to a recoverable failure: FailFast
// fails the Session (reason), Graceful records it. It reports whether the Session goes on.
func (r *run) recoverable(reason string, f flowv1.Failure) bool {
	if r.snap.journey.ErrorRecovery == flowv1.ErrorRecoveryFailFast {
		r.fail(reason, f.Message, &f)
		return false
	}
	r.addFailure(f)
	return true
}

// fail ends the Session as Failed.
func (r *run) fail(reason, msg string, f *flowv1.Failure) {
	st := r.st
	if f != nil {
		r.addFailure(*f)
	}
	if st.LastTurn != nil {
		st.LastTurn.FinishReason = flowv1.FinishError
	}
	st.Turn = nil
	st.Phase = flowv1.PhaseFailed
	st.CompletionTime = &r.now
	r.readyReason, r.readyMessage = reason, msg
}

// block stops the Session: Stalled with reason, phase unchanged (Running when it was
// Pending). A proposed move that was refused is recorded in history as a Block.
func (r *run) block(reason string, finish flowv1.FinishReason, proposed *move, msg string) {
	st := r.st
	if st.Turn == nil || st.LastTurn == nil {
		st.LastTurn = &flowv1.TurnOutcome{Pathway: st.CurrentPathway}
		r.answered = false
	}
	st.Turn = nil
	st.LastTurn.FinishReason = finish
	st.LastTurn.Failures = append(st.LastTurn.Failures, flowv1.Failure{Source: flowv1.FailurePolicy, Component: "engine", Kind: flowv1.FailurePolicyKind, Message: msg})
	h := flowv1.HistoryEntry{Time: r.now, Step: r.step, From: st.CurrentPathway, Action: flowv1.ActionBlock, Source: flowv1.SourceCap,
		Iteration: st.Iteration, MessageID: st.LastTurn.MessageID, Reason: reason + ": " + msg}
	if proposed != nil {
		h.To, h.Transition, h.Confidence = proposed.to, proposed.transition, proposed.confidence
	}
	r.appendHistory(h)
	setCondition(st, flowv1.ConditionStalled, metav1.ConditionTrue, reason, capitalize(msg)+r.unblockHint(reason), r.now)
	if !st.Phase.HasStarted() {
		st.Phase = flowv1.PhaseRunning
	}
	r.answer()
}

func (r *run) appendHistory(h flowv1.HistoryEntry) {
	st := r.st
	if h.Action != flowv1.ActionBlock {
		h.PathwayStack = slices.Clone(st.PathwayStack) // where the Session is after it, for Rewind
	}
	st.History = trimHistory(append(st.History, h), r.snap.lim.history)
}

// sessionInfo is what agents and CEL know about the Session, in pathway p.
func (r *run) sessionInfo(p string) agent.SessionInfo {
	return agent.SessionInfo{
		Name:         r.in.SessionName,
		Pathway:      p,
		Iteration:    r.st.Iteration,
		Turns:        r.st.Turns,
		PathwayTurns: r.st.PathwayTurns,
	}
}

// message returns the text of the message with id.
func (r *run) message(id string) (string, bool) {
	for i := range r.spec.Messages {
		if r.spec.Messages[i].ID == id {
			return r.spec.Messages[i].Text, true
		}
	}
	return "", false
}
