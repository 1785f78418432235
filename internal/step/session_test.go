package step_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/journeytest"
	"github.com/journeyops/journey-operator/internal/revision"
	"github.com/journeyops/journey-operator/internal/step"
)

// waitingForClassifier returns a journey whose agents are LLMs, and a Session of it that
// has started and holds a message: its next step asks the classifier.
func waitingForClassifier(t *testing.T, mods ...func(*journeytest.RevisionData)) (*engine.Snapshot, step.Input) {
	t.Helper()
	c, err := journeytest.Load(filepath.Join("..", "journeytest", "testdata", "llm-answers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		m(c.Data)
	}
	snap, _, err := revision.Build(c.Journey, c.Data)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	in := step.Input{Generation: 2, Input: engine.Input{
		Spec:   &flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: c.Journey}},
		Status: &flowv1.SessionStatus{}, Now: now, SessionName: "s", SessionUID: "uid", CreationTime: now,
	}}
	// Start the Session: the entry pathway is not an Entry pathway, so this writes no effect.
	loop := step.Loop{Performer: refuse(t)}
	for range 10 {
		res, err := loop.Step(context.Background(), snap, in)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome == step.Unchanged {
			break
		}
		in.Status = res.Status
	}
	in.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "My order arrived broken."}}
	return snap, in
}

func refuse(t *testing.T) step.Performer {
	return step.PerformerFunc(func(_ context.Context, eff *engine.Effect) (step.Answer, error) {
		t.Fatalf("unexpected effect %s", step.Describe(eff))
		return step.Answer{}, nil
	})
}

func answer(a step.Answer, err error) step.Performer {
	return step.PerformerFunc(func(context.Context, *engine.Effect) (step.Answer, error) { return a, err })
}

func TestStepJournalsTheAnswer(t *testing.T) {
	snap, in := waitingForClassifier(t)
	loop := step.Loop{Performer: answer(step.Answer{Response: agent.IntentResponse{Intent: agent.NoIntent, Confidence: 0.9}}, nil)}
	res, err := loop.Step(context.Background(), snap, in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != step.Performed || res.Effect == nil || res.Effect.Kind != flowv1.EffectClassifyIntent {
		t.Fatalf("outcome %s, effect %+v: want the classifier's answer performed", res.Outcome, res.Effect)
	}
	p := res.Status.PendingEffect
	if p == nil || p.Kind != flowv1.EffectClassifyIntent || p.Result.Intent != agent.NoIntent || p.InputHash != res.Effect.InputHash {
		t.Fatalf("pendingEffect %+v: want the answer journaled with the effect's input hash", p)
	}
	if len(res.Status.Journal) != 1 || res.Status.Journal[0].ID != p.ID {
		t.Errorf("journal %+v: want the pending answer", res.Status.Journal)
	}
	if c := apimeta.FindStatusCondition(res.Status.Conditions, flowv1.ConditionAgentAvailable); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("AgentAvailable %+v: want True", c)
	}
	if res.Status.ObservedGeneration != 2 {
		t.Errorf("observedGeneration %d, want 2", res.Status.ObservedGeneration)
	}
	if in.Status.PendingEffect != nil {
		t.Error("the step changed its input")
	}
}

func TestStepAgentFailures(t *testing.T) {
	rateLimited := &agent.Error{Class: agent.Transient, Kind: flowv1.FailureRateLimit, Source: flowv1.FailureLLM, Err: errors.New("429")}
	refused := &agent.Error{Class: agent.Terminal, Kind: flowv1.FailureValidation, Source: flowv1.FailureLLM, Err: errors.New("401")}
	for _, tc := range []struct {
		name            string
		err             error
		retry           time.Duration
		outcome         step.Outcome
		condition       string
		reason, message string
	}{
		{"transient", rateLimited, 0, step.AgentRetry, flowv1.ConditionAgentAvailable, flowv1.ReasonRateLimited, rateLimited.Error()},
		{"terminal offline", refused, 0, step.AgentStalled, flowv1.ConditionStalled, flowv1.ReasonAgentTerminalError, refused.Error()},
		{"terminal retried", refused, time.Minute, step.AgentStalled, flowv1.ConditionStalled, flowv1.ReasonAgentTerminalError, refused.Error() + " (retried every 1m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, in := waitingForClassifier(t)
			loop := step.Loop{Performer: answer(step.Answer{Err: tc.err}, nil), StallRetry: tc.retry}
			res, err := loop.Step(context.Background(), snap, in)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.outcome || res.Reason != tc.reason || !errors.Is(res.Err, tc.err) {
				t.Fatalf("outcome %s reason %s err %v: want %s %s", res.Outcome, res.Reason, res.Err, tc.outcome, tc.reason)
			}
			if res.Status.PendingEffect != nil || len(res.Status.Journal) != 0 || res.Status.Step != in.Status.Step {
				t.Errorf("a failed agent call journaled %+v or took a step", res.Status.PendingEffect)
			}
			c := apimeta.FindStatusCondition(res.Status.Conditions, tc.condition)
			if c == nil || c.Reason != tc.reason || !strings.HasPrefix(c.Message, tc.message) || !strings.HasPrefix(res.Message, tc.message) {
				t.Errorf("%s = %+v, message %q: want reason %s and message %q", tc.condition, c, res.Message, tc.reason, tc.message)
			}
			// The same failure again changes nothing more than the count of attempts.
			in.Status = res.Status
			again, err := loop.Step(context.Background(), snap, in)
			if err != nil {
				t.Fatal(err)
			}
			want := res.Status.DeepCopy()
			if tc.outcome == step.AgentRetry {
				if r := again.Status.AgentRetry; r == nil || r.Attempts != 2 || !r.Since.Time.Equal(in.Now) || r.InputHash != res.Effect.InputHash {
					t.Errorf("agentRetry after two failures: %+v", r)
				}
				want.AgentRetry = again.Status.AgentRetry
			}
			if !equality.Semantic.DeepEqual(again.Status, want) {
				t.Errorf("the same failure changed the status again")
			}
		})
	}
}

// A call that keeps failing transiently is given up after the retry limit (the
// journey's default 2, plus the first attempt): its error is journaled as its answer,
// so the engine applies it (here: the classifier found no intent) and the turn goes on.
func TestStepTransientGivesUp(t *testing.T) {
	rateLimited := &agent.Error{Class: agent.Transient, Kind: flowv1.FailureRateLimit, Source: flowv1.FailureLLM, Agent: "triage", Err: errors.New("429")}
	snap, in := waitingForClassifier(t)
	calls := 0
	loop := step.Loop{Performer: step.PerformerFunc(func(context.Context, *engine.Effect) (step.Answer, error) {
		calls++
		return step.Answer{Err: rateLimited}, nil
	})}
	for attempt := 1; attempt <= 2; attempt++ {
		res, err := loop.Step(context.Background(), snap, in)
		if err != nil || res.Outcome != step.AgentRetry {
			t.Fatalf("attempt %d: %s, %v", attempt, res.Outcome, err)
		}
		in.Status = res.Status
		in.Now = in.Now.Add(time.Second)
	}
	res, err := loop.Step(context.Background(), snap, in)
	if err != nil || res.Outcome != step.Performed || calls != 3 {
		t.Fatalf("third attempt: %s, %v after %d calls; want the failure journaled", res.Outcome, err, calls)
	}
	rec := res.Status.PendingEffect
	if rec == nil || rec.Result.Failure == nil || rec.Result.Failure.Kind != flowv1.FailureRateLimit ||
		!strings.Contains(rec.Result.Failure.Message, "gave up after 3 attempts") {
		t.Fatalf("journaled %+v", rec)
	}
	if res.Status.AgentRetry != nil {
		t.Errorf("agentRetry kept after the call was answered: %+v", res.Status.AgentRetry)
	}
}

// A model that hangs is abandoned at the pathway's timeout, counted from the call's
// first attempt, retries included: the timeout is journaled as the call's answer.
func TestStepPathwayTimeout(t *testing.T) {
	snap, in := waitingForClassifier(t, func(d *journeytest.RevisionData) {
		d.Pathways["help"].Timeout = &metav1.Duration{Duration: 50 * time.Millisecond}
	})
	hang := step.PerformerFunc(func(ctx context.Context, _ *engine.Effect) (step.Answer, error) {
		<-ctx.Done()
		return step.Answer{Err: &agent.Error{Class: agent.Transient, Kind: flowv1.FailureTimeout, Source: flowv1.FailureTransport, Err: ctx.Err()}}, nil
	})
	res, err := (&step.Loop{Performer: hang}).Step(context.Background(), snap, in)
	if err != nil || res.Outcome != step.Performed {
		t.Fatalf("%s, %v: want the timeout journaled", res.Outcome, err)
	}
	if f := res.Status.PendingEffect.Result.Failure; f == nil || f.Kind != flowv1.FailureTimeout || !strings.Contains(f.Message, "pathway timeout 50ms") {
		t.Fatalf("journaled %+v", res.Status.PendingEffect)
	}

	// A call retried past its timeout is not made again.
	in.Status.AgentRetry = &flowv1.AgentRetry{InputHash: res.Effect.InputHash, Attempts: 1, Since: metav1.NewTime(in.Now.Add(-time.Second))}
	res, err = (&step.Loop{Performer: refuse(t)}).Step(context.Background(), snap, in)
	if err != nil || res.Outcome != step.Performed || res.Status.PendingEffect.Result.Failure == nil {
		t.Fatalf("%s, %v: want the timeout journaled without a call", res.Outcome, err)
	}
}

func TestStepWithoutAnswer(t *testing.T) {
	snap, in := waitingForClassifier(t)
	missing := errors.New("no recorded answer")
	loop := step.Loop{Performer: answer(step.Answer{}, missing)}
	if _, err := loop.Step(context.Background(), snap, in); !errors.Is(err, missing) {
		t.Fatalf("err %v: want the performer's", err)
	}
}
