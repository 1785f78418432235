package openai

import (
	"reflect"
	"testing"

	"github.com/journeyops/journey-operator/internal/agent"
)

func TestTextToolCalls(t *testing.T) {
	tools := []string{"find_doctors", "copay"}
	find := agent.ToolCall{Name: "find_doctors", Arguments: `{"specialty":"cardiology"}`}
	copay := agent.ToolCall{Name: "copay", Arguments: `{}`}
	for _, tc := range []struct {
		name, content string
		want          []agent.ToolCall
		text          string
	}{
		{"hermes", `<tool_call>
{"name": "find_doctors", "arguments": {"specialty": "cardiology"}}
</tool_call>`, []agent.ToolCall{find}, ""},
		{"hermes with text and two calls", `Let me look that up.
<tool_call>{"name": "find_doctors", "arguments": {"specialty": "cardiology"}}</tool_call>
<tool_call>{"name": "copay", "arguments": {}}</tool_call>`, []agent.ToolCall{find, copay}, "Let me look that up."},
		{"hermes without the last closing tag", `<tool_call>{"name": "find_doctors", "arguments": {"specialty": "cardiology"}}`, []agent.ToolCall{find}, ""},
		{"hermes arguments as a string", `<tool_call>{"name": "find_doctors", "arguments": "{\"specialty\":\"cardiology\"}"}</tool_call>`, []agent.ToolCall{find}, ""},
		{"hermes near-miss name is still a call", `<tool_call>{"name": "find_doctor", "arguments": {"specialty": "cardiology"}}</tool_call>`,
			[]agent.ToolCall{{Name: "find_doctor", Arguments: `{"specialty":"cardiology"}`}}, ""},
		{"hermes unreadable", `<tool_call>{"name": "find_doctors", "arguments": {</tool_call>`, nil, ""},
		{"mistral list", `[TOOL_CALLS] [{"name": "find_doctors", "arguments": {"specialty": "cardiology"}, "id": "a1B2c3D4e"}, {"name": "copay", "arguments": {}}]`,
			[]agent.ToolCall{{ID: "a1B2c3D4e", Name: "find_doctors", Arguments: `{"specialty":"cardiology"}`}, copay}, ""},
		{"mistral name and args", `[TOOL_CALLS]find_doctors[ARGS]{"specialty": "cardiology"}[TOOL_CALLS]copay[ARGS]{}`, []agent.ToolCall{find, copay}, ""},
		{"mistral call id", `[TOOL_CALLS]find_doctors[CALL_ID]c9[ARGS]{"specialty": "cardiology"}`,
			[]agent.ToolCall{{ID: "c9", Name: "find_doctors", Arguments: `{"specialty":"cardiology"}`}}, ""},
		{"mistral with text first", `Sure. [TOOL_CALLS]copay[ARGS]{}`, []agent.ToolCall{copay}, "Sure."},
		{"mistral unreadable", `[TOOL_CALLS]find_doctors{"specialty": "cardiology"}`, nil, ""},
		{"bare call", `{"name": "find_doctors", "arguments": {"specialty": "cardiology"}}`, []agent.ToolCall{find}, ""},
		{"bare call with parameters (Llama 3)", `{"name": "find_doctors", "parameters": {"specialty": "cardiology"}}`, []agent.ToolCall{find}, ""},
		{"bare list", `[{"name": "find_doctors", "arguments": {"specialty": "cardiology"}}, {"name": "copay", "parameters": {}}]`, []agent.ToolCall{find, copay}, ""},
		{"bare call naming no tool of the pathway", `{"name": "refund", "arguments": {}}`, nil, ""},
		{"bare object with other keys", `{"name": "find_doctors", "arguments": {}, "reply": "hi"}`, nil, ""},
		{"pathway answer", `{"reply":"hi","outcome":"success","complete":true}`, nil, ""},
		{"plain text", `I cannot help with that.`, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, text := textToolCalls(tc.content, tools)
			if !reflect.DeepEqual(got, tc.want) || (len(tc.want) > 0 && text != tc.text) {
				t.Errorf("textToolCalls = %+v, %q; want %+v, %q", got, text, tc.want, tc.text)
			}
		})
	}
}
