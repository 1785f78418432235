package openai

import (
	"context"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/journeyops/journey-operator/internal/agent"
)

var _ agent.Sampler = (*Agent)(nil)

// Sample answers a tool server's sampling request: the server's conversation, under
// the server's system prompt after the agent's own instructions, completed as plain
// text with at most req.MaxTokens tokens (the agent's maxTokens when lower).
// Transient failures are retried as for any call of the agent.
func (a *Agent) Sample(ctx context.Context, req agent.SampleRequest) (agent.SampleResponse, error) {
	c := call{system: joinNonEmpty(a.instructions, req.SystemPrompt)}
	for _, m := range req.Messages {
		role := goopenai.ChatMessageRoleUser
		if m.Role == "assistant" {
			role = goopenai.ChatMessageRoleAssistant
		}
		c.messages = append(c.messages, goopenai.ChatCompletionMessage{Role: role, Content: m.Text})
	}
	msgs := []goopenai.ChatCompletionMessage{}
	if c.system != "" {
		msgs = append(msgs, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleSystem, Content: c.system})
	}
	creq := goopenai.ChatCompletionRequest{Model: a.model, Messages: mergeRoles(append(msgs, c.messages...)), Temperature: a.temperature}
	tokens := a.maxTokens
	if req.MaxTokens > 0 && (tokens <= 0 || req.MaxTokens < tokens) {
		tokens = req.MaxTokens
	}
	if a.completionTokensField {
		creq.MaxCompletionTokens = tokens
	} else {
		creq.MaxTokens = tokens //nolint:staticcheck // max_tokens is the field most OpenAI-compatible servers read
	}
	c.build = func() object { return nil }
	for retries := 0; ; retries++ {
		resp, f := a.try(ctx, creq)
		if f == nil {
			choice := resp.Choices[0]
			return agent.SampleResponse{Text: choice.Message.Content, Model: resp.Model, StopReason: stopReason(choice.FinishReason),
				Usage: a.usage(resp, c)}, nil
		}
		if f.err.Class != agent.Transient || ctx.Err() != nil || retries >= a.maxRetries {
			return agent.SampleResponse{}, f.err
		}
		wait := a.backoff(retries)
		if f.err.RetryAfter > 0 {
			if f.err.RetryAfter > a.opts.maxRetryWait {
				return agent.SampleResponse{}, f.err
			}
			wait = f.err.RetryAfter
		}
		if err := a.opts.sleep(ctx, wait); err != nil {
			return agent.SampleResponse{}, f.err
		}
	}
}

// stopReason is a chat completion's finish reason as MCP sampling names it.
func stopReason(r goopenai.FinishReason) string {
	switch r {
	case goopenai.FinishReasonLength:
		return "maxTokens"
	case goopenai.FinishReasonStop:
		return "endTurn"
	}
	return string(r)
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n\n" + b
}
