package testenv

import (
	"encoding/json"
	"net/http"
	"strings"
)

// ToolCall is one function call of an assistant message: in an answer (CallTools) or
// replayed in a later request (ChatRequest.ToolCalls).
type ToolCall struct {
	ID, Name, Arguments string
}

// CallTools is a 200 chat completion whose assistant message calls tools instead of
// answering (finish_reason tool_calls).
func CallTools(calls ...ToolCall) Reply { return callTools(nil, calls) }

// CallToolsSaying is CallTools whose assistant message also has content: the text a
// model writes alongside its calls.
func CallToolsSaying(content string, calls ...ToolCall) Reply { return callTools(content, calls) }

func callTools(content any, calls []ToolCall) Reply {
	tcs := make([]any, len(calls))
	for i, c := range calls {
		tcs[i] = map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}}
	}
	return JSONReply(http.StatusOK, map[string]any{
		"id": "chatcmpl-tools", "object": "chat.completion", "created": 1, "model": "test-model",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls",
			"message": map[string]any{"role": "assistant", "content": content, "tool_calls": tcs}}},
		"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
	})
}

// ToolResult is a tool-role message of a request: the result of the call ToolCallID.
type ToolResult struct {
	ToolCallID, Content string
}

type toolMessages struct {
	Messages []struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

func (r ChatRequest) toolMessages() toolMessages {
	var m toolMessages
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// promptedResults is the caption of the user message in which an agent that offers
// its tools in the prompt replays what came of a round of calls, as a JSON list.
const promptedResults = "What came of your tool calls"

// ToolResults are the request's tool messages, in order; for a request without tool
// messages, the results an agent offering its tools in the prompt replays in user
// messages (without a ToolCallID).
func (r ChatRequest) ToolResults() []ToolResult {
	var out []ToolResult
	msgs := r.toolMessages().Messages
	for _, m := range msgs {
		if m.Role == "tool" {
			out = append(out, ToolResult{ToolCallID: m.ToolCallID, Content: m.Content})
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, m := range msgs {
		i := strings.Index(m.Content, promptedResults)
		if m.Role != "user" || i < 0 {
			continue
		}
		rest := m.Content[i:]
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			continue
		}
		var results []struct {
			Result string `json:"result"`
		}
		if json.NewDecoder(strings.NewReader(rest[nl+1:])).Decode(&results) != nil {
			continue
		}
		for _, res := range results {
			out = append(out, ToolResult{Content: res.Result})
		}
	}
	return out
}

// ToolCalls are the tool calls of the request's assistant messages, in order.
func (r ChatRequest) ToolCalls() []ToolCall {
	var out []ToolCall
	for _, m := range r.toolMessages().Messages {
		for _, c := range m.ToolCalls {
			out = append(out, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
	}
	return out
}

// Functions are the names of the function tools the request offers, with their
// parameters' schemas.
func (r ChatRequest) Functions() map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, t := range r.toolMessages().Tools {
		if t.Type == "function" {
			out[t.Function.Name] = t.Function.Parameters
		}
	}
	return out
}
