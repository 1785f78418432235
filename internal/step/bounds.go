package step

import (
	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
)

// A Session's stored size is bounded, however long its conversation runs. Each part
// that grows with the conversation has a byte bound; MaxObjectBytes adds them up. The
// formula (documented in docs/PERFORMANCE.md, "Session size") is
//
//	spec.messages          MaxMessagesBytes (the CRD refuses more; processed messages are dropped)
//	spec.outcomes          MaxOutcomesBytes (the webhook refuses more; processed ones are dropped)
//	spec.approvals         MaxApprovalsBytes (the CRD refuses more; processed ones are dropped)
//	spec.initialContext    C = limits.maxContextBytes
//	status.context         C
//	status.contextHistory  engine.ContextHistoryBytes(C) = C/4
//	status.history         engine.MaxHistoryBytes
//	status.journal         MaxJournalBytes
//	conversation transcript TranscriptBytes(limits)
//	turn records           3 x MaxAnswerBytes (lastTurn, pendingEffect, turn: one answer each)
//	everything else        FixedBytes (metadata, managed fields, conditions, counters)
//
// With the defaults (C = 48 KiB, a 16 KiB transcript) that is 254 KiB, under the
// 256 KiB this project promises; with the largest limits the API allows (C = 512 KiB,
// a 128 KiB transcript) it is about 1.38 MiB, under etcd's 1.5 MiB request limit.
// A new growing part adds its term here, so the bound stays in one place.
const (
	// MaxMessagesBytes bounds spec.messages: the sum over its messages of the text, the
	// id and MessageOverheadBytes. The CRD refuses an update past it.
	MaxMessagesBytes = 32768
	// MessageOverheadBytes is what a message costs in spec.messages besides its id and text.
	MessageOverheadBytes = 24
	// MaxOutcomesBytes bounds spec.outcomes: the sum over its outcomes of OutcomeBytes.
	// The admission webhook refuses an update that adds outcomes past it.
	MaxOutcomesBytes = 12288
	// OutcomeOverheadBytes is what an outcome costs in spec.outcomes besides its
	// pathway, data and message.
	OutcomeOverheadBytes = 64
	// MaxApprovalsBytes bounds spec.approvals: the sum over its approvals of their
	// decision id, by, reason and destination, and 64 bytes each. The CRD refuses more.
	MaxApprovalsBytes = 6144
	// MaxJournalBytes bounds status.journal: the oldest answers are dropped past it.
	MaxJournalBytes = 24576
	// MaxAnswerBytes is what one agent answer is assumed to take at most in status
	// (its reply, outputs and reasoning): about 2,000 completion tokens.
	MaxAnswerBytes = 8192
	// FixedBytes covers what does not grow with the conversation: metadata and managed
	// fields, conditions, counters, the last decision.
	FixedBytes = 16384
)

// TranscriptBytes is the conversation transcript's byte bound under limits:
// limits.maxTranscriptBytes, or its default.
func TranscriptBytes(l flowv1.Limits) int {
	if l.MaxTranscriptBytes != nil {
		return int(*l.MaxTranscriptBytes)
	}
	return engine.DefaultMaxTranscriptBytes
}

// ContextBytes is limits.maxContextBytes, or its default.
func ContextBytes(l flowv1.Limits) int {
	if l.MaxContextBytes > 0 {
		return int(l.MaxContextBytes)
	}
	return engine.DefaultMaxContextBytes
}

// MaxObjectBytes is the most a Session of a journey with limits takes in storage, by
// the formula above.
func MaxObjectBytes(l flowv1.Limits) int {
	c := ContextBytes(l)
	return MaxMessagesBytes + MaxOutcomesBytes + MaxApprovalsBytes + c + c + engine.ContextHistoryBytes(c) + engine.MaxHistoryBytes +
		MaxJournalBytes + TranscriptBytes(l) + 3*MaxAnswerBytes + FixedBytes
}

// OutcomeBytes is what outcome o counts against MaxOutcomesBytes: its pathway, data,
// message and OutcomeOverheadBytes.
func OutcomeBytes(o *flowv1.ExternalOutcome) int {
	n := len(o.Pathway) + len(o.Message) + OutcomeOverheadBytes
	if o.Data != nil {
		n += len(o.Data.Raw)
	}
	return n
}

// OutcomesBytes is what spec.outcomes counts against MaxOutcomesBytes.
func OutcomesBytes(outcomes []flowv1.ExternalOutcome) int {
	n := 0
	for i := range outcomes {
		n += OutcomeBytes(&outcomes[i])
	}
	return n
}
