package step_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/step"
)

// builtinChat is a one-pathway chat whose agent is builtin: every step is pure.
func builtinChat(t *testing.T) *engine.Snapshot {
	t.Helper()
	j := &flowv1.JourneySpec{EntryPathway: "chat", Pathways: []flowv1.PathwayEntry{{Name: "chat", PathwayRef: "chat"}}}
	p := &flowv1.PathwaySpec{Builtin: &flowv1.BuiltinPathway{Reply: "ok", Complete: "false"}}
	snap, err := engine.NewSnapshot("chat-1", j, map[string]*flowv1.PathwaySpec{"chat": p})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// Pure steps are taken together: one write processes the pending messages of a builtin
// chat, up to MoreSteps more steps, and reaches the status that steps one at a time
// reach.
func TestPureStepsAreWrittenTogether(t *testing.T) {
	snap := builtinChat(t)
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	newInput := func() step.Input {
		spec := &flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "chat"}}
		for i := range 5 {
			spec.Messages = append(spec.Messages, flowv1.Message{ID: fmt.Sprintf("m%d", i), Text: "hi"})
		}
		return step.Input{Generation: 1, Input: engine.Input{Spec: spec, Status: &flowv1.SessionStatus{}, Now: now, SessionName: "s", SessionUID: "u", CreationTime: now}}
	}
	settle := func(loop step.Loop) (*flowv1.SessionStatus, int) {
		in := newInput()
		writes := 0
		for range 100 {
			res, err := loop.Step(context.Background(), snap, in)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome == step.Unchanged {
				return in.Status, writes
			}
			writes++
			in.Status = res.Status
		}
		t.Fatal("never settled")
		return nil, 0
	}
	one, oneWrites := settle(step.Loop{Performer: refuse(t)})
	together, writes := settle(step.Loop{Performer: refuse(t), MoreSteps: 16})
	if together.ProcessedMessages != 5 || together.Step != one.Step || together.Turns != one.Turns {
		t.Errorf("together: processed %d, step %d, turns %d; one at a time: step %d, turns %d",
			together.ProcessedMessages, together.Step, together.Turns, one.Step, one.Turns)
	}
	if writes != 1 || oneWrites <= writes {
		t.Errorf("%d writes together, %d one step at a time", writes, oneWrites)
	}
	_, capped := settle(step.Loop{Performer: refuse(t), MoreSteps: 1})
	if capped <= writes {
		t.Errorf("MoreSteps 1 took %d writes", capped)
	}
}
