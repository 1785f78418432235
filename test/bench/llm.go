package main

import (
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// slowLLM is a chat completions endpoint that answers every intent classification
// with "none" after latency: a stand-in for a remote model, to show what agent calls
// do to throughput.
func slowLLM(latency time.Duration) *testenv.ChatServer {
	return testenv.NewChatServerNoCleanup(testenv.Always(testenv.Reply{
		Content: `{"intent":"none","confidence":0.9,"reasoning":"bench"}`,
		Usage:   testenv.Usage{Prompt: 100, Completion: 10},
		Latency: latency,
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
