package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// fuzzJourney has every feature the invariants are about: detours with a small stack,
// a small context cap fed by accumulation and context updates, LLM intents, remote and
// builtin decisions with approvals and escalation, External outcomes and JumpBack.
func fuzzJourney(policy flowv1.ErrorRecovery, escalation bool) def {
	judge := choose("judge", "review", "done", "fix", "booking")
	judge.Decision.Messaging = true
	judge.Decision.ConfidenceThresholds = &flowv1.ConfidenceThresholds{AutoAdvance: "0.8", RequireApproval: "0.5"}
	rules := choose("", "fix", "done", "booking")
	rules.Decision.Rules = []flowv1.DecisionRule{
		{When: `has(outputs.items) && size(outputs.items) > 2`, To: "fix", Action: flowv1.ActionJumpBack, Confidence: "0.9"},
		{When: `has(outputs.items) && size(outputs.items) == 1`, To: "done", Confidence: "0.85"},
		{When: `has(outputs.items) && size(outputs.items) == 2`, To: "booking", Confidence: "0.3"},
	}
	return journeyOf("intake", map[string]*flowv1.PathwaySpec{
		"intake": {Next: "booking", Accumulate: []string{"n"}, Builtin: &flowv1.BuiltinPathway{
			Outputs: []flowv1.BuiltinOutput{{Name: "n", Expression: `size(message)`}},
		}},
		"booking": {Agents: []flowv1.Name{"gpt"}, Accumulate: []string{"items", "selected", "profile"},
			Transitions: &flowv1.OutcomeTransitions{OnSuccess: judge, OnFailure: str("booking"), OnPartialSuccess: rules}},
		"faq":    {ReturnBehavior: &flowv1.ReturnBehavior{}, Builtin: &flowv1.BuiltinPathway{Complete: `session.pathwayTurns >= 1`}},
		"help":   {ReturnBehavior: &flowv1.ReturnBehavior{PreserveContext: new(false)}, Agents: []flowv1.Name{"gpt"}, Accumulate: []string{"items"}},
		"review": {Executor: flowv1.ExecutorExternal, Accumulate: []string{"items"}, Transitions: &flowv1.OutcomeTransitions{OnSuccess: judge, OnFailure: &flowv1.OutcomeTransition{To: "booking", Action: flowv1.ActionJumpBack}, OnUnclear: rules}},
		"fix":    {RunOn: flowv1.RunOnEntry, Next: "review"},
		"done":   {RunOn: flowv1.RunOnEntry},
		"human":  {Builtin: &flowv1.BuiltinPathway{Complete: "false"}},
	}, func(j *flowv1.JourneySpec) {
		j.Agents = []flowv1.AgentSpec{
			{Name: "gpt", Provider: flowv1.ProviderOpenAI, Model: "m"},
			{Name: "judge", Provider: flowv1.ProviderOpenAI, Model: "m"},
		}
		j.IntentDetection = &flowv1.IntentDetection{Agent: "gpt"}
		if escalation {
			j.EscalationPathway = "human"
		}
		j.ErrorRecovery = policy
		j.Limits = flowv1.Limits{MaxPathwayDepth: 2, MaxContextBytes: 1024, MaxTurns: 40, MaxHistory: 12, MaxIterations: 4}
		j.Transitions = []flowv1.GlobalTransition{
			{Name: "faq", To: "faq", Priority: 10, Trigger: flowv1.Trigger{Intent: &flowv1.IntentTrigger{Patterns: []string{"what is", "why"}, LLMFallback: true}}},
			{Name: "help", To: "help", Priority: 9, Trigger: flowv1.Trigger{Intent: &flowv1.IntentTrigger{Patterns: []string{"help"}, LLMFallback: true}}},
			{Name: "reject", From: "booking", To: "booking", Trigger: flowv1.Trigger{Intent: &flowv1.IntentTrigger{Patterns: []string{"another"}}},
				ContextUpdate: []flowv1.ContextUpdate{{Field: "rejected", Op: flowv1.ContextAppend, From: "selected"}, {Field: "flag", Op: flowv1.ContextSet, Value: raw(`"x"`)}}},
			{Name: "restart", To: "intake", Trigger: flowv1.Trigger{Condition: `message == "restart"`}},
			{Name: "to-human", To: "human", Trigger: flowv1.Trigger{Condition: `message == "operator"`}},
		}
	})
}

var fuzzWords = []string{"hello", "what is this", "why", "I need help", "another one", "restart", "book it", "hmm", "tell me more about the process", "operator"}
var fuzzPathways = []string{"review", "booking", "fix", "done", "nowhere"}
var fuzzResults = []flowv1.ResultType{flowv1.ResultSuccess, flowv1.ResultFailure, flowv1.ResultPartialSuccess, flowv1.ResultUnclear, ""}

// fuzzOps interprets data as operations on a Session and checks the invariants after
// every step.
func fuzzOps(t *testing.T, data []byte) {
	policy := flowv1.ErrorRecoveryGraceful
	if len(data) > 0 && data[0]&1 == 1 {
		policy = flowv1.ErrorRecoveryFailFast
	}
	s := newSession(t, fuzzJourney(policy, len(data) > 0 && data[0]&2 == 2))
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	// The fake LLM answers from the input too.
	s.answer = func(e *Effect) (any, error) {
		b := next()
		if b%11 == 0 {
			return nil, &agent.Error{Class: agent.Invalid, Kind: flowv1.FailureValidation, Source: flowv1.FailureLLM, Err: fmt.Errorf("garbage")}
		}
		conf := float64(next()%12) / 10 // 0 .. 1.1: out of range sometimes
		switch e.Kind {
		case flowv1.EffectClassifyIntent:
			names := []string{"faq", "help", "reject", "bogus", "none", "none", "none", "none"}
			return agent.IntentResponse{Intent: names[int(b)%len(names)], Confidence: conf}, nil
		case flowv1.EffectDecide:
			return agent.DecisionResponse{Destination: fuzzPathways[int(b)%len(fuzzPathways)], Confidence: conf,
				Usage: agent.Usage{PromptTokens: 10}}, nil
		default:
			items := make([]any, int(b%5))
			for i := range items {
				items[i] = fmt.Sprintf("item-%d-%d", b, i) + string(make([]byte, int(next())%64))
			}
			return agent.PathwayResponse{
				Reply:      "ok",
				Outputs:    map[string]any{"items": items, "selected": map[string]any{"id": int64(b % 3)}, "profile": map[string]any{"k": fmt.Sprint(b)}},
				ResultType: fuzzResults[int(next())%len(fuzzResults)],
				Complete:   b&7 != 0,
			}, nil
		}
	}
	msgs := 0
	for steps := 0; len(data) > 0 && steps < 300; steps++ {
		switch op := next() % 8; op {
		case 0, 1:
			msgs++
			s.say(fmt.Sprintf("m%d", msgs), fuzzWords[int(next())%len(fuzzWords)])
		case 2:
			s.post(fuzzPathways[int(next())%len(fuzzPathways)], int32(next()%3)+1, fuzzResults[int(next())%4], `{"items":["r"]}`)
		case 3:
			id := "d-0"
			if s.st.LastDecision != nil {
				id = s.st.LastDecision.ID
			}
			b := next()
			s.approve(id, b&1 == 0, []string{"", "fix", "done", "intake"}[int(b>>1)%4])
		case 4:
			s.now = s.now.Add(time.Duration(next()) * 10 * time.Second) // the 24h timeout takes about 70 of these
		case 5:
			s.spec.Suspend = next()%4 == 0
		default:
			if eff := s.step(); eff != nil {
				checkEffect(t, s, eff)
				s.perform(eff)
			}
			checkInvariants(t, s)
			if hook != nil {
				hook("phase:" + string(s.st.Phase))
			}
		}
	}
	s.spec.Suspend = false
	s.settle()
	checkInvariants(t, s)
	if hook != nil {
		hook(string(s.st.Phase) + "/" + s.stalled())
		for _, h := range s.st.History {
			hook(string(h.Action) + ":" + string(h.Source))
		}
	}
}

var hook func(string)

func checkEffect(t *testing.T, s *session, eff *Effect) {
	if len(eff.Agents) == 0 || eff.InputHash == "" {
		t.Fatalf("effect without agents or hash: %+v", eff)
	}
	for _, a := range eff.Agents {
		if a.Provider == flowv1.ProviderOpenAI {
			return
		}
	}
	t.Fatalf("an effect for builtin agents only: %+v", eff)
}

func checkInvariants(t *testing.T, s *session) {
	st := s.st
	lim := s.snap.lim
	if len(st.PathwayStack) > lim.depth {
		t.Fatalf("stack depth %d > %d", len(st.PathwayStack), lim.depth)
	}
	ctx, err := decodeJSON(st.Context)
	if err != nil {
		t.Fatalf("context: %v", err)
	}
	if st.Context != nil && len(st.Context.Raw) > lim.contextBytes {
		t.Fatalf("context is %d bytes > %d", len(st.Context.Raw), lim.contextBytes)
	}
	if st.Context != nil && sizeOf(ctx) != len(st.Context.Raw) {
		t.Fatalf("sizeOf %d != encoded size %d", sizeOf(ctx), len(st.Context.Raw))
	}
	if st.Phase != "" && st.Phase != flowv1.PhasePending {
		if _, ok := s.snap.pathways[st.CurrentPathway]; !ok {
			t.Fatalf("current pathway %q is not declared", st.CurrentPathway)
		}
	}
	for _, p := range st.PathwayStack {
		if _, ok := s.snap.pathways[p]; !ok {
			t.Fatalf("stack holds undeclared pathway %q", p)
		}
	}
	if len(st.History) > lim.history {
		t.Fatalf("history has %d entries > %d", len(st.History), lim.history)
	}
	for _, h := range st.History {
		if h.To != "" {
			if _, ok := s.snap.pathways[h.To]; !ok {
				t.Fatalf("moved to undeclared pathway %q", h.To)
			}
		}
		if h.Action == flowv1.ActionBlock || h.To == "" {
			continue
		}
		if h.Source == flowv1.SourceAgent || h.Source == flowv1.SourceRule || h.Source == flowv1.SourceApproval {
			d := (&run{snap: s.snap}).decisionSpec(&flowv1.DecisionRecord{From: h.From, Transition: h.Transition})
			if d == nil {
				t.Fatalf("decision move without a decision: %s", dump(h))
			}
			if !contains(d.AllowedDestinations, h.To) && h.To != string(s.snap.journey.EscalationPathway) && !(h.Source == flowv1.SourceApproval && (h.To == h.From || strings.HasPrefix(h.Reason, "rejected by"))) {
				t.Fatalf("decision moved to %q, not in %v", h.To, d.AllowedDestinations)
			}
		}
	}
	if st.Iteration > int32(lim.iterations) {
		t.Fatalf("iteration %d > %d", st.Iteration, lim.iterations)
	}
	if int(st.Turns) > lim.turns {
		t.Fatalf("turns %d > %d", st.Turns, lim.turns)
	}
	if int(st.ProcessedMessages) > len(s.spec.Messages) || int(st.ProcessedOutcomes) > len(s.spec.Outcomes) || int(st.ProcessedApprovals) > len(s.spec.Approvals) {
		t.Fatalf("processed more than there is")
	}
	if st.Phase.IsTerminal() && st.CompletionTime == nil {
		t.Fatalf("terminal phase without completionTime")
	}
}

// TestRandomWalks runs the fuzz operations on pseudo-random inputs from fixed seeds,
// and checks that they reach the interesting states, so the invariants are exercised
// by every test run, not only when fuzzing.
func TestRandomWalks(t *testing.T) {
	seen := map[string]int{}
	hook = func(s string) { seen[s]++ }
	defer func() { hook = nil }()
	for seed := range 100 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		data := make([]byte, 64+rng.IntN(300))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		fuzzOps(t, data)
	}
	for _, want := range []string{
		"Advance:Transition", "Advance:Agent", "Advance:Rule", "Advance:Approval", "Advance:Return", "Advance:Next",
		"JumpBack:Rule", "Retry:Outcome", "Block:Cap", "phase:AwaitingApproval", "phase:Escalated", "Completed/", "phase:Failed",
		"Running/LoopDetected", "WaitingForInput/",
	} {
		if seen[want] == 0 {
			t.Errorf("no random walk reached %s: %v", want, seen)
		}
	}
}

func FuzzStep(f *testing.F) {
	f.Add([]byte{0, 0, 1, 7, 7, 7, 0, 3, 7, 1, 9, 7, 7, 7, 7})
	f.Fuzz(fuzzOps)
}

// FuzzMerge checks the accumulation rules: merging never loses a key, lists keep their
// items in order without new duplicates, and merging the same update twice changes nothing.
func FuzzMerge(f *testing.F) {
	f.Add(`{"a":[1,{"id":"dr1"}],"m":{"x":1}}`, `{"a":[{"id":"dr1"},2],"m":{"y":2},"s":"v"}`)
	f.Fuzz(func(t *testing.T, base, upd string) {
		b, err1 := decodeObject([]byte(base))
		u, err2 := decodeObject([]byte(upd))
		if err1 != nil || err2 != nil {
			return
		}
		bCopy := encodeJSON(b)
		m := mergeObject(b, u)
		if string(encodeJSON(b)) != string(bCopy) {
			t.Fatal("merge modified its base")
		}
		for k := range b {
			if _, ok := m[k]; !ok {
				t.Fatalf("lost key %q", k)
			}
		}
		for k := range u {
			if _, ok := m[k]; !ok {
				t.Fatalf("lost key %q", k)
			}
		}
		if again := mergeObject(m, u); !equalValues(again, m) {
			t.Fatalf("merge is not idempotent:\n%s\n%s", encodeJSON(m), encodeJSON(again))
		}
		if sizeOf(m) != len(encodeJSON(m)) {
			t.Fatalf("sizeOf %d != %d", sizeOf(m), len(encodeJSON(m)))
		}
		if dec, err := decodeObject(encodeJSON(m)); err != nil || !equalValues(dec, m) {
			t.Fatalf("encoding does not round-trip: %v", err)
		}
	})
}

// FuzzParseJSON checks the fast decoder against encoding/json: when it accepts a
// document, it decodes it to the same values.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e3,-0.1,{"b":null}],"s":"x\n\u00e9\ud83d\ude00","t":true,"f":false}`, `[]`, `"\ud800"`, `1e400`, `{"a":"\xff"}`, ` {"k" : [ ] } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want any
		werr := json.Unmarshal(data, &want)
		got, ok := parseJSON(data)
		if !ok {
			return
		}
		if werr != nil {
			t.Fatalf("parseJSON accepted %q, encoding/json says %v", data, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("parseJSON(%q) = %#v, encoding/json %#v", data, got, want)
		}
	})
}

func TestSizeOf(t *testing.T) {
	for _, v := range []any{
		0.0, math.Copysign(0, -1), 1.0, -1.0, 123456789012345.0, 1e15, 1e21, 1e-7, 0.1, -2.5, math.MaxInt64, float64(math.MinInt64),
		"", "plain", "quote\" back\\ nl\n tab\t cr\r ctl\x01 html<>& uni é 😀 bad\xff sep\u2028", []any{}, map[string]any{},
		map[string]any{"a": []any{1.0, nil, true, false, "x"}, "é": map[string]any{"k": 3.25}}, int64(-42), 7, int32(9),
	} {
		if got, want := sizeOf(v), len(encodeJSON(v)); got != want {
			t.Errorf("sizeOf(%#v) = %d, encoded %d", v, got, want)
		}
		if raw, err := json.Marshal(v); err == nil {
			var back, mine any
			json.Unmarshal(raw, &back)
			json.Unmarshal(encodeJSON(v), &mine)
			if !reflect.DeepEqual(back, mine) {
				t.Errorf("encodeJSON(%#v) = %s, decodes to %#v, want %#v", v, encodeJSON(v), mine, back)
			}
		}
	}
}
