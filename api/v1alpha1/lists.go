package v1alpha1

import "fmt"

// Outcomes, approvals and interventions are numbered over the whole Session, from 0,
// as messages are: spec.outcomes holds the ones from spec.outcomesDropped on,
// spec.approvals the ones from spec.approvalsDropped on, spec.interventions the ones
// from spec.interventionsDropped on, and status.processedOutcomes,
// status.processedApprovals and status.processedInterventions count from the same
// origin.

// OutcomeAt returns External outcome n of the Session, when spec.outcomes still holds it.
func (s *SessionSpec) OutcomeAt(n int32) (*ExternalOutcome, bool) {
	i := int(n) - int(s.OutcomesDropped)
	if i < 0 || i >= len(s.Outcomes) {
		return nil, false
	}
	return &s.Outcomes[i], true
}

// OutcomeCount is how many External outcomes the Session has been sent: the dropped
// ones and the ones spec.outcomes holds.
func (s *SessionSpec) OutcomeCount() int32 {
	return s.OutcomesDropped + int32(len(s.Outcomes))
}

// ApprovalAt returns approval n of the Session, when spec.approvals still holds it.
func (s *SessionSpec) ApprovalAt(n int32) (*Approval, bool) {
	i := int(n) - int(s.ApprovalsDropped)
	if i < 0 || i >= len(s.Approvals) {
		return nil, false
	}
	return &s.Approvals[i], true
}

// ApprovalCount is how many approvals the Session has been sent: the dropped ones and
// the ones spec.approvals holds.
func (s *SessionSpec) ApprovalCount() int32 {
	return s.ApprovalsDropped + int32(len(s.Approvals))
}

// InterventionAt returns intervention n of the Session, when spec.interventions still
// holds it.
func (s *SessionSpec) InterventionAt(n int32) (*Intervention, bool) {
	i := int(n) - int(s.InterventionsDropped)
	if i < 0 || i >= len(s.Interventions) {
		return nil, false
	}
	return &s.Interventions[i], true
}

// InterventionCount is how many interventions the Session has been sent: the dropped
// ones and the ones spec.interventions holds.
func (s *SessionSpec) InterventionCount() int32 {
	return s.InterventionsDropped + int32(len(s.Interventions))
}

// DroppableOutcomes is how many outcomes may have left spec.outcomes: the processed
// ones. The Session's validation refuses a spec.outcomesDropped past it.
func (s *Session) DroppableOutcomes() int32 { return max(s.Status.ProcessedOutcomes, 0) }

// DroppableApprovals is how many approvals may have left spec.approvals: the
// processed ones. The Session's validation refuses a spec.approvalsDropped past it.
func (s *Session) DroppableApprovals() int32 { return max(s.Status.ProcessedApprovals, 0) }

// InterventionsPending reports whether the Session has interventions the engine has not
// processed: a finished Session still takes a step for them (a Failed one may resume).
func (s *Session) InterventionsPending() bool {
	return s.Status.ProcessedInterventions < s.Spec.InterventionCount()
}

// DroppableInterventions is how many interventions may have left spec.interventions:
// the processed ones. The Session's validation refuses a spec.interventionsDropped past
// it.
func (s *Session) DroppableInterventions() int32 { return max(s.Status.ProcessedInterventions, 0) }

// MoveAtOrBefore returns the last entry of status.history at or before step that says
// where the Session was after it (a move or an intervention, not a refused move). ok
// is false when there is none; kept then says whether history still holds every move
// the Session made (one entry for each of status.transitions, besides refused moves
// and interventions), so that having none means the Session was where it started.
func (s *SessionStatus) MoveAtOrBefore(step int64) (entry *HistoryEntry, ok, kept bool) {
	moves := 0
	for i := len(s.History) - 1; i >= 0; i-- {
		e := &s.History[i]
		if e.Action == ActionBlock {
			continue
		}
		if e.Step <= step {
			return e, true, true
		}
		if e.Source != SourceHuman {
			moves++
		}
	}
	return nil, false, moves == int(s.Transitions)
}

// InterventionRecord returns the record of the processed intervention id in
// status.interventions, nil when it holds none (not processed yet, or its record
// was dropped).
func (s *SessionStatus) InterventionRecord(id string) *InterventionRecord {
	for i := len(s.Interventions) - 1; i >= 0; i-- {
		if s.Interventions[i].Intervention.ID == id {
			return &s.Interventions[i]
		}
	}
	return nil
}

// Refusal says what intervention r refused, who sent it and why ("Resume by alice
// refused: ..."): the message of its InterventionRefused Event. It is "" for an
// intervention that applied.
func (r *InterventionRecord) Refusal() string {
	if r.Result != InterventionRefused {
		return ""
	}
	by := r.Intervention.By
	if by == "" {
		by = "an unnamed person"
	}
	return fmt.Sprintf("%s by %s refused: %s", r.Intervention.Action, by, r.Message)
}
