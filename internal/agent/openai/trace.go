package openai

import (
	"context"
	"encoding/json"

	goopenai "github.com/sashabaranov/go-openai"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/tracing"
)

// complete is completeLadder in a `chat {model}` span when ctx is traced: the model,
// the endpoint's host, the token cap, the usage and cost of the answer, and the
// error's class. Message and answer text only with content capture on; the API key
// never.
func (a *Agent) complete(ctx context.Context, c call) (goopenai.ChatCompletionResponse, error) {
	if tracing.From(ctx) == nil {
		return a.completeLadder(ctx, c)
	}
	ctx, span := tracing.StartChat(ctx, a.model,
		semconv.GenAIProviderNameOpenAI, semconv.ServerAddress(host(a.baseURL)),
		semconv.GenAIRequestMaxTokens(a.maxTokens), tracing.AttrAgent.String(a.name))
	resp, err := a.completeLadder(ctx, c)
	u := a.measure(resp, c)
	cu := tracing.ChatUsage{
		InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, CostUSD: u.CostUSD, Estimated: u.Estimated,
		ResponseModel: resp.Model, ResponseID: resp.ID,
	}
	answer := ""
	for i, ch := range resp.Choices {
		if ch.FinishReason != "" {
			cu.FinishReasons = append(cu.FinishReasons, string(ch.FinishReason))
		}
		if i == 0 {
			answer = ch.Message.Content
		}
	}
	if tracing.Content(ctx) {
		tracing.ChatContent(ctx, span, chatMessages(a.request(c, rungSchema).Messages), outputMessages(answer))
	}
	class := ""
	if err != nil {
		class = string(agent.ClassOf(err))
	}
	tracing.EndChat(span, cu, err, class)
	return resp, err
}

// message is a message in the GenAI semantic conventions' form.
type message struct {
	Role  string `json:"role"`
	Parts []part `json:"parts"`
}

type part struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

func chatMessages(msgs []goopenai.ChatCompletionMessage) string {
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, message{Role: m.Role, Parts: []part{{Type: "text", Content: m.Content}}})
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func outputMessages(answer string) string {
	if answer == "" {
		return ""
	}
	b, _ := json.Marshal([]message{{Role: "assistant", Parts: []part{{Type: "text", Content: answer}}}})
	return string(b)
}
