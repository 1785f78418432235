package openai

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/testenv"
)

const findSchema = `{"type":"object","properties":{"specialty":{"type":"string"}},"required":["specialty"]}`

// toolTurn is a booking turn that may call find_doctors (a server tool with a pinned
// schema) and copay (a builtin tool without one), after two rounds of calls.
func toolTurn() agent.PathwayRequest {
	return agent.PathwayRequest{
		Pathway: "booking", Spec: bookingSpec, Message: "book me a cardiologist",
		ToolSpecs: []agent.ToolSpec{
			{Name: "find_doctors", Description: "Find doctors.", InputSchema: json.RawMessage(findSchema)},
			{Name: "copay"},
		},
		ToolExchanges: []agent.ToolExchange{
			{Round: 1, ID: "t-3-0", Tool: "find_doctors", Arguments: `{"specialty":"cardiology"}`, Result: `{"doctors":["dr-lee"]}`},
			{Round: 1, ID: "t-3-1", Tool: "find_doctor", Arguments: `{}`, Result: `tool "find_doctor" is not one of the pathway's tools (find_doctors, copay)`},
			{Round: 2, ID: "t-5-2", Tool: "copay", Arguments: `{}`, Result: "rejected by alice: not now"},
		},
	}
}

func TestRunPathwayOffersTools(t *testing.T) {
	srv := newChatServer(t, testenv.Always(testenv.CallTools(
		testenv.ToolCall{ID: "call_1", Name: "find_doctors", Arguments: ` {"specialty":"dermatology"} `},
		testenv.ToolCall{ID: "call_2", Name: "copay", Arguments: `{}`})))
	a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
	got, err := a.RunPathway(context.Background(), toolTurn())
	if err != nil {
		t.Fatalf("RunPathway: %v", err)
	}
	want := []agent.ToolCall{{ID: "call_1", Name: "find_doctors", Arguments: `{"specialty":"dermatology"}`}, {ID: "call_2", Name: "copay", Arguments: `{}`}}
	if !reflect.DeepEqual(got.ToolCalls, want) || got.Reply != "" || got.Usage.PromptTokens != 100 {
		t.Fatalf("RunPathway = %+v", got)
	}

	req := srv.Request(t, 1)
	fns := req.Functions()
	if len(fns) != 2 || string(fns["find_doctors"]) != findSchema || string(fns["copay"]) != string(emptyParameters) {
		t.Errorf("functions %s", fns)
	}
	// The calls are replayed after the user's message: one assistant message per
	// round with its calls, each followed by the calls' results.
	var roles []string
	for _, m := range req.Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,tool,assistant,tool" {
		t.Errorf("roles %s", got)
	}
	calls := req.ToolCalls()
	if len(calls) != 3 || calls[0].ID != "t-3-0" || calls[1].Name != "find_doctor" || calls[2].Arguments != "{}" {
		t.Errorf("replayed calls %+v", calls)
	}
	results := req.ToolResults()
	if len(results) != 3 || results[0] != (testenv.ToolResult{ToolCallID: "t-3-0", Content: `{"doctors":["dr-lee"]}`}) ||
		results[2] != (testenv.ToolResult{ToolCallID: "t-5-2", Content: "rejected by alice: not now"}) ||
		!strings.Contains(results[1].Content, "not one of the pathway's tools") {
		t.Errorf("tool results %+v", results)
	}
	if sys := req.Messages[0].Content; !strings.Contains(sys, "You may call the tools offered to you") {
		t.Errorf("system message does not mention the tools:\n%s", sys)
	}
	if req.Schema != "pathway_turn" {
		t.Errorf("the final answer's schema %q is not requested with the tools", req.Schema)
	}
}

func TestRunPathwayFinalAnswerWithTools(t *testing.T) {
	srv := newChatServer(t, testenv.Always(reply(bookingAnswer, 10, 5)))
	a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
	got, err := a.RunPathway(context.Background(), toolTurn())
	if err != nil || got.Reply != "Dr. Lee can see you Monday." || got.ToolCalls != nil {
		t.Fatalf("RunPathway = %+v, %v", got, err)
	}
}

func TestRunPathwayWithoutToolsOffersNone(t *testing.T) {
	srv := newChatServer(t, testenv.Always(reply(bookingAnswer, 10, 5)))
	a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
	turn := toolTurn()
	turn.ToolSpecs, turn.ToolExchanges = nil, nil
	if _, err := a.RunPathway(context.Background(), turn); err != nil {
		t.Fatal(err)
	}
	body := request(t, srv, 1)
	if _, ok := body["tools"]; ok {
		t.Errorf("a pathway without tools offered %v", body["tools"])
	}
	if sys := srv.Request(t, 1).Messages[0].Content; strings.Contains(sys, "tools offered") {
		t.Errorf("system message mentions tools")
	}
}

func TestRunPathwayIgnoresToolCallsNotOffered(t *testing.T) {
	srv := newChatServer(t, testenv.Always(testenv.CallTools(testenv.ToolCall{ID: "c", Name: "find_doctors", Arguments: "{}"})))
	a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
	turn := toolTurn()
	turn.ToolSpecs, turn.ToolExchanges = nil, nil
	got, err := a.RunPathway(context.Background(), turn)
	if err == nil || got.ToolCalls != nil {
		t.Fatalf("an answer calling tools that were not offered: %+v, %v", got, err)
	}
}

// TestToolCallUsageEstimated: an answer with tool calls and no usage block is
// estimated from the offered tools, the replayed calls and the calls asked for.
func TestToolCallUsageEstimated(t *testing.T) {
	args := `{"specialty":"` + strings.Repeat("cardiology ", 40) + `"}`
	srv := newChatServer(t, testenv.Always(testenv.JSONReply(200, map[string]any{
		"id": "x", "object": "chat.completion", "model": "m",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
			"role": "assistant", "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
				"function": map[string]any{"name": "find_doctors", "arguments": args}}}}}},
	})))
	a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
	without := toolTurn()
	without.ToolExchanges = nil
	small, err := a.RunPathway(context.Background(), without)
	if err != nil {
		t.Fatal(err)
	}
	big, err := a.RunPathway(context.Background(), toolTurn())
	if err != nil {
		t.Fatal(err)
	}
	if !big.Usage.Estimated || big.Usage.CompletionTokens < agent.EstimateTokens(len(args)) || big.Usage.PromptTokens <= small.Usage.PromptTokens {
		t.Errorf("usage %+v (without exchanges %+v)", big.Usage, small.Usage)
	}
}
