package rebuild

import (
	"fmt"
	"strings"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// A live Session's inputs, as a replay (and kubectl journey record and replay) sends them again: its whole
// conversation, its External outcomes and its approvals, from the first ever sent.
//
// kubectl journey say drops the processed messages from the front of spec.messages
// (spec.messagesDropped counts them), so the conversation is read from
// status.transcript, which keeps each turn's message (its id and text) with the reply,
// and from spec.messages for the messages the transcript does not hold yet (pending,
// or in the turn in progress). The transcript keeps the newest exchanges within
// limits.maxTranscriptBytes: a message that left both is lost, and the Session can no
// longer be replayed from its start (see ConversationLostError).
//
// kubectl journey outcome and approve drop the processed outcomes and approvals from
// the front of spec.outcomes and spec.approvals, as say does for messages; the
// transcript keeps each applied outcome with the exchange of its turn and each
// approval in an exchange of its own, numbered among all ever sent. One that left both
// is lost too. (An outcome for another pathway or iteration is skipped, not applied,
// and has no exchange: it is not needed to replay the Session.)

// Inputs are a live Session's inputs, each list from the first entry ever sent.
type Inputs struct {
	Messages  []flowv1.Message
	Outcomes  []flowv1.ExternalOutcome
	Approvals []flowv1.Approval
}

// ConversationLostError says which inputs of a live Session it no longer holds, so
// that it cannot be replayed from its start.
type ConversationLostError struct {
	Session string
	// Messages are the numbers (from 1) of the first and last message the Session no
	// longer holds, of Total; zero when it holds them all. Held are the numbers of the
	// first and last message status.transcript holds of those that left spec.messages.
	Messages, Held    [2]int32
	Total             int32
	MessagesDropped   int32
	TranscriptDropped int32
	// Outcomes and Approvals are the numbers (from 1) of the first and last External
	// outcome and approval the Session no longer holds; zero when it holds them all.
	// OutcomesDropped and ApprovalsDropped are how many processed ones left the spec.
	Outcomes, Approvals               [2]int32
	OutcomesDropped, ApprovalsDropped int32
}

func (e *ConversationLostError) Error() string {
	var lost []string
	if e.Messages[0] > 0 {
		held := "none of them"
		if e.Held[0] > 0 {
			held = numbered("message", e.Held)
		}
		lost = append(lost, fmt.Sprintf("%s of its %d: %s spec.messages (spec.messagesDropped is %d) and status.transcript, which dropped its %d oldest exchanges to stay under limits.maxTranscriptBytes (of the dropped messages it holds %s)",
			numbered("message", e.Messages), e.Total, left(e.Messages), e.MessagesDropped, e.TranscriptDropped, held))
	}
	if o := e.Outcomes; o[0] > 0 {
		lost = append(lost, fmt.Sprintf("%s: %s spec.outcomes (spec.outcomesDropped is %d) and %s does not hold %s",
			numbered("External outcome", o), left(o), e.OutcomesDropped, e.transcript(), them(o)))
	}
	if a := e.Approvals; a[0] > 0 {
		lost = append(lost, fmt.Sprintf("%s: %s spec.approvals (spec.approvalsDropped is %d) and %s does not hold %s",
			numbered("approval", a), left(a), e.ApprovalsDropped, e.transcript(), them(a)))
	}
	return fmt.Sprintf("session %s cannot be replayed from its start: it no longer holds %s", e.Session, strings.Join(lost, "; nor "))
}

// transcript names status.transcript, with the exchanges it dropped.
func (e *ConversationLostError) transcript() string {
	if e.TranscriptDropped == 0 {
		return "status.transcript"
	}
	return fmt.Sprintf("status.transcript (which dropped its %d oldest exchanges)", e.TranscriptDropped)
}

// numbered is "noun n", or "nouns first to last".
func numbered(noun string, s [2]int32) string {
	if s[0] == s[1] {
		return fmt.Sprintf("%s %d", noun, s[0])
	}
	return fmt.Sprintf("%ss %d to %d", noun, s[0], s[1])
}

// them is "it" or "them".
func them(s [2]int32) string {
	if s[0] == s[1] {
		return "it"
	}
	return "them"
}

// left is "it left" or "they left".
func left(s [2]int32) string {
	if s[0] == s[1] {
		return "it left"
	}
	return "they left"
}

// InputsOf reads the inputs of Session s; the error is a *ConversationLostError when s
// no longer holds some of them.
func InputsOf(s *flowv1.Session) (*Inputs, error) {
	lost := &ConversationLostError{Session: s.Name, OutcomesDropped: s.Spec.OutcomesDropped, ApprovalsDropped: s.Spec.ApprovalsDropped,
		TranscriptDropped: s.Status.TranscriptDropped}
	held := droppedMessages(s)
	if missing := s.Spec.MessagesDropped - int32(len(held)); missing > 0 {
		lost.Messages = [2]int32{1, missing}
		lost.Total = s.Spec.MessageCount()
		lost.MessagesDropped = s.Spec.MessagesDropped
		if len(held) > 0 {
			lost.Held = [2]int32{missing + 1, s.Spec.MessagesDropped}
		}
	}
	outcomes, lostOutcomes := droppedInputs(s, s.Spec.OutcomesDropped, func(e *flowv1.Exchange) (*flowv1.ExternalOutcome, bool) {
		return e.Outcome, e.Outcome != nil || e.Approval == nil && e.InputNumber > 0
	})
	approvals, lostApprovals := droppedInputs(s, s.Spec.ApprovalsDropped, func(e *flowv1.Exchange) (*flowv1.Approval, bool) {
		return e.Approval, e.Approval != nil
	})
	lost.Outcomes, lost.Approvals = lostOutcomes, lostApprovals
	if lost.Messages[0] > 0 || lost.Outcomes[0] > 0 || lost.Approvals[0] > 0 {
		return nil, lost
	}
	return &Inputs{Messages: append(held, s.Spec.Messages...), Outcomes: append(outcomes, s.Spec.Outcomes...),
		Approvals: append(approvals, s.Spec.Approvals...)}, nil
}

// droppedInputs returns the first dropped inputs of a kind (External outcomes or
// approvals) that left the spec as status.transcript holds them, in order, and the
// numbers (from 1) of the first and last it no longer holds. of picks an exchange's
// input of the kind, and whether the exchange is one of that kind (an outcome turn
// whose outcome left the spec before the turn ended keeps only its number).
//
// Exchanges keep their inputs in the order they were taken, numbered; the transcript
// drops whole exchanges from the front. A number the transcript lacks past the first
// it holds was never applied (a stale outcome); one before it, or any when it holds
// none, may have left with its exchange (or been sent to an operator that did not
// keep inputs in the transcript yet): it is lost.
func droppedInputs[T any](s *flowv1.Session, dropped int32, of func(*flowv1.Exchange) (*T, bool)) ([]T, [2]int32) {
	if dropped == 0 {
		return nil, [2]int32{}
	}
	var held []T
	first := dropped + 1 // the first number the transcript holds
	for i := range s.Status.Transcript {
		e := &s.Status.Transcript[i]
		in, ok := of(e)
		if !ok || e.InputNumber < 1 || e.InputNumber > dropped {
			continue
		}
		first = min(first, e.InputNumber)
		if in == nil {
			return nil, [2]int32{e.InputNumber, e.InputNumber}
		}
		held = append(held, *in)
	}
	if first > 1 {
		return nil, [2]int32{1, first - 1}
	}
	return held, [2]int32{}
}

// droppedMessages returns the messages that left spec.messages as status.transcript
// holds them, oldest first: all of them, or the newest ones when the transcript
// dropped the exchanges of the oldest (fewer than spec.messagesDropped).
//
// Every message turn that ended has an exchange, in the order of the messages; the
// transcript holds the newest of them. The first message spec.messages holds, when
// the transcript has its exchange, tells which message each exchange is of; else the
// last exchange is of the last message whose turn ended (the processed messages, less
// the one of a turn in progress).
func droppedMessages(s *flowv1.Session) []flowv1.Message {
	dropped := s.Spec.MessagesDropped
	if dropped == 0 {
		return nil
	}
	var turns []flowv1.Message
	for _, e := range s.Status.Transcript {
		if e.MessageID != "" {
			turns = append(turns, flowv1.Message{ID: e.MessageID, Text: e.User})
		}
	}
	// first is the number (from 0) of the message of turns[0].
	first := s.DroppableMessages() - int32(len(turns))
	if len(s.Spec.Messages) > 0 {
		for i := len(turns) - 1; i >= 0; i-- {
			if turns[i].ID == s.Spec.Messages[0].ID {
				first = dropped - int32(i)
				break
			}
		}
	}
	if first < 0 || first >= dropped || int(dropped-first) > len(turns) {
		// The transcript holds none of them (or is not one the engine wrote).
		return nil
	}
	return turns[:dropped-first]
}
