package step_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/agent/openai"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/step"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// openaiPerformer performs effects with real openai agents (the go-openai client).
func openaiPerformer(t *testing.T) step.Performer {
	return step.PerformerFunc(func(ctx context.Context, eff *engine.Effect) (step.Answer, error) {
		agents := make([]agent.Agent, 0, len(eff.Agents))
		for _, spec := range eff.Agents {
			a, err := openai.New(spec, "sk-test")
			if err != nil {
				t.Fatal(err)
			}
			agents = append(agents, a)
		}
		resp, err := step.Call(ctx, agents, eff)
		return step.Answer{Response: resp, Err: err}, nil
	})
}

// settle steps in until nothing changes, and returns the last status.
func settle(t *testing.T, loop *step.Loop, snap *engine.Snapshot, in step.Input) *flowv1.SessionStatus {
	t.Helper()
	for range 20 {
		res, err := loop.Step(context.Background(), snap, in)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome == step.AgentRetry || res.Outcome == step.AgentStalled {
			t.Fatalf("agent failed: %v", res.Err)
		}
		if res.Outcome == step.Unchanged {
			return res.Status
		}
		in.Status = res.Status
	}
	t.Fatal("the Session did not settle")
	return nil
}

// Each turn's reply is kept with its message: turn 3's request carries turns 1 and
// 2's messages and replies, alternating and in order, then turn 3's message.
func TestConversationMemory(t *testing.T) {
	cs := testenv.NewChatServer(t, nil)
	for i := 1; i <= 3; i++ {
		cs.Script(testenv.Answer(fmt.Sprintf(`{"reply":"reply %d","outputs":{},"outcome":"success","complete":false}`, i)))
	}
	journey := &flowv1.JourneySpec{
		EntryPathway: "chat",
		Pathways:     []flowv1.PathwayEntry{{Name: "chat", PathwayRef: "chat"}},
		Agents:       []flowv1.AgentSpec{{Name: "bot", Provider: flowv1.ProviderOpenAI, Model: "m", BaseURL: cs.BaseURL()}},
	}
	chat := &flowv1.PathwaySpec{Agents: []flowv1.Name{"bot"}, Signature: flowv1.Signature{Instructions: "Chat with the user."}}
	snap, err := engine.NewSnapshot("rev-1", journey, map[string]*flowv1.PathwaySpec{"chat": chat})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	in := step.Input{Generation: 1, Input: engine.Input{
		Spec: &flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "j"}}, Status: &flowv1.SessionStatus{},
		Now: now, SessionName: "s", SessionUID: "uid", CreationTime: now,
	}}
	loop := &step.Loop{Performer: openaiPerformer(t)}
	for i := 1; i <= 3; i++ {
		in.Spec.Messages = append(in.Spec.Messages, flowv1.Message{ID: fmt.Sprintf("m%d", i), Text: fmt.Sprintf("message %d", i)})
		in.Status = settle(t, loop, snap, in)
	}
	reqs := cs.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	// The client joins consecutive messages of one role: the last user message is the
	// pathway's inputs, then the message.
	var got []string
	for _, m := range reqs[2].Messages {
		if m.Role == "system" {
			continue
		}
		if data, msg, ok := strings.Cut(m.Content, "\n\n"); ok && strings.HasPrefix(data, "The pathway's inputs") {
			m.Content = msg
		}
		got = append(got, m.Role+": "+m.Content)
	}
	want := []string{"user: message 1", "assistant: reply 1", "user: message 2", "assistant: reply 2", "user: message 3"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("turn 3 asked with\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	tr := in.Status.Transcript
	if len(tr) != 3 || tr[2].User != "message 3" || tr[2].Assistant != "reply 3" || tr[0].MessageID != "m1" {
		t.Errorf("transcript %+v", tr)
	}
}
