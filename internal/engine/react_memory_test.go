package engine

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// TestReActToolCallsInTranscript: a turn's tool calls stay in the conversation: its
// transcript exchange keeps them, and the next turn's agent sees them before the
// reply in the assistant message. The text the model wrote with its calls is given
// back with them in the same turn.
func TestReActToolCallsInTranscript(t *testing.T) {
	s, l := reactTools(t, func(req agent.PathwayRequest) agent.PathwayResponse {
		if req.Message == "and who was it?" {
			return agent.PathwayResponse{Reply: "Dr. Cardiology.", ResultType: flowv1.ResultSuccess}
		}
		if len(req.ToolExchanges) == 0 {
			r := asks(call("find_doctors", `{"specialty":"cardiology"}`))
			r.Reply = "Let me look that up."
			return r
		}
		return agent.PathwayResponse{Reply: "Found one.", ResultType: flowv1.ResultSuccess}
	})
	s.say("m1", "find me a cardiologist")
	s.settle()
	reqs := pathwayReqs(l)
	if len(reqs) != 2 || len(reqs[1].ToolExchanges) != 1 || reqs[1].ToolExchanges[0].AssistantText != "Let me look that up." {
		t.Fatalf("the re-ask does not carry the model's text: %s", dump(reqs))
	}
	want := []flowv1.ExchangeToolCall{{Tool: "find_doctors", Args: `{"specialty":"cardiology"}`, Result: `{"doctors":["dr-cardiology"]}`, State: flowv1.ToolCallDone}}
	tr := s.st.Transcript
	if len(tr) != 1 || !reflect.DeepEqual(tr[0].ToolCalls, want) || tr[0].Assistant != "Found one." || tr[0].User != "find me a cardiologist" {
		t.Fatalf("transcript %s", dump(tr))
	}

	s.say("m2", "and who was it?")
	s.settle()
	reqs = pathwayReqs(l)
	hist := reqs[len(reqs)-1].History
	wantHist := []agent.Exchange{
		{Role: "user", Text: "find me a cardiologist"},
		{Role: "assistant", Text: "[called find_doctors {\"specialty\":\"cardiology\"} -> {\"doctors\":[\"dr-cardiology\"]}]\n\nFound one."},
	}
	if !reflect.DeepEqual(hist, wantHist) {
		t.Fatalf("turn 2 history %s", dump(hist))
	}
	if tr := s.st.Transcript; len(tr) != 2 || tr[1].ToolCalls != nil || tr[1].Assistant != "Dr. Cardiology." {
		t.Errorf("transcript %s", dump(tr))
	}
}

// TestExchangeToolCalls: previews are cut at a UTF-8 boundary and say so, a failed
// call keeps why, and calls past the exchange's bound are counted, not kept.
func TestExchangeToolCalls(t *testing.T) {
	long := `{"note":"` + strings.Repeat("é", 400) + `"}`
	calls := []flowv1.ToolCallProgress{
		{ToolCallRecord: flowv1.ToolCallRecord{ID: "t-1-0", Tool: "find_doctors", State: flowv1.ToolCallDone},
			Args: &apiextensionsv1.JSON{Raw: []byte(long)}, Result: &apiextensionsv1.JSON{Raw: []byte(long)}},
		{ToolCallRecord: flowv1.ToolCallRecord{ID: "t-1-1", Tool: "book_slot", State: flowv1.ToolCallRejected, Error: "rejected by alice: not now"},
			Args: &apiextensionsv1.JSON{Raw: []byte(`{"slot":"09:00"}`)}},
	}
	for i := range 20 {
		calls = append(calls, flowv1.ToolCallProgress{ToolCallRecord: flowv1.ToolCallRecord{ID: fmt.Sprintf("t-2-%d", i), Tool: "copay", State: flowv1.ToolCallDone},
			Result: &apiextensionsv1.JSON{Raw: []byte(long)}})
	}
	got, omitted := exchangeToolCalls(calls)
	size := 0
	for _, c := range got {
		size += toolCallBytes(c)
	}
	if omitted == 0 || int(omitted)+len(got) != len(calls) || size > maxExchangeToolBytes {
		t.Fatalf("kept %d calls (%d bytes), omitted %d", len(got), size, omitted)
	}
	first := got[0]
	note := fmt.Sprintf("… (cut, %d bytes)", len(long))
	if len(first.Args) > maxToolArgsPreview || len(first.Result) > maxToolResultPreview ||
		!strings.HasSuffix(first.Args, note) || !strings.HasSuffix(first.Result, note) ||
		!utf8.ValidString(first.Args) || !utf8.ValidString(first.Result) || !strings.HasPrefix(first.Args, `{"note":"éé`) {
		t.Errorf("previews %q / %q", first.Args, first.Result)
	}
	if got[1] != (flowv1.ExchangeToolCall{Tool: "book_slot", Args: `{"slot":"09:00"}`, Result: "rejected by alice: not now", State: flowv1.ToolCallRejected}) {
		t.Errorf("rejected call %+v", got[1])
	}
	text := assistantText(flowv1.Exchange{ToolCalls: got[1:2], ToolCallsOmitted: omitted, Assistant: "Not booked."})
	wantText := fmt.Sprintf("[called book_slot {\"slot\":\"09:00\"} -> Rejected: rejected by alice: not now]\n[and %d more tool calls, not shown]\n\nNot booked.", omitted)
	if text != wantText {
		t.Errorf("assistant text %q", text)
	}
	// The bound of the transcript counts the calls as stored.
	ex := flowv1.Exchange{ToolCalls: got}
	if b, _ := json.Marshal(got); StoredBytes(&ex) <= len(b) || len(b) < size {
		t.Errorf("exchange bytes %d, calls %d bytes stored, %d bytes of previews", StoredBytes(&ex), len(b), size)
	}
}

// TestToolsOnPipelineRefused: tools on a pathway that several remote agents run
// side by side (Parallel, Router, Ensemble) are refused with a message that names
// the pathway; one remote agent, a Sequential pipeline, or builtin agents may have
// them.
func TestToolsOnPipelineRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		agents   []flowv1.Name
		pipeline flowv1.Pipeline
		want     string
	}{
		{"parallel pipeline with a remote agent", []flowv1.Name{"planner", "gpt"}, flowv1.PipelineParallel,
			"pathway book: tools are offered to one agent or to a Sequential pipeline, and this one runs a Parallel pipeline of 2 agents (planner, gpt)"},
		{"sequential pipeline", []flowv1.Name{"planner", "gpt"}, "", ""},
		{"one remote agent", []flowv1.Name{"gpt"}, flowv1.PipelineRouter, ""},
		{"builtin agents", []flowv1.Name{"planner", "helper"}, flowv1.PipelineEnsemble, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := clinicTools(twoCalls, func(j *flowv1.JourneySpec, p *flowv1.PathwaySpec) {
				j.Agents = append(j.Agents, openai, flowv1.AgentSpec{Name: "planner", Provider: flowv1.ProviderOpenAI, Model: "m"},
					flowv1.AgentSpec{Name: "helper", Provider: flowv1.ProviderBuiltin})
				if tc.name == "builtin agents" {
					j.Agents[1].Provider = flowv1.ProviderBuiltin
				}
				p.Agents, p.Pipeline = tc.agents, tc.pipeline
			})
			issues := strings.Join(Validate(d.j, d.p), "\n")
			if tc.want == "" && strings.Contains(issues, "tools are offered") || !strings.Contains(issues, tc.want) {
				t.Errorf("issues:\n%s", issues)
			}
		})
	}
}

// TestReActSequentialPipeline: each agent of a Sequential pipeline runs its own loop
// of tool calls, one after the other: the second sees the first's outputs and only
// its own calls; the turn's outputs merge, its reply is the last agent's, and its
// exchange keeps every call.
func TestReActSequentialPipeline(t *testing.T) {
	s, l := reactTools(t, nil, func(j *flowv1.JourneySpec, p *flowv1.PathwaySpec) {
		j.Agents = append(j.Agents, flowv1.AgentSpec{Name: "planner", Provider: flowv1.ProviderOpenAI, Model: "m"})
		p.Agents = []flowv1.Name{"planner", "gpt"}
	})
	var order []string
	byAgent := map[string][]agent.PathwayRequest{}
	l.pathway = func(req agent.PathwayRequest) (agent.PathwayResponse, error) {
		name := order[len(order)-1]
		byAgent[name] = append(byAgent[name], req)
		if name == "planner" {
			if len(req.ToolExchanges) == 0 {
				return asks(call("find_doctors", `{"specialty":"cardiology"}`)), nil
			}
			var found struct{ Doctors []string }
			_ = json.Unmarshal([]byte(req.ToolExchanges[0].Result), &found)
			return agent.PathwayResponse{Reply: "Found one.", Outputs: map[string]any{"doctor": found.Doctors[0]}, ResultType: flowv1.ResultSuccess}, nil
		}
		if len(req.ToolExchanges) == 0 {
			return asks(call("book_slot", fmt.Sprintf(`{"doctor":%q}`, req.Inputs["doctor"]))), nil
		}
		return final(req), nil
	}
	tool := s.answer
	s.answer = func(e *Effect) (any, error) {
		if e.Kind == flowv1.EffectRunPathway {
			if len(e.Agents) != 1 || e.Pipeline != flowv1.PipelineSequential {
				t.Fatalf("a pipeline agent's effect names %d agents, pipeline %s", len(e.Agents), e.Pipeline)
			}
			order = append(order, string(e.Agents[0].Name))
		}
		return tool(e)
	}
	s.say("m1", "book me a cardiologist")
	s.settle()
	if got := strings.Join(order, ","); got != "planner,planner,gpt,gpt" || toolEffects(s) != 2 {
		t.Fatalf("agents asked %s, %d tool calls", got, toolEffects(s))
	}
	g := byAgent["gpt"]
	if g[0].Inputs["doctor"] != "dr-cardiology" || g[0].Context["doctor"] != "dr-cardiology" || len(g[0].ToolExchanges) != 0 ||
		len(g[1].ToolExchanges) != 1 || g[1].ToolExchanges[0].Tool != "book_slot" || len(g[1].ToolSpecs) != 3 {
		t.Errorf("gpt's requests %s", dump(g))
	}
	lt := s.st.LastTurn
	outputs, _ := decodeJSON(lt.Outputs)
	if lt.AssistantText != "Booked dr-cardiology at 09:00" || outputs["doctor"] != "dr-cardiology" || outputs["booking"] == nil ||
		len(lt.ToolCalls) != 2 || lt.FinishReason != flowv1.FinishSuccess || s.st.Turn != nil {
		t.Fatalf("last turn %s", dump(lt))
	}
	if b, _ := json.Marshal(s.context()["booking"]); string(b) != `{"doctor":"dr-cardiology","slot":"09:00"}` {
		t.Errorf("context booking %s", b)
	}
	if tr := s.st.Transcript; len(tr) != 1 || len(tr[0].ToolCalls) != 2 || tr[0].ToolCalls[1].Tool != "book_slot" {
		t.Errorf("transcript %s", dump(tr))
	}
}
