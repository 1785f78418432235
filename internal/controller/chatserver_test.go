package controller

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// chatServer is a local server speaking the chat completions protocol, for the real
// go-openai client. answer gets the response schema's name (decision, intent,
// pathway_turn) and the user messages, and returns the JSON content of the answer.
type chatServer struct {
	*httptest.Server
	calls atomic.Int32
	mu    sync.Mutex
	auth  []string
	// block, when set, holds each call it returns true for until the client gives up.
	block func(call int32) bool
	// status, when set and non-zero for a call, fails it with that HTTP status.
	status atomic.Int32
	answer func(kind, user string) string
}

func newChatServer(t *testing.T, answer func(kind, user string) string) *chatServer {
	t.Helper()
	cs := &chatServer{answer: answer}
	cs.Server = httptest.NewServer(http.HandlerFunc(cs.handle))
	t.Cleanup(cs.Close)
	return cs
}

func (cs *chatServer) handle(w http.ResponseWriter, r *http.Request) {
	n := cs.calls.Add(1)
	cs.mu.Lock()
	cs.auth = append(cs.auth, r.Header.Get("Authorization"))
	cs.mu.Unlock()
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		ResponseFormat struct {
			JSONSchema struct {
				Name string `json:"name"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if code := cs.status.Load(); code != 0 {
		w.Header().Set("Retry-After", "0")
		http.Error(w, `{"error":{"message":"try later","type":"test"}}`, int(code))
		return
	}
	if cs.block != nil && cs.block(n) {
		<-r.Context().Done()
		return
	}
	var user []string
	for _, m := range req.Messages {
		if m.Role == "user" {
			user = append(user, m.Content)
		}
	}
	content := cs.answer(req.ResponseFormat.JSONSchema.Name, strings.Join(user, "\n"))
	body, _ := json.Marshal(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "model": "test-model",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": content}}},
		"usage": map[string]any{"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
	})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func (cs *chatServer) authHeaders() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]string(nil), cs.auth...)
}
