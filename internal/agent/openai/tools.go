package openai

import (
	"encoding/json"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/journeyops/journey-operator/internal/agent"
)

// Tools. A pathway turn that may call tools offers them as functions (OpenAI function
// calling): the names are the pathway's tools, the parameters the input schemas the
// revision pins. The model answers either with tool calls, which the engine checks
// and makes one step at a time, or with the final structured answer. Each later
// request replays the turn's calls: every model answer as an assistant message with
// its tool calls and whatever text it wrote with them, each followed by a tool
// message with what came of the call (its result, or why it was refused, rejected
// or failed).

// emptyParameters is the schema of a tool without a pinned input schema.
var emptyParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// functionTools are specs as chat-completions function tools.
func functionTools(specs []agent.ToolSpec) []goopenai.Tool {
	if len(specs) == 0 {
		return nil
	}
	out := make([]goopenai.Tool, 0, len(specs))
	for _, s := range specs {
		params := emptyParameters
		if len(s.InputSchema) > 0 && string(s.InputSchema) != "null" {
			params = s.InputSchema
		}
		out = append(out, goopenai.Tool{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{
			Name: s.Name, Description: s.Description, Parameters: params,
		}})
	}
	return out
}

// toolMessages replays the turn's tool exchanges: for each model answer (a round), an
// assistant message with its calls and the text the model wrote with them, then one
// tool message per call.
func toolMessages(exchanges []agent.ToolExchange) []goopenai.ChatCompletionMessage {
	var out []goopenai.ChatCompletionMessage
	for i := 0; i < len(exchanges); {
		j := i
		asked := goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleAssistant, Content: exchanges[i].AssistantText}
		for ; j < len(exchanges) && exchanges[j].Round == exchanges[i].Round; j++ {
			ex := exchanges[j]
			asked.ToolCalls = append(asked.ToolCalls, goopenai.ToolCall{ID: ex.ID, Type: goopenai.ToolTypeFunction,
				Function: goopenai.FunctionCall{Name: ex.Tool, Arguments: ex.Arguments}})
		}
		out = append(out, asked)
		for _, ex := range exchanges[i:j] {
			out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleTool, ToolCallID: ex.ID, Content: ex.Result})
		}
		i = j
	}
	return out
}

// toolCalls are the function calls of the answer's first choice.
func toolCalls(resp goopenai.ChatCompletionResponse) []agent.ToolCall {
	if len(resp.Choices) == 0 {
		return nil
	}
	var out []agent.ToolCall
	for _, tc := range resp.Choices[0].Message.ToolCalls {
		if tc.Type != "" && tc.Type != goopenai.ToolTypeFunction {
			continue
		}
		out = append(out, agent.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: strings.TrimSpace(tc.Function.Arguments)})
	}
	return out
}

// toolsNotice tells the model it may call the offered tools before it answers.
const toolsNotice = "\nYou may call the tools offered to you to get what you need before you answer; " +
	"a tool's result, or why a call was refused, comes back in a tool message, as data. " +
	"When you have what you need, answer with the JSON object described above.\n"

// toolCallChars is the length of calls' names and arguments, for usage estimates.
func toolCallChars(calls []goopenai.ToolCall) int {
	n := 0
	for _, c := range calls {
		n += len(c.Function.Name) + len(c.Function.Arguments)
	}
	return n
}
