package step_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/journeytest"
	"github.com/journeyops/journey-operator/internal/step"
)

// hangingModel is a model that never answers a pathway turn: RunPathway blocks until
// its context ends and returns the context's error, as a client cut off mid-call does.
// It classifies every message as no intent at once.
type hangingModel struct{ turns atomic.Int32 }

func (m *hangingModel) RunPathway(ctx context.Context, _ agent.PathwayRequest) (agent.PathwayResponse, error) {
	m.turns.Add(1)
	<-ctx.Done()
	return agent.PathwayResponse{}, ctx.Err()
}

func (m *hangingModel) Decide(context.Context, agent.DecisionRequest) (agent.DecisionResponse, error) {
	return agent.DecisionResponse{}, errors.New("not asked in this test")
}

func (m *hangingModel) ClassifyIntent(context.Context, agent.IntentRequest) (agent.IntentResponse, error) {
	return agent.IntentResponse{Intent: agent.NoIntent, Confidence: 1}, nil
}

// A model that hangs fails the turn at the pathway's timeout: the turn's result is a
// failure with kind Timeout and the Session takes onFailure. The model blocks until
// its context is cancelled, so the outcome does not depend on how fast the machine
// is: only the pathway timeout ends the call.
func TestHangingModelHitsPathwayTimeout(t *testing.T) {
	snap, in := waitingForClassifier(t, func(d *journeytest.RevisionData) {
		help := d.Pathways["help"]
		help.Timeout = &metav1.Duration{Duration: 100 * time.Millisecond}
		help.Transitions.OnFailure = &flowv1.OutcomeTransition{To: "done"}
	})
	model := &hangingModel{}
	loop := &step.Loop{Performer: step.PerformerFunc(func(ctx context.Context, eff *engine.Effect) (step.Answer, error) {
		agents := make([]agent.Agent, len(eff.Agents))
		for i := range agents {
			agents[i] = model
		}
		resp, err := step.Call(ctx, agents, eff)
		return step.Answer{Response: resp, Err: err}, nil
	})}
	// Should the pathway timeout not bound the call, the test's own deadline ends it
	// (and the checks below fail) rather than the test hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var failed *flowv1.TurnOutcome
	for range 20 {
		res, err := loop.Step(ctx, snap, in)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome == step.AgentRetry || res.Outcome == step.AgentStalled {
			t.Fatalf("the hanging call was %s (%v); want it answered by the pathway timeout", res.Outcome, res.Err)
		}
		if lt := res.Status.LastTurn; lt != nil && lt.Pathway == "help" && lt.ResultType == flowv1.ResultFailure {
			failed = lt.DeepCopy()
		}
		if res.Outcome == step.Unchanged {
			break
		}
		in.Status = res.Status
	}
	st := in.Status
	if failed == nil || len(failed.Failures) == 0 || failed.Failures[0].Kind != flowv1.FailureTimeout ||
		!strings.Contains(failed.Failures[0].Message, "pathway timeout 100ms") {
		t.Fatalf("the help turn did not fail with the pathway timeout: %+v", failed)
	}
	if st.Phase != flowv1.PhaseCompleted || st.CurrentPathway != "done" {
		t.Fatalf("phase %s in %s; want onFailure to lead to done", st.Phase, st.CurrentPathway)
	}
	var took bool
	for _, h := range st.History {
		took = took || (h.From == "help" && h.To == "done" && h.Transition == "onFailure")
	}
	if !took {
		t.Errorf("history %+v has no onFailure transition from help", st.History)
	}
	if n := model.turns.Load(); n != 1 {
		t.Errorf("the hanging model was asked %d times; the timeout bounds the turn, retries included", n)
	}
}
