package step

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
)

// DefaultMaxJournal is how many agent answers status.journal keeps by default.
const DefaultMaxJournal = 100

// AppendJournal appends an answer to status.journal, dropping the oldest past the limit
// (limits.maxJournal, nil for the default) or past MaxJournalBytes, and counting them
// in status.journalDropped. The newest answer is always kept.
func AppendJournal(status *flowv1.SessionStatus, rec *flowv1.EffectRecord, limit *int32) {
	n := DefaultMaxJournal
	if limit != nil {
		n = int(*limit)
	}
	status.Journal = append(status.Journal, *rec.DeepCopy())
	total, keep := 2, 0
	for i := len(status.Journal) - 1; i >= 0 && keep < n; i-- {
		b := engine.StoredBytes(&status.Journal[i])
		if keep > 0 && total+b > MaxJournalBytes {
			break
		}
		total += b
		keep++
	}
	if over := len(status.Journal) - keep; over > 0 {
		status.Journal = append([]flowv1.EffectRecord(nil), status.Journal[over:]...)
		status.JournalDropped += int32(over)
	}
}

// SetCondition sets a Session condition at now, its message capped for status.
func SetCondition(status *flowv1.SessionStatus, typ string, st metav1.ConditionStatus, reason, msg string, now time.Time) {
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	var gen int64
	if c := apimeta.FindStatusCondition(status.Conditions, typ); c != nil {
		gen = c.ObservedGeneration
	}
	apimeta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: typ, Status: st, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now), ObservedGeneration: gen,
	})
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

// agentUnavailable marks a Session whose agent failed transiently. A condition that
// already says so is kept, so that failing again changes nothing.
func agentUnavailable(status *flowv1.SessionStatus, reason, msg string, now time.Time) {
	if c := apimeta.FindStatusCondition(status.Conditions, flowv1.ConditionAgentAvailable); c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason {
		return
	}
	SetCondition(status, flowv1.ConditionAgentAvailable, metav1.ConditionFalse, reason, msg, now)
}

// journal stores the answer to the step's effect: in status.pendingEffect, for the
// next step to apply, and at the end of status.journal.
func journal(status *flowv1.SessionStatus, rec *flowv1.EffectRecord, limit *int32, now time.Time) {
	status.PendingEffect = rec
	AppendJournal(status, status.PendingEffect, limit)
	SetCondition(status, flowv1.ConditionAgentAvailable, metav1.ConditionTrue, flowv1.ReasonAgentReady, "The last agent call answered", now)
}
