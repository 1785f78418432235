package journeytest

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// ToolResult is a scripted result of a server tool: a test answers the tool calls of
// its journey with them, so a journey whose tools live on MCP servers runs offline,
// without any server. Builtin tools need none: they are computed.
type ToolResult struct {
	// Tool is the tool's name in the journey (spec.tools[].name).
	Tool string `json:"tool"`
	// Args, when set, must be among the call's arguments, with the same values: the
	// result answers only the calls with those arguments. Unset answers every call.
	Args map[string]any `json:"args,omitempty"`
	// Result is the tool's result (any JSON value), as the server's structured content.
	Result json.RawMessage `json:"result,omitempty"`
	// Error makes the tool answer with an error (an MCP result with isError): the
	// call is Failed with this message.
	Error string `json:"error,omitempty"`
	// DurationMs is how long the call takes, as lastTurn.toolCalls reports it.
	DurationMs int64 `json:"durationMs,omitempty"`
}

// check checks the scripted result at w.
func (t *ToolResult) check(w string) error {
	if t.Tool == "" {
		return fmt.Errorf("%s.tool: name the tool", w)
	}
	hasResult := len(bytes.TrimSpace(t.Result)) > 0
	if hasResult == (t.Error != "") {
		return fmt.Errorf("%s: give exactly one of result and error", w)
	}
	if t.DurationMs < 0 {
		return fmt.Errorf("%s.durationMs: %d is negative", w, t.DurationMs)
	}
	return nil
}

// matches reports whether t answers the call of tool with args.
func (t *ToolResult) matches(tool string, args map[string]any) bool {
	if t.Tool != tool {
		return false
	}
	for k, want := range t.Args {
		got, ok := args[k]
		if !ok || !equalJSON(want, got) {
			return false
		}
	}
	return true
}

// response is the tool's answer.
func (t *ToolResult) response() agent.ToolResponse {
	r := agent.ToolResponse{Error: t.Error, DurationMs: t.DurationMs}
	if t.Error == "" {
		_ = json.Unmarshal(t.Result, &r.Result)
	}
	return r
}

// checkTools checks the scripted tool results at where (tools, steps[i].tools).
func checkTools(where string, tools []ToolResult) error {
	for i := range tools {
		if err := tools[i].check(fmt.Sprintf("%s[%d]", where, i)); err != nil {
			return err
		}
	}
	return nil
}

// scriptedTool answers the call eff of a server tool from the step's scripted results,
// then the test's: the first that matches. ok is false when none does.
func (s *script) scriptedTool(eff *engine.Effect) (reply, bool) {
	for _, list := range [][]ToolResult{s.tools, s.caseTools} {
		for i := range list {
			if list[i].matches(eff.Tool.Tool, eff.Tool.Args) {
				return reply{resp: list[i].response()}, true
			}
		}
	}
	return reply{}, false
}

// nextIsToolAnswer reports whether the step's next recorded answer answers a tool call
// (a recorded test): it is used before the scripted results.
func (s *script) nextIsToolAnswer(eff *engine.Effect) bool {
	return s.used < len(s.answers) && s.answers[s.used].Kind == eff.Kind
}

// MissingToolResultError says that the engine called a server tool the test scripts no
// result for.
type MissingToolResultError struct {
	Step int // 1-based
	Tool string
	Args map[string]any
}

func (e *MissingToolResultError) Error() string {
	args := compactJSON(orEmpty(e.Args))
	return fmt.Sprintf("the engine called tool %s with arguments %s and the test scripts no result for it: add one under tools (or steps[%d].tools), for example {tool: %s, result: {...}}; a result with args answers only the calls with those arguments",
		e.Tool, truncate.Line(args, 200), e.Step-1, e.Tool)
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
