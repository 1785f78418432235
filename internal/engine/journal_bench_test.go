package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// llmStatus is the status of an LLM Session after n model calls, as the bench's llm and
// react Sessions have it: n journaled answers (a pathway's reply with its reasoning and
// usage, every fourth a decision, every fifth a tool call with its result) and a
// transcript of n/2 exchanges.
func llmStatus(n int) *flowv1.SessionStatus {
	st := &flowv1.SessionStatus{Step: int64(2 * n)}
	for i := range n {
		st.Journal = append(st.Journal, *llmAnswer(i))
	}
	for i := range n / 2 {
		st.Transcript = append(st.Transcript, flowv1.Exchange{
			MessageID: fmt.Sprintf("m-%d", i), Pathway: "support", Step: int64(2 * i),
			User:      "Where is my order? It was due on Tuesday and the tracking page says \"label created\".",
			Assistant: strings.Repeat("Your order left the warehouse this morning. ", 4),
		})
	}
	return st
}

func llmAnswer(i int) *flowv1.EffectRecord {
	rec := &flowv1.EffectRecord{
		ID: fmt.Sprintf("0f6c2a1e-5b7d-4c1a-9e3f-2d8b6a4c9e1f/%d/3a7bd3e2", 2*i), Kind: flowv1.EffectRunPathway,
		Step: int64(2 * i), InputHash: "3a7bd3e2360a3d29", Agent: "support-agent",
		Result: flowv1.AgentResult{
			Reasoning:  "A late order: explain \"label created\".",
			Reply:      "Your order left the warehouse this morning.",
			Outputs:    &apiextensionsv1.JSON{Raw: []byte(`{"orderID":"A-1042","eta":"2026-11-28"}`)},
			Usage:      flowv1.Usage{PromptTokens: 812, CompletionTokens: 96},
			DurationMs: 840,
		},
	}
	switch {
	case i%5 == 4:
		rec.Kind, rec.ToolCall = flowv1.EffectCallTool, fmt.Sprintf("call-%d", i)
		rec.Result = flowv1.AgentResult{ToolResult: &apiextensionsv1.JSON{Raw: []byte(`{"content":[{"type":"text","text":"A-1042: shipped, 2 parcels"}]}`)}, DurationMs: 35}
	case i%4 == 3:
		rec.Kind = flowv1.EffectDecide
		rec.Result = flowv1.AgentResult{Destination: "billing", Confidence: "high", Reasoning: "A refund.", Usage: flowv1.Usage{PromptTokens: 640, CompletionTokens: 24}}
	}
	return rec
}

// BenchmarkJournalPerModelCall is what the manager does with status.journal on each
// model call of a Session with n answers: append the answer (AppendJournal), encode the
// status for the write, decode it from the watch.
func BenchmarkJournalPerModelCall(b *testing.B) {
	for _, n := range []int{40, 60} {
		b.Run(fmt.Sprintf("answers=%d", n), func(b *testing.B) {
			raw, err := json.Marshal(llmStatus(n))
			if err != nil {
				b.Fatal(err)
			}
			var read flowv1.SessionStatus
			if err := json.Unmarshal(raw, &read); err != nil {
				b.Fatal(err)
			}
			rec := llmAnswer(n)
			b.ReportAllocs()
			for b.Loop() {
				st := read.DeepCopy()
				AppendJournal(st, rec, nil)
				out, err := json.Marshal(st)
				if err != nil {
					b.Fatal(err)
				}
				var next flowv1.SessionStatus
				if err := json.Unmarshal(out, &next); err != nil {
					b.Fatal(err)
				}
				if len(next.Journal) != n+1 {
					b.Fatalf("journal has %d answers, want %d", len(next.Journal), n+1)
				}
			}
		})
	}
}
