package engine

import (
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// A turn runs through stages, each in its own file: Route (route.go: global
// transitions, message turns only), Run (pathway.go: the pathway's agents) and Decide
// (decide.go: outcome transitions and decisions). status.turn records the stage while
// the turn waits on a remote agent.

// stageResult is what a stage of a turn did: the turn goes on with the next stage, or
// waits on a remote agent call, or is over. The zero value is "over": the stage ended
// the turn, or the Session stopped (it failed, was blocked by a cap, or completed) and
// dropped it.
type stageResult struct {
	// next is the stage the turn goes on with, in this step.
	next flowv1.TurnStage
	// effect is the remote agent call the turn waits on; the step returns it.
	effect *Effect
	// pause ends the step with the turn in progress and no effect: what the step
	// recorded (a tool call's write-ahead record) must be written before the turn goes on.
	pause bool
}

// turnOver is the result of a stage after which the turn is over.
var turnOver = stageResult{}

// goTo is the result of a stage after which the turn goes on with stage next.
func goTo(next flowv1.TurnStage) stageResult { return stageResult{next: next} }

// waitOn is the result of a stage that waits on a remote agent call.
func waitOn(eff *Effect) stageResult { return stageResult{effect: eff} }

// startTurn starts the next turn, if any: an entry run, an External outcome or a message.
func (r *run) startTurn() *Effect {
	st := r.st
	if r.current() == nil {
		r.fail(flowv1.ReasonInvalidSpec, fmt.Sprintf("pathway %q is not in journey revision %s", st.CurrentPathway, r.snap.revision), nil)
		return nil
	}
	trigger, outcome, ok := r.nextTrigger()
	if !ok {
		return nil
	}
	if turns := r.limits().turns; int(st.Turns) >= turns {
		r.block(flowv1.ReasonTurnLimit, flowv1.FinishTurnLimit, nil, fmt.Sprintf("the session reached maxTurns %d", turns))
		return nil
	}
	if why, over := r.overBudget(); over {
		r.block(flowv1.ReasonBudgetExceeded, flowv1.FinishBudgetExceeded, nil, why)
		return nil
	}
	st.Turns++
	prev := st.LastTurn
	if trigger == flowv1.TurnEntry && r.continuesTurn(prev) {
		// An entry run the message's turn led into: the turn goes on in its record.
		st.LastTurn = &flowv1.TurnOutcome{Trigger: prev.Trigger, MessageID: prev.MessageID, Pathway: st.CurrentPathway,
			Replies: prev.Replies, Failures: prev.Failures, Usage: prev.Usage}
	} else {
		st.LastTurn = &flowv1.TurnOutcome{Trigger: trigger, Pathway: st.CurrentPathway}
	}
	st.Turn = &flowv1.TurnProgress{Trigger: trigger, Pathway: st.CurrentPathway}
	r.answered = false
	switch trigger {
	case flowv1.TurnExternalOutcome:
		st.ProcessedOutcomes = int32(outcome + 1)
		st.Turn.Stage = flowv1.StageRun
		return r.drive(r.applyOutcome(outcome))
	case flowv1.TurnMessage:
		msg, _ := r.spec.MessageAt(st.ProcessedMessages) // nextTrigger made sure it is there
		st.ProcessedMessages++
		st.LastTurn.MessageID = msg.ID
		st.Turn.MessageID = msg.ID
		// Conditions see the previous turn's outputs; keep them while routing waits.
		if prev != nil && prev.Outputs != nil {
			st.Turn.Outputs = prev.Outputs.DeepCopy()
		}
		return r.drive(goTo(flowv1.StageRoute))
	}
	return r.drive(goTo(flowv1.StageRun))
}

// nextTrigger finds what starts the next turn: an entry run, else the next External
// outcome for the current pathway and iteration (skipping stale ones: outcome is its
// index), else the next message. ok is false when there is nothing to do.
func (r *run) nextTrigger() (trigger flowv1.TurnTrigger, outcome int, ok bool) {
	st := r.st
	switch {
	case r.entryDue():
		return flowv1.TurnEntry, -1, true
	case r.external() && st.ProcessedOutcomes < r.spec.OutcomeCount():
		// Outcomes for another pathway or iteration are stale: skip them. Outcomes
		// dropped unprocessed (by an update that bypassed validation) are skipped too.
		for i := max(st.ProcessedOutcomes, r.spec.OutcomesDropped); i < r.spec.OutcomeCount(); i++ {
			o, _ := r.spec.OutcomeAt(i)
			if string(o.Pathway) == st.CurrentPathway && o.Iteration == st.Iteration {
				return flowv1.TurnExternalOutcome, int(i), true
			}
			st.ProcessedOutcomes = i + 1
		}
		return "", -1, false
	case st.ProcessedMessages < r.spec.MessageCount():
		// Only an update that bypassed the Session's validation drops a message that was
		// not processed; it can no longer be read, so it is skipped.
		st.ProcessedMessages = max(st.ProcessedMessages, r.spec.MessagesDropped)
		return flowv1.TurnMessage, -1, true
	}
	return "", -1, false
}

// continuesTurn reports whether an entry run now continues prev, the turn of a
// message: prev is over and its last move (history tagged with its message) entered
// the current pathway.
func (r *run) continuesTurn(prev *flowv1.TurnOutcome) bool {
	if prev == nil || prev.MessageID == "" || prev.FinishReason == "" || len(r.st.History) == 0 {
		return false
	}
	h := r.st.History[len(r.st.History)-1]
	return h.MessageID == prev.MessageID && h.To == r.st.CurrentPathway && h.Action != flowv1.ActionBlock
}

// resume continues the turn in progress from its recorded stage.
func (r *run) resume() *Effect {
	return r.drive(goTo(r.st.Turn.Stage))
}

// drive runs the turn in progress through its stages, starting from what the last one
// did, until the turn is over or waits on a remote agent call, which it returns.
func (r *run) drive(res stageResult) *Effect {
	trigger := r.st.Turn.Trigger
	for res.effect == nil && res.next != "" && !res.pause {
		r.st.Turn.Stage = res.next
		res = r.runStage(res.next)
	}
	if res.effect == nil && !res.pause {
		r.endTurn(trigger)
	}
	return res.effect
}

func (r *run) runStage(stage flowv1.TurnStage) stageResult {
	switch stage {
	case flowv1.StageRoute:
		return r.route()
	case flowv1.StageRun:
		return r.runPathway()
	case flowv1.StageDecide:
		return r.decideStage()
	}
	return turnOver
}

// remote returns the journaled answer to req when there is one for exactly this
// request. Otherwise the answer is nil and the stage returns res: it waits on the
// effect that asks for req, or, when the budget is spent or the worst case of the
// call could exceed it, the call is not made: the Session is blocked with the turn
// kept in progress, to go on when spec.limits raises the budget.
func (r *run) remote(kind flowv1.EffectKind, agents []flowv1.AgentSpec, pipeline flowv1.Pipeline, req any) (answer *flowv1.EffectRecord, res stageResult) {
	eff := newEffect(kind, agents, pipeline, req)
	if p := r.pending; p != nil && p.Kind == kind && p.InputHash == eff.InputHash {
		r.pending = nil
		return p, turnOver
	}
	// A journaled answer to another question is stale: it is dropped and asked again.
	r.pending = nil
	if why, over := r.overBudget(); over {
		return nil, r.stallOnBudget(why)
	}
	if why, over := r.unaffordable(eff); over {
		return nil, r.stallOnBudget(why)
	}
	d, b, degrade := r.replayDegraded(kind, eff)
	if !degrade {
		if w, over := r.noRoom(kind, WorstCase(eff)); over {
			if d, b, degrade = r.degrade(eff); !degrade {
				return nil, r.waitForBudget(w)
			}
		}
	}
	if degrade {
		if why, over := r.unaffordable(d); over {
			return nil, r.stallOnBudget(why)
		}
		if w, over := r.noRoom(kind, WorstCase(d)); over {
			return nil, r.waitForBudget(w)
		}
		r.degraded(b, eff, d)
		return nil, waitOn(d)
	}
	if kind == flowv1.EffectRunPathway {
		// The pathway's own agents fit: no longer degraded.
		apimeta.RemoveStatusCondition(&r.st.Conditions, flowv1.ConditionDegraded)
	}
	return nil, waitOn(eff)
}

// endTurn finishes the pathway run in progress, started by trigger: the turn answers
// (see answer) and its exchange joins the transcript. On a turn the Session already
// dropped (failed, blocked, completed) the finish reason is already set.
func (r *run) endTurn(trigger flowv1.TurnTrigger) {
	if lt := r.st.LastTurn; lt != nil && lt.FinishReason == "" {
		lt.FinishReason = flowv1.FinishSuccess
	}
	r.answer()
	r.recordExchange(trigger)
	r.st.Turn = nil
}

// turnFailed records a failed pathway run under the journey's errorRecovery; the
// turn is over.
func (r *run) turnFailed(f flowv1.Failure) {
	if r.recoverable(flowv1.ReasonFailed, f) {
		r.st.LastTurn.FinishReason = flowv1.FinishError
	}
}

func (r *run) addUsage(u flowv1.Usage) {
	if u == (flowv1.Usage{}) {
		return
	}
	r.st.Usage = addUsage(r.st.Usage, u)
	if r.st.LastTurn != nil {
		r.st.LastTurn.Usage = addUsage(r.st.LastTurn.Usage, u)
	}
}

// applyOutcome applies External outcome i of the Session (counted from the first one
// ever sent) as the pathway's result.
func (r *run) applyOutcome(i int) stageResult {
	o, _ := r.spec.OutcomeAt(int32(i))
	outputs, err := decodeJSON(o.Data)
	if err != nil {
		r.turnFailed(flowv1.Failure{Source: flowv1.FailureTool, Component: r.st.CurrentPathway, Kind: flowv1.FailureValidation,
			Message: fmt.Sprintf("outcome %d data: %v", i, err)})
		return turnOver
	}
	return r.applyResult(agent.PathwayResponse{Reply: o.Message, Outputs: outputs, ResultType: o.ResultType, Complete: true}, nil)
}
