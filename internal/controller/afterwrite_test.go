package controller

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/step"
)

// How a reconcile of a Session ends once its status is written: one table.
func TestAfterWrite(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	status := func(phase flowv1.Phase, stalled string) *flowv1.SessionStatus {
		st := &flowv1.SessionStatus{Phase: phase}
		if stalled != "" {
			st.Conditions = []metav1.Condition{{Type: flowv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: stalled}}
		}
		return st
	}
	boom := errors.New("boom")
	in := now.Add(time.Minute)
	for _, tc := range []struct {
		name    string
		st      sessionStep
		advance AdvanceMode
		want    outcome
		expire  bool
	}{
		{"agent retry keeps the step's error", sessionStep{status: status(flowv1.PhaseRunning, ""), step: step.AgentRetry, then: failed(boom), deadline: in},
			AdvanceWatch, failed(boom), false},
		{"terminal agent error retries slowly", sessionStep{status: status(flowv1.PhaseRunning, ""), step: step.AgentStalled, then: outcome{kind: requeue, after: terminalRetry}},
			AdvanceWatch, outcome{kind: requeue, after: terminalRetry}, false},
		{"nothing written, nothing to wait for", sessionStep{}, AdvanceWatch, outcome{}, false},
		{"finished by the step: expire", sessionStep{status: status(flowv1.PhaseCompleted, ""), step: step.Changed, deadline: in},
			AdvanceWatch, outcome{}, true},
		{"running, watch mode: the write brings the next step", sessionStep{status: status(flowv1.PhaseRunning, ""), step: step.Performed},
			AdvanceWatch, outcome{}, false},
		{"running, requeue mode", sessionStep{status: status(flowv1.PhaseRunning, ""), step: step.Changed, deadline: in},
			AdvanceRequeue, outcome{kind: requeue, after: time.Millisecond}, false},
		{"waiting: at its deadline", sessionStep{status: status(flowv1.PhaseWaitingForInput, ""), step: step.Changed, deadline: in},
			AdvanceWatch, outcome{kind: requeue, after: time.Minute + 10*time.Millisecond}, false},
		{"unchanged and waiting: at its deadline", sessionStep{status: status(flowv1.PhaseWaitingForInput, ""), step: step.Unchanged, deadline: in},
			AdvanceRequeue, outcome{kind: requeue, after: time.Minute + 10*time.Millisecond}, false},
		{"blocked: waits for a person", sessionStep{status: status(flowv1.PhaseRunning, flowv1.ReasonLoopDetected), step: step.Changed, deadline: in},
			AdvanceWatch, outcome{}, false},
		{"stalled by an agent is not blocked", sessionStep{status: status(flowv1.PhaseWaitingForInput, flowv1.ReasonAgentTerminalError), step: step.Unchanged, deadline: in},
			AdvanceWatch, outcome{kind: requeue, after: time.Minute + 10*time.Millisecond}, false},
		{"past the deadline and not blocked (suspended)", sessionStep{status: status(flowv1.PhaseWaitingForInput, ""), step: step.Unchanged, deadline: now.Add(-time.Second)},
			AdvanceWatch, outcome{}, false},
		{"no deadline", sessionStep{status: status(flowv1.PhaseWaitingForInput, ""), step: step.Changed},
			AdvanceWatch, outcome{}, false},
		{"the turn the upgradePolicy waited for ended: it replays now", sessionStep{status: status(flowv1.PhaseWaitingForInput, ""), step: step.Performed, upgradeWaits: true, deadline: in},
			AdvanceWatch, outcome{kind: requeue, after: time.Millisecond}, false},
		{"the upgradePolicy waits for a turn in progress", sessionStep{status: &flowv1.SessionStatus{Phase: flowv1.PhaseWaitingForInput, Turn: &flowv1.TurnProgress{}}, step: step.Performed, upgradeWaits: true},
			AdvanceWatch, outcome{}, false},
		{"the upgradePolicy waits, nothing changed (suspended)", sessionStep{status: status(flowv1.PhaseWaitingForInput, ""), step: step.Unchanged, upgradeWaits: true},
			AdvanceWatch, outcome{}, false},
		{"revision gone: terminal", sessionStep{status: status(flowv1.PhasePending, flowv1.ReasonRevisionNotFound), then: outcome{kind: terminal, err: boom}},
			AdvanceWatch, outcome{kind: terminal, err: boom}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, expire := afterWrite(tc.st, tc.advance, now)
			if got != tc.want || expire != tc.expire {
				t.Errorf("afterWrite = %+v, expire %v; want %+v, expire %v", got, expire, tc.want, tc.expire)
			}
		})
	}
}
