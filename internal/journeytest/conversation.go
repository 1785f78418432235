package journeytest

import (
	"fmt"
	"strings"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// A live Session's inputs, as record and replay send them again: its whole
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
// Outcomes and approvals are kept nowhere else than in spec: status keeps no copy of an
// outcome's data or an approval's destination, by and reason. A Session that dropped
// processed ones (kubectl journey outcome and approve do, as say does for messages)
// cannot be replayed either.

// liveInputs are a live Session's inputs, each list from the first entry ever sent.
type liveInputs struct {
	messages  []flowv1.Message
	outcomes  []flowv1.ExternalOutcome
	approvals []flowv1.Approval
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
	// OutcomesDropped and ApprovalsDropped are how many processed outcomes and
	// approvals left the spec.
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
	if n := e.OutcomesDropped; n > 0 {
		lost = append(lost, fmt.Sprintf("%s: %s spec.outcomes (spec.outcomesDropped is %d) and status keeps no copy of an outcome's data",
			numbered("External outcome", [2]int32{1, n}), left([2]int32{1, n}), n))
	}
	if n := e.ApprovalsDropped; n > 0 {
		lost = append(lost, fmt.Sprintf("%s: %s spec.approvals (spec.approvalsDropped is %d) and status keeps no copy of an approval",
			numbered("approval", [2]int32{1, n}), left([2]int32{1, n}), n))
	}
	return fmt.Sprintf("session %s cannot be replayed from its start: it no longer holds %s", e.Session, strings.Join(lost, "; nor "))
}

// numbered is "noun n", or "nouns first to last".
func numbered(noun string, s [2]int32) string {
	if s[0] == s[1] {
		return fmt.Sprintf("%s %d", noun, s[0])
	}
	return fmt.Sprintf("%ss %d to %d", noun, s[0], s[1])
}

// left is "it left" or "they left".
func left(s [2]int32) string {
	if s[0] == s[1] {
		return "it left"
	}
	return "they left"
}

// inputsOf reads the inputs of Session s; the error is a *ConversationLostError when s
// no longer holds some of them.
func inputsOf(s *flowv1.Session) (*liveInputs, error) {
	lost := &ConversationLostError{Session: s.Name, OutcomesDropped: s.Spec.OutcomesDropped, ApprovalsDropped: s.Spec.ApprovalsDropped}
	held := droppedMessages(s)
	if missing := s.Spec.MessagesDropped - int32(len(held)); missing > 0 {
		lost.Messages = [2]int32{1, missing}
		lost.Total = s.Spec.MessageCount()
		lost.MessagesDropped, lost.TranscriptDropped = s.Spec.MessagesDropped, s.Status.TranscriptDropped
		if len(held) > 0 {
			lost.Held = [2]int32{missing + 1, s.Spec.MessagesDropped}
		}
	}
	if lost.Messages[0] > 0 || lost.OutcomesDropped > 0 || lost.ApprovalsDropped > 0 {
		return nil, lost
	}
	return &liveInputs{messages: append(held, s.Spec.Messages...), outcomes: s.Spec.Outcomes, approvals: s.Spec.Approvals}, nil
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
