package testenv

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// ToolDialect is how a stand-in server returns the tool calls its model makes.
type ToolDialect string

const (
	// DialectNative returns the calls as tool_calls: a server with a tool-call parser.
	DialectNative ToolDialect = "native"
	// DialectHermes writes <tool_call>{"name", "arguments"}</tool_call> blocks in the
	// content, as Hermes and Qwen models do behind a server without a tool parser
	// (vLLM without --tool-call-parser, llama.cpp without --jinja).
	DialectHermes ToolDialect = "hermes"
	// DialectMistral writes [TOOL_CALLS][{"name", "arguments"}, ...] (Mistral's v3
	// tokenizers).
	DialectMistral ToolDialect = "mistral"
	// DialectMistralArgs writes [TOOL_CALLS]name[ARGS]{...} for each call (Mistral's
	// v11 and later tokenizers).
	DialectMistralArgs ToolDialect = "mistral-args"
	// DialectBareJSON writes the call as a bare JSON object {"name", "parameters"}
	// (a list for several calls), as Llama 3 models do.
	DialectBareJSON ToolDialect = "json"
	// DialectPrompted writes the calls in the JSON answer's tool_calls, each with its
	// arguments as a JSON-encoded string: what an agent that offers its tools in the
	// prompt asks for.
	DialectPrompted ToolDialect = "prompted"
)

// ToolDialects are the dialects that write calls as text.
var ToolDialects = []ToolDialect{DialectHermes, DialectMistral, DialectMistralArgs, DialectBareJSON, DialectPrompted}

func argsObject(args string) json.RawMessage {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(args)
}

// Write is calls as text in dialect d.
func (d ToolDialect) Write(calls []ToolCall) string {
	type call struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments,omitempty"`
		Parameters json.RawMessage `json:"parameters,omitempty"`
	}
	var b strings.Builder
	switch d {
	case DialectHermes:
		for _, c := range calls {
			raw, _ := json.Marshal(call{Name: c.Name, Arguments: argsObject(c.Arguments)})
			fmt.Fprintf(&b, "<tool_call>\n%s\n</tool_call>\n", raw)
		}
	case DialectMistral:
		list := make([]call, len(calls))
		for i, c := range calls {
			list[i] = call{Name: c.Name, Arguments: argsObject(c.Arguments)}
		}
		raw, _ := json.Marshal(list)
		fmt.Fprintf(&b, "[TOOL_CALLS]%s", raw)
	case DialectMistralArgs:
		for _, c := range calls {
			fmt.Fprintf(&b, "[TOOL_CALLS]%s[ARGS]%s", c.Name, argsObject(c.Arguments))
		}
	case DialectBareJSON:
		list := make([]call, len(calls))
		for i, c := range calls {
			list[i] = call{Name: c.Name, Parameters: argsObject(c.Arguments)}
		}
		var raw []byte
		if len(list) == 1 {
			raw, _ = json.Marshal(list[0])
		} else {
			raw, _ = json.Marshal(list)
		}
		b.Write(raw)
	case DialectPrompted:
		type prompted struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		}
		list := make([]prompted, len(calls))
		for i, c := range calls {
			list[i] = prompted{Name: c.Name, Arguments: string(argsObject(c.Arguments))}
		}
		raw, _ := json.Marshal(map[string]any{"tool_calls": list, "reply": "", "outcome": "unclear", "complete": false})
		b.Write(raw)
	}
	return strings.TrimSpace(b.String())
}

// CallToolsAs is a 200 chat completion whose content holds calls written in dialect
// d, without tool_calls (CallTools for DialectNative).
func CallToolsAs(d ToolDialect, calls ...ToolCall) Reply {
	if d == DialectNative || d == "" {
		return CallTools(calls...)
	}
	return Answer(d.Write(calls))
}

// Rewrite is r as a server returning tool calls in dialect d: an answer with
// tool_calls comes back with the calls written in its content instead, after the text
// written with them. Other replies are r.
func (d ToolDialect) Rewrite(r Reply) Reply {
	calls, text, ok := nativeCalls(r)
	if !ok || d == DialectNative || d == "" {
		return r
	}
	return Answer(strings.TrimSpace(text + "\n" + d.Write(calls)))
}

// InDialect is respond as a server that returns tool calls in dialect d.
func InDialect(d ToolDialect, respond Responder) Responder {
	return func(req ChatRequest) Reply { return d.Rewrite(respond(req)) }
}

// nativeCalls are the tool calls of a 200 answer with tool_calls, and its content.
func nativeCalls(r Reply) ([]ToolCall, string, bool) {
	if r.Body == "" || (r.Status != 0 && r.Status != http.StatusOK) {
		return nil, "", false
	}
	var body struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal([]byte(r.Body), &body) != nil || len(body.Choices) == 0 || len(body.Choices[0].Message.ToolCalls) == 0 {
		return nil, "", false
	}
	m := body.Choices[0].Message
	out := make([]ToolCall, len(m.ToolCalls))
	for i, c := range m.ToolCalls {
		out[i] = ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments}
	}
	text := ""
	if m.Content != nil {
		text = *m.Content
	}
	return out, text, true
}

// OffersTools reports whether the request offers native tools.
func (r ChatRequest) OffersTools() bool { return len(r.toolMessages().Tools) > 0 }

// ToolRefusals are the answers of servers that do not take native tools to a request
// offering them, as each server words it, by server.
var ToolRefusals = map[string]Reply{
	// vLLM started without --enable-auto-tool-choice (tools imply tool_choice auto).
	"vLLM": JSONReply(http.StatusBadRequest, map[string]any{"object": "error",
		"message": `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`,
		"type":    "BadRequestError", "param": nil, "code": 400}),
	// An Ollama model whose template has no tools (its OpenAI-compatible API).
	"Ollama": JSONReply(http.StatusBadRequest, map[string]any{"error": map[string]any{
		"message": "registry.ollama.ai/library/gemma2:2b does not support tools", "type": "api_error", "param": nil, "code": nil}}),
	// llama.cpp's server without --jinja.
	"llama.cpp": JSONReply(http.StatusInternalServerError, map[string]any{"error": map[string]any{
		"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}}),
	// OpenRouter when no provider of the model takes tools.
	"OpenRouter": JSONReply(http.StatusNotFound, map[string]any{"error": map[string]any{
		"message": "No endpoints found that support tool use. To learn more about provider routing, visit: https://openrouter.ai/docs/provider-routing",
		"code":    404}}),
	// LiteLLM proxying a model without tools, drop_params not set.
	"LiteLLM": JSONReply(http.StatusBadRequest, map[string]any{"error": map[string]any{
		"message": "litellm.UnsupportedParamsError: ollama does not support parameters: ['tools'], for model=gemma2. " +
			"To drop these, set `litellm.drop_params=True` or for proxy:\n\n`litellm_settings:\n drop_params: true`\n",
		"type": "None", "param": "None", "code": "400"}}),
}

// RefusingTools is respond as a server that does not take native tools: a request
// offering them gets refusal; the others are answered by respond, whose tool calls
// come back in the prompted dialect (what an agent that stepped down asks for).
func RefusingTools(refusal Reply, respond Responder) Responder {
	prompted := InDialect(DialectPrompted, respond)
	return func(req ChatRequest) Reply {
		if req.OffersTools() {
			return refusal
		}
		return prompted(req)
	}
}
