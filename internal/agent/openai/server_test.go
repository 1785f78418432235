package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

const testKey = "sk-test-4f1c9a0b7e2d3c5a6b8e9f0a1b2c3d4e"

// chatServer is a local chat completions endpoint. respond answers call n (from 1);
// it records every request.
type chatServer struct {
	*httptest.Server
	respond func(n int, w http.ResponseWriter, r *http.Request)

	mu       sync.Mutex
	calls    int
	bodies   [][]byte
	headers  []http.Header
	stopping chan struct{}
}

func newChatServer(t testing.TB, respond func(n int, w http.ResponseWriter, r *http.Request)) *chatServer {
	t.Helper()
	s := &chatServer{respond: respond, stopping: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.calls++
		n := s.calls
		s.bodies = append(s.bodies, body)
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		s.respond(n, w, r)
	}))
	t.Cleanup(func() {
		close(s.stopping)
		s.Close()
	})
	return s
}

func (s *chatServer) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// request decodes the n-th request body (from 1).
func (s *chatServer) request(t testing.TB, n int) map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > len(s.bodies) {
		t.Fatalf("request %d: only %d requests", n, len(s.bodies))
	}
	var m map[string]any
	if err := json.Unmarshal(s.bodies[n-1], &m); err != nil {
		t.Fatalf("request %d is not JSON: %v", n, err)
	}
	return m
}

// completion writes a chat completion whose first choice says content.
func completion(w http.ResponseWriter, content string, prompt, completionTokens int) {
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
		"choices": []any{map[string]any{
			"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": content},
		}},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completionTokens, "total_tokens": prompt + completionTokens},
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, status int, message, typ string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": message, "type": typ, "code": typ}})
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
