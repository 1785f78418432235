package engine

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// Interventions: a person's acts on a Session (spec.interventions), each applied
// exactly once, in order, one a step, between turns. status.processedInterventions
// counts them, applied or refused, so a repeated step never applies one twice.

// interventionsPending reports whether spec.interventions has entries not processed yet.
func (r *run) interventionsPending() bool {
	return r.st.ProcessedInterventions < r.spec.InterventionCount()
}

// answerPending reports whether the next intervention is an Answer, which applies
// while a turn is in progress (it answers what a call of the turn waits for).
func (r *run) answerPending() bool {
	iv, ok := r.spec.InterventionAt(max(r.st.ProcessedInterventions, r.spec.InterventionsDropped))
	return ok && iv.Action == flowv1.InterventionAnswer
}

// intervene processes the next intervention: it applies, or it is refused with why
// (still counted as processed). Either way status.interventions records it whole, with
// the step and, when refused, why, so that a replay gives it again at that step.
func (r *run) intervene() {
	st := r.st
	st.ProcessedInterventions = max(st.ProcessedInterventions, r.spec.InterventionsDropped)
	iv, ok := r.spec.InterventionAt(st.ProcessedInterventions)
	if !ok {
		// Only an update that bypassed the Session's validation drops an intervention
		// that was not processed; it can no longer be read.
		st.ProcessedInterventions = r.spec.InterventionCount()
		return
	}
	st.ProcessedInterventions++
	rec := flowv1.InterventionRecord{Step: r.step, Result: flowv1.InterventionApplied, Intervention: *iv.DeepCopy()}
	if why := r.apply(iv); why != "" {
		rec.Result, rec.Message = flowv1.InterventionRefused, truncate.Bytes(why, flowv1.MaxRefusalBytes, "")
	}
	st.Interventions = trimInterventions(append(st.Interventions, rec))
}

// apply applies iv, or says why it cannot: then nothing of it applied.
func (r *run) apply(iv *flowv1.Intervention) string {
	st := r.st
	if st.Phase == flowv1.PhaseCompleted || st.Phase == flowv1.PhaseCancelled {
		return fmt.Sprintf("the session is %s, which is final", st.Phase)
	}
	switch iv.Action {
	case flowv1.InterventionResume:
		return r.resumeBlocked(iv)
	case flowv1.InterventionRetry:
		return r.retryTurn(iv)
	case flowv1.InterventionGoto:
		return r.gotoPathway(iv)
	case flowv1.InterventionRewind:
		return r.rewind(iv)
	case flowv1.InterventionUpgrade:
		return r.upgrade(iv)
	case flowv1.InterventionAnswer:
		return r.answerCall(iv)
	}
	return fmt.Sprintf("action %q is not one this operator knows", iv.Action)
}

// blockedBy is what stops the Session that Resume lifts: the Stalled reason of a cap
// or loop prevention, or Failed.
func (r *run) blockedBy() (string, bool) {
	if r.st.Phase == flowv1.PhaseFailed {
		return flowv1.ReasonFailed, true
	}
	return Blocked(r.st)
}

// cannotLift says why lifting block would not let the Session go on: a count or
// budget cap still reached under the Session's limits (with what the intervention
// raised). Loops, the retry limit, timeouts and failures can always be lifted.
func (r *run) cannotLift(block string) string {
	st, l := r.st, r.limits()
	switch block {
	case flowv1.ReasonTurnLimit:
		if int(st.Turns) >= l.turns {
			return fmt.Sprintf("maxTurns %d is used up (%d turns): resume with a higher limits.maxTurns", l.turns, st.Turns)
		}
	case flowv1.ReasonIterationLimit:
		if int(st.Iteration) >= l.iterations {
			return fmt.Sprintf("maxIterations %d is reached (iteration %d): resume with a higher limits.maxIterations", l.iterations, st.Iteration)
		}
	case flowv1.ReasonTransitionLimit:
		if int(st.Transitions) >= l.transitions {
			return fmt.Sprintf("maxTransitions %d is used up (%d transitions): resume with a higher limits.maxTransitions", l.transitions, st.Transitions)
		}
	case flowv1.ReasonBudgetExceeded:
		if why, over := r.overBudget(); over {
			return why + ": resume with a higher limits.budget"
		}
	case flowv1.ReasonOutcomeUnknown:
		return "the outcome of a tool call is unknown: say what became of it with kubectl journey answer" + r.waitingCalls()
	}
	return ""
}

// lift removes block. The loop window restarts with the history entry the
// intervention adds; the retry limit resets the blocked pathway's retry count; a
// session timeout counts again from now (an idle timeout does on its own: the step is
// activity); a failed Session waits again. A turn a cap stopped goes on when keepTurn
// (Resume) and is dropped otherwise (the person chose what happens next). On Resume,
// a pathway that runs on entry and whose move was refused runs again, so that its
// decision is taken again (now that the window restarted or the cap was raised);
// other pathways decide again on their next message or outcome.
func (r *run) lift(block string, keepTurn bool) {
	st := r.st
	if n := len(st.History); keepTurn && st.Turn == nil && n > 0 && st.History[n-1].Action == flowv1.ActionBlock && st.History[n-1].To != "" {
		if p := r.current(); p != nil && p.RunOn == flowv1.RunOnEntry && !p.IsExternal() {
			st.PathwayTurns = 0
		}
	}
	switch block {
	case flowv1.ReasonFailed:
		st.Phase = flowv1.PhaseRunning
		st.CompletionTime = nil
		apimeta.RemoveStatusCondition(&st.Conditions, flowv1.ConditionCompleted)
	case flowv1.ReasonRetryLimit:
		p := st.CurrentPathway
		if n := len(st.History); n > 0 && st.History[n-1].Action == flowv1.ActionBlock && st.History[n-1].To != "" {
			p = st.History[n-1].To
		}
		delete(st.Retries, p)
		if len(st.Retries) == 0 {
			st.Retries = nil
		}
	case flowv1.ReasonSessionTimeout:
		st.SessionTimeoutFrom = &r.now
	}
	c := apimeta.FindStatusCondition(st.Conditions, flowv1.ConditionStalled)
	apimeta.RemoveStatusCondition(&st.Conditions, flowv1.ConditionStalled)
	if st.Turn == nil {
		return
	}
	if !keepTurn {
		st.Turn, st.PendingEffect = nil, nil
		return
	}
	if lt := st.LastTurn; lt != nil && c != nil {
		lt.FinishReason = ""
		lt.Failures = slices.DeleteFunc(lt.Failures, func(f flowv1.Failure) bool {
			return f.Source == flowv1.FailurePolicy && f.Component == "engine" && strings.HasPrefix(c.Message, capitalize(f.Message))
		})
	}
}

// unblock lifts whatever blocks the Session before a Retry, Goto or Rewind, which
// are a person's decision of what happens next; it fails, changing nothing, when
// Resume would be refused.
func (r *run) unblock() string {
	block, blocked := r.blockedBy()
	if !blocked {
		return ""
	}
	if why := r.cannotLift(block); why != "" {
		return fmt.Sprintf("the session is blocked (%s) and %s", block, why)
	}
	r.lift(block, false)
	return ""
}

// resumeBlocked lifts what blocks the Session, first raising its caps by iv.limits.
func (r *run) resumeBlocked(iv *flowv1.Intervention) string {
	st := r.st
	block, blocked := r.blockedBy()
	if !blocked {
		return fmt.Sprintf("nothing blocks the session (phase %s): Resume lifts a cap, loop prevention, the retry limit, a timeout or a failure", st.Phase)
	}
	prev := st.InterventionLimits
	st.InterventionLimits = mergeLimits(prev, iv.Limits)
	if why := r.cannotLift(block); why != "" {
		st.InterventionLimits = prev
		return why
	}
	r.lift(block, true)
	r.recordIntervention(iv, st.CurrentPathway, "", "lifted "+block)
	return ""
}

// retryTurn runs the current pathway's last turn again, at once, with iv.feedback for
// its agents: the retry-with-feedback of a decision, decided by a person (not counted
// against the retry limit).
func (r *run) retryTurn(iv *flowv1.Intervention) string {
	st := r.st
	cur := st.CurrentPathway
	switch p := r.current(); {
	case st.Turns == 0 || st.LastTurn == nil:
		return "no turn has run yet: there is nothing to retry"
	case p == nil:
		return fmt.Sprintf("pathway %q is not in journey revision %s", cur, r.snap.revision)
	case p.IsExternal():
		return fmt.Sprintf("pathway %s is External: its executor runs it, and a new outcome in spec.outcomes runs it again", cur)
	}
	if why := r.unblock(); why != "" {
		return why
	}
	feedback := cmp.Or(iv.Feedback, fmt.Sprintf("%s asked for this turn to be run again", who(iv.By)))
	st.LastDecision = &flowv1.DecisionRecord{ID: decisionID(r.step), From: cur, To: cur, Action: flowv1.ActionRetry,
		Source: flowv1.SourceHuman, Reasoning: truncate.Bytes(feedback, 1024, ""), State: flowv1.DecisionRetriedWithFeedback}
	st.PathwayTurns = 0
	r.leaveApproval()
	r.recordIntervention(iv, cur, flowv1.ActionRetry, "ran "+cur+" again")
	return ""
}

// gotoPathway moves the Session to iv.pathway, as a transition would: a detour
// pushes the pathway it leaves, a pathway on the stack pops back to it, and the
// pathway then runs like one entered (at once when it runs on entry, else with the
// next message). Caps and loop prevention do not apply to a person's move.
func (r *run) gotoPathway(iv *flowv1.Intervention) string {
	st := r.st
	to, from := string(iv.Pathway), st.CurrentPathway
	target, ok := r.snap.pathways[to]
	if !ok {
		return fmt.Sprintf("pathway %q is not in journey revision %s", to, r.snap.revision)
	}
	stack := slices.Clone(st.PathwayStack)
	if i := slices.Index(stack, to); i >= 0 {
		stack = stack[:i]
	} else if to != from && target.IsDetour() {
		if len(stack) >= r.snap.lim.depth {
			return fmt.Sprintf("the pathway stack is full (maxPathwayDepth %d): %s is a detour", r.snap.lim.depth, to)
		}
		stack = append(stack, from)
	}
	if why := r.unblock(); why != "" {
		return why
	}
	st.CurrentPathway, st.PathwayStack, st.PathwayTurns = to, nil, 0
	if len(stack) > 0 {
		st.PathwayStack = stack
	}
	reason := interventionReason(iv, "moved to "+to)
	st.LastDecision = &flowv1.DecisionRecord{ID: decisionID(r.step), From: from, To: to, Action: flowv1.ActionAdvance,
		Source: flowv1.SourceHuman, Confidence: "1", Reasoning: reason, State: flowv1.DecisionApplied}
	r.leaveApproval()
	r.recordIntervention(iv, from, flowv1.ActionAdvance, "moved to "+to)
	return ""
}

// rewind restores the pathway, pathway stack, iteration and context the Session had
// after step iv.step, from status.history and the kept context versions. The
// transcript and the journal keep what happened since, marked rewound; pathway
// agents no longer see the rewound exchanges. The Session then waits for the next
// message in the restored pathway.
func (r *run) rewind(iv *flowv1.Intervention) string {
	st := r.st
	n := int64(*iv.Step)
	if n >= st.Step {
		return fmt.Sprintf("step %d is not before the session's current step %d", n, st.Step)
	}
	pos, why := r.positionAfter(n)
	if why != "" {
		return why
	}
	if _, ok := r.snap.pathways[pos.pathway]; !ok {
		return fmt.Sprintf("pathway %q of step %d is not in journey revision %s", pos.pathway, n, r.snap.revision)
	}
	version := st.ContextVersion
	for _, v := range st.ContextHistory {
		if v.Step > n {
			version = v.Version - 1
			break
		}
	}
	ctx, err := ContextAt(st, version)
	if err != nil {
		return fmt.Sprintf("the context after step %d is no longer kept: %v", n, err)
	}
	if why := r.unblock(); why != "" {
		return why
	}
	keys := slices.Sorted(maps.Keys(r.context()))
	for k := range ctx {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	_ = r.commitContext(ctx, keys, pos.pathway) // an earlier context, so within its cap
	from := st.CurrentPathway
	st.CurrentPathway, st.PathwayStack, st.Iteration = pos.pathway, pos.stack, pos.iteration
	st.PathwayTurns, st.Retries, st.Turn, st.PendingEffect = 1, nil, nil, nil
	for i := range st.Transcript {
		if st.Transcript[i].Step > n {
			st.Transcript[i].Rewound = true
		}
	}
	for i := range st.Journal {
		if st.Journal[i].Step > n {
			st.Journal[i].Rewound = true
		}
	}
	r.leaveApproval()
	r.recordIntervention(iv, from, "", fmt.Sprintf("rewound to step %d", n))
	return ""
}

// position is where a Session is: its pathway, pathway stack and iteration.
type position struct {
	pathway   string
	stack     []string
	iteration int32
}

// positionAfter is where the Session was after step n: where the last move at or
// before it left it, or where it started when no move came before and history holds
// every move.
func (r *run) positionAfter(n int64) (position, string) {
	e, ok, kept := r.st.MoveAtOrBefore(n)
	switch {
	case ok:
		return position{pathway: cmp.Or(e.To, e.From), stack: slices.Clone(e.PathwayStack), iteration: e.Iteration}, ""
	case !kept && len(r.st.History) == 0:
		return position{}, fmt.Sprintf("step %d is no longer kept in status.history, which keeps no entries", n)
	case !kept:
		return position{}, fmt.Sprintf("step %d is no longer kept in status.history (the oldest entry kept is of step %d)", n, r.st.History[0].Step)
	}
	return position{pathway: string(r.snap.journey.EntryPathway), iteration: 1}, ""
}

// leaveApproval ends a wait for a person: the intervention decided instead.
func (r *run) leaveApproval() {
	if r.awaiting() {
		r.st.Phase = flowv1.PhaseRunning
	}
}

// recordIntervention records an applied intervention in history: source Human, who,
// what it did and why. Its Event is Intervened.
func (r *run) recordIntervention(iv *flowv1.Intervention, from string, action flowv1.Action, what string) {
	st := r.st
	if iv.Action == flowv1.InterventionResume || iv.Action == flowv1.InterventionRewind || iv.Action == flowv1.InterventionUpgrade {
		action = ""
	}
	r.appendHistory(flowv1.HistoryEntry{Time: r.now, Step: r.step, From: from, To: st.CurrentPathway, Action: action,
		Source: flowv1.SourceHuman, Transition: iv.ID, Iteration: st.Iteration, Reason: interventionReason(iv, what),
		Intervention: iv.Action, By: iv.By})
}

// unblockHint ends the message of a condition that stops the Session (a block, a
// failure) with the command that gets it going again, so that kubectl describe alone
// tells a person what to run.
func (r *run) unblockHint(block string) string {
	name := cmp.Or(r.in.SessionName, "SESSION")
	switch block {
	case flowv1.ReasonLoopDetected:
		return fmt.Sprintf("; to go on, run kubectl journey resume %s (the loop window restarts) or kubectl journey goto %s with the pathway to go to", name, name)
	case flowv1.ReasonRetryLimit:
		return fmt.Sprintf("; kubectl journey retry %s runs the pathway once more, kubectl journey resume %s resets its retry count", name, name)
	case flowv1.ReasonTurnLimit, flowv1.ReasonIterationLimit, flowv1.ReasonTransitionLimit, flowv1.ReasonBudgetExceeded:
		return fmt.Sprintf("; raise the cap to go on: kubectl journey limits %s, or kubectl journey resume %s with higher limits", name, name)
	case flowv1.ReasonSessionTimeout, flowv1.ReasonIdleTimeout:
		return fmt.Sprintf("; kubectl journey resume %s restarts the timeout from now", name)
	case flowv1.ReasonFailed:
		return fmt.Sprintf("; kubectl journey resume %s lets it wait for input again, kubectl journey rewind %s restores an earlier step, kubectl journey cancel %s ends it", name, name, name)
	}
	return ""
}

func interventionReason(iv *flowv1.Intervention, what string) string {
	if iv.Reason != "" {
		what += ": " + iv.Reason
	}
	return truncate.Bytes(what, 1024, "")
}

func who(by string) string { return cmp.Or(by, "an unnamed person") }

// mergeLimits is a with the caps b sets replacing a's.
func mergeLimits(a, b *flowv1.SessionLimits) *flowv1.SessionLimits {
	if b == nil {
		return a
	}
	out := &flowv1.SessionLimits{}
	if a != nil {
		out = a.DeepCopy()
	}
	out.MaxTurns = cmp.Or(b.MaxTurns, out.MaxTurns)
	out.MaxIterations = cmp.Or(b.MaxIterations, out.MaxIterations)
	out.MaxTransitions = cmp.Or(b.MaxTransitions, out.MaxTransitions)
	if bb := b.Budget; bb != nil {
		if out.Budget == nil {
			out.Budget = &flowv1.SessionBudget{}
		}
		out.Budget.MaxTokens = cmp.Or(bb.MaxTokens, out.Budget.MaxTokens)
		out.Budget.MaxCostUSD = cmp.Or(bb.MaxCostUSD, out.Budget.MaxCostUSD)
		out.Budget.MaxToolCalls = cmp.Or(bb.MaxToolCalls, out.Budget.MaxToolCalls)
	}
	return out
}

// interventionEvents are the Events of the interventions processed between old and
// cur: Intervened for each applied one (from history), InterventionRefused (Warning)
// for each refused one (from status.interventions).
func interventionEvents(old, cur *flowv1.SessionStatus) []Event {
	if cur.Step <= old.Step {
		return nil
	}
	var out []Event
	for _, h := range cur.History {
		if h.Step > old.Step && h.Intervention != "" {
			out = append(out, Event{EventNormal, flowv1.ReasonIntervened, fmt.Sprintf("%s by %s: %s", h.Intervention, who(h.By), h.Reason)})
		}
	}
	for _, rec := range cur.Interventions {
		if rec.Step > old.Step && rec.Result == flowv1.InterventionRefused {
			out = append(out, Event{EventWarning, flowv1.ReasonInterventionRefused, rec.Refusal()})
		}
	}
	return out
}
