package openai

import (
	"encoding/json"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/journeyops/journey-operator/internal/agent"
)

// call is one question to the model: the instructions, the conversation, and the
// schema the answer must match.
type call struct {
	system   string
	messages []goopenai.ChatCompletionMessage
	// schemaName names the json_schema (decision, intent, pathway_turn); schemaKey
	// identifies what the schema is built from, for the schema cache.
	schemaName, schemaKey string
	build                 func() object
	// tools are the functions the model may call instead of answering.
	tools []goopenai.Tool
}

func (c call) schema() []byte { return schemas.get(c.schemaName+"\x00"+c.schemaKey, c.build) }

// request is the chat completion request for c on rung r.
func (a *Agent) request(c call, r rung) goopenai.ChatCompletionRequest {
	schema := c.schema()
	system := c.system
	if r != rungSchema {
		system += schemaInstructions(schema)
	}
	msgs := make([]goopenai.ChatCompletionMessage, 0, len(c.messages)+1)
	msgs = append(msgs, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleSystem, Content: system})
	req := goopenai.ChatCompletionRequest{
		Model:          a.model,
		Messages:       mergeRoles(append(msgs, c.messages...)),
		Temperature:    a.temperature,
		ResponseFormat: responseFormat(r, c.schemaName, schema),
		Tools:          c.tools,
	}
	if a.completionTokensField {
		req.MaxCompletionTokens = a.maxTokens
	} else {
		req.MaxTokens = a.maxTokens //nolint:staticcheck // max_tokens is the field most OpenAI-compatible servers read
	}
	return req
}

// mergeRoles joins consecutive messages of the same role into one, separated by a
// blank line: chat templates that require alternating roles (the Mistral family)
// refuse two user messages in a row with a 400. Tool calls and tool results are
// never merged: each answers one call.
func mergeRoles(msgs []goopenai.ChatCompletionMessage) []goopenai.ChatCompletionMessage {
	out := msgs[:0:0]
	for _, m := range msgs {
		if n := len(out); n > 0 && out[n-1].Role == m.Role && m.Role != goopenai.ChatMessageRoleTool &&
			len(m.ToolCalls) == 0 && len(out[n-1].ToolCalls) == 0 {
			out[n-1].Content += "\n\n" + m.Content
			continue
		}
		out = append(out, m)
	}
	return out
}

// UsesMaxCompletionTokens reports whether the token cap is sent as
// max_completion_tokens rather than max_tokens. The rule: OpenAI (no baseURL, or host
// api.openai.com) and Azure OpenAI (hosts under openai.azure.com,
// cognitiveservices.azure.com and services.ai.azure.com) take max_completion_tokens,
// which their reasoning models require and max_tokens is deprecated for; so do
// OpenAI's reasoning models (o1, o3, o4, gpt-5 and later) behind any endpoint, since
// they refuse max_tokens. Every other OpenAI-compatible server (vLLM, Ollama,
// llama.cpp, LM Studio, LocalAI, TGI, Groq, OpenRouter, LiteLLM) takes max_tokens,
// which some of them do not know under the newer name.
func UsesMaxCompletionTokens(baseURL, model string) bool {
	h := host(baseURL)
	if h == "api.openai.com" || strings.HasSuffix(h, ".openai.azure.com") ||
		strings.HasSuffix(h, ".cognitiveservices.azure.com") || strings.HasSuffix(h, ".services.ai.azure.com") {
		return true
	}
	m := strings.ToLower(model)
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(m, p) {
			return true
		}
	}
	return false
}

// usage converts the response's usage block, with cost. An answer without one (some
// servers and proxies omit it) is estimated from the lengths of the prompt and the
// answer and flagged, rather than counted as free.
func (a *Agent) usage(resp goopenai.ChatCompletionResponse, c call) agent.Usage {
	u := a.measure(resp, c)
	if u.Estimated {
		usageEstimated.WithLabelValues(host(a.baseURL), a.model).Inc()
	}
	return u
}

// measure is usage without counting estimates in the metric.
func (a *Agent) measure(resp goopenai.ChatCompletionResponse, c call) agent.Usage {
	u := agent.Usage{PromptTokens: int64(resp.Usage.PromptTokens), CompletionTokens: int64(resp.Usage.CompletionTokens)}
	if u.PromptTokens == 0 && u.CompletionTokens == 0 && resp.Usage.TotalTokens == 0 && len(resp.Choices) > 0 {
		chars := len(c.system) + len(c.schema())
		for _, m := range c.messages {
			chars += len(m.Content) + toolCallChars(m.ToolCalls)
		}
		for _, t := range c.tools {
			if raw, err := json.Marshal(t); err == nil {
				chars += len(raw)
			}
		}
		answer := resp.Choices[0].Message
		u.PromptTokens = agent.EstimateTokens(chars)
		u.CompletionTokens = agent.EstimateTokens(len(answer.Content) + len(answer.ReasoningContent) + toolCallChars(answer.ToolCalls))
		u.Estimated = true
	}
	u.CostUSD = agent.Cost(a.pricing, u)
	return u
}
