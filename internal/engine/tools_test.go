package engine

import (
	"encoding/json"
	"strings"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
)

// clinicTools is a one-pathway booking journey with builtin tools: find_doctors, then
// book_slot with find_doctors' result.
func clinicTools(calls []flowv1.BuiltinToolCall, mods ...func(*flowv1.JourneySpec, *flowv1.PathwaySpec)) def {
	p := &flowv1.PathwaySpec{
		Tools: []flowv1.ToolName{"find_doctors", "book_slot", "copay"},
		Builtin: &flowv1.BuiltinPathway{
			ToolCalls: calls,
			Outputs:   []flowv1.BuiltinOutput{{Name: "booking", Expression: "has(tools.book_slot) ? tools.book_slot : {}"}},
			Reply:     `{{ with .tools.book_slot }}Booked {{ .doctor }} at {{ .slot }}{{ else }}no booking{{ end }}`,
			Complete:  "false",
		},
		Accumulate: []string{"booking"},
	}
	j := &flowv1.JourneySpec{
		EntryPathway: "book",
		Pathways:     []flowv1.PathwayEntry{{Name: "book", PathwayRef: "book"}},
		Tools: []flowv1.Tool{
			{Name: "find_doctors", Builtin: &flowv1.BuiltinTool{Expression: "{'doctors': ['dr-' + args.specialty]}"}},
			{Name: "book_slot", Builtin: &flowv1.BuiltinTool{Expression: "{'doctor': args.doctor, 'slot': '09:00'}"}, Requires: []string{"patient"}},
			{Name: "copay", Builtin: &flowv1.BuiltinTool{Expression: "{'copay_usd': 40}"}, Cache: flowv1.ToolCacheSession},
		},
	}
	for _, m := range mods {
		m(j, p)
	}
	return def{j: j, p: map[string]*flowv1.PathwaySpec{"book": p}}
}

var twoCalls = []flowv1.BuiltinToolCall{
	{Tool: "find_doctors", Args: "{'specialty': 'cardiology'}"},
	{Tool: "book_slot", Args: "{'doctor': tools.find_doctors.doctors[0]}"},
}

// toolSession is a session whose effects are tool calls answered by the builtin tools.
func toolSession(t *testing.T, d def, ctx string) *session {
	s := newSession(t, d)
	if ctx != "" {
		s.spec.InitialContext = raw(ctx)
	}
	s.answer = func(e *Effect) (any, error) {
		if e.Kind != flowv1.EffectCallTool {
			t.Fatalf("unexpected effect %s", e.Kind)
		}
		return builtin.CallTool(*e.Tool)
	}
	return s
}

func TestBuiltinTwoToolTurn(t *testing.T) {
	s := toolSession(t, clinicTools(twoCalls), `{"patient": {"name": "Ada"}}`)
	s.say("m1", "book me")
	s.settle()
	if len(s.effects) != 2 || s.effects[0].Tool.Tool != "find_doctors" || s.effects[1].Tool.Tool != "book_slot" {
		t.Fatalf("effects %s", dump(s.effects))
	}
	if got := s.effects[1].Tool.Args["doctor"]; got != "dr-cardiology" {
		t.Errorf("book_slot args %v: the second call does not see the first one's result", s.effects[1].Tool.Args)
	}
	for i, e := range s.effects {
		if !strings.HasPrefix(e.Tool.IdempotencyKey, "uid-1-") || !strings.HasSuffix(e.Tool.IdempotencyKey, "-"+string(rune('0'+i))) {
			t.Errorf("call %d idempotency key %q", i, e.Tool.IdempotencyKey)
		}
	}
	lt := s.st.LastTurn
	if lt.AssistantText != "Booked dr-cardiology at 09:00" {
		t.Errorf("reply %q", lt.AssistantText)
	}
	if len(lt.ToolCalls) != 2 || lt.ToolCalls[0].State != flowv1.ToolCallDone || lt.ToolCalls[1].State != flowv1.ToolCallDone || lt.ToolCalls[0].ArgsDigest == "" {
		t.Errorf("lastTurn.toolCalls %s", dump(lt.ToolCalls))
	}
	if b, _ := json.Marshal(s.context()["booking"]); string(b) != `{"doctor":"dr-cardiology","slot":"09:00"}` {
		t.Errorf("context booking %s", b)
	}
	if s.st.Turn != nil {
		t.Errorf("turn still in progress")
	}
}

func TestToolCallRetriedWithSameKeyAfterCrash(t *testing.T) {
	s := toolSession(t, clinicTools(twoCalls[:1]), "")
	s.say("m1", "find")
	var eff *Effect
	for i := 0; i < 5 && eff == nil; i++ {
		eff = s.step()
	}
	if eff == nil || eff.Kind != flowv1.EffectCallTool {
		t.Fatalf("no tool call effect")
	}
	if len(s.st.Turn.ToolCalls) != 1 || s.st.Turn.ToolCalls[0].State != flowv1.ToolCallPending {
		t.Fatalf("the call was not journaled before it was made: %s", dump(s.st.Turn))
	}
	// The caller crashed: nothing journaled. The next step asks for the same call.
	again := s.step()
	if again == nil || again.Tool.IdempotencyKey != eff.Tool.IdempotencyKey || again.InputHash != eff.InputHash {
		t.Fatalf("retry %s, first %s", dump(again), dump(eff))
	}
	s.perform(again)
	s.settle()
	if len(s.effects) != 1 || s.st.LastTurn.ToolCalls[0].State != flowv1.ToolCallDone {
		t.Fatalf("effects %d, calls %s", len(s.effects), dump(s.st.LastTurn.ToolCalls))
	}
}

func TestToolRefusals(t *testing.T) {
	t.Run("missing prerequisite", func(t *testing.T) {
		s := toolSession(t, clinicTools([]flowv1.BuiltinToolCall{{Tool: "book_slot", Args: "{'doctor': 'x'}"}}), "")
		s.say("m1", "book")
		s.settle()
		if len(s.effects) != 0 {
			t.Fatalf("the tool was called %d times without its prerequisite", len(s.effects))
		}
		lt := s.st.LastTurn
		if len(lt.Failures) != 1 || lt.Failures[0].Source != flowv1.FailureTool || !strings.Contains(lt.Failures[0].Message, `"patient"`) {
			t.Fatalf("failures %s", dump(lt.Failures))
		}
		if len(lt.ToolCalls) != 1 || lt.ToolCalls[0].State != flowv1.ToolCallFailed {
			t.Errorf("toolCalls %s", dump(lt.ToolCalls))
		}
	})
	t.Run("tool not in the pathway's list", func(t *testing.T) {
		d := clinicTools(twoCalls[:1])
		d.p["book"].Tools = []flowv1.ToolName{"find_doctors"}
		d.j.Tools = append(d.j.Tools, flowv1.Tool{Name: "refund", Builtin: &flowv1.BuiltinTool{Expression: "{}"}})
		d.p["book"].Builtin.ToolCalls = []flowv1.BuiltinToolCall{{Tool: "refund"}}
		if _, err := NewSnapshot("rev", d.j, d.p); err == nil || !strings.Contains(err.Error(), `tool "refund" is not in the pathway's tools`) {
			t.Fatalf("NewSnapshot: %v", err)
		}
	})
}

func TestToolValidation(t *testing.T) {
	d := clinicTools(twoCalls, func(j *flowv1.JourneySpec, p *flowv1.PathwaySpec) {
		j.Tools = append(j.Tools, flowv1.Tool{Name: "remote", Server: "nowhere"},
			flowv1.Tool{Name: "both", Server: "nowhere", Builtin: &flowv1.BuiltinTool{Expression: "{}"}},
			flowv1.Tool{Name: "bad", Builtin: &flowv1.BuiltinTool{Expression: "{"}})
		p.Tools = append(p.Tools, "ghost")
	})
	issues := strings.Join(Validate(d.j, d.p), "\n")
	for _, want := range []string{
		`tool remote: server "nowhere" is not declared in spec.toolServers`,
		`tool both: sets both server and builtin`,
		`tool bad: builtin.expression`,
		`pathway book: tool "ghost" is not declared in spec.tools`,
	} {
		if !strings.Contains(issues, want) {
			t.Errorf("issues do not say %q:\n%s", want, issues)
		}
	}
}

func TestToolLimits(t *testing.T) {
	t.Run("cache answers identical calls once", func(t *testing.T) {
		s := toolSession(t, clinicTools([]flowv1.BuiltinToolCall{{Tool: "copay"}, {Tool: "copay"}}), "")
		s.say("m1", "copay?")
		s.settle()
		calls := s.st.LastTurn.ToolCalls
		if len(s.effects) != 1 || len(calls) != 2 || calls[0].Cached || !calls[1].Cached || calls[1].State != flowv1.ToolCallDone {
			t.Fatalf("effects %d, calls %s", len(s.effects), dump(calls))
		}
		s.say("m2", "again")
		s.settle()
		if len(s.effects) != 1 {
			t.Fatalf("the cache does not last the Session: %d calls", len(s.effects))
		}
	})
	t.Run("repeated call stops the turn", func(t *testing.T) {
		same := flowv1.BuiltinToolCall{Tool: "find_doctors", Args: "{'specialty': 'x'}"}
		s := toolSession(t, clinicTools([]flowv1.BuiltinToolCall{same, same, same}), "")
		s.say("m1", "loop")
		s.settle()
		lt := s.st.LastTurn
		if len(s.effects) != MaxRepeatedToolCalls || lt.FinishReason != flowv1.FinishLoopDetected || lt.Failures[0].Source != flowv1.FailurePolicy {
			t.Fatalf("effects %d, last turn %s", len(s.effects), dump(lt))
		}
		if lt.Outputs != nil || s.context()["booking"] != nil {
			t.Errorf("a stopped turn produced outputs")
		}
	})
	t.Run("maxToolCalls", func(t *testing.T) {
		one := int32(1)
		s := toolSession(t, clinicTools(twoCalls, func(_ *flowv1.JourneySpec, p *flowv1.PathwaySpec) { p.MaxToolCalls = &one }), `{"patient": {}}`)
		s.say("m1", "book")
		s.settle()
		lt := s.st.LastTurn
		if len(s.effects) != 1 || lt.FinishReason != flowv1.FinishToolCallLimit || !strings.Contains(lt.Failures[0].Message, "maxToolCalls 1") {
			t.Fatalf("effects %d, last turn %s", len(s.effects), dump(lt))
		}
	})
}

func TestToolApproval(t *testing.T) {
	guarded := func(j *flowv1.JourneySpec, _ *flowv1.PathwaySpec) {
		j.Tools[1].Approval = flowv1.ToolApprovalAlways
		j.Tools[1].When = "args.doctor != 'dr-trusted'"
	}
	waiting := func(t *testing.T) (*session, string) {
		s := toolSession(t, clinicTools(twoCalls, guarded), `{"patient": {}}`)
		s.say("m1", "book")
		s.settle()
		if s.st.Phase != flowv1.PhaseAwaitingApproval || len(s.effects) != 1 {
			t.Fatalf("phase %s, effects %d", s.st.Phase, len(s.effects))
		}
		d := s.st.PendingDecision()
		if d == nil || !strings.Contains(d.Reasoning, `call book_slot {"doctor":"dr-cardiology"}`) {
			t.Fatalf("pending decision %s", dump(d))
		}
		c := s.condition(flowv1.ConditionAwaitingApproval)
		if c == nil || !strings.Contains(c.Message, "Tool call "+d.ID) {
			t.Errorf("condition %s", dump(c))
		}
		// A message waits while the call does.
		s.say("m2", "hello?")
		s.settle()
		if len(s.effects) != 1 || s.st.ProcessedMessages != 1 {
			t.Fatalf("effects %d, processed %d while waiting", len(s.effects), s.st.ProcessedMessages)
		}
		return s, d.ID
	}
	books := func(s *session) (n int) {
		for _, e := range s.effects {
			if e.Tool.Tool == "book_slot" {
				n++
			}
		}
		return n
	}
	t.Run("approved: called once", func(t *testing.T) {
		s, id := waiting(t)
		s.approve(id, true, "")
		s.settle()
		if books(s) != 1 || s.effects[1].Tool.Tool != "book_slot" || s.effects[1].Tool.ID != id {
			t.Fatalf("effects %s", dump(s.effects))
		}
		if b, _ := json.Marshal(s.context()["booking"]); !strings.Contains(string(b), "dr-cardiology") {
			t.Errorf("booking %s", b)
		}
		// m2 runs next: its own booking waits for its own approval.
		if s.st.ProcessedMessages != 2 || s.st.Phase != flowv1.PhaseAwaitingApproval || s.st.PendingDecision().ID == id {
			t.Errorf("after the approval: processed %d, phase %s, pending %s", s.st.ProcessedMessages, s.st.Phase, dump(s.st.PendingDecision()))
		}
	})
	t.Run("rejected: never called", func(t *testing.T) {
		s, id := waiting(t)
		s.approve(id, false, "")
		s.settle()
		if books(s) != 0 {
			t.Fatalf("the rejected call was made: %s", dump(s.effects))
		}
		if s.context()["booking"] != nil {
			t.Errorf("a rejected booking reached the context")
		}
		// The rejection is the m1 turn's Tool failure; m2 then waits on its own call.
		if s.st.ProcessedMessages != 2 || s.st.PendingDecision() == nil || s.st.PendingDecision().ID == id {
			t.Errorf("processed %d, pending %s", s.st.ProcessedMessages, dump(s.st.PendingDecision()))
		}
	})
	t.Run("rejection recorded", func(t *testing.T) {
		s := toolSession(t, clinicTools(twoCalls, guarded), `{"patient": {}}`)
		s.say("m1", "book")
		s.settle()
		id := s.st.PendingDecision().ID
		s.approve(id, false, "")
		s.spec.Approvals[0].Reason = "not this week"
		s.settle()
		lt := s.st.LastTurn
		if books(s) != 0 || s.st.LastDecision.State != flowv1.DecisionRejected || lt.ToolCalls[1].State != flowv1.ToolCallRejected {
			t.Fatalf("books %d, decision %s, calls %s", books(s), dump(s.st.LastDecision), dump(lt.ToolCalls))
		}
		if lt.ToolCalls[1].Error != "rejected by alice: not this week" || lt.Failures[0].Source != flowv1.FailureTool {
			t.Errorf("call %s failures %s", dump(lt.ToolCalls[1]), dump(lt.Failures))
		}
	})
	t.Run("when false: no approval", func(t *testing.T) {
		d := clinicTools([]flowv1.BuiltinToolCall{{Tool: "book_slot", Args: "{'doctor': 'dr-trusted'}"}}, guarded)
		s := toolSession(t, d, `{"patient": {}}`)
		s.say("m1", "book")
		s.settle()
		if len(s.effects) != 1 || s.st.Phase == flowv1.PhaseAwaitingApproval {
			t.Fatalf("effects %d phase %s", len(s.effects), s.st.Phase)
		}
	})
	t.Run("IfDestructive follows the pinned hints", func(t *testing.T) {
		d := clinicTools(nil)
		d.j.ToolServers = []flowv1.ToolServer{{Name: "clinic", URL: "http://clinic"}}
		d.j.Tools = append(d.j.Tools, flowv1.Tool{Name: "lookup", Server: "clinic"}, flowv1.Tool{Name: "cancel", Server: "clinic"})
		snap, err := NewSnapshot("rev", d.j, d.p)
		if err != nil {
			t.Fatal(err)
		}
		snap = snap.WithServerTools(map[string]ToolInfo{"lookup": {ReadOnly: true}, "cancel": {Destructive: true}})
		r := &run{snap: snap}
		for name, want := range map[string]bool{"lookup": false, "cancel": true, "copay": false} {
			tool, _ := snap.tool(name)
			if got, err := r.needsApproval(tool, nil, nil); err != nil || got != want {
				t.Errorf("%s: needs approval %v (%v), want %v", name, got, err, want)
			}
		}
	})
}

func TestToolArgsCheckedAgainstPinnedSchema(t *testing.T) {
	schema := `{"type":"object","properties":{"specialty":{"type":"string"}},"required":["specialty"],"additionalProperties":false}`
	for _, tc := range []struct {
		name, args string
		calls      int
	}{
		{"valid", "{'specialty': 'cardiology'}", 1},
		{"wrong type", "{'specialty': 42}", 0},
		{"missing", "{}", 0},
		{"extra", "{'specialty': 'x', 'admin': true}", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := clinicTools([]flowv1.BuiltinToolCall{{Tool: "lookup", Args: flowv1.Expression(tc.args)}})
			d.j.ToolServers = []flowv1.ToolServer{{Name: "clinic", URL: "http://clinic"}}
			d.j.Tools = append(d.j.Tools, flowv1.Tool{Name: "lookup", Server: "clinic", Approval: flowv1.ToolApprovalNever})
			d.p["book"].Tools = append(d.p["book"].Tools, "lookup")
			s := toolSession(t, d, "")
			s.snap = s.snap.WithServerTools(map[string]ToolInfo{"lookup": {ReadOnly: true, InputSchema: []byte(schema)}})
			s.answer = func(e *Effect) (any, error) {
				if e.Tool.Server == nil || e.Tool.ServerTool != "lookup" {
					t.Fatalf("request %s", dump(e.Tool))
				}
				return map[string]any{}, nil
			}
			s.say("m1", "find")
			s.settle()
			if len(s.effects) != tc.calls {
				t.Fatalf("%d calls, want %d", len(s.effects), tc.calls)
			}
			if tc.calls == 0 {
				f := s.st.LastTurn.Failures
				if len(f) != 1 || f[0].Source != flowv1.FailureTool || f[0].Kind != flowv1.FailureValidation || !strings.Contains(f[0].Message, "input schema") {
					t.Errorf("failures %s", dump(f))
				}
			}
		})
	}
}
