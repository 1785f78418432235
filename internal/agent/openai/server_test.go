package openai

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/testenv"
)

const testKey = "sk-test-4f1c9a0b7e2d3c5a6b8e9f0a1b2c3d4e"

// newChatServer is the harness's chat server answering every request with respond.
func newChatServer(t testing.TB, respond testenv.Responder) *testenv.ChatServer {
	t.Helper()
	return testenv.NewChatServer(t, respond)
}

// request decodes the n-th request body (from 1).
func request(t testing.TB, srv *testenv.ChatServer, n int) map[string]any {
	t.Helper()
	m, err := srv.Request(t, n).Decode()
	if err != nil {
		t.Fatalf("request %d is not JSON: %v", n, err)
	}
	return m
}

// reply is a chat completion whose first choice says content.
func reply(content string, prompt, completionTokens int) testenv.Reply {
	return testenv.Reply{Content: content, Usage: testenv.Usage{Prompt: prompt, Completion: completionTokens}}
}

func decisionJSON(dest string, confidence float64) string {
	return fmt.Sprintf(`{"destination":%q,"confidence":%v,"reasoning":"because"}`, dest, confidence)
}

// sleeper records the waits the agent asks for without waiting.
type sleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeper) Waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

var testNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func testSpec(baseURL string) flowv1.AgentSpec {
	return flowv1.AgentSpec{
		Name:        "triage",
		Provider:    "openai",
		Model:       "gpt-4o-mini",
		BaseURL:     baseURL,
		Temperature: "0.2",
		Timeout:     &metav1.Duration{Duration: 2 * time.Second},
		Pricing:     &flowv1.Pricing{PromptPerMTok: "0.15", CompletionPerMTok: "0.60"},
	}
}

// newTestAgent builds an agent on srv with a recorded sleep, a fixed clock and a
// jitter of 0.5 (a backoff delay d becomes 3d/4).
func newTestAgent(t testing.TB, spec flowv1.AgentSpec, sl *sleeper, opts ...Option) *Agent {
	t.Helper()
	all := []Option{
		WithSleep(sl.sleep),
		WithClock(func() time.Time { return testNow }),
		WithJitter(func() float64 { return 0.5 }),
	}
	a, err := New(spec, testKey, append(all, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

// decisionReq is a decision among booking and escalation whose outputs and context
// carry end-user text.
func decisionReq(userText string) agent.DecisionRequest {
	return agent.DecisionRequest{
		ID:         "d-7",
		Pathway:    "test",
		Transition: "onPartialSuccess",
		Decision: &flowv1.Decision{
			Agent:               "triage",
			Prompt:              "Assess the test results and choose the next step.",
			AllowedDestinations: []flowv1.Name{"booking", "escalation"},
		},
		ResultType: flowv1.ResultPartialSuccess,
		Outputs:    map[string]any{"failures": 3, "note": userText},
		Context:    map[string]any{"last_message": userText},
		Session:    agent.SessionInfo{Name: "s1", Pathway: "test", Iteration: 2},
	}
}
