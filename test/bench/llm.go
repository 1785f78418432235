package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// slowLLM is a chat completions endpoint that answers every intent classification
// with "none" after latency: a stand-in for a remote model, to show what agent calls
// do to throughput.
func slowLLM(latency time.Duration) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(latency)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "bench", "object": "chat.completion", "model": "bench",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": `{"intent":"none","confidence":0.9,"reasoning":"bench"}`}}},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
		})
	}))
}

// remoteClassifier makes the journey's intent classifier an openai agent at baseURL.
func remoteClassifier(j *flowv1.Journey, baseURL string) bool {
	if j.Spec.IntentDetection == nil {
		return false
	}
	for i := range j.Spec.Agents {
		a := &j.Spec.Agents[i]
		if a.Name == j.Spec.IntentDetection.Agent {
			a.Provider, a.Model, a.BaseURL, a.Builtin = flowv1.ProviderOpenAI, "bench", baseURL, nil
			return true
		}
	}
	return false
}
