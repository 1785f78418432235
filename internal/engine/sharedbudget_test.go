package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// ledger is a Budget's ledger as the manager keeps it, for one Session: what the
// window's answered calls spent. A call is reserved by the step (the engine says
// whether its worst case fits) and settled by Charge in the write that journals it.
type ledger struct {
	name       string
	limit      Spend
	spent      Spend
	start, end time.Time
}

func (l *ledger) room() BudgetRoom {
	return BudgetRoom{Name: l.name, WindowStart: l.start, WindowEnd: l.end, Limit: l.limit, Left: l.limit.Sub(l.spent)}
}

// run steps s until a step changes nothing, with the Budgets of ledgers: each call the
// engine asks for must fit in every Budget (the reservation), and its answer is
// charged to all of them (the settlement). It returns how many calls were made.
func (s *session) run(ledgers ...*ledger) int {
	s.t.Helper()
	calls := 0
	for range 200 {
		s.budgets = nil
		for _, l := range ledgers {
			s.budgets = append(s.budgets, l.room())
		}
		before := s.st.DeepCopy()
		eff := s.step()
		if eff == nil {
			if equality.Semantic.DeepEqual(before, s.st) {
				return calls
			}
			continue
		}
		need := WorstCase(eff)
		for _, b := range s.budgets {
			if field, ok := Fits(need, b.Left, b.Limit); !ok {
				s.t.Fatalf("the engine asked for a %s call that does not fit Budget %s (%s): need %+v, left %+v", eff.Kind, b.Name, field, need, b.Left)
			}
		}
		s.perform(eff)
		calls++
		spent := Spent(eff, s.st.PendingEffect)
		Charge(s.st, s.budgets, spent)
		for _, l := range ledgers {
			l.spent = l.spent.Add(spent)
		}
	}
	s.t.Fatalf("the session did not settle in 200 steps")
	return calls
}

// pricedChat is a conversation on a priced openai agent, worst case about USD 0.3 a
// call (see budgeted), without a budget of its own.
func pricedChat(t *testing.T) (*session, *llm) {
	s := newSession(t, budgeted(""))
	s.snap.journey.Limits.Budget = nil
	l := &llm{usage: agent.Usage{PromptTokens: 1000, CompletionTokens: 200, CostUSD: 0.25},
		pathway: func(req agent.PathwayRequest) (agent.PathwayResponse, error) {
			return agent.PathwayResponse{Reply: "re: " + req.Message, ResultType: flowv1.ResultSuccess}, nil
		}}
	s.answer = l.answer
	return s, l
}

func window(name string, limit Spend) *ledger {
	return &ledger{name: name, limit: limit, start: t0.Truncate(24 * time.Hour), end: t0.Truncate(24 * time.Hour).Add(24 * time.Hour)}
}

func TestSharedBudgetReserveSettleDeny(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit Spend
		// calls is how many calls fit; field is the limit the next one does not fit.
		calls int
		want  string
	}{
		{"cost", Spend{CostNano: 1e9}, 3, "which could cost up to USD 0.261900001: USD 0.25 of its limit of USD 1 is left"},
		{"tokens", Spend{Tokens: 3000}, 2, "which could use up to"},
		{"model calls", Spend{ModelCalls: 2}, 2, "which could make 1 model call: 0 model calls of its limit of 2 model calls is left"},
		{"unlimited amounts", Spend{ToolCalls: 1}, 5, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, l := pricedChat(t)
			b := window("team", tc.limit)
			for i := range 5 {
				s.say(fmt.Sprintf("m%d", i), fmt.Sprintf("hello %d", i))
			}
			if got := s.run(b); got != tc.calls || l.calls[flowv1.EffectRunPathway] != tc.calls {
				t.Fatalf("%d calls made, want %d", got, tc.calls)
			}
			// Settled: the Session's entry is exactly what the answers cost.
			if len(s.st.Budgets) != 1 || ChargeSpend(s.st.Budgets[0]) != b.spent || b.spent.ModelCalls != int64(tc.calls) ||
				b.spent.CostNano != int64(tc.calls)*25e7 || !s.st.Budgets[0].WindowStart.Equal(&metav1.Time{Time: b.start}) {
				t.Fatalf("status.budgets %s, ledger %+v", dump(s.st.Budgets), b.spent)
			}
			w := s.condition(flowv1.ConditionWaitingForBudget)
			if tc.want == "" {
				if w != nil || s.st.ProcessedMessages != 5 {
					t.Fatalf("waiting %s with %d messages processed", dump(w), s.st.ProcessedMessages)
				}
				return
			}
			// Denied: the call is not made, the turn waits, and the conditions say why.
			if w == nil || w.Status != metav1.ConditionTrue || w.Reason != flowv1.ReasonBudgetExhausted ||
				!strings.HasPrefix(w.Message, "Budget team has no room for the next RunPathway call") || !strings.Contains(w.Message, tc.want) ||
				!strings.Contains(w.Message, "until 2026-11-23T00:00:00Z") {
				t.Fatalf("WaitingForBudget %s", dump(w))
			}
			ready, rec := s.condition(flowv1.ConditionReady), s.condition(flowv1.ConditionReconciling)
			if ready.Status != metav1.ConditionFalse || ready.Reason != flowv1.ReasonBudgetExhausted || ready.Message != w.Message ||
				rec == nil || rec.Status != metav1.ConditionTrue || s.st.Reason != flowv1.ReasonBudgetExhausted {
				t.Errorf("Ready %s Reconciling %s reason %s", dump(ready), dump(rec), s.st.Reason)
			}
			if s.st.Phase != flowv1.PhaseRunning || s.st.Turn == nil || s.stalled() != "" || len(s.st.LastTurn.Failures) != 0 {
				t.Errorf("phase %s turn %s stalled %q failures %s", s.st.Phase, dump(s.st.Turn), s.stalled(), dump(s.st.LastTurn.Failures))
			}
			// Waiting again changes nothing: nothing to write.
			waiting := s.st.DeepCopy()
			if s.run(b); !equality.Semantic.DeepEqual(waiting, s.st) {
				t.Fatalf("a second step while waiting changed the status")
			}
			// The limit raised: the waiting turn goes on, and the rest.
			b.limit = Spend{CostNano: 100e9, Tokens: 1e6, ModelCalls: 100}
			s.run(b)
			if s.condition(flowv1.ConditionWaitingForBudget) != nil || s.st.ProcessedMessages != 5 || l.calls[flowv1.EffectRunPathway] != 5 ||
				s.st.Reason == flowv1.ReasonBudgetExhausted || s.st.LastTurn.AssistantText != "re: hello 4" {
				t.Fatalf("after raising: %s", dump(s.st.Conditions))
			}
			if ChargeSpend(s.st.Budgets[0]) != b.spent || b.spent.ModelCalls != 5 {
				t.Errorf("status.budgets %s, ledger %+v", dump(s.st.Budgets), b.spent)
			}
		})
	}
}

// A call needs room in every Budget that selects the Session: the tighter one stops
// it and is named.
func TestSharedBudgetTighterOfTwo(t *testing.T) {
	s, _ := pricedChat(t)
	loose, tight := window("namespace", Spend{CostNano: 100e9}), window("team", Spend{ModelCalls: 1})
	s.say("m1", "one").say("m2", "two")
	if got := s.run(loose, tight); got != 1 {
		t.Fatalf("%d calls", got)
	}
	if w := s.condition(flowv1.ConditionWaitingForBudget); w == nil || !strings.HasPrefix(w.Message, "Budget team ") {
		t.Fatalf("WaitingForBudget %s", dump(w))
	}
	if len(s.st.Budgets) != 2 || ChargeSpend(s.st.Budgets[0]) != loose.spent || ChargeSpend(s.st.Budgets[1]) != tight.spent {
		t.Errorf("both Budgets are charged: %s", dump(s.st.Budgets))
	}
}

// A new window: the Session's entry starts again from nothing, and a Budget that no
// longer selects it is dropped from status.budgets.
func TestSharedBudgetWindowRolls(t *testing.T) {
	s, _ := pricedChat(t)
	b, other := window("team", Spend{ModelCalls: 1}), window("other", Spend{CostNano: 100e9})
	s.say("m1", "one").say("m2", "two")
	s.run(b, other)
	if s.condition(flowv1.ConditionWaitingForBudget) == nil {
		t.Fatalf("not waiting")
	}
	b.start, b.end, b.spent = b.end, b.end.Add(24*time.Hour), Spend{}
	s.now = b.start.Add(time.Minute)
	s.run(b)
	if s.st.ProcessedMessages != 2 || len(s.st.Budgets) != 1 || s.st.Budgets[0].Name != "team" || s.st.Budgets[0].ModelCalls != 1 ||
		!s.st.Budgets[0].WindowStart.Equal(&metav1.Time{Time: b.start}) {
		t.Fatalf("processed %d, status.budgets %s", s.st.ProcessedMessages, dump(s.st.Budgets))
	}
}

// A pipeline reserves the summed worst case of its agents, model calls included.
func TestSharedBudgetPipelineSummed(t *testing.T) {
	two := budgeted("")
	two.j.Limits.Budget = nil
	two.j.Agents = append(two.j.Agents, flowv1.AgentSpec{Name: "bot2", Provider: flowv1.ProviderOpenAI, Model: "m",
		Pricing: &flowv1.Pricing{PromptPerMTok: "100", CompletionPerMTok: "1000"}})
	two.p["chat"].Agents = []flowv1.Name{"bot", "bot2"}
	two.p["chat"].Pipeline = flowv1.PipelineSequential
	s := newSession(t, two)
	s.say("m1", "hi")
	s.budgets = []BudgetRoom{window("team", Spend{ModelCalls: 1}).room()}
	s.step()
	w := s.condition(flowv1.ConditionWaitingForBudget)
	if w == nil || !strings.Contains(w.Message, "which could make 2 model calls: 1 model call of its limit of 1 model call is left") {
		t.Fatalf("WaitingForBudget %s", dump(w))
	}
	eff := newEffect(flowv1.EffectRunPathway, two.j.Agents, flowv1.PipelineSequential, agent.PathwayRequest{Pathway: "chat", Message: "hi"})
	one := newEffect(flowv1.EffectRunPathway, two.j.Agents[:1], flowv1.PipelineSequential, agent.PathwayRequest{Pathway: "chat", Message: "hi"})
	if both, first := WorstCase(eff), WorstCase(one); both.ModelCalls != 2 || both.CostNano <= 2*first.CostNano-first.CostNano || both.Tokens <= first.Tokens {
		t.Errorf("worst case of the pipeline %+v, of its first agent %+v", both, first)
	}
}

// A ReAct loop reserves each model round and each tool call on its own: a Budget of
// two model calls lets the first two rounds through and stops the third, and a
// Budget of one tool call stops the second call.
func TestSharedBudgetReActPerRound(t *testing.T) {
	script := func(req agent.PathwayRequest) agent.PathwayResponse {
		switch len(req.ToolExchanges) {
		case 0:
			return asks(call("find_doctors", `{"specialty":"cardiology"}`))
		case 1:
			return asks(call("book_slot", `{"doctor":"dr-cardiology"}`))
		}
		return final(req)
	}
	for _, tc := range []struct {
		name         string
		limit        Spend
		kinds, field string
	}{
		{"model calls", Spend{ModelCalls: 2}, "RunPathway,CallTool,RunPathway,CallTool", "next RunPathway call, which could make 1 model call: 0 model calls"},
		{"tool calls", Spend{ToolCalls: 1}, "RunPathway,CallTool,RunPathway", "next CallTool call, which could make a tool call: 0 tool calls of its limit of 1 tool call is left"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := reactTools(t, script)
			b := window("team", tc.limit)
			s.say("m1", "book me a cardiologist")
			s.run(b)
			var kinds []string
			for _, e := range s.effects {
				kinds = append(kinds, string(e.Kind))
			}
			if got := strings.Join(kinds, ","); got != tc.kinds {
				t.Fatalf("effects %s", got)
			}
			if w := s.condition(flowv1.ConditionWaitingForBudget); w == nil || !strings.Contains(w.Message, tc.field) || s.st.Turn == nil {
				t.Fatalf("WaitingForBudget %s", dump(w))
			}
			b.limit = Spend{ModelCalls: 10, ToolCalls: 10}
			s.run(b)
			if s.st.Turn != nil || s.st.LastTurn.AssistantText != "Booked dr-cardiology at 09:00" || b.spent.ModelCalls != 3 || b.spent.ToolCalls != 2 ||
				ChargeSpend(s.st.Budgets[0]) != b.spent {
				t.Fatalf("after raising: turn %s, spent %+v, status.budgets %s", dump(s.st.Turn), b.spent, dump(s.st.Budgets))
			}
		})
	}
}

// A denied call spends nothing, and a cancelled Session no longer waits.
func TestSharedBudgetReleaseOnCancel(t *testing.T) {
	s, _ := pricedChat(t)
	b := window("team", Spend{ModelCalls: 1})
	s.say("m1", "one").say("m2", "two")
	s.run(b)
	if s.condition(flowv1.ConditionWaitingForBudget) == nil || b.spent.ModelCalls != 1 {
		t.Fatalf("not waiting after one call: %+v", b.spent)
	}
	s.spec.Cancel = true
	s.run(b)
	if s.st.Phase != flowv1.PhaseCancelled || apimeta.FindStatusCondition(s.st.Conditions, flowv1.ConditionWaitingForBudget) != nil || b.spent.ModelCalls != 1 {
		t.Fatalf("phase %s conditions %s spent %+v", s.st.Phase, dump(s.st.Conditions), b.spent)
	}
}

// A Journey without limits.budget.maxCostUSD still caps each Session's cost, at
// DefaultMaxCostNano; "0" sets no cap, explicitly.
func TestDefaultSessionCostCap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget *flowv1.SessionBudget
		calls  int
		stall  string
	}{
		{"no budget", nil, 3, flowv1.ReasonBudgetExceeded},
		{"a budget without maxCostUSD", &flowv1.SessionBudget{MaxTokens: 1e9}, 3, flowv1.ReasonBudgetExceeded},
		{"explicitly unlimited", &flowv1.SessionBudget{MaxCostUSD: "0"}, 5, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := budgeted("")
			d.j.Limits.Budget = tc.budget
			s := newSession(t, d)
			l := &llm{usage: agent.Usage{PromptTokens: 1000, CompletionTokens: 200, CostUSD: 2},
				pathway: func(req agent.PathwayRequest) (agent.PathwayResponse, error) {
					return agent.PathwayResponse{Reply: "re: " + req.Message, ResultType: flowv1.ResultSuccess}, nil
				}}
			s.answer = l.answer
			for i := range 5 {
				s.say(fmt.Sprintf("m%d", i), "hi")
			}
			s.settle()
			if l.calls[flowv1.EffectRunPathway] != tc.calls || s.stalled() != tc.stall {
				t.Fatalf("%d calls, stalled %q; want %d, %q", l.calls[flowv1.EffectRunPathway], s.stalled(), tc.calls, tc.stall)
			}
			if tc.stall != "" {
				if c := s.condition(flowv1.ConditionStalled); !strings.Contains(c.Message, "USD 6 spent, budget is 5") {
					t.Errorf("Stalled %s", dump(c))
				}
			}
		})
	}
}

// degradable is pricedChat with a second, cheap agent "small" (worst case well under
// a cent), and pathway chat allowing degrade: bot's answers cost USD 0.25, small's
// USD 0.001.
func degradable(t *testing.T, policy flowv1.DegradePolicy) (*session, *llm) {
	d := budgeted("")
	d.j.Limits.Budget = nil
	d.j.Agents = append(d.j.Agents, flowv1.AgentSpec{Name: "small", Provider: flowv1.ProviderOpenAI, Model: "s", MaxTokens: d.j.Agents[0].MaxTokens,
		Pricing: &flowv1.Pricing{PromptPerMTok: "0.1", CompletionPerMTok: "1"}})
	d.p["chat"].Degrade = policy
	s := newSession(t, d)
	l := &llm{pathway: func(req agent.PathwayRequest) (agent.PathwayResponse, error) {
		return agent.PathwayResponse{Reply: "re: " + req.Message, ResultType: flowv1.ResultSuccess}, nil
	}}
	s.answer = func(e *Effect) (any, error) {
		l.usage = agent.Usage{PromptTokens: 1000, CompletionTokens: 200, CostUSD: 0.25}
		if e.Agents[0].Name == "small" {
			l.usage.CostUSD = 0.001
		}
		return l.answer(e)
	}
	return s, l
}

// agentsOf are the first agents of s's effects, in order.
func agentsOf(s *session) string {
	var names []string
	for _, e := range s.effects {
		names = append(names, string(e.Agents[0].Name))
	}
	return strings.Join(names, ",")
}

// onExhausted: Degrade switches the calls of a pathway that allows it to the cheaper
// agent once the Budget has no room for its own, says so in the turn, a condition
// and an Event, and switches back when the Budget has room again.
func TestSharedBudgetDegrade(t *testing.T) {
	s, _ := degradable(t, flowv1.DegradeAllow)
	b := window("team", Spend{CostNano: 1e9})
	s.say("m1", "one").say("m2", "two").say("m3", "three").say("m4", "four")
	before := s.st.DeepCopy()
	degradeRoom := func(l *ledger) BudgetRoom { r := l.room(); r.DegradeTo = "small"; return r }
	// run with the Budget's degradeTo: the harness's ledger rooms have none.
	runDegraded := func() {
		for range 200 {
			s.budgets = []BudgetRoom{degradeRoom(b)}
			prev := s.st.DeepCopy()
			eff := s.step()
			if eff == nil {
				if equality.Semantic.DeepEqual(prev, s.st) {
					return
				}
				continue
			}
			if field, ok := Fits(WorstCase(eff), s.budgets[0].Left, b.limit); !ok {
				t.Fatalf("the engine asked for a call that does not fit (%s)", field)
			}
			s.perform(eff)
			spent := Spent(eff, s.st.PendingEffect)
			Charge(s.st, s.budgets, spent)
			b.spent = b.spent.Add(spent)
		}
		t.Fatalf("the session did not settle")
	}
	runDegraded()
	if got := agentsOf(s); got != "bot,bot,bot,small" || s.st.ProcessedMessages != 4 || s.condition(flowv1.ConditionWaitingForBudget) != nil {
		t.Fatalf("agents %s, %d processed, conditions %s", got, s.st.ProcessedMessages, dump(s.st.Conditions))
	}
	if d := s.st.LastTurn.DegradedTo; d == nil || d.Budget != "team" || d.Agent != "small" || s.st.LastTurn.AssistantText != "re: four" {
		t.Fatalf("lastTurn %s", dump(s.st.LastTurn))
	}
	// The journal records which call ran on the cheaper agent, for a replay to make
	// it so again.
	for i, eff := range s.effects {
		rec := eff.Record("uid-1", int64(i), nil, nil)
		if d := rec.DegradedTo; (rec.Agent == "small") != (d != nil) || d != nil && *d != *s.st.LastTurn.DegradedTo {
			t.Errorf("the record of agent %s's call: degradedTo %s", rec.Agent, dump(d))
		}
	}
	c := s.condition(flowv1.ConditionDegraded)
	const want = "Budget team has no room for the calls of pathway chat with agent bot; they are made with agent small (onExhausted: Degrade) until it has room (kubectl journey budget team)"
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != flowv1.ReasonDegraded || c.Message != want {
		t.Fatalf("Degraded %s", dump(c))
	}
	if ready := s.condition(flowv1.ConditionReady); ready.Status != metav1.ConditionTrue {
		t.Errorf("a degraded Session is Ready: %s", dump(ready))
	}
	var degradedEvents int
	for _, e := range Events(before, s.st) {
		if e.Reason == flowv1.ReasonDegraded && e.Message == want {
			degradedEvents++
		}
	}
	if degradedEvents != 1 {
		t.Errorf("%d Degraded Events in %s", degradedEvents, dump(Events(before, s.st)))
	}
	if b.spent.CostNano != 751e6 || ChargeSpend(s.st.Budgets[0]) != b.spent {
		t.Errorf("spent %+v, status.budgets %s", b.spent, dump(s.st.Budgets))
	}

	// Raised: the pathway's own agent again, and the condition goes.
	b.limit = Spend{CostNano: 100e9}
	s.say("m5", "five")
	runDegraded()
	if got := agentsOf(s); got != "bot,bot,bot,small,bot" || s.condition(flowv1.ConditionDegraded) != nil || s.st.LastTurn.DegradedTo != nil {
		t.Fatalf("agents %s, Degraded %s, lastTurn %s", got, dump(s.condition(flowv1.ConditionDegraded)), dump(s.st.LastTurn))
	}
}

// Degrade applies only where every Budget without room allows it, to pathways with
// degrade: Allow, and when the cheaper call fits: otherwise the Session waits.
func TestSharedBudgetDegradeWaits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy flowv1.DegradePolicy
		rooms  func(spent Spend) []BudgetRoom
		want   string
	}{
		{"pathway does not allow it", "", func(spent Spend) []BudgetRoom {
			r := window("team", Spend{CostNano: 1e9}).room()
			r.Left, r.DegradeTo = r.Left.Sub(spent), "small"
			return []BudgetRoom{r}
		}, "Budget team has no room for the next RunPathway call, which could cost up to USD 0.26"},
		{"another Budget stalls", flowv1.DegradeAllow, func(spent Spend) []BudgetRoom {
			a, b := window("a", Spend{CostNano: 1e9}).room(), window("b", Spend{CostNano: 1e9}).room()
			a.Left, a.DegradeTo = a.Left.Sub(spent), "small"
			b.Left = b.Left.Sub(spent)
			return []BudgetRoom{a, b}
		}, "Budget a has no room for the next RunPathway call, which could cost up to USD 0.26"},
		{"the cheaper call does not fit either", flowv1.DegradeAllow, func(spent Spend) []BudgetRoom {
			r := window("team", Spend{ModelCalls: 3}).room()
			r.Left, r.DegradeTo = r.Left.Sub(Spend{ModelCalls: spent.ModelCalls}), "small"
			return []BudgetRoom{r}
		}, "Budget team has no room for the next RunPathway call, which could make 1 model call: 0 model calls"},
		{"degradeTo is not an openai agent", flowv1.DegradeAllow, func(spent Spend) []BudgetRoom {
			r := window("team", Spend{CostNano: 1e9}).room()
			r.Left, r.DegradeTo = r.Left.Sub(spent), "nobody"
			return []BudgetRoom{r}
		}, "Budget team has no room for the next RunPathway call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := degradable(t, tc.policy)
			s.say("m1", "one").say("m2", "two").say("m3", "three").say("m4", "four")
			var spent Spend
			for range 100 {
				s.budgets = tc.rooms(spent)
				prev := s.st.DeepCopy()
				eff := s.step()
				if eff == nil {
					if equality.Semantic.DeepEqual(prev, s.st) {
						break
					}
					continue
				}
				s.perform(eff)
				spent = spent.Add(Spent(eff, s.st.PendingEffect))
			}
			w := s.condition(flowv1.ConditionWaitingForBudget)
			if got := agentsOf(s); got != "bot,bot,bot" || w == nil || !strings.HasPrefix(w.Message, tc.want) {
				t.Fatalf("agents %s, WaitingForBudget %s", got, dump(w))
			}
			if s.condition(flowv1.ConditionDegraded) != nil || s.st.LastTurn.DegradedTo != nil {
				t.Errorf("not degraded, yet %s", dump(s.st.LastTurn))
			}
		})
	}
}

// A tool call whose server samples reserves the worst case of its sampling too: the
// whole token cap on the sampling agent, at its pricing; its requests are not model
// calls.
func TestSharedBudgetSamplingWorstCase(t *testing.T) {
	priced := flowv1.AgentSpec{Name: "bot", Provider: flowv1.ProviderOpenAI, Model: "m",
		Pricing: &flowv1.Pricing{PromptPerMTok: "100", CompletionPerMTok: "1000"}}
	plain := WorstCase(&Effect{Kind: flowv1.EffectCallTool, Tool: &agent.ToolRequest{Tool: "find"}})
	sampled := WorstCase(&Effect{Kind: flowv1.EffectCallTool, Tool: &agent.ToolRequest{Tool: "find",
		Sampling: &agent.ToolSampling{Agent: priced, MaxTokens: 1000}}})
	if plain != (Spend{ToolCalls: 1}) {
		t.Errorf("a tool call without sampling: %+v", plain)
	}
	// 1000 completion tokens at USD 1000 per million are USD 1, and the prompt more.
	if sampled.ToolCalls != 1 || sampled.ModelCalls != 0 || sampled.Tokens <= 1000 || sampled.CostNano <= 1e9 {
		t.Errorf("a tool call with sampling: %+v", sampled)
	}
	if _, ok := Fits(sampled, Spend{CostNano: 1e9, ToolCalls: 5}, Spend{CostNano: 1e9, ToolCalls: 5}); ok {
		t.Errorf("a sampling call that could cost more than USD 1 fits in USD 1")
	}
}
