package engine

import (
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// idleDeadline is when a Session waiting for input times out under limits.idleTimeout:
// its last activity plus the idle timeout. ok is false when there is no idle timeout or
// the Session is not idle: not waiting for input, in a turn, or with a message or
// External outcome still to take in (taking it in is activity).
func idleDeadline(l limits, spec *flowv1.SessionSpec, st *flowv1.SessionStatus) (time.Time, bool) {
	if l.idle <= 0 || st.Phase != flowv1.PhaseWaitingForInput || st.Turn != nil || st.LastActivityTime == nil {
		return time.Time{}, false
	}
	if spec != nil && (st.ProcessedMessages < spec.MessageCount() || st.ProcessedOutcomes < spec.OutcomeCount()) {
		return time.Time{}, false
	}
	return st.LastActivityTime.Add(l.idle), true
}

// timeoutStart is when the session timeout of a Session created at created counts
// from: when a Resume last lifted a session timeout, else its creation, else
// status.startTime.
func timeoutStart(created time.Time, st *flowv1.SessionStatus) time.Time {
	switch {
	case st.SessionTimeoutFrom != nil:
		return st.SessionTimeoutFrom.Time
	case created.IsZero() && st.StartTime != nil:
		return st.StartTime.Time
	}
	return created
}

// NextDeadline is the earliest time at which a step of a Session with this spec and
// status, created at created (else started at status.startTime; see timeoutStart), would stop it
// without any input: its session timeout or, while it waits for input, its idle
// timeout, or, while it waits for an approval with a timeout, that approval's
// deadline, or, while a tool call waits for the user's input, its elicitationTimeout. It is zero when the Session has not started.
func (s *Snapshot) NextDeadline(spec *flowv1.SessionSpec, st *flowv1.SessionStatus, created time.Time) time.Time {
	if st == nil {
		return time.Time{}
	}
	start := timeoutStart(created, st)
	var at time.Time
	if !start.IsZero() {
		at = s.Deadline(start)
	}
	if idle, ok := idleDeadline(s.lim, spec, st); ok && (at.IsZero() || idle.Before(at)) {
		at = idle
	}
	if approval, _, ok := s.approvalDeadline(st); ok && (at.IsZero() || approval.Before(at)) {
		at = approval
	}
	if input, ok := s.earliestInputDeadline(st); ok && (at.IsZero() || input.Before(at)) {
		at = input
	}
	return at
}
