// Package rollout is the canary state machine of a Journey with spec.rollout: pure
// functions over the Journey's status, the Session counts of its revisions and the
// clock, which the Journey controller calls once per reconcile and whose result it
// writes. One transition per call: a canary starts, takes its next step, is promoted
// or is aborted.
package rollout

import (
	"fmt"
	"math/big"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/expr"
)

// Input is what a rollout step decides on.
type Input struct {
	// Spec is the Journey's spec.rollout (nil: no rollout).
	Spec *flowv1.Rollout
	// Generation is the Journey's metadata.generation, for the conditions.
	Generation int64
	// Counts are the counted Sessions of the stable and canary revisions.
	Counts flowv1.RolloutCounts
	// Now is the controller's clock.
	Now time.Time
	// Promote and Abort are requests (kubectl journey rollout promote, abort) naming
	// a canary revision; a request about another revision does nothing.
	Promote, Abort string
	// UpgradePolicy is the Journey's spec.upgradePolicy: what becomes of an aborted
	// canary's running Sessions.
	UpgradePolicy flowv1.UpgradePolicy
}

// Event is a transition to report as a Kubernetes Event.
type Event struct {
	Warning         bool
	Reason, Message string
}

// Result is what a step did.
type Result struct {
	// Events are the transitions taken (at most one).
	Events []Event
	// RequeueAfter is when the step should be looked at again (0: only on a change).
	RequeueAfter time.Duration
}

// Step moves the rollout of the Journey whose status is st (readyRevision already
// updated by the reconcile) at most one transition, in place.
func Step(st *flowv1.JourneyStatus, in Input) Result {
	if in.Spec == nil {
		if st.StableRevision != "" || st.CanaryRevision != "" || st.Rollout != nil {
			st.StableRevision, st.CanaryRevision, st.Rollout = "", "", nil
			meta.RemoveStatusCondition(&st.Conditions, flowv1.ConditionCanary)
		}
		return Result{}
	}
	ready := st.ReadyRevision
	switch {
	case ready == "":
		return Result{}
	case st.StableRevision == "":
		// The first valid revision, or a rollout just configured: what serves is stable.
		st.StableRevision = ready
		return Result{}
	case st.CanaryRevision == "" && ready != st.StableRevision:
		if r := st.Rollout; r != nil && r.Revision == ready && r.Phase == flowv1.RolloutAborted {
			if in.Promote == ready {
				return promote(st, in, "promoted by kubectl journey rollout promote after it was aborted")
			}
			return Result{} // an aborted canary stays aborted until a new revision
		}
		return start(st, in, "")
	case st.CanaryRevision == "":
		return Result{}
	case st.CanaryRevision != ready:
		// A newer valid revision replaces the canary, which starts over.
		return start(st, in, fmt.Sprintf(" (replacing canary %s)", st.CanaryRevision))
	}
	return progress(st, in)
}

// start makes readyRevision the canary at its first step.
func start(st *flowv1.JourneyStatus, in Input, note string) Result {
	now := metav1.NewTime(in.Now)
	first := in.Spec.Canary.Steps[0]
	st.CanaryRevision = st.ReadyRevision
	st.Rollout = &flowv1.RolloutStatus{
		Revision: st.ReadyRevision, StableRevision: st.StableRevision, Phase: flowv1.RolloutProgressing, Step: 0, Weight: first.Weight,
		StartTime: &now, StepStartTime: &now,
	}
	msg := fmt.Sprintf("Canary %s started%s: %d%% of new Sessions start on it, the others on %s", st.CanaryRevision, note, first.Weight, st.StableRevision)
	st.Rollout.Message = msg
	setCondition(st, in, metav1.ConditionTrue, flowv1.ReasonCanaryProgressing, msg)
	ev := []Event{{Reason: flowv1.ReasonCanaryStarted, Message: msg}}
	if first.Pause == nil {
		return holdStep(st, in, len(in.Spec.Canary.Steps), ev)
	}
	return Result{Events: ev, RequeueAfter: pauseOf(first)}
}

// progress decides a running canary: a request, the failure condition, then the
// current step's pause and, after the last step, the promotion.
func progress(st *flowv1.JourneyStatus, in Input) Result {
	r := st.Rollout
	if r == nil || r.Revision != st.CanaryRevision {
		now := metav1.NewTime(in.Now)
		r = &flowv1.RolloutStatus{Revision: st.CanaryRevision, StableRevision: st.StableRevision, Phase: flowv1.RolloutProgressing, StartTime: &now, StepStartTime: &now}
		st.Rollout = r
	}
	r.Counts = in.Counts
	steps := in.Spec.Canary.Steps
	if int(r.Step) >= len(steps) {
		r.Step = int32(len(steps) - 1)
	}
	switch {
	case in.Abort == st.CanaryRevision:
		return abort(st, in, "aborted by kubectl journey rollout abort")
	case in.Promote == st.CanaryRevision:
		return promote(st, in, "promoted by kubectl journey rollout promote")
	}
	a := in.Spec.Analysis
	if a != nil && a.FailureCondition != "" && in.Counts.Canary.Finished >= int64(a.MinSessions) {
		fails, err := holds(a.FailureCondition, in.Counts)
		if fails {
			return abort(st, in, fmt.Sprintf("failureCondition %q holds: %s", a.FailureCondition, describe(in.Counts)))
		}
		if err != nil {
			r.Message = fmt.Sprintf("failureCondition cannot be decided yet: %v", err)
		}
	}
	step := steps[r.Step]
	if step.Pause == nil {
		return holdStep(st, in, len(steps), nil)
	}
	since := in.Now
	if r.StepStartTime != nil {
		since = r.StepStartTime.Time
	}
	if left := since.Add(step.Pause.Duration).Sub(in.Now); left > 0 {
		r.Phase = flowv1.RolloutProgressing
		msg := fmt.Sprintf("step %d of %d: %d%% of new Sessions start on %s for %s", r.Step+1, len(steps), r.Weight, st.CanaryRevision, step.Pause.Duration)
		setCondition(st, in, metav1.ConditionTrue, flowv1.ReasonCanaryProgressing, msg)
		return Result{RequeueAfter: left}
	}
	if int(r.Step)+1 < len(steps) {
		now := metav1.NewTime(in.Now)
		r.Step++
		r.Weight = steps[r.Step].Weight
		r.StepStartTime = &now
		r.Phase = flowv1.RolloutProgressing
		msg := fmt.Sprintf("Canary %s at step %d of %d: %d%% of new Sessions start on it", st.CanaryRevision, r.Step+1, len(steps), r.Weight)
		r.Message = msg
		setCondition(st, in, metav1.ConditionTrue, flowv1.ReasonCanaryProgressing, msg)
		ev := []Event{{Reason: flowv1.ReasonCanaryStep, Message: msg}}
		if steps[r.Step].Pause == nil {
			return holdStep(st, in, len(steps), ev)
		}
		return Result{Events: ev, RequeueAfter: pauseOf(steps[r.Step])}
	}
	// The last step has passed.
	if !in.Spec.AutoPromote {
		return hold(st, in, "the last step has passed: promote the canary with kubectl journey rollout promote")
	}
	if a != nil {
		if in.Counts.Canary.Finished < int64(a.MinSessions) {
			return hold(st, in, fmt.Sprintf("waiting for %d finished canary Sessions before promoting (%d so far)", a.MinSessions, in.Counts.Canary.Finished))
		}
		if a.SuccessCondition != "" {
			ok, err := holds(a.SuccessCondition, in.Counts)
			switch {
			case err != nil:
				return hold(st, in, fmt.Sprintf("successCondition cannot be decided yet: %v", err))
			case !ok:
				return hold(st, in, fmt.Sprintf("successCondition %q does not hold yet: %s", a.SuccessCondition, describe(in.Counts)))
			}
			return promote(st, in, fmt.Sprintf("successCondition %q holds: %s", a.SuccessCondition, describe(in.Counts)))
		}
	}
	return promote(st, in, "its last step passed")
}

// holdStep holds at a step without pause (of n steps), after the events of reaching it.
func holdStep(st *flowv1.JourneyStatus, in Input, n int, events []Event) Result {
	r := st.Rollout
	res := hold(st, in, fmt.Sprintf("step %d of %d (%d%%) holds until kubectl journey rollout promote", r.Step+1, n, r.Weight))
	res.Events = events
	return res
}

// hold keeps the canary where it is, saying what it waits for.
func hold(st *flowv1.JourneyStatus, in Input, why string) Result {
	st.Rollout.Phase = flowv1.RolloutPaused
	st.Rollout.Message = why
	setCondition(st, in, metav1.ConditionTrue, flowv1.ReasonCanaryPaused, fmt.Sprintf("Canary %s paused: %s", st.CanaryRevision, why))
	return Result{}
}

func promote(st *flowv1.JourneyStatus, in Input, why string) Result {
	rev := st.ReadyRevision
	if st.CanaryRevision != "" {
		rev = st.CanaryRevision
	}
	msg := fmt.Sprintf("Canary %s promoted: %s; new Sessions start on it", rev, why)
	st.StableRevision, st.CanaryRevision = rev, ""
	if st.Rollout == nil {
		st.Rollout = &flowv1.RolloutStatus{Revision: rev}
	}
	st.Rollout.Phase, st.Rollout.Weight, st.Rollout.Message = flowv1.RolloutPromoted, 100, msg
	setCondition(st, in, metav1.ConditionFalse, flowv1.ReasonPromoted, msg)
	return Result{Events: []Event{{Reason: flowv1.ReasonPromoted, Message: msg}}}
}

func abort(st *flowv1.JourneyStatus, in Input, why string) Result {
	running := "its running Sessions stay on it"
	if in.UpgradePolicy == flowv1.UpgradeReplayCompatible {
		running = "its running Sessions move back to " + st.StableRevision + " when their journal replays the same there (upgradePolicy ReplayCompatible), the others stay on it"
	}
	msg := fmt.Sprintf("Canary %s aborted: %s; new Sessions start on %s, %s", st.CanaryRevision, why, st.StableRevision, running)
	st.CanaryRevision = ""
	st.Rollout.Phase, st.Rollout.Weight, st.Rollout.Message = flowv1.RolloutAborted, 0, msg
	setCondition(st, in, metav1.ConditionFalse, flowv1.ReasonAborted, msg)
	return Result{Events: []Event{{Warning: true, Reason: flowv1.ReasonAborted, Message: msg}}}
}

func setCondition(st *flowv1.JourneyStatus, in Input, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: flowv1.ConditionCanary, Status: status, Reason: reason, Message: msg, ObservedGeneration: in.Generation,
	})
}

func pauseOf(s flowv1.CanaryStep) time.Duration {
	if s.Pause == nil {
		return 0
	}
	return s.Pause.Duration
}

// holds evaluates a condition on the counts.
func holds(cond flowv1.Expression, c flowv1.RolloutCounts) (bool, error) {
	return expr.RolloutBool(string(cond), Vars(c.Canary), Vars(c.Stable))
}

// Vars are a revision's counts as a condition reads them.
func Vars(c flowv1.RevisionCounts) map[string]float64 {
	cost, _ := new(big.Float).SetString(orZero(c.CostUSD))
	usd := 0.0
	if cost != nil {
		usd, _ = cost.Float64()
	}
	return map[string]float64{
		"started": float64(c.Started), "completed": float64(c.Completed), "failed": float64(c.Failed),
		"escalated": float64(c.Escalated), "finished": float64(c.Finished), "turns": float64(c.Turns), "costUSD": usd,
	}
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// describe is "canary {started 4, finished 3, failed 3, ...}, stable {...}".
func describe(c flowv1.RolloutCounts) string {
	one := func(r flowv1.RevisionCounts) string {
		return fmt.Sprintf("{started %d, finished %d, completed %d, failed %d, escalated %d, turns %d, costUSD %s}",
			r.Started, r.Finished, r.Completed, r.Failed, r.Escalated, r.Turns, orZero(r.CostUSD))
	}
	return "canary " + one(c.Canary) + ", stable " + one(c.Stable)
}
