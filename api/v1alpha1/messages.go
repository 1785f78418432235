package v1alpha1

// Messages are numbered over the whole conversation, from 0: spec.messages holds the
// ones from spec.messagesDropped on, and status.processedMessages counts from the same
// origin. These helpers keep the arithmetic in one place.

// MessageAt returns message n of the conversation, when spec.messages still holds it.
func (s *SessionSpec) MessageAt(n int32) (*Message, bool) {
	i := int(n) - int(s.MessagesDropped)
	if i < 0 || i >= len(s.Messages) {
		return nil, false
	}
	return &s.Messages[i], true
}

// MessageCount is how many messages the conversation has had: the dropped ones and the
// ones spec.messages holds.
func (s *SessionSpec) MessageCount() int32 {
	return s.MessagesDropped + int32(len(s.Messages))
}

// MessageNumber returns the number in the conversation of the message with id in
// spec.messages, or -1.
func (s *SessionSpec) MessageNumber(id string) int32 {
	for i := range s.Messages {
		if s.Messages[i].ID == id {
			return s.MessagesDropped + int32(i)
		}
	}
	return -1
}

// DroppableMessages is how many messages of the conversation may have left
// spec.messages: the processed ones, except the one a turn in progress still reads.
// The Session's validation refuses a spec.messagesDropped past it.
func (s *Session) DroppableMessages() int32 {
	n := s.Status.ProcessedMessages
	if s.Status.Turn != nil && s.Status.Turn.Trigger == TurnMessage {
		n--
	}
	return max(n, 0)
}
