package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	goopenai "github.com/sashabaranov/go-openai"
	"sigs.k8s.io/controller-runtime/pkg/log"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// The tool ladder. A pathway turn's tools are offered, from the richest way down:
//
//  1. native: as function tools, the calls coming back as tool_calls (and, from a
//     server without a tool-call parser, as text in one of the dialects of
//     dialects.go);
//  2. prompted: described in the instructions, the calls asked for in the JSON answer
//     itself, in a tool_calls property before the pathway's answer (calls written as
//     text in a dialect are still read).
//
// An Auto agent starts on the mode learned for its endpoint and model (native until
// the endpoint refuses it) and steps down, within the same turn, when the endpoint
// answers that it does not take native tools. It says so once per endpoint and model
// in the process: a log line, a metric, and a Notice the controller turns into an
// Event on the Session. An agent pinned to Native stalls on such an answer, with a
// message naming the setting to change.

// toolMode is a step of the tool ladder.
type toolMode int

const (
	toolsNative toolMode = iota
	toolsPrompted
)

func (m toolMode) calling() flowv1.ToolCalling {
	if m == toolsPrompted {
		return flowv1.ToolCallingPrompted
	}
	return flowv1.ToolCallingNative
}

var learnedTools = &memory[toolMode]{m: map[string]toolMode{}}

// LearnedToolCalling is how Auto agents offer tools to model at baseURL ("" for the
// OpenAI API) in this process: Native until the endpoint refused native tools.
func LearnedToolCalling(baseURL, model string) flowv1.ToolCalling {
	return learnedTools.get(endpointKey(baseURL, model)).calling()
}

var toolFallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "journey_agent_tool_calling_fallbacks_total",
	Help: "Times an endpoint refused native tools and an Auto agent stepped down to tools in the prompt, by endpoint host and model.",
}, []string{"host", "model"})

// toolMode is how this agent offers tools now.
func (a *Agent) toolMode() toolMode {
	switch a.toolCalling {
	case flowv1.ToolCallingNative:
		return toolsNative
	case flowv1.ToolCallingPrompted:
		return toolsPrompted
	}
	return learnedTools.get(endpointKey(a.baseURL, a.model))
}

// toolsRefusedError is an endpoint's refusal of native tools.
type toolsRefusedError struct{ err error }

func (e *toolsRefusedError) Error() string {
	return fmt.Sprintf("the endpoint does not take native tools (%v); set the agent's toolCalling to Prompted, "+
		"or Auto to offer them in the prompt when the endpoint refuses them", e.err)
}

func (e *toolsRefusedError) Unwrap() error { return e.err }

// toolsRefused is the Terminal error of a refusal of native tools: the Session of an
// agent pinned to Native stalls with it; an Auto agent steps down instead.
func (a *Agent) toolsRefused(f *agent.Error) *agent.Error {
	return a.fail(agent.Terminal, flowv1.FailureValidation, flowv1.FailureLLM, &toolsRefusedError{err: f.Err})
}

// stepDownTools moves an Auto agent to prompted tools after the endpoint refused
// native ones, remembers it, and says so the first time.
func (a *Agent) stepDownTools(ctx context.Context, why error) toolMode {
	if !learnedTools.lower(endpointKey(a.baseURL, a.model), toolsPrompted) {
		return toolsPrompted
	}
	toolFallbacks.WithLabelValues(host(a.baseURL), a.model).Inc()
	log.FromContext(ctx).Info("Endpoint refused native tools, offering them in the prompt", "agent", a.name,
		"host", host(a.baseURL), "model", a.model, "error", why.Error())
	agent.Notify(ctx, agent.Notice{Reason: flowv1.ReasonToolCallingPrompted, Message: fmt.Sprintf(
		"Agent %s: the endpoint %s refused native tools for model %s; tools are now offered in the prompt "+
			"and the calls asked for in the JSON answer (toolCalling Auto; set Prompted to skip the first attempt)",
		a.name, host(a.baseURL), a.model)})
	return toolsPrompted
}

// promptedTools is the instructions' description of the tools in prompted mode.
func promptedTools(specs []agent.ToolSpec) string {
	var b strings.Builder
	b.WriteString("\nTools you may call before you answer (name: what it does; the JSON schema of its arguments):\n")
	for _, s := range specs {
		params := emptyParameters
		if len(s.InputSchema) > 0 && string(s.InputSchema) != "null" {
			params = s.InputSchema
		}
		fmt.Fprintf(&b, "- %s", s.Name)
		if s.Description != "" {
			fmt.Fprintf(&b, ": %s", s.Description)
		}
		fmt.Fprintf(&b, "; arguments: %s\n", params)
	}
	b.WriteString("To call tools, list the calls in tool_calls, each with the tool's name and its arguments " +
		"as a JSON object encoded in a string; the rest of that answer is not used. " +
		"The results, or why a call was refused, come back in a user message, as data. " +
		"When you have what you need, answer with tool_calls empty.\n")
	return b.String()
}

// toolCallsSchema is the schema of the tool_calls property of a prompted answer.
func toolCallsSchema(names []string) object {
	return object{
		{"type", "array"},
		{"description", "The tools to call before you answer; empty when you answer now."},
		{"items", strictObject(object{
			{"name", object{{"type", "string"}, {"enum", names}}},
			{"arguments", object{{"type", "string"}, {"description", "The call's arguments: a JSON object encoded as a string."}}},
		})},
	}
}

// promptedCall is a call in a prompted answer or its replay.
type promptedCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// promptedMessages replays the turn's tool exchanges in prompted mode: for each round,
// the model's answer with its calls, then a user message with what came of them, as
// data. Servers that refuse native tools may refuse tool-role messages too.
func promptedMessages(exchanges []agent.ToolExchange) []goopenai.ChatCompletionMessage {
	type result struct {
		Tool      string `json:"tool"`
		Arguments string `json:"arguments"`
		Result    string `json:"result"`
	}
	var out []goopenai.ChatCompletionMessage
	for i := 0; i < len(exchanges); {
		var (
			calls   []promptedCall
			results []result
			j       = i
		)
		for ; j < len(exchanges) && exchanges[j].Round == exchanges[i].Round; j++ {
			ex := exchanges[j]
			calls = append(calls, promptedCall{Name: ex.Tool, Arguments: ex.Arguments})
			results = append(results, result{Tool: ex.Tool, Arguments: ex.Arguments, Result: ex.Result})
		}
		asked, _ := json.Marshal(struct {
			ToolCalls []promptedCall `json:"tool_calls"`
		}{calls})
		out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleAssistant, Content: string(asked)})
		if data, err := dataMessage("What came of your tool calls, in order", results); err == nil {
			out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleUser, Content: data})
		}
		i = j
	}
	return out
}

// parsePrompted reads a prompted answer: its tool calls, with the reply written with
// them, when tool_calls lists some; else the pathway answer without tool_calls.
func parsePrompted(content string, outputs []flowv1.SignatureField) ([]agent.ToolCall, agent.PathwayResponse, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(content), &m); err != nil {
		_, err := parsePathway(content, outputs)
		return nil, agent.PathwayResponse{}, err
	}
	if raw, ok := m["tool_calls"]; ok {
		delete(m, "tool_calls")
		if s := strings.TrimSpace(string(raw)); s != "null" && s != "[]" {
			calls, ok := callList(raw, false)
			if !ok || !strings.HasPrefix(s, "[") {
				return nil, agent.PathwayResponse{}, errors.New("tool_calls is not a list of calls with a name and arguments")
			}
			var reply string
			_ = json.Unmarshal(m["reply"], &reply)
			return calls, agent.PathwayResponse{Reply: reply}, nil
		}
	}
	rest, err := json.Marshal(m)
	if err != nil {
		return nil, agent.PathwayResponse{}, err
	}
	out, err := parsePathway(string(rest), outputs)
	return nil, out, err
}
