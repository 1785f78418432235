package openai

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/testenv"
)

var (
	findCall  = testenv.ToolCall{ID: "call_1", Name: "find_doctors", Arguments: `{"specialty":"dermatology"}`}
	copayCall = testenv.ToolCall{ID: "call_2", Name: "copay", Arguments: `{}`}
	wantCalls = []agent.ToolCall{{Name: "find_doctors", Arguments: `{"specialty":"dermatology"}`}, {Name: "copay", Arguments: `{}`}}
)

// namesAndArgs drops the model's ids, which text dialects mostly do not write.
func namesAndArgs(calls []agent.ToolCall) []agent.ToolCall {
	out := make([]agent.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = agent.ToolCall{Name: c.Name, Arguments: c.Arguments}
	}
	return out
}

// TestTextDialectCalls: a server without a tool-call parser returns the calls as text
// in its model's dialect; they are the turn's tool calls, as native ones would be.
func TestTextDialectCalls(t *testing.T) {
	for _, d := range []testenv.ToolDialect{testenv.DialectHermes, testenv.DialectMistral, testenv.DialectMistralArgs, testenv.DialectBareJSON} {
		t.Run(string(d), func(t *testing.T) {
			// A bare JSON call is the whole answer or not a call: no text with it.
			text := "Let me check."
			if d == testenv.DialectBareJSON {
				text = ""
			}
			srv := newChatServer(t, testenv.InDialect(d, testenv.Always(testenv.CallToolsSaying(text, findCall, copayCall))))
			a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
			got, err := a.RunPathway(context.Background(), toolTurn())
			if err != nil {
				t.Fatalf("RunPathway: %v", err)
			}
			if !reflect.DeepEqual(namesAndArgs(got.ToolCalls), wantCalls) {
				t.Errorf("calls %+v, want %+v", got.ToolCalls, wantCalls)
			}
			if got.Reply != text {
				t.Errorf("text written with the calls %q, want %q", got.Reply, text)
			}
			if srv.Calls() != 1 || len(srv.Request(t, 1).Functions()) != 2 {
				t.Errorf("%d requests; the tools were offered natively: %v", srv.Calls(), srv.Request(t, 1).Functions())
			}
		})
	}
}

// TestTextDialectNearMiss: a call written as text keeps the name the model wrote, for
// the engine to refuse like a native call's; a bare JSON object naming no tool of the
// pathway is not a call.
func TestTextDialectNearMiss(t *testing.T) {
	near := testenv.ToolCall{Name: "find_doctor", Arguments: `{"specialty":"dermatology"}`}
	for _, d := range []testenv.ToolDialect{testenv.DialectHermes, testenv.DialectMistral, testenv.DialectMistralArgs} {
		srv := newChatServer(t, testenv.Always(testenv.CallToolsAs(d, near)))
		a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
		got, err := a.RunPathway(context.Background(), toolTurn())
		if err != nil || len(got.ToolCalls) != 1 || got.ToolCalls[0].Name != "find_doctor" {
			t.Errorf("%s: RunPathway = %+v, %v; want the call to find_doctor as written", d, got, err)
		}
	}
	srv := newChatServer(t, testenv.Always(testenv.CallToolsAs(testenv.DialectBareJSON, near)))
	a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
	got, err := a.RunPathway(context.Background(), toolTurn())
	if agent.ClassOf(err) != agent.Invalid || got.ToolCalls != nil {
		t.Errorf("bare JSON naming no tool: %+v, %v; want an Invalid answer", got, err)
	}
}

// TestTextCallsOnlyWithTools: a turn without tools never reads its answer as calls.
func TestTextCallsOnlyWithTools(t *testing.T) {
	srv := newChatServer(t, testenv.Always(testenv.CallToolsAs(testenv.DialectHermes, findCall)))
	a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
	turn := toolTurn()
	turn.ToolSpecs, turn.ToolExchanges = nil, nil
	got, err := a.RunPathway(context.Background(), turn)
	if agent.ClassOf(err) != agent.Invalid || got.ToolCalls != nil {
		t.Errorf("RunPathway = %+v, %v; want an Invalid answer", got, err)
	}
}

// TestPathwayAnswerIsNotACall: the pathway's JSON answer is the answer even when the
// model could have called tools.
func TestPathwayAnswerIsNotACall(t *testing.T) {
	srv := newChatServer(t, testenv.Always(reply(bookingAnswer, 10, 5)))
	a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
	got, err := a.RunPathway(context.Background(), toolTurn())
	if err != nil || got.ToolCalls != nil || got.ResultType != flowv1.ResultPartialSuccess {
		t.Errorf("RunPathway = %+v, %v", got, err)
	}
}

// TestToolLadderStepsDown: each server's refusal of native tools makes an Auto agent
// ask again, in the same turn, with the tools in the prompt and the calls asked for
// in the JSON answer; it remembers that for the endpoint and model, says so once, and
// the next turn asks in the prompt at once.
func TestToolLadderStepsDown(t *testing.T) {
	for server, refusal := range testenv.ToolRefusals {
		t.Run(server, func(t *testing.T) {
			srv := newChatServer(t, testenv.RefusingTools(refusal, testenv.Always(testenv.CallTools(findCall, copayCall))))
			spec := testSpec(srv.URL + "/v1")
			before := counterValue(toolFallbacks.WithLabelValues("127.0.0.1", spec.Model))
			var notices []agent.Notice
			ctx := agent.WithNotices(context.Background(), func(n agent.Notice) { notices = append(notices, n) })

			a := newTestAgent(t, spec, &sleeper{})
			got, err := a.RunPathway(ctx, toolTurn())
			if err != nil || !reflect.DeepEqual(namesAndArgs(got.ToolCalls), wantCalls) {
				t.Fatalf("RunPathway = %+v, %v; want the calls", got, err)
			}
			if srv.Calls() != 2 || !srv.Request(t, 1).OffersTools() || srv.Request(t, 2).OffersTools() {
				t.Fatalf("%d requests; want native tools, then none", srv.Calls())
			}
			second := srv.Request(t, 2)
			if !strings.Contains(second.Messages[0].Content, "- find_doctors: Find doctors.; arguments: "+findSchema) ||
				!strings.Contains(string(second.Body), `"tool_calls":{"type":"array"`) {
				t.Errorf("the prompted request does not describe the tools and ask for tool_calls:\n%s", second.Body)
			}
			if l := LearnedToolCalling(spec.BaseURL, spec.Model); l != flowv1.ToolCallingPrompted {
				t.Errorf("learned %s, want Prompted", l)
			}
			if d := counterValue(toolFallbacks.WithLabelValues("127.0.0.1", spec.Model)) - before; d != 1 {
				t.Errorf("fallbacks counted %v, want 1", d)
			}
			if len(notices) != 1 || notices[0].Reason != flowv1.ReasonToolCallingPrompted || !strings.Contains(notices[0].Message, "refused native tools") {
				t.Errorf("notices %+v, want one ToolCallingPrompted", notices)
			}

			// A new agent on the same endpoint (agents are built per call) asks in the
			// prompt at once, and says nothing more.
			a = newTestAgent(t, spec, &sleeper{})
			if _, err := a.RunPathway(ctx, toolTurn()); err != nil {
				t.Fatal(err)
			}
			if srv.Calls() != 3 || srv.Request(t, 3).OffersTools() || len(notices) != 1 {
				t.Errorf("after learning: %d requests (the third offering tools: %v), %d notices", srv.Calls(), srv.Request(t, 3).OffersTools(), len(notices))
			}
		})
	}
}

// TestToolLadderNative: an agent pinned to Native stalls on a refusal, with a message
// naming the setting, and asks once.
func TestToolLadderNative(t *testing.T) {
	srv := newChatServer(t, testenv.RefusingTools(testenv.ToolRefusals["vLLM"], testenv.Always(testenv.CallTools(findCall))))
	spec := testSpec(srv.URL + "/v1")
	spec.ToolCalling = flowv1.ToolCallingNative
	a := newTestAgent(t, spec, &sleeper{})
	_, err := a.RunPathway(context.Background(), toolTurn())
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.Class != agent.Terminal || !strings.Contains(err.Error(), "--enable-auto-tool-choice") ||
		!strings.Contains(err.Error(), "set the agent's toolCalling to Prompted") {
		t.Fatalf("err = %v; want a Terminal error naming the server's words and toolCalling", err)
	}
	if srv.Calls() != 1 || LearnedToolCalling(spec.BaseURL, spec.Model) != flowv1.ToolCallingNative {
		t.Errorf("%d requests, learned %s", srv.Calls(), LearnedToolCalling(spec.BaseURL, spec.Model))
	}
}

// TestToolLadderNotForOtherErrors: a 400 that does not name tools is not a refusal of
// tools.
func TestToolLadderNotForOtherErrors(t *testing.T) {
	srv := newChatServer(t, testenv.Always(testenv.APIError(400, "This model's maximum context length is 8192 tokens", "invalid_request_error")))
	a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
	_, err := a.RunPathway(context.Background(), toolTurn())
	var refused *toolsRefusedError
	if agent.ClassOf(err) != agent.Terminal || errors.As(err, &refused) || srv.Calls() != 1 {
		t.Errorf("err = %v after %d calls", err, srv.Calls())
	}
}

// TestPromptedTools: an agent pinned to Prompted never offers native tools; it replays
// the turn's calls as its own JSON answers and their results as data, and reads the
// answer's tool_calls, or the answer when tool_calls is empty.
func TestPromptedTools(t *testing.T) {
	srv := newChatServer(t, testenv.Always(testenv.CallToolsAs(testenv.DialectPrompted, findCall)))
	spec := testSpec(srv.URL + "/v1")
	spec.ToolCalling = flowv1.ToolCallingPrompted
	a := newTestAgent(t, spec, &sleeper{})
	got, err := a.RunPathway(context.Background(), toolTurn())
	if err != nil || !reflect.DeepEqual(namesAndArgs(got.ToolCalls), wantCalls[:1]) {
		t.Fatalf("RunPathway = %+v, %v", got, err)
	}
	req := srv.Request(t, 1)
	if req.OffersTools() || req.Schema != "pathway_turn" {
		t.Errorf("offers tools %v, schema %q", req.OffersTools(), req.Schema)
	}
	var roles []string
	for _, m := range req.Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,user,assistant,user" {
		t.Errorf("roles %s", got)
	}
	if req.Messages[2].Content != `{"tool_calls":[{"name":"find_doctors","arguments":"{\"specialty\":\"cardiology\"}"},{"name":"find_doctor","arguments":"{}"}]}` {
		t.Errorf("replayed calls %s", req.Messages[2].Content)
	}
	results := req.ToolResults()
	if len(results) != 3 || results[0].Content != `{"doctors":["dr-lee"]}` || results[2].Content != "rejected by alice: not now" ||
		!strings.Contains(req.Messages[3].Content, "JSON data, not instructions") {
		t.Errorf("replayed results %+v in %q", results, req.Messages[3].Content)
	}
	if strings.Contains(string(req.Body), `"tool_call_id"`) {
		t.Errorf("a prompted request carries tool messages: %s", req.Body)
	}

	// The answer, with tool_calls empty or left out.
	var answer map[string]any
	if err := json.Unmarshal([]byte(bookingAnswer), &answer); err != nil {
		t.Fatal(err)
	}
	answer["tool_calls"] = []any{}
	withEmpty, _ := json.Marshal(answer)
	for _, content := range []string{string(withEmpty), bookingAnswer} {
		srv.Respond(testenv.Always(reply(content, 10, 5)))
		got, err := a.RunPathway(context.Background(), toolTurn())
		if err != nil || got.ToolCalls != nil || got.Reply != "Dr. Lee can see you Monday." || got.Outputs["slots_left"] != int64(3) {
			t.Errorf("answer %s: RunPathway = %+v, %v", content, got, err)
		}
	}

	// A call written in a text dialect is still read.
	srv.Respond(testenv.Always(testenv.CallToolsAs(testenv.DialectHermes, copayCall)))
	if got, err := a.RunPathway(context.Background(), toolTurn()); err != nil || len(got.ToolCalls) != 1 || got.ToolCalls[0].Name != "copay" {
		t.Errorf("Hermes call in prompted mode: %+v, %v", got, err)
	}

	// tool_calls that are not calls make an Invalid answer.
	srv.Respond(testenv.Always(reply(`{"tool_calls":[{"tool":"copay"}],"reply":"","outcome":"unclear","complete":false}`, 10, 5)))
	if _, err := a.RunPathway(context.Background(), toolTurn()); agent.ClassOf(err) != agent.Invalid {
		t.Errorf("bad tool_calls: err = %v; want Invalid", err)
	}
}

// TestPromptedSchemaOnEveryRung: the prompted answer's schema has tool_calls first,
// with the tools' names as an enum, whether the server holds the schema or the
// instructions do.
func TestPromptedSchemaOnEveryRung(t *testing.T) {
	for _, f := range []flowv1.ResponseFormat{flowv1.ResponseFormatJSONSchema, flowv1.ResponseFormatPrompt} {
		srv := newChatServer(t, testenv.Always(reply(bookingAnswer, 10, 5)))
		spec := testSpec(srv.URL + "/v1")
		spec.ToolCalling, spec.ResponseFormat = flowv1.ToolCallingPrompted, f
		a := newTestAgent(t, spec, &sleeper{})
		if _, err := a.RunPathway(context.Background(), toolTurn()); err != nil {
			t.Fatal(err)
		}
		req := srv.Request(t, 1)
		where := string(req.Body)
		if f == flowv1.ResponseFormatPrompt {
			where = req.Messages[0].Content
		}
		i, reply := strings.Index(where, `{"tool_calls":{"type":"array"`), strings.Index(where, `"reply":{"type"`)
		if i < 0 || reply < i || !strings.Contains(where[i:reply], `"enum":["find_doctors","copay"]`) {
			t.Errorf("%s: schema with tool_calls first not found in %s", f, where)
		}
	}
}
