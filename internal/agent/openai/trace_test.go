package openai

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tracing"
)

// TestChatSpan: a traced call is a chat span under the step, with the model, the usage
// the server returned and the error class; the request carries its traceparent; the
// messages and the answer are recorded only with content capture, the key never.
func TestChatSpan(t *testing.T) {
	const msg = "I'm wondering about the process for my referral"
	for _, content := range []bool{false, true} {
		srv := newChatServer(t, testenv.Sequence(
			reply(`{"intent":"faq-detour","confidence":0.9,"reasoning":"a question"}`, 77, 11),
			testenv.APIError(401, "Incorrect API key provided", "invalid_api_key")))
		spec := testSpec(srv.URL + "/v1")
		spec.Pricing = &flowv1.Pricing{PromptPerMTok: "1", CompletionPerMTok: "2"}
		a := newTestAgent(t, spec, &sleeper{})
		rec := tracetest.NewSpanRecorder()
		p := tracing.NewWithProcessor(rec, content)
		ctx, _ := p.Begin(context.Background(), &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "u"}})
		step := trace.SpanContextFromContext(ctx)
		req := agent.IntentRequest{Message: msg, Intents: []agent.Intent{{Name: "faq-detour", Description: "A question"}}}
		if _, err := a.ClassifyIntent(ctx, req); err != nil {
			t.Fatal(err)
		}
		if _, err := a.ClassifyIntent(ctx, req); agent.ClassOf(err) != agent.Terminal {
			t.Fatalf("second call: %v, want Terminal", err)
		}
		spans := rec.Ended()
		if len(spans) != 2 {
			t.Fatalf("%d spans, want one per call", len(spans))
		}
		sp := spans[0]
		a0 := map[string]string{}
		for _, kv := range sp.Attributes() {
			a0[string(kv.Key)] = kv.Value.String()
		}
		want := map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": spec.Model, "gen_ai.provider.name": "openai",
			"gen_ai.usage.input_tokens": "77", "gen_ai.usage.output_tokens": "11", "journey.usage.cost_usd": "9.9e-05"}
		for k, v := range want {
			if a0[k] != v {
				t.Errorf("content %v: %s = %q, want %q", content, k, a0[k], v)
			}
		}
		if sp.Name() != "chat "+spec.Model || sp.Parent().SpanID() != step.SpanID() || sp.SpanKind() != trace.SpanKindClient {
			t.Errorf("span %s parent %v kind %v: want a client chat span under the step", sp.Name(), sp.Parent().SpanID(), sp.SpanKind())
		}
		if tp := srv.Request(t, 1).Header.Get("traceparent"); !strings.Contains(tp, sp.SpanContext().SpanID().String()) {
			t.Errorf("traceparent %q does not name the chat span %v", tp, sp.SpanContext().SpanID())
		}
		recorded := strings.Contains(a0["gen_ai.input.messages"], msg) && strings.Contains(a0["gen_ai.output.messages"], "faq-detour")
		if recorded != content {
			t.Errorf("content capture %v, yet messages recorded %v: %v", content, recorded, a0)
		}
		for k, v := range a0 {
			if strings.Contains(v, testKey) || (!content && strings.Contains(v, "wondering")) {
				t.Errorf("content %v: attribute %s = %q", content, k, v)
			}
		}
		if failed := spans[1]; failed.Status().Code != codes.Error || !strings.Contains(fmt.Sprint(failed.Attributes()), "Terminal") {
			t.Errorf("refused key: status %v attributes %v, want Error of class Terminal", failed.Status(), failed.Attributes())
		}
	}
}
