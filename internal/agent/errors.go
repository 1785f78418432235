package agent

import (
	"errors"
	"fmt"
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// ErrorClass tells the controller what to do with a failed call.
type ErrorClass string

const (
	// Transient errors (429, 5xx, timeouts, connection resets) are retried by requeueing
	// the Session with backoff; nothing is journaled.
	Transient ErrorClass = "Transient"
	// Terminal errors (401/403, 404 model, other 4xx, a missing API key) cannot succeed
	// by retrying; the Session is stalled with a reason a person can act on.
	Terminal ErrorClass = "Terminal"
	// Invalid answers (bad JSON, a destination outside the allowed list, a confidence
	// outside [0,1], an empty choice list) are journaled as unclear decisions or "no
	// intent": never a jump elsewhere.
	Invalid ErrorClass = "Invalid"
)

// Error is a classified agent failure. Its message never contains secrets.
type Error struct {
	Class ErrorClass
	// Kind and Source are the typed failure recorded in status.
	Kind   flowv1.FailureKind
	Source flowv1.FailureSource
	// Agent is the agent's name.
	Agent string
	// RetryAfter is the server's Retry-After hint for transient errors, if any.
	RetryAfter time.Duration
	Err        error
}

// Error names the agent when there is one, then the class and kind of the failure.
func (e *Error) Error() string {
	if e.Agent == "" {
		return fmt.Sprintf("%s %s error: %v", e.Class, e.Kind, e.Err)
	}
	return fmt.Sprintf("agent %q: %s %s error: %v", e.Agent, e.Class, e.Kind, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Failure is the typed failure record for status.
func (e *Error) Failure() flowv1.Failure {
	return flowv1.Failure{Source: e.Source, Component: e.Agent, Kind: e.Kind, Message: e.Error()}
}

// ClassOf returns the class of err: the class of an *Error in its chain, else Transient.
func ClassOf(err error) ErrorClass {
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Class
	}
	return Transient
}
