package builtin

import (
	"context"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// TestSample: a builtin agent answers a sampling request with its reply template,
// else with the last message's text, at no cost.
func TestSample(t *testing.T) {
	req := agent.SampleRequest{SystemPrompt: "Be kind.", Messages: []agent.Exchange{{Role: "user", Text: "Hello"}, {Role: "user", Text: "How are you?"}}}
	echo, err := New(flowv1.AgentSpec{Name: "b"}).Sample(context.Background(), req)
	if err != nil || echo.Text != "How are you?" || echo.Usage != (agent.Usage{}) {
		t.Errorf("echo %+v, %v", echo, err)
	}
	tmpl := New(flowv1.AgentSpec{Name: "b", Builtin: &flowv1.BuiltinAgent{Reply: "{{ len .messages }} messages; {{ .systemPrompt }} You said: {{ .last }}"}})
	got, err := tmpl.Sample(context.Background(), req)
	if err != nil || got.Text != "2 messages; Be kind. You said: How are you?" {
		t.Errorf("template answer %+v, %v", got, err)
	}
	bad := New(flowv1.AgentSpec{Name: "b", Builtin: &flowv1.BuiltinAgent{Reply: "{{ .nothing.deeper }}"}})
	if _, err := bad.Sample(context.Background(), req); err == nil {
		t.Errorf("a failing template is not an error")
	}
}
