package openai

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/journeyops/journey-operator/internal/agent"
)

// Tool calls written as text. A server without a tool-call parser (vLLM without
// --tool-call-parser, llama.cpp without --jinja, a model its parser does not know)
// returns the calls the model wrote in its chat template's own format as the answer's
// content. When an answer offered tools has no native tool_calls and is not the
// pathway's JSON answer, its text is read in the well-known dialects:
//
//   - Hermes, Qwen 2.5 and later, and many fine-tunes: one or more
//     <tool_call>{"name": ..., "arguments": {...}}</tool_call> blocks (the last one
//     may lack its closing tag when the server stopped on it);
//   - Mistral (v3 tokenizers): [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...];
//   - Mistral (v11 and later tokenizers): [TOOL_CALLS]name[ARGS]{...}, repeated for
//     several calls, with an optional [CALL_ID]id before [ARGS];
//   - a bare JSON call, as Llama 3 models write it: an object {"name": ..., "arguments"
//     or "parameters": {...}} with nothing else, or a list of them, each naming one of
//     the pathway's tools.
//
// The calls found are returned like native ones and go through the same checks in the
// engine: a name that is not one of the pathway's tools is refused with the same
// message, arguments are validated against the tool's schema. Text before the first
// call is kept as the text the model wrote with its calls.

const (
	hermesOpen   = "<tool_call>"
	hermesClose  = "</tool_call>"
	mistralCalls = "[TOOL_CALLS]"
	mistralArgs  = "[ARGS]"
	mistralID    = "[CALL_ID]"
)

// textCall is a call as the dialects write it: "arguments" (most) or "parameters"
// (Llama 3), as an object or as a JSON-encoded string.
type textCall struct {
	Name       *string         `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Parameters json.RawMessage `json:"parameters"`
	ID         string          `json:"id"`
}

// call is the text call as a tool call; false when it names no tool.
func (tc textCall) call() (agent.ToolCall, bool) {
	if tc.Name == nil || strings.TrimSpace(*tc.Name) == "" {
		return agent.ToolCall{}, false
	}
	args := tc.Arguments
	if len(args) == 0 {
		args = tc.Parameters
	}
	return agent.ToolCall{ID: tc.ID, Name: strings.TrimSpace(*tc.Name), Arguments: argumentsText(args)}, true
}

// argumentsText is a call's arguments as JSON text: an object compacted, a string
// (arguments encoded as a string, the OpenAI way) as it is, nothing as {}.
func argumentsText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// textToolCalls reads the tool calls written in content (cleaned of <think> blocks and
// fences) in any of the dialects above, and the text written before them. tools are
// the names of the pathway's tools, which a bare JSON call must name. No calls when
// the text holds none, or a dialect's marker is followed by something unreadable.
func textToolCalls(content string, tools []string) (calls []agent.ToolCall, text string) {
	if i := strings.Index(content, hermesOpen); i >= 0 {
		return hermesCalls(content[i:]), strings.TrimSpace(content[:i])
	}
	if i := strings.Index(content, mistralCalls); i >= 0 {
		return mistralToolCalls(content[i:]), strings.TrimSpace(content[:i])
	}
	return bareCalls(content, tools), ""
}

// hermesCalls reads <tool_call> blocks; every block must hold one call.
func hermesCalls(s string) []agent.ToolCall {
	var out []agent.ToolCall
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		rest, ok := strings.CutPrefix(s, hermesOpen)
		if !ok {
			// Text after the calls is not theirs; stop.
			break
		}
		body, after, closed := strings.Cut(rest, hermesClose)
		if !closed {
			body, after = rest, ""
		}
		c, ok := oneCall(body, false)
		if !ok {
			return nil
		}
		out = append(out, c)
		s = after
	}
	return out
}

// mistralToolCalls reads [TOOL_CALLS] followed by a JSON list of calls, or by
// name[ARGS]{...} (optionally name[CALL_ID]id[ARGS]{...}), repeated.
func mistralToolCalls(s string) []agent.ToolCall {
	var out []agent.ToolCall
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		rest, ok := strings.CutPrefix(s, mistralCalls)
		if !ok {
			break
		}
		rest = strings.TrimSpace(rest)
		if strings.HasPrefix(rest, "[") || strings.HasPrefix(rest, "{") {
			list, after, ok := leadingJSON(rest)
			if !ok {
				return nil
			}
			calls, ok := callList(list, false)
			if !ok {
				return nil
			}
			out = append(out, calls...)
			s = after
			continue
		}
		head, args, found := strings.Cut(rest, mistralArgs)
		if !found {
			return nil
		}
		name, id, _ := strings.Cut(head, mistralID)
		obj, after, ok := leadingJSON(strings.TrimSpace(args))
		if !ok || strings.TrimSpace(name) == "" {
			return nil
		}
		out = append(out, agent.ToolCall{ID: strings.TrimSpace(id), Name: strings.TrimSpace(name), Arguments: argumentsText(obj)})
		s = after
	}
	return out
}

// bareCalls reads content that is only a JSON call or a list of them, each naming one
// of tools.
func bareCalls(content string, tools []string) []agent.ToolCall {
	s := strings.TrimSpace(content)
	if !strings.HasPrefix(s, "{") && !strings.HasPrefix(s, "[") {
		return nil
	}
	calls, ok := callList(json.RawMessage(s), true)
	if !ok {
		return nil
	}
	for _, c := range calls {
		if !slices.Contains(tools, c.Name) {
			return nil
		}
	}
	return calls
}

// callList reads a JSON call or a list of calls; every element must be a call (with
// nothing but a name, arguments or parameters, and an id, when strict).
func callList(raw json.RawMessage, strict bool) ([]agent.ToolCall, bool) {
	raw = bytes.TrimSpace(raw)
	var items []json.RawMessage
	if bytes.HasPrefix(raw, []byte("[")) {
		if json.Unmarshal(raw, &items) != nil || len(items) == 0 {
			return nil, false
		}
	} else {
		items = []json.RawMessage{raw}
	}
	out := make([]agent.ToolCall, 0, len(items))
	for _, it := range items {
		c, ok := oneCall(string(it), strict)
		if !ok {
			return nil, false
		}
		out = append(out, c)
	}
	return out, true
}

// oneCall reads one JSON call object without trailing data; strict refuses unknown
// keys too (a JSON answer that happens to have a name is not a call), where no
// dialect's marker says the text is a call.
func oneCall(s string, strict bool) (agent.ToolCall, bool) {
	var tc textCall
	s = strings.TrimSpace(s)
	if strict {
		if decodeStrict(s, &tc) != nil {
			return agent.ToolCall{}, false
		}
	} else {
		dec := json.NewDecoder(strings.NewReader(s))
		if dec.Decode(&tc) != nil || dec.More() {
			return agent.ToolCall{}, false
		}
	}
	return tc.call()
}

// leadingJSON splits s into the JSON value it starts with and what follows.
func leadingJSON(s string) (json.RawMessage, string, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, "", false
	}
	return raw, s[dec.InputOffset():], true
}
