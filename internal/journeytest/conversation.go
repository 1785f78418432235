package journeytest

import (
	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/rebuild"
)

// ConversationLostError says which inputs of a live Session it no longer holds, so
// that it cannot be replayed from its start (see rebuild.InputsOf).
type ConversationLostError = rebuild.ConversationLostError

// liveInputs are a live Session's inputs, each list from the first entry ever sent.
type liveInputs struct {
	messages  []flowv1.Message
	outcomes  []flowv1.ExternalOutcome
	approvals []flowv1.Approval
}

// inputsOf reads the inputs of Session s as record and replay send them again: its
// whole conversation, External outcomes and approvals, from spec and, for what kubectl
// journey say, outcome and approve dropped from spec, from status.transcript; the
// error is a *ConversationLostError when s no longer holds some of them.
func inputsOf(s *flowv1.Session) (*liveInputs, error) {
	in, err := rebuild.InputsOf(s)
	if err != nil {
		return nil, err
	}
	return &liveInputs{messages: in.Messages, outcomes: in.Outcomes, approvals: in.Approvals}, nil
}
