package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
)

// reactTools is clinicTools run by a remote agent that may call the tools: the
// model answers as script says for each request (by the number of its tool
// exchanges so far).
func reactTools(t *testing.T, script func(req agent.PathwayRequest) agent.PathwayResponse, mods ...func(*flowv1.JourneySpec, *flowv1.PathwaySpec)) (*session, *llm) {
	d := clinicTools(nil, func(j *flowv1.JourneySpec, p *flowv1.PathwaySpec) {
		j.Agents = append(j.Agents, openai)
		p.Agents = []flowv1.Name{"gpt"}
		p.Builtin = nil
		p.Signature.Outputs = []flowv1.SignatureField{{Name: "booking", Type: "object"}}
	})
	for _, m := range mods {
		m(d.j, d.p["book"])
	}
	s := toolSession(t, d, `{"patient": {"name": "Ada"}}`)
	l := &llm{pathway: func(req agent.PathwayRequest) (agent.PathwayResponse, error) { return script(req), nil }}
	s.answer = func(e *Effect) (any, error) {
		if e.Kind == flowv1.EffectCallTool {
			return builtin.CallTool(*e.Tool)
		}
		return l.answer(e)
	}
	return s, l
}

func call(name, args string) agent.ToolCall {
	return agent.ToolCall{ID: "call_" + name, Name: name, Arguments: args}
}

func asks(calls ...agent.ToolCall) agent.PathwayResponse {
	return agent.PathwayResponse{ToolCalls: calls}
}

// final answers with the booking found in the exchanges' last result.
func final(req agent.PathwayRequest) agent.PathwayResponse {
	var booking map[string]any
	if n := len(req.ToolExchanges); n > 0 {
		_ = json.Unmarshal([]byte(req.ToolExchanges[n-1].Result), &booking)
	}
	return agent.PathwayResponse{Reply: fmt.Sprintf("Booked %v at %v", booking["doctor"], booking["slot"]),
		Outputs: map[string]any{"booking": booking}, ResultType: flowv1.ResultSuccess, Complete: false}
}

func pathwayReqs(l *llm) []agent.PathwayRequest {
	var out []agent.PathwayRequest
	for _, r := range l.lastReqs {
		if p, ok := r.(agent.PathwayRequest); ok {
			out = append(out, p)
		}
	}
	return out
}

func toolEffects(s *session) (n int) {
	for _, e := range s.effects {
		if e.Kind == flowv1.EffectCallTool {
			n++
		}
	}
	return n
}

func TestReActTwoToolTurn(t *testing.T) {
	s, l := reactTools(t, func(req agent.PathwayRequest) agent.PathwayResponse {
		switch len(req.ToolExchanges) {
		case 0:
			return asks(call("find_doctors", `{"specialty":"cardiology"}`))
		case 1:
			var found struct{ Doctors []string }
			_ = json.Unmarshal([]byte(req.ToolExchanges[0].Result), &found)
			return asks(call("book_slot", fmt.Sprintf(`{"doctor":%q}`, found.Doctors[0])))
		}
		return final(req)
	})
	s.say("m1", "book me a cardiologist")
	s.settle()
	var kinds []string
	for _, e := range s.effects {
		kinds = append(kinds, string(e.Kind))
	}
	if got := strings.Join(kinds, ","); got != "RunPathway,CallTool,RunPathway,CallTool,RunPathway" {
		t.Fatalf("effects %s", got)
	}
	reqs := pathwayReqs(l)
	if len(reqs[0].ToolSpecs) != 3 || reqs[0].ToolSpecs[0].Name != "find_doctors" {
		t.Errorf("tool specs %s", dump(reqs[0].ToolSpecs))
	}
	ex := reqs[2].ToolExchanges
	if len(ex) != 2 || ex[0].Result != `{"doctors":["dr-cardiology"]}` || ex[1].Tool != "book_slot" || ex[1].Arguments != `{"doctor":"dr-cardiology"}` ||
		ex[0].Round != 1 || ex[1].Round != 2 {
		t.Errorf("third request's exchanges %s", dump(ex))
	}
	lt := s.st.LastTurn
	if lt.AssistantText != "Booked dr-cardiology at 09:00" || len(lt.ToolCalls) != 2 || lt.ToolCalls[1].State != flowv1.ToolCallDone {
		t.Fatalf("last turn %s", dump(lt))
	}
	if b, _ := json.Marshal(s.context()["booking"]); string(b) != `{"doctor":"dr-cardiology","slot":"09:00"}` {
		t.Errorf("context booking %s", b)
	}
	if s.st.Turn != nil || lt.FinishReason != flowv1.FinishSuccess || len(lt.Failures) != 0 {
		t.Errorf("turn %s finish %s failures %s", dump(s.st.Turn), lt.FinishReason, dump(lt.Failures))
	}
}

func TestReActRefusals(t *testing.T) {
	schema := `{"type":"object","properties":{"specialty":{"type":"string"}},"required":["specialty"],"additionalProperties":false}`
	for _, tc := range []struct {
		name string
		call agent.ToolCall
		ctx  string
		want string
	}{
		{"not in the pathway's list", call("refund", `{}`), "", `tool "refund" is not one of the pathway's tools (find_doctors, book_slot, copay, lookup)`},
		{"near-miss name", call("find_doctor", `{"specialty":"x"}`), "", `tool "find_doctor" is not one of the pathway's tools`},
		{"arguments fail the schema", call("lookup", `{"specialty":42}`), "", "the arguments do not match its input schema"},
		{"arguments not JSON", call("lookup", `{"specialty":`), "", "the arguments are not a JSON object"},
		{"missing prerequisite", call("book_slot", `{"doctor":"dr-x"}`), "{}", `requires context key "patient"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, l := reactTools(t, func(req agent.PathwayRequest) agent.PathwayResponse {
				if len(req.ToolExchanges) == 0 {
					return asks(tc.call)
				}
				return agent.PathwayResponse{Reply: "sorry: " + req.ToolExchanges[0].Result, ResultType: flowv1.ResultSuccess}
			}, func(j *flowv1.JourneySpec, p *flowv1.PathwaySpec) {
				j.ToolServers = []flowv1.ToolServer{{Name: "clinic", URL: "http://clinic"}}
				j.Tools = append(j.Tools, flowv1.Tool{Name: "lookup", Server: "clinic", Approval: flowv1.ToolApprovalNever})
				j.Tools = append(j.Tools, flowv1.Tool{Name: "refund", Builtin: &flowv1.BuiltinTool{Expression: "{}"}})
				p.Tools = append(p.Tools, "lookup")
			})
			s.snap = s.snap.WithServerTools(map[string]ToolInfo{"lookup": {ReadOnly: true, InputSchema: []byte(schema)}})
			if tc.ctx != "" {
				s.spec.InitialContext = raw(tc.ctx)
			}
			s.say("m1", "go")
			s.settle()
			if n := toolEffects(s); n != 0 {
				t.Fatalf("%d tool calls made", n)
			}
			lt := s.st.LastTurn
			if len(lt.Failures) != 1 || lt.Failures[0].Source != flowv1.FailureTool || lt.Failures[0].Kind != flowv1.FailureValidation ||
				!strings.Contains(lt.Failures[0].Message, tc.want) {
				t.Fatalf("failures %s", dump(lt.Failures))
			}
			reqs := pathwayReqs(l)
			if len(reqs) != 2 || len(reqs[1].ToolExchanges) != 1 || !strings.Contains(reqs[1].ToolExchanges[0].Result, tc.want) {
				t.Fatalf("the model was not told: %s", dump(reqs))
			}
			if !strings.HasPrefix(lt.AssistantText, "sorry: ") || lt.FinishReason != flowv1.FinishSuccess || len(lt.ToolCalls) != 1 ||
				lt.ToolCalls[0].State != flowv1.ToolCallFailed {
				t.Errorf("the turn did not go on: %s", dump(lt))
			}
		})
	}
}

func TestReActLimits(t *testing.T) {
	t.Run("maxToolCalls", func(t *testing.T) {
		two := int32(2)
		n := 0
		s, l := reactTools(t, func(agent.PathwayRequest) agent.PathwayResponse {
			n++
			return asks(call("find_doctors", fmt.Sprintf(`{"specialty":"s%d"}`, n)))
		}, func(_ *flowv1.JourneySpec, p *flowv1.PathwaySpec) { p.MaxToolCalls = &two })
		s.say("m1", "go")
		s.settle()
		lt := s.st.LastTurn
		if toolEffects(s) != 2 || len(pathwayReqs(l)) != 3 || lt.FinishReason != flowv1.FinishToolCallLimit ||
			!strings.Contains(lt.Failures[0].Message, "maxToolCalls 2") || s.st.Turn != nil {
			t.Fatalf("tool calls %d, model asked %d, last turn %s", toolEffects(s), len(pathwayReqs(l)), dump(lt))
		}
	})
	t.Run("an entry pathway stopped by a limit does not run again", func(t *testing.T) {
		s, l := reactTools(t, func(agent.PathwayRequest) agent.PathwayResponse {
			return asks(call("find_doctors", `{"specialty":"x"}`))
		}, func(_ *flowv1.JourneySpec, p *flowv1.PathwaySpec) { p.RunOn = flowv1.RunOnEntry })
		s.settle()
		if s.st.Turns != 1 || len(pathwayReqs(l)) != MaxRepeatedToolCalls+1 || s.st.LastTurn.FinishReason != flowv1.FinishLoopDetected {
			t.Fatalf("turns %d, model asked %d times, last turn %s", s.st.Turns, len(pathwayReqs(l)), dump(s.st.LastTurn))
		}
	})
	t.Run("repeated call", func(t *testing.T) {
		s, l := reactTools(t, func(agent.PathwayRequest) agent.PathwayResponse {
			return asks(call("find_doctors", `{"specialty":"x"}`))
		})
		s.say("m1", "go")
		s.settle()
		lt := s.st.LastTurn
		if toolEffects(s) != MaxRepeatedToolCalls || len(pathwayReqs(l)) != MaxRepeatedToolCalls+1 || lt.FinishReason != flowv1.FinishLoopDetected ||
			lt.Failures[0].Source != flowv1.FailurePolicy {
			t.Fatalf("tool calls %d, last turn %s", toolEffects(s), dump(lt))
		}
	})
}

// TestReActCrashSafe: a crash after the model's answer was journaled plans the same
// calls from the journal without asking again; a crash during a call repeats it with
// the same key.
func TestReActCrashSafe(t *testing.T) {
	s, l := reactTools(t, func(req agent.PathwayRequest) agent.PathwayResponse {
		if len(req.ToolExchanges) == 0 {
			return asks(call("find_doctors", `{"specialty":"cardiology"}`))
		}
		return final(req)
	})
	s.say("m1", "go")
	eff := s.step()
	if eff == nil || eff.Kind != flowv1.EffectRunPathway {
		t.Fatalf("first effect %s", dump(eff))
	}
	s.perform(eff)
	journaled := s.st.DeepCopy()
	if len(journaled.PendingEffect.Result.ToolCalls) != 1 || journaled.PendingEffect.Result.ToolCalls[0].Name != "find_doctors" {
		t.Fatalf("journal %s", dump(journaled.PendingEffect))
	}
	// The step that plans the call is lost twice (its status write failed): the journal plans it again.
	for range 2 {
		if e := s.step(); e != nil {
			t.Fatalf("planning asked for %s", dump(e))
		}
		if len(s.st.Turn.ToolCalls) != 1 || s.st.Turn.ToolCalls[0].State != flowv1.ToolCallPending {
			t.Fatalf("the call is not written ahead: %s", dump(s.st.Turn))
		}
		s.st = journaled.DeepCopy()
	}
	if e := s.step(); e != nil {
		t.Fatalf("planning asked for %s", dump(e))
	}
	first := s.step()
	if first == nil || first.Kind != flowv1.EffectCallTool {
		t.Fatalf("call effect %s", dump(first))
	}
	again := s.step() // the call's answer was never journaled
	if again == nil || again.Tool.IdempotencyKey != first.Tool.IdempotencyKey {
		t.Fatalf("retry %s", dump(again))
	}
	s.perform(again)
	s.settle()
	if asked := l.calls[flowv1.EffectRunPathway]; asked != 2 || toolEffects(s) != 1 || s.st.LastTurn.AssistantText == "" {
		t.Fatalf("model asked %d times, %d calls, last turn %s", asked, toolEffects(s), dump(s.st.LastTurn))
	}
}

func TestReActApprovals(t *testing.T) {
	guarded := func(j *flowv1.JourneySpec, _ *flowv1.PathwaySpec) {
		j.Tools[1].Approval = flowv1.ToolApprovalAlways
		j.Tools[0].Approval = flowv1.ToolApprovalAlways
	}
	s, l := reactTools(t, func(req agent.PathwayRequest) agent.PathwayResponse {
		if len(req.ToolExchanges) == 0 {
			return asks(call("find_doctors", `{"specialty":"x"}`), call("book_slot", `{"doctor":"dr-x"}`))
		}
		var results []string
		for _, ex := range req.ToolExchanges {
			results = append(results, ex.Result)
		}
		return agent.PathwayResponse{Reply: strings.Join(results, " | "), ResultType: flowv1.ResultSuccess}
	}, guarded)
	s.say("m1", "go")
	s.settle()
	d := s.st.PendingDecision()
	if s.st.Phase != flowv1.PhaseAwaitingApproval || d == nil || !strings.Contains(d.Reasoning, "call find_doctors") {
		t.Fatalf("phase %s, pending %s", s.st.Phase, dump(d))
	}
	s.approve(d.ID, true, "")
	s.settle()
	d2 := s.st.PendingDecision()
	if toolEffects(s) != 1 || d2 == nil || d2.ID == d.ID || !strings.Contains(d2.Reasoning, "call book_slot") {
		t.Fatalf("after the first approval: calls %d, pending %s", toolEffects(s), dump(d2))
	}
	s.approve(d2.ID, false, "")
	s.spec.Approvals[1].Reason = "no"
	s.settle()
	lt := s.st.LastTurn
	if toolEffects(s) != 1 || lt.AssistantText != `{"doctors":["dr-x"]} | rejected by alice: no` {
		t.Fatalf("calls %d, reply %q", toolEffects(s), lt.AssistantText)
	}
	if ex := pathwayReqs(l)[1].ToolExchanges; len(ex) != 2 || ex[0].Round != ex[1].Round {
		t.Errorf("the calls of one answer are not one round: %s", dump(ex))
	}
	if lt.ToolCalls[0].ApprovedBy != "alice" || lt.ToolCalls[1].State != flowv1.ToolCallRejected || lt.Failures[0].Kind != flowv1.FailurePolicyKind {
		t.Errorf("last turn %s", dump(lt))
	}
}

func TestCallLimitsOfToolCalls(t *testing.T) {
	d := clinicTools(nil, func(_ *flowv1.JourneySpec, p *flowv1.PathwaySpec) {
		p.Retry = &flowv1.RetryPolicy{Limit: 4}
		p.Timeout = &metav1.Duration{Duration: 7 * time.Second}
	})
	snap, err := NewSnapshot("rev", d.j, d.p)
	if err != nil {
		t.Fatal(err)
	}
	eff := newEffect(flowv1.EffectCallTool, nil, "", agent.ToolRequest{ID: "t-1-0", Tool: "copay", Pathway: "book"})
	if attempts, timeout := snap.CallLimits(eff); attempts != 5 || timeout != 7*time.Second {
		t.Errorf("CallLimits = %d, %s; want the pathway's 5 attempts and 7s", attempts, timeout)
	}
}

// TestModelToolCallsJournaledWithinBounds: the journal keeps at most 64 calls of one
// answer and cuts long arguments, which then fail as invalid JSON.
func TestModelToolCallsJournaledWithinBounds(t *testing.T) {
	var calls []agent.ToolCall
	for i := range 70 {
		calls = append(calls, call(fmt.Sprintf("tool%d", i), `{}`))
	}
	calls[0].Arguments = `{"q":"` + strings.Repeat("x", 10000) + `"}`
	eff := newEffect(flowv1.EffectRunPathway, []flowv1.AgentSpec{openai}, "", agent.PathwayRequest{Pathway: "p"})
	rec := eff.Record("uid", 3, agent.PathwayResponse{ToolCalls: calls}, nil)
	got := rec.Result.ToolCalls
	if len(got) != maxModelToolCalls || len(got[0].Arguments) != maxArgumentsBytes || got[63].Name != "tool63" {
		t.Fatalf("journaled %d calls, first arguments %d bytes", len(got), len(got[0].Arguments))
	}
	var v map[string]any
	if json.Unmarshal([]byte(got[0].Arguments), &v) == nil {
		t.Errorf("cut arguments still parse")
	}
}
