package engine

import (
	"strconv"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// The Session status the step protocol writes outside a step: the journal of agent
// answers and the conditions of a Session that waits, stalls or retries. They live
// here so that one package sets every part of a Session's status.

// DefaultMaxJournal is how many agent answers status.journal keeps by default.
const DefaultMaxJournal = 100

// AppendJournal appends an answer to status.journal, dropping the oldest past the limit
// (limits.maxJournal, nil for the default) or past flowv1.MaxJournalBytes, and counting
// them in status.journalDropped. The newest answer is always kept.
func AppendJournal(status *flowv1.SessionStatus, rec *flowv1.EffectRecord, limit *int32) {
	n := DefaultMaxJournal
	if limit != nil {
		n = int(*limit)
	}
	status.Journal = append(status.Journal, *rec.DeepCopy())
	kept := keepNewestSized(status.Journal, n, flowv1.MaxJournalBytes, true, flowv1.JournalEntryBytes)
	status.JournalDropped += int32(len(status.Journal) - len(kept))
	status.Journal = kept
	if len(status.Journal) == 0 {
		status.Journal = nil
	}
}

// Journal stores the answer to a step's effect: in status.pendingEffect, for the next
// step to apply, and at the end of status.journal. AgentAvailable says what became of
// the call (agentCondition).
func Journal(status *flowv1.SessionStatus, rec *flowv1.EffectRecord, limit *int32, now time.Time) {
	status.PendingEffect = rec
	status.ToolProgress = nil // the call in flight, if any, is over
	AppendJournal(status, status.PendingEffect, limit)
	st, reason, msg := agentCondition(rec)
	SetCondition(status, flowv1.ConditionAgentAvailable, st, reason, msg, now)
}

// ToolProgress is status.toolProgress for progress p of call, reported at now: what a
// write made while the call runs shows. Progress and total are kept as decimals, the
// message cut to its bound.
func ToolProgress(call *agent.ToolRequest, p agent.ToolProgress, now time.Time) *flowv1.ToolProgress {
	tp := &flowv1.ToolProgress{Call: call.ID, Tool: call.Tool, Progress: strconv.FormatFloat(p.Progress, 'f', -1, 64),
		Message: truncate.Bytes(p.Message, 256, "…"), UpdatedAt: metav1.NewTime(now)}
	if p.Total > 0 {
		tp.Total = strconv.FormatFloat(p.Total, 'f', -1, 64)
	}
	return tp
}

// agentCondition is AgentAvailable after the call rec answers: True when the agent or
// tool answered (with a usable answer or not: an invalid answer or a tool's error
// result is an answer), False when the call was given up (it timed out, was rate
// limited, or its transport or server failed until its attempts ran out), with the
// error class as reason.
func agentCondition(rec *flowv1.EffectRecord) (metav1.ConditionStatus, string, string) {
	who := rec.Agent
	if who == "" {
		who = "the agent"
	}
	f := rec.Result.Failure
	if f == nil {
		return metav1.ConditionTrue, flowv1.ReasonAgentReady, "The last agent call answered"
	}
	switch {
	case f.Kind == flowv1.FailureRateLimit:
		return metav1.ConditionFalse, flowv1.ReasonRateLimited, "The last call to " + who + " was given up: " + f.Summary()
	case f.Kind == flowv1.FailureTimeout:
		return metav1.ConditionFalse, flowv1.ReasonAgentTimeout, "The last call to " + who + " was given up: " + f.Summary()
	case f.Source == flowv1.FailureTransport, f.Source == flowv1.FailureLLM && f.Kind == flowv1.FailureException,
		f.Source == flowv1.FailureSystem && f.Kind == flowv1.FailureUnknown:
		return metav1.ConditionFalse, flowv1.ReasonAgentError, "The last call to " + who + " was given up: " + f.Summary()
	}
	return metav1.ConditionTrue, flowv1.ReasonAgentReady, "The last call to " + who + " answered, but the answer was not usable: " + f.Summary()
}

// SetCondition sets a Session condition at now, its message capped for status.
func SetCondition(status *flowv1.SessionStatus, typ string, st metav1.ConditionStatus, reason, msg string, now time.Time) {
	setCondition(status, typ, st, reason, msg, metav1.NewTime(now))
}

// Stall marks a Session that cannot go on without a change from a person: Stalled and
// not Ready for reason, no longer Reconciling.
func Stall(status *flowv1.SessionStatus, reason, msg string, now time.Time) {
	SetCondition(status, flowv1.ConditionStalled, metav1.ConditionTrue, reason, msg, now)
	SetCondition(status, flowv1.ConditionReady, metav1.ConditionFalse, reason, msg, now)
	apimeta.RemoveStatusCondition(&status.Conditions, flowv1.ConditionReconciling)
	if apimeta.IsStatusConditionTrue(status.Conditions, flowv1.ConditionAwaitingInput) {
		SetCondition(status, flowv1.ConditionAwaitingInput, metav1.ConditionFalse, reason, "Not waiting for input: the Session is stalled", now)
	}
}

// Wait marks a Session that cannot start yet (its Journey is missing or not Ready):
// Pending, not Ready and Reconciling for reason (it starts by itself once the Journey is
// Ready). Conditions that already say so are kept, so that waiting again changes
// nothing.
func Wait(status *flowv1.SessionStatus, reason, msg string, now time.Time) {
	if status.Phase == "" {
		status.Phase = flowv1.PhasePending
	}
	for _, typ := range []string{flowv1.ConditionReady, flowv1.ConditionReconciling} {
		if c := apimeta.FindStatusCondition(status.Conditions, typ); c != nil && c.Reason == reason && c.Message == msg {
			continue
		}
		st := metav1.ConditionFalse
		if typ == flowv1.ConditionReconciling {
			st = metav1.ConditionTrue
		}
		SetCondition(status, typ, st, reason, msg, now)
	}
}

// Observe records that status reflects generation: in status.observedGeneration and in
// every condition's observedGeneration, as kstatus and `kubectl wait` expect.
func Observe(status *flowv1.SessionStatus, generation int64) {
	status.ObservedGeneration = generation
	for i := range status.Conditions {
		status.Conditions[i].ObservedGeneration = generation
	}
}

// AgentUnavailable marks a Session whose agent failed transiently. A condition that
// already says so is kept, so that failing again changes nothing.
func AgentUnavailable(status *flowv1.SessionStatus, reason, msg string, now time.Time) {
	status.ToolProgress = nil // the call in flight failed
	if c := apimeta.FindStatusCondition(status.Conditions, flowv1.ConditionAgentAvailable); c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason {
		return
	}
	SetCondition(status, flowv1.ConditionAgentAvailable, metav1.ConditionFalse, reason, msg, now)
}
