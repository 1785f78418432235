package openai

import (
	"context"
	"strings"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// A Sequential pipeline of two agents with instructions of their own: each request
// carries its agent's role, and the second sees the first's outputs in its inputs.
func TestSequentialAgentsWithRoles(t *testing.T) {
	cs := testenv.NewChatServer(t, nil)
	cs.Script(
		testenv.Answer(`{"reply":"","outputs":{"draft":"Dear patient, Dr. Smith is free on Tuesday.","verdict":""},"outcome":"success","complete":true}`),
		testenv.Answer(`{"reply":"Dr. Smith is free on Tuesday.","outputs":{"draft":"Dr. Smith is free on Tuesday.","verdict":"approved"},"outcome":"success","complete":true}`),
	)
	var agents []agent.Agent
	for _, spec := range []flowv1.AgentSpec{
		{Name: "writer", Provider: flowv1.ProviderOpenAI, Model: "m", BaseURL: cs.BaseURL(), Instructions: "You write the first draft."},
		{Name: "reviewer", Provider: flowv1.ProviderOpenAI, Model: "m", BaseURL: cs.BaseURL(), Instructions: "You review the draft and shorten it."},
	} {
		a, err := New(spec, "sk-test")
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
	}
	spec := &flowv1.PathwaySpec{
		Agents:   []flowv1.Name{"writer", "reviewer"},
		Pipeline: flowv1.PipelineSequential,
		Signature: flowv1.Signature{
			Instructions: "Tell the patient when a doctor is free.",
			Outputs:      []flowv1.SignatureField{{Name: "draft", Type: "string"}, {Name: "verdict", Type: "string"}},
		},
	}
	resp, err := agent.RunPipeline(context.Background(), agents, flowv1.PipelineSequential,
		agent.PathwayRequest{Pathway: "booking", Spec: spec, Message: "When is Dr. Smith free?"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Reply != "Dr. Smith is free on Tuesday." || resp.Outputs["verdict"] != "approved" {
		t.Errorf("response %+v", resp)
	}
	reqs := cs.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	system := func(r testenv.ChatRequest) string {
		for _, m := range r.Messages {
			if m.Role == "system" {
				return m.Content
			}
		}
		return ""
	}
	first, second := system(reqs[0]), system(reqs[1])
	if !strings.Contains(first, "You write the first draft.") || strings.Contains(first, "You review") {
		t.Errorf("the writer's system prompt:\n%s", first)
	}
	if !strings.Contains(second, "You review the draft and shorten it.") || strings.Contains(second, "You write") {
		t.Errorf("the reviewer's system prompt:\n%s", second)
	}
	for _, s := range []string{first, second} {
		if !strings.Contains(s, "Tell the patient when a doctor is free.") {
			t.Errorf("the pathway's instructions are missing:\n%s", s)
		}
	}
	if u := reqs[0].User(); strings.Contains(u, "Dear patient") {
		t.Errorf("the writer saw its own future draft: %s", u)
	}
	if u := reqs[1].User(); !strings.Contains(u, `"draft":"Dear patient, Dr. Smith is free on Tuesday."`) {
		t.Errorf("the reviewer did not see the writer's draft in its inputs:\n%s", u)
	}
}
