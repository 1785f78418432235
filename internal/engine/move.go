package engine

import (
	"fmt"
	"strings"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// move is a transition about to be taken.
type move struct {
	to         string
	action     flowv1.Action
	source     flowv1.DecisionSource
	transition string
	confidence flowv1.Confidence
	agent      string
	reasoning  string
	// failed says the turn's result was a failure: Close then fails the Session.
	failed bool
	// record is the decision record to keep as lastDecision (else one is built).
	record *flowv1.DecisionRecord
}

// moveResult is what became of a move.
type moveResult uint8

const (
	// moved: the Session moved (or, for Close, completed or failed).
	moved moveResult = iota
	// moveRefused: the move was refused and recorded as a recoverable failure (a detour
	// past maxPathwayDepth under Graceful recovery); the turn goes on where it is.
	moveRefused
	// moveStopped: the move was refused and the Session stopped: a cap or loop
	// prevention blocked it, or it failed. The turn is over.
	moveStopped
)

// move takes a transition, or refuses it: caps and loop prevention block the Session,
// a detour past maxPathwayDepth is a recoverable failure.
func (r *run) move(m move) moveResult {
	st := r.st
	from := st.CurrentPathway
	lim := r.limits()
	if m.action == flowv1.ActionClose {
		r.close(m)
		return moved
	}
	if int(st.Transitions) >= lim.transitions {
		r.block(flowv1.ReasonTransitionLimit, flowv1.FinishTransitionLimit, &m, fmt.Sprintf("the session reached maxTransitions %d", lim.transitions))
		return moveStopped
	}
	target, ok := r.snap.pathways[m.to]
	if !ok {
		r.fail(flowv1.ReasonInvalidSpec, fmt.Sprintf("transition %s names pathway %q, which is not in journey revision %s", m.transition, m.to, r.snap.revision), nil)
		return moveStopped
	}
	switch m.action {
	case flowv1.ActionRetry:
		limit := r.snap.retryLimit(target)
		if int(st.Retries[m.to]) >= limit {
			r.block(flowv1.ReasonRetryLimit, flowv1.FinishError, &m, fmt.Sprintf("pathway %s reached its retry limit %d in iteration %d", m.to, limit, st.Iteration))
			return moveStopped
		}
	case flowv1.ActionJumpBack:
		if int(st.Iteration)+1 > lim.iterations {
			r.block(flowv1.ReasonIterationLimit, flowv1.FinishIterationLimit, &m, fmt.Sprintf("the session reached maxIterations %d", lim.iterations))
			return moveStopped
		}
	}
	// A JumpBack starts a new cycle on purpose; maxIterations caps those,
	// so loop prevention looks only within the current iteration.
	if m.to != from && m.action != flowv1.ActionRetry && m.action != flowv1.ActionJumpBack {
		if cycle, ok := loop(st.History, from, m.to, lim.window, lim.repeats); ok {
			r.block(flowv1.ReasonLoopDetected, flowv1.FinishLoopDetected, &m,
				fmt.Sprintf("oscillating cycle detected: %s", strings.Join(cycle, "→")))
			return moveStopped
		}
	}
	pop := m.source == flowv1.SourceReturn && len(st.PathwayStack) > 0 && st.PathwayStack[len(st.PathwayStack)-1] == m.to
	push := !pop && m.to != from && target.IsDetour()
	if push && len(st.PathwayStack) >= lim.depth {
		f := flowv1.Failure{Source: flowv1.FailurePolicy, Component: m.transition, Kind: flowv1.FailurePolicyKind,
			Message: fmt.Sprintf("detour to %s refused: the pathway stack is full (maxPathwayDepth %d)", m.to, lim.depth)}
		if r.recoverable(flowv1.ReasonStackOverflow, f) {
			return moveRefused
		}
		return moveStopped
	}
	if pop {
		if p := r.snap.pathways[from]; p != nil && p.ReturnBehavior != nil && p.ReturnBehavior.PreserveContext != nil && !*p.ReturnBehavior.PreserveContext {
			r.dropDetourContext(from)
		}
		st.PathwayStack = st.PathwayStack[:len(st.PathwayStack)-1]
		if len(st.PathwayStack) == 0 {
			st.PathwayStack = nil
		}
	}
	if push {
		st.PathwayStack = append(st.PathwayStack, from)
	}

	st.CurrentPathway = m.to
	switch m.action {
	case flowv1.ActionJumpBack:
		st.Iteration++
		st.Retries = nil
	case flowv1.ActionRetry:
		if st.Retries == nil {
			st.Retries = map[string]int32{}
		}
		st.Retries[m.to]++
	}
	if m.to != from || m.action == flowv1.ActionRetry || m.action == flowv1.ActionJumpBack {
		st.PathwayTurns = 0
	}
	st.Transitions++
	r.record(from, m)
	return moved
}

// close completes the journey; after a failure result it fails it.
func (r *run) close(m move) {
	st := r.st
	from := st.CurrentPathway
	st.Transitions++
	r.record(from, m)
	st.Turn = nil
	st.CompletionTime = &r.now
	if m.failed {
		st.Phase = flowv1.PhaseFailed
		if st.LastTurn != nil {
			st.LastTurn.FinishReason = flowv1.FinishError
		}
		r.readyReason, r.readyMessage = flowv1.ReasonFailed, fmt.Sprintf("Pathway %s failed and its %s transition closed the journey", from, m.transition)
		return
	}
	st.Phase = flowv1.PhaseCompleted
	if st.LastTurn != nil && st.LastTurn.FinishReason == "" {
		st.LastTurn.FinishReason = flowv1.FinishSuccess
	}
}

// record appends the move to history and, unless it is an automatic move (next, return),
// makes it the last decision.
func (r *run) record(from string, m move) {
	st := r.st
	msgID := "" // the message whose turn (entry runs it led into included) moved
	if st.Turn != nil && st.LastTurn != nil {
		msgID = st.LastTurn.MessageID
	}
	r.appendHistory(flowv1.HistoryEntry{
		Time: r.now, Step: r.step, From: from, To: m.to, Action: m.action, Source: m.source, Transition: m.transition,
		Confidence: m.confidence, Iteration: st.Iteration, MessageID: msgID, Reason: truncate.Bytes(m.reasoning, 1024, ""),
	})
	if m.source == flowv1.SourceNext || m.source == flowv1.SourceReturn {
		return // automatic moves are not decisions
	}
	if m.confidence != "" {
		st.Confidence = m.confidence
	}
	rec := m.record
	if rec == nil {
		rec = &flowv1.DecisionRecord{
			ID: decisionID(r.step), Transition: m.transition, From: from, To: m.to, Action: m.action, Source: m.source,
			Agent: m.agent, Confidence: m.confidence, Reasoning: truncate.Bytes(m.reasoning, 1024, ""), State: flowv1.DecisionApplied,
		}
	}
	st.LastDecision = rec
}

// loop reports whether moving from -> to would complete more than repeats traversals
// of one cycle of pathways within the last window transitions (an oscillation),
// and the cycle. Retries and moves within one pathway are not part of cycles, and a
// cycle never spans a JumpBack: each iteration is a deliberate new cycle.
func loop(history []flowv1.HistoryEntry, from, to string, window, repeats int) ([]string, bool) {
	need := repeats + 1 // traversals that make a loop
	// The moves that count, newest first: at most window-1 of them, plus this one.
	var idx []int
	for i := len(history) - 1; i >= 0 && len(idx) < window-1; i-- {
		h := history[i]
		if h.Action == flowv1.ActionJumpBack || h.Source == flowv1.SourceHuman {
			break // a new cycle, or a person's intervention: the window restarts
		}
		if h.From != h.To && h.From != "" && h.To != "" && h.Action == flowv1.ActionAdvance {
			idx = append(idx, i)
		}
	}
	// The pathways visited, oldest first.
	seq := make([]string, 0, len(idx)+2)
	if len(idx) > 0 {
		seq = append(seq, history[idx[len(idx)-1]].From)
		for k := len(idx) - 1; k >= 0; k-- {
			seq = append(seq, history[idx[k]].To)
		}
	}
	if len(seq) == 0 || seq[len(seq)-1] != from {
		seq = append(seq, from)
	}
	seq = append(seq, to)
	n := len(seq)
	for l := 2; l*need <= n-1; l++ {
		start := n - 1 - l*need
		periodic := true
		for j := start + l; j < n; j++ {
			if seq[j] != seq[j-l] {
				periodic = false
				break
			}
		}
		if periodic {
			return seq[start : start+l+1], true
		}
	}
	return nil, false
}
