package agent

import (
	"errors"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// An agent error names the agent it came from, and reads well without one.
func TestErrorMessageNamesTheAgent(t *testing.T) {
	named := &Error{Class: Invalid, Kind: flowv1.FailureValidation, Agent: "triage", Err: errors.New("confidence 1.5 is outside [0,1]")}
	if got, want := named.Error(), `agent "triage": Invalid Validation error: confidence 1.5 is outside [0,1]`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	anonymous := &Error{Class: Terminal, Kind: flowv1.FailureValidation, Err: errors.New("effect names no agent")}
	if got, want := anonymous.Error(), "Terminal Validation error: effect names no agent"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
