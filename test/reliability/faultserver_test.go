package reliability

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Faults the chat server injects.
const (
	faultTimeout   = "timeout"     // no answer until the client gives up
	fault429       = "429"         // rate limited
	fault500       = "500"         // server error
	faultGarbage   = "garbage"     // 200 with a body or content that is not the JSON asked for
	faultOutOfList = "out-of-list" // 200 with a destination or intent outside the enum
)

var faultKinds = []string{faultTimeout, fault429, fault500, faultGarbage, faultOutOfList}

// faultServer speaks the chat completions protocol (POST /v1/chat/completions with a
// json_schema response format) and fails a share of the calls. Its good answers are a
// function of the request: the intent is faq-detour when the message mentions a
// question, the decision is shipping when the order is late, else billing, and a
// pathway turn is complete when the customer says bye.
type faultServer struct {
	*httptest.Server
	rate float64

	mu     sync.Mutex
	rng    *rand.Rand
	calls  int
	faults map[string]int
	byKind map[string]int // calls by response schema
}

func newFaultServer(t *testing.T, rate float64, seed uint64) *faultServer {
	t.Helper()
	fs := &faultServer{rate: rate, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), faults: map[string]int{}, byKind: map[string]int{}}
	fs.Server = httptest.NewServer(http.HandlerFunc(fs.handle))
	t.Cleanup(fs.Close)
	return fs
}

// fault picks the fault for the next call, or "".
func (fs *faultServer) fault(kind string) string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.calls++
	fs.byKind[kind]++
	if fs.rng.Float64() >= fs.rate {
		return ""
	}
	f := faultKinds[fs.rng.IntN(len(faultKinds))]
	fs.faults[f]++
	return f
}

func (fs *faultServer) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		ResponseFormat struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Name string `json:"name"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	kind := req.ResponseFormat.JSONSchema.Name
	var user strings.Builder
	for _, m := range req.Messages {
		if m.Role == "user" {
			user.WriteString(strings.ToLower(m.Content))
			user.WriteString("\n")
		}
	}
	text := user.String()
	f := fs.fault(kind)
	switch f {
	case faultTimeout:
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		return
	case fault429:
		writeJSONBody(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{"message": "rate limited", "type": "rate_limit_error"}})
		return
	case fault500:
		writeJSONBody(w, http.StatusInternalServerError, map[string]any{"error": map[string]any{"message": "upstream overloaded", "type": "server_error"}})
		return
	case faultGarbage:
		if fs.coin() {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id": "chatcmpl-x", "choices": [{"message": {"content": `))
			return
		}
		completionBody(w, "Sure! I think the answer is shipping, probably.")
		return
	}
	var content string
	switch kind {
	case "intent":
		intent := "none"
		if strings.Contains(text, "question") {
			intent = "faq-detour"
		}
		if f == faultOutOfList {
			intent = "refund-everything"
		}
		content = fmt.Sprintf(`{"intent":%q,"confidence":0.9,"reasoning":"from the words used"}`, intent)
	case "decision":
		dest := "billing"
		if strings.Contains(text, "late") {
			dest = "shipping"
		}
		if f == faultOutOfList {
			dest = "refunds"
		}
		content = fmt.Sprintf(`{"destination":%q,"confidence":0.9,"reasoning":"the order says so"}`, dest)
	default: // a pathway turn
		outcome := "success"
		if f == faultOutOfList {
			outcome = "catastrophe"
		}
		content = fmt.Sprintf(`{"reply":"Your billing question is noted.","outputs":{"note":"noted"},"outcome":%q,"complete":%v}`,
			outcome, strings.Contains(text, "bye"))
	}
	completionBody(w, content)
}

func (fs *faultServer) coin() bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.rng.IntN(2) == 0
}

// counts returns the calls made and the faults injected, by kind.
func (fs *faultServer) counts() (calls int, faults map[string]int, schemas string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	faults = map[string]int{}
	for k, v := range fs.faults {
		faults[k] = v
	}
	keys := make([]string, 0, len(fs.byKind))
	for k := range fs.byKind {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, fs.byKind[k]))
	}
	return fs.calls, faults, strings.Join(parts, " ")
}

func completionBody(w http.ResponseWriter, content string) {
	writeJSONBody(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "test-model",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": content}}},
		"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
	})
}

func writeJSONBody(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
