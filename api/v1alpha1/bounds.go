package v1alpha1

// A Session's stored size is bounded, however long its conversation runs. Each part
// that grows with the conversation has a byte bound; Limits.MaxObjectBytes adds them
// up. The formula (documented in docs/PERFORMANCE.md, "Session size") is
//
//	spec.messages          MaxMessagesBytes (the CRD refuses more; processed messages are dropped)
//	spec.outcomes          MaxOutcomesBytes (the webhook refuses more; processed ones are dropped)
//	spec.approvals         MaxApprovalsBytes (the CRD refuses more; processed ones are dropped)
//	spec.interventions     MaxInterventionsBytes (the CRD refuses more; processed ones are dropped)
//	spec.initialContext    C = Limits.ContextBytes (limits.maxContextBytes)
//	status.context         C
//	status.contextHistory  ContextHistoryBytes(C) = C/4
//	status.history         MaxHistoryBytes
//	status.interventions   MaxInterventionRecordsBytes
//	status.journal         MaxJournalBytes
//	conversation transcript Limits.TranscriptBytes (limits.maxTranscriptBytes), with
//	                       lastTurn.replies (every reply of the last turn, at most
//	                       MaxTurnRepliesBytes): the transcript keeps less to make room
//	turn records           3 x MaxAnswerBytes (lastTurn, pendingEffect, turn: one answer each)
//	everything else        FixedBytes (metadata, managed fields, conditions, counters)
//
// With the defaults (C = 48 KiB, a 16 KiB transcript) that is 255.95 KiB, under the
// 256 KiB this project promises; with the largest limits the API allows (C = 512 KiB,
// a 128 KiB transcript) it is about 1.38 MiB, under etcd's 1.5 MiB request limit.
// A new growing part adds its term here, so the bound stays in one place. The bounds
// are plain arithmetic over the API's types, so that the admission webhook, the
// engine that trims status and the tests all read them from here.
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
	// MaxInterventionsBytes bounds spec.interventions: the sum over its interventions of
	// their id, by, reason, feedback, pathway, call, result and content (as JSON), and
	// InterventionOverheadBytes each. The CRD refuses more (the admission webhook
	// counts content). The largest single intervention fits.
	MaxInterventionsBytes = 2000
	// InterventionOverheadBytes is what an intervention costs in spec.interventions
	// besides its strings (its action, step and limits).
	InterventionOverheadBytes = 80
	// MaxHistoryBytes bounds status.history: the oldest transitions are dropped past it
	// (the newest is always kept; an entry's reason is at most 1 KiB).
	MaxHistoryBytes = 12288
	// MaxInterventionRecordsBytes bounds status.interventions: the oldest records are
	// dropped past it or past MaxInterventionRecords (the newest is always kept; it
	// holds the largest intervention spec.interventions takes).
	MaxInterventionRecordsBytes = 4096
	// MaxInterventionRecords bounds the count of status.interventions.
	MaxInterventionRecords = 64
	// MaxRefusalBytes is where the message of a refused intervention's record is cut.
	MaxRefusalBytes = 512
	// MaxJournalBytes bounds status.journal: the oldest answers are dropped past it.
	MaxJournalBytes = 24576
	// MaxAnswerBytes is what one agent answer is assumed to take at most in status
	// (its reply, outputs and reasoning): about 2,000 completion tokens.
	MaxAnswerBytes = 8192
	// MaxTurnRepliesBytes bounds lastTurn.replies, as stored: the oldest replies of
	// a turn are dropped past it (the newest is always kept, its text cut at
	// MaxTurnReplyBytes). They count against the transcript's bound.
	MaxTurnRepliesBytes = 1536
	// MaxTurnReplyBytes is where a reply's text in lastTurn.replies is cut.
	MaxTurnReplyBytes = 1024
	// MaxToolResultBytes bounds a tool call's result as the Session stores it (its
	// JSON): a longer result is cut, and kept as a JSON string that ends with a note
	// saying how long it was.
	MaxToolResultBytes = 4096
	// MaxElicitationMessageBytes is where the message of a server's request for
	// input is cut, as the Session stores it.
	MaxElicitationMessageBytes = 1024
	// MaxElicitationSchemaBytes bounds the schema of a form a server asks the user
	// to fill in (its JSON): a call whose server asks with a larger one fails. The
	// MCP reference server's own form takes 2.4 KB.
	MaxElicitationSchemaBytes = 4096
	// FixedBytes covers what does not grow with the conversation: metadata and managed
	// fields, conditions, counters, the last decision.
	FixedBytes = 16384
	// DefaultMaxContextBytes caps the context without limits.maxContextBytes.
	DefaultMaxContextBytes = 49152
	// DefaultMaxTranscriptBytes bounds status.transcript without limits.maxTranscriptBytes.
	DefaultMaxTranscriptBytes = 16384
)

// ContextBytes is limits.maxContextBytes, or DefaultMaxContextBytes.
func (l Limits) ContextBytes() int {
	if l.MaxContextBytes > 0 {
		return int(l.MaxContextBytes)
	}
	return DefaultMaxContextBytes
}

// TranscriptBytes is the conversation transcript's byte bound: limits.maxTranscriptBytes,
// or DefaultMaxTranscriptBytes.
func (l Limits) TranscriptBytes() int {
	if l.MaxTranscriptBytes != nil {
		return int(*l.MaxTranscriptBytes)
	}
	return DefaultMaxTranscriptBytes
}

// ContextHistoryBytes bounds status.contextHistory for a context capped at
// contextBytes: a quarter of it. Versions are deltas, so this holds the last changes
// of a conversation, not copies of the context.
func ContextHistoryBytes(contextBytes int) int { return contextBytes / 4 }

// MaxObjectBytes is the most a Session of a journey with limits l takes in storage,
// by the formula above.
func (l Limits) MaxObjectBytes() int {
	c := l.ContextBytes()
	return MaxMessagesBytes + MaxOutcomesBytes + MaxApprovalsBytes + MaxInterventionsBytes + c + c + ContextHistoryBytes(c) + MaxHistoryBytes + MaxInterventionRecordsBytes +
		MaxJournalBytes + l.TranscriptBytes() + 3*MaxAnswerBytes + FixedBytes
}

// OutcomeBytes is what outcome o counts against MaxOutcomesBytes: its pathway, data,
// message and OutcomeOverheadBytes.
func OutcomeBytes(o *ExternalOutcome) int {
	n := len(o.Pathway) + len(o.Message) + OutcomeOverheadBytes
	if o.Data != nil {
		n += len(o.Data.Raw)
	}
	return n
}

// OutcomesBytes is what spec.outcomes counts against MaxOutcomesBytes.
func OutcomesBytes(outcomes []ExternalOutcome) int {
	n := 0
	for i := range outcomes {
		n += OutcomeBytes(&outcomes[i])
	}
	return n
}

// Bytes is what intervention iv counts against MaxInterventionsBytes: its strings,
// its content's JSON and InterventionOverheadBytes.
func (iv *Intervention) Bytes() int {
	n := len(iv.ID) + len(iv.By) + len(iv.Reason) + len(iv.Feedback) + len(iv.Pathway) + len(iv.Call) + len(iv.Result) + InterventionOverheadBytes
	if iv.Content != nil {
		n += len(iv.Content.Raw)
	}
	return n
}
