package v1alpha1

import (
	"iter"
	"strings"
)

// This file holds the predicates that the engine, the webhooks, the controllers and
// the kubectl plugin all need, so that each is written once, next to the types it
// reads.

// The names of the four outcome transitions, as in the API (spec.transitions.<name>)
// and in status (lastDecision.transition, history[].transition).
const (
	TransitionOnSuccess        = "onSuccess"
	TransitionOnFailure        = "onFailure"
	TransitionOnPartialSuccess = "onPartialSuccess"
	TransitionOnUnclear        = "onUnclear"
)

// ReturnNone is the ReturnBehavior type of a pathway that is not a detour.
const ReturnNone = "None"

// HasStarted reports whether the Session has taken its first step: the phase is set
// and not Pending.
func (p Phase) HasStarted() bool {
	return p != "" && p != PhasePending
}

// AwaitsApproval reports whether the Session waits on a person for a decision:
// AwaitingApproval, or Escalated (an approval naming the decision still moves it on).
func (p Phase) AwaitsApproval() bool {
	return p == PhaseAwaitingApproval || p == PhaseEscalated
}

// All yields the transitions that are set with their names, in the order onSuccess,
// onFailure, onPartialSuccess, onUnclear. It yields nothing for a nil receiver.
func (t *OutcomeTransitions) All() iter.Seq2[string, *OutcomeTransition] {
	return func(yield func(string, *OutcomeTransition) bool) {
		if t == nil {
			return
		}
		for _, o := range [...]struct {
			name string
			t    *OutcomeTransition
		}{
			{TransitionOnSuccess, t.OnSuccess},
			{TransitionOnFailure, t.OnFailure},
			{TransitionOnPartialSuccess, t.OnPartialSuccess},
			{TransitionOnUnclear, t.OnUnclear},
		} {
			if o.t != nil && !yield(o.name, o.t) {
				return
			}
		}
	}
}

// Named returns the transition called name (onSuccess, ...), or nil when it is not set
// or name is not one of the four. It is nil for a nil receiver.
func (t *OutcomeTransitions) Named(name string) *OutcomeTransition {
	for n, o := range t.All() {
		if n == name {
			return o
		}
	}
	return nil
}

// ForResult returns the transition that a complete turn with result type rt takes,
// and its name: on<Result>, where a partial success without onPartialSuccess takes
// onSuccess. It returns nil and "" when that transition is not set, and for a nil
// receiver.
func (t *OutcomeTransitions) ForResult(rt ResultType) (*OutcomeTransition, string) {
	if t == nil {
		return nil, ""
	}
	switch rt {
	case ResultSuccess:
		return t.OnSuccess, TransitionOnSuccess
	case ResultFailure:
		return t.OnFailure, TransitionOnFailure
	case ResultPartialSuccess:
		if t.OnPartialSuccess != nil {
			return t.OnPartialSuccess, TransitionOnPartialSuccess
		}
		return t.OnSuccess, TransitionOnSuccess
	case ResultUnclear:
		return t.OnUnclear, TransitionOnUnclear
	}
	return nil, ""
}

// IsDetour reports whether entering the pathway from another one pushes that one, to
// return to it when the pathway completes: returnBehavior is set with type
// ReturnToPrevious (or empty, its default). It is false for a nil receiver.
func (p *PathwaySpec) IsDetour() bool {
	return p != nil && p.ReturnBehavior != nil && (p.ReturnBehavior.Type == "" || p.ReturnBehavior.Type == ReturnToPrevious)
}

// IsExternal reports whether the pathway's results come from spec.outcomes rather
// than from agents. It is false for a nil receiver.
func (p *PathwaySpec) IsExternal() bool {
	return p != nil && p.Executor == ExecutorExternal
}

// FromAny reports whether the transition applies in every pathway (from empty or "*").
func (t *GlobalTransition) FromAny() bool {
	return t.From == "" || t.From == "*"
}

// AppliesIn reports whether the transition applies while the Session is in pathway.
func (t *GlobalTransition) AppliesIn(pathway string) bool {
	return t.FromAny() || t.From == pathway
}

// Waiting reports whether the decision waits for an approval: Pending, or Escalated
// without an escalation pathway.
func (d *DecisionRecord) Waiting() bool {
	return d != nil && (d.State == DecisionPending || d.State == DecisionEscalated)
}

// PendingDecision returns the decision the Session waits on for an approval (its last
// decision, when that has an id and is Pending or Escalated), or nil.
func (s *SessionStatus) PendingDecision() *DecisionRecord {
	if d := s.LastDecision; d != nil && d.ID != "" && d.Waiting() {
		return d
	}
	return nil
}

// ApprovalIndex returns the index in spec.approvals of the first approval or
// rejection of decisionID (the one that counts), or -1 when there is none.
func (s *SessionSpec) ApprovalIndex(decisionID string) int {
	for i := range s.Approvals {
		if s.Approvals[i].DecisionID == decisionID {
			return i
		}
	}
	return -1
}

// Approves reports whether the approval accepts its decision: approve is set and true.
func (a *Approval) Approves() bool {
	return a.Approve != nil && *a.Approve
}

// toolDecisionPrefix starts the transition of a decision record that stands for a
// tool call waiting for approval: "tool:<tool>".
const toolDecisionPrefix = "tool:"

// ToolDecisionTransition is the transition of the decision record that stands for a
// call of tool waiting for approval.
func ToolDecisionTransition(tool string) string {
	return toolDecisionPrefix + tool
}

// ToolCall returns the tool of d when d stands for a tool call waiting for approval
// (shown like a decision), and whether it does.
func (d *DecisionRecord) ToolCall() (tool string, ok bool) {
	if d == nil {
		return "", false
	}
	return strings.CutPrefix(d.Transition, toolDecisionPrefix)
}

// Failed reports whether a turn that ended with this finish reason failed: it ended on
// an error, a cap or a policy, not by answering (Success), waiting for a person
// (AwaitingApproval, Escalated) or being cancelled. Empty (in progress) is not failed.
func (f FinishReason) Failed() bool {
	switch f {
	case "", FinishSuccess, FinishAwaitingApproval, FinishEscalated, FinishCancelled:
		return false
	}
	return true
}

// Failed reports whether the turn failed: it ended on a failure finish reason or
// recorded failures. A nil turn did not.
func (t *TurnOutcome) Failed() bool {
	return t != nil && (t.FinishReason.Failed() || len(t.Failures) > 0)
}

// Summary is the failure in one line: "<source>/<kind> in <component>: <message>".
func (f Failure) Summary() string {
	s := string(f.Source) + "/" + string(f.Kind)
	if f.Component != "" {
		s += " in " + f.Component
	}
	if f.Message != "" {
		s += ": " + strings.Join(strings.Fields(f.Message), " ")
	}
	return s
}

// Unkeyed reports whether the server does not honour idempotency keys (idempotency
// None): a call sent to it is never sent again on its own.
func (s *ToolServer) Unkeyed() bool {
	return s != nil && s.Idempotency == ToolIdempotencyNone
}

// UnknownAction is the tool's onUnknown: AskHuman when it is not set.
func (t *Tool) UnknownAction() OnUnknownAction {
	if t == nil || t.OnUnknown == "" {
		return OnUnknownAskHuman
	}
	return t.OnUnknown
}

// TurnToolCall returns the tool call of the turn in progress with id, nil when the
// turn has none.
func (s *SessionStatus) TurnToolCall(id string) *ToolCallProgress {
	if s == nil || s.Turn == nil {
		return nil
	}
	for i := range s.Turn.ToolCalls {
		if s.Turn.ToolCalls[i].ID == id {
			return &s.Turn.ToolCalls[i]
		}
	}
	return nil
}

// UnknownToolCalls yields the tool calls of the turn in progress whose outcome is
// unknown: they wait for an Answer intervention (or a probe).
func (s *SessionStatus) UnknownToolCalls() iter.Seq[*ToolCallProgress] {
	return func(yield func(*ToolCallProgress) bool) {
		if s == nil || s.Turn == nil {
			return
		}
		for i := range s.Turn.ToolCalls {
			if s.Turn.ToolCalls[i].State == ToolCallOutcomeUnknown && !yield(&s.Turn.ToolCalls[i]) {
				return
			}
		}
	}
}
