package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/budget"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// pricedJourney is a one-pathway journey on a priced openai agent: each answer uses
// 120 prompt and 30 completion tokens, USD 0.0015 at USD 10 per million tokens; its
// worst case (the prompt estimate plus 50 answer tokens) is several times that.
func pricedJourney(t *testing.T, ns string, chat *testenv.ChatServer, mods ...func(*flowv1.Journey, *flowv1.Pathway)) {
	t.Helper()
	p := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ask"},
		Spec: flowv1.PathwaySpec{Agents: []flowv1.Name{"gpt"}, Signature: flowv1.Signature{Instructions: "Answer the question."}}}
	j := journeyOf(ns, "priced", p)
	j.Spec.Agents = []flowv1.AgentSpec{{Name: "gpt", Provider: flowv1.ProviderOpenAI, Model: "test-model", BaseURL: chat.BaseURL(),
		MaxRetries: ptr.To[int32](0), MaxTokens: ptr.To[int32](50), Pricing: &flowv1.Pricing{PromptPerMTok: "10", CompletionPerMTok: "10"}}}
	for _, mod := range mods {
		mod(j, p)
	}
	create(t, p, j)
	eventually(t, 30*time.Second, func() error {
		if get(t, ns, "priced", &flowv1.Journey{}).Status.ReadyRevision == "" {
			return fmt.Errorf("journey not ready")
		}
		return nil
	})
}

func pricedChat(t *testing.T) *testenv.ChatServer {
	return testenv.NewChatServer(t, func(r testenv.ChatRequest) testenv.Reply {
		return testenv.Reply{Content: `{"reply":"done","outcome":"success","complete":true}`, Usage: testenv.Usage{Prompt: 120, Completion: 30}}
	})
}

func sharedBudget(ns, name, cost string, mod func(*flowv1.Budget)) *flowv1.Budget {
	b := &flowv1.Budget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: flowv1.BudgetSpec{Window: "Day", Limits: flowv1.BudgetLimits{CostUSD: flowv1.Decimal(cost)}}}
	if mod != nil {
		mod(b)
	}
	return b
}

// spentBySessions sums what the Sessions' status.budgets say they spent in Budget
// name, and what their journals say their calls cost.
func spentBySessions(t *testing.T, ns, name string) (charged, journaled engine.Spend, calls int64) {
	t.Helper()
	var list flowv1.SessionList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		for _, c := range s.Status.Budgets {
			if c.Name == name {
				charged = charged.Add(engine.ChargeSpend(c))
			}
		}
		cost, _ := engine.ParseCost(s.Status.Usage.CostUSD)
		var made int64
		for _, r := range s.Status.Journal {
			if r.Kind == flowv1.EffectRunPathway {
				made++
			}
		}
		journaled = journaled.Add(engine.Spend{CostNano: cost, Tokens: s.Status.Usage.PromptTokens + s.Status.Usage.CompletionTokens, ModelCalls: made})
		calls += made
	}
	return charged, journaled, calls
}

// raiseBudget sets the costUSD limit of Budget name, as a person does with kubectl
// edit: read, change, write, again when the manager wrote its status in between. The
// managers write it every BudgetFlush, two of them in the shards test: on a busy
// machine more often than retry.DefaultRetry's five tries within 50 ms outlast.
func raiseBudget(t *testing.T, ns, name, costUSD string) {
	t.Helper()
	backoff := wait.Backoff{Steps: 20, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 0.5, Cap: time.Second}
	err := retry.RetryOnConflict(backoff, func() error {
		b := get(t, ns, name, &flowv1.Budget{})
		b.Spec.Limits.CostUSD = flowv1.Decimal(costUSD)
		return k8sClient.Update(context.Background(), b)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// 40 Sessions share a Budget of USD 0.05, 8 at a time, with the manager restarted twice
// during the run: the settled spend stays within the limit, the ledger equals what
// the Sessions journaled (nothing counted twice), the Sessions without room say which
// Budget they wait for, and all of them finish once the limit is raised.
func TestBudgetSharedBySessions(t *testing.T) {
	ns := newNamespace(t)
	chat := pricedChat(t)
	opts := Options{MaxConcurrentReconciles: 8, BudgetFlush: 100 * time.Millisecond}
	mgr := startManager(t, ns, opts)
	pricedJourney(t, ns, chat)
	create(t, sharedBudget(ns, "team", "0.05", nil))
	const n = 40
	for i := range n {
		s := sessionOf(ns, fmt.Sprintf("s-%02d", i), "priced")
		s.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "What is the copay?"}}
		create(t, s)
	}
	// Two restarts while the Sessions spend.
	for _, calls := range []int{8, 16} {
		eventually(t, 60*time.Second, func() error {
			if chat.Calls() < calls {
				return fmt.Errorf("%d calls", chat.Calls())
			}
			return nil
		})
		if err := mgr.Stop(); err != nil {
			t.Fatalf("manager: %v", err)
		}
		mgr = startManager(t, ns, opts)
	}
	// The Budget runs out: the rest wait, each naming it.
	var waiting []string
	eventually(t, 60*time.Second, func() error {
		var list flowv1.SessionList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		waiting = nil
		for _, s := range list.Items {
			switch c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionWaitingForBudget); {
			case s.Status.Phase == flowv1.PhaseCompleted:
			case c != nil && c.Status == metav1.ConditionTrue:
				if !strings.HasPrefix(c.Message, "Budget team has no room for the next RunPathway call, which could cost up to USD ") ||
					!strings.Contains(c.Message, "of its limit of USD 0.05 is left") || s.Status.Reason != flowv1.ReasonBudgetExhausted {
					return fmt.Errorf("session %s waits with %q (reason %s)", s.Name, c.Message, s.Status.Reason)
				}
				waiting = append(waiting, s.Name)
			default:
				return fmt.Errorf("session %s: phase %s, reason %s", s.Name, s.Status.Phase, s.Status.Reason)
			}
		}
		if len(waiting) == 0 {
			return fmt.Errorf("no session waits for the Budget")
		}
		// A waiting Session goes on when a call settles below its worst case: the
		// run has settled when every Session made its call or waits.
		if _, _, calls := spentBySessions(t, ns, "team"); int(calls)+len(waiting) != n {
			return fmt.Errorf("%d calls made and %d Sessions waiting, want %d in all", calls, len(waiting), n)
		}
		return nil
	})
	charged, journaled, calls := spentBySessions(t, ns, "team")
	if charged.CostNano > 50e6 || charged != journaled || charged.ModelCalls != calls || charged.CostNano != calls*1500000 {
		t.Fatalf("charged %+v, journaled %+v in %d calls: want at most USD 0.05, equal, USD 0.0015 a call", charged, journaled, calls)
	}
	if int(calls)+len(waiting) != n {
		t.Errorf("%d calls made and %d Sessions waiting, want %d in all", calls, len(waiting), n)
	}
	// The ledger, rebuilt twice, is what the Sessions journaled.
	eventually(t, 20*time.Second, func() error {
		b := get(t, ns, "team", &flowv1.Budget{})
		spent := budget.Amounts(b.Status.Spent)
		if spent.CostNano != charged.CostNano || b.Status.Waiting != int32(len(waiting)) || !apimeta.IsStatusConditionTrue(b.Status.Conditions, flowv1.ConditionExhausted) {
			return fmt.Errorf("Budget status %+v, want spent %+v and %d waiting", b.Status, charged, len(waiting))
		}
		return nil
	})

	// Raised: the waiting Sessions go on by themselves.
	raiseBudget(t, ns, "team", "1")
	eventually(t, 60*time.Second, everySessionCompleted(ns))
	charged, journaled, calls = spentBySessions(t, ns, "team")
	if charged != journaled || calls != n || charged.CostNano != n*1500000 {
		t.Errorf("after raising: charged %+v, journaled %+v, %d calls", charged, journaled, calls)
	}
}

// Two Budgets select one Session: the tighter stops it.
func TestBudgetTighterOfTwo(t *testing.T) {
	ns := newNamespace(t)
	chat := pricedChat(t)
	startManager(t, ns, Options{BudgetFlush: 100 * time.Millisecond})
	pricedJourney(t, ns, chat)
	create(t, sharedBudget(ns, "namespace", "10", nil), sharedBudget(ns, "team", "", func(b *flowv1.Budget) {
		b.Spec.Limits = flowv1.BudgetLimits{ModelCalls: 1}
		b.Spec.Selector.MatchLabels = map[string]string{"team": "care"}
	}))
	for i := range 2 {
		s := sessionOf(ns, fmt.Sprintf("s-%d", i), "priced")
		s.Labels = map[string]string{"team": "care"}
		s.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "hi"}}
		create(t, s)
	}
	eventually(t, 30*time.Second, func() error {
		var done, waiting int
		for i := range 2 {
			s := get(t, ns, fmt.Sprintf("s-%d", i), &flowv1.Session{})
			c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionWaitingForBudget)
			switch {
			case s.Status.Phase == flowv1.PhaseCompleted:
				done++
			case c != nil && strings.HasPrefix(c.Message, "Budget team has no room for the next RunPathway call, which could make 1 model call: 0 model calls"):
				waiting++
			}
		}
		if done != 1 || waiting != 1 {
			return fmt.Errorf("%d completed, %d waiting for team", done, waiting)
		}
		return nil
	})
	if calls := chat.Calls(); calls != 1 {
		t.Errorf("%d model calls, want 1", calls)
	}
	// The metrics of the Budget: its limit, what was spent, and the Session denied.
	eventually(t, 20*time.Second, func() error {
		want := map[string]float64{"journey_budget_limit/modelCalls": 1, "journey_budget_spent/modelCalls": 1, "journey_budget_denials/": 1}
		families, err := metrics.Registry.Gather()
		if err != nil {
			return err
		}
		got := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				var budget, amount string
				for _, l := range m.GetLabel() {
					switch l.GetName() {
					case "budget":
						budget = l.GetValue()
					case "amount":
						amount = l.GetValue()
					}
				}
				if budget == ns+"/team" {
					got[f.GetName()+"/"+amount] = m.GetGauge().GetValue()
				}
			}
		}
		for k, v := range want {
			if got[k] != v {
				return fmt.Errorf("metric %s = %v, want %v (all: %v)", k, got[k], v, got)
			}
		}
		return nil
	})
}

// A Budget with onExhausted: Degrade that has no room for the pathway's own agent
// has its call made with the cheaper agent: the Session completes, says so in its
// turn, its Degraded condition and an Event, and the Budget's spend stays within
// its limit. With room again, the pathway's own agent answers.
func TestBudgetDegrade(t *testing.T) {
	ns := newNamespace(t)
	chat := pricedChat(t)
	startManager(t, ns, Options{BudgetFlush: 100 * time.Millisecond})
	pricedJourney(t, ns, chat, func(j *flowv1.Journey, p *flowv1.Pathway) {
		small := j.Spec.Agents[0]
		small.Name, small.Model, small.Pricing = "small", "small-model", &flowv1.Pricing{PromptPerMTok: "0.01", CompletionPerMTok: "0.01"}
		j.Spec.Agents = append(j.Spec.Agents, small)
		p.Spec.Degrade = flowv1.DegradeAllow
	})
	// Less than one answer of gpt (USD 0.0015): only small's calls fit.
	create(t, sharedBudget(ns, "team", "0.001", func(b *flowv1.Budget) {
		b.Spec.OnExhausted, b.Spec.DegradeTo = flowv1.ExhaustedDegrade, &flowv1.DegradeTarget{Agent: "small"}
	}))
	s := sessionOf(ns, "s", "priced")
	s.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "What is the copay?"}}
	create(t, s)
	done := func(name string) *flowv1.Session {
		var got *flowv1.Session
		eventually(t, 30*time.Second, func() error {
			got = get(t, ns, name, &flowv1.Session{})
			if got.Status.Phase != flowv1.PhaseCompleted {
				return fmt.Errorf("session %s: phase %s, reason %s", name, got.Status.Phase, got.Status.Reason)
			}
			return nil
		})
		return got
	}
	got := done("s")
	if models := modelsAsked(chat); strings.Join(models, ",") != "small-model" {
		t.Fatalf("models asked %v, want small-model once", models)
	}
	if d := got.Status.LastTurn.DegradedTo; d == nil || d.Budget != "team" || d.Agent != "small" {
		t.Errorf("lastTurn.degradedTo %+v", d)
	}
	if j := got.Status.Journal; len(j) != 1 || j[0].Agent != "small" || j[0].DegradedTo == nil || *j[0].DegradedTo != *got.Status.LastTurn.DegradedTo {
		t.Errorf("journal %+v: want small's answer, recorded as degraded by Budget team (what an upgrade or fork replays)", j)
	}
	c := apimeta.FindStatusCondition(got.Status.Conditions, flowv1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != flowv1.ReasonDegraded ||
		!strings.HasPrefix(c.Message, "Budget team has no room for the calls of pathway ask with agent gpt; they are made with agent small") {
		t.Errorf("Degraded %+v", c)
	}
	eventually(t, 10*time.Second, func() error {
		if !eventReasons(t, ns, "s")[flowv1.ReasonDegraded] {
			return fmt.Errorf("no %s Event", flowv1.ReasonDegraded)
		}
		return nil
	})
	// 150 tokens at USD 0.01 per million: what small's answer cost, within the limit.
	charged, journaled, calls := spentBySessions(t, ns, "team")
	if calls != 1 || charged != journaled || charged.CostNano != 1500 {
		t.Fatalf("charged %+v, journaled %+v in %d calls", charged, journaled, calls)
	}

	// Raised: the pathway's own agent answers, not degraded.
	raiseBudget(t, ns, "team", "1")
	eventually(t, 10*time.Second, func() error {
		if b := get(t, ns, "team", &flowv1.Budget{}); b.Status.ObservedGeneration != b.Generation {
			return fmt.Errorf("Budget status of generation %d, want %d", b.Status.ObservedGeneration, b.Generation)
		}
		return nil
	})
	s2 := sessionOf(ns, "s2", "priced")
	s2.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "What is the copay?"}}
	create(t, s2)
	got = done("s2")
	if models := modelsAsked(chat); strings.Join(models, ",") != "small-model,test-model" {
		t.Fatalf("models asked %v", models)
	}
	if got.Status.LastTurn.DegradedTo != nil || apimeta.FindStatusCondition(got.Status.Conditions, flowv1.ConditionDegraded) != nil {
		t.Errorf("s2 degraded: %+v", got.Status.LastTurn)
	}
}

// modelsAsked are the models chat was asked, in order.
func modelsAsked(chat *testenv.ChatServer) []string {
	var out []string
	for _, r := range chat.Requests() {
		out = append(out, r.Model)
	}
	return out
}

// Past softLimitPercent of a limit, the Budget's SoftLimitReached condition turns
// True and a Warning Event says so; below it, the condition is False.
func TestBudgetSoftLimitReached(t *testing.T) {
	ns := newNamespace(t)
	chat := pricedChat(t)
	startManager(t, ns, Options{BudgetFlush: 100 * time.Millisecond})
	pricedJourney(t, ns, chat)
	create(t, sharedBudget(ns, "team", "", func(b *flowv1.Budget) {
		b.Spec.Limits = flowv1.BudgetLimits{ModelCalls: 4}
		b.Spec.SoftLimitPercent = ptr.To[int32](50)
	}))
	soft := func(name string, want metav1.ConditionStatus, calls int64) {
		t.Helper()
		s := sessionOf(ns, name, "priced")
		s.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "hi"}}
		create(t, s)
		eventually(t, 30*time.Second, func() error {
			b := get(t, ns, "team", &flowv1.Budget{})
			c := apimeta.FindStatusCondition(b.Status.Conditions, flowv1.ConditionSoftLimitReached)
			if spent := budget.Amounts(b.Status.Spent); spent.ModelCalls != calls || c == nil || c.Status != want {
				return fmt.Errorf("spent %+v, SoftLimitReached %+v", b.Status.Spent, c)
			}
			return nil
		})
	}
	soft("s-0", metav1.ConditionFalse, 1)
	if eventReasons(t, ns, "team")[flowv1.ReasonSoftLimitReached] {
		t.Fatalf("a SoftLimitReached Event below the soft limit")
	}
	soft("s-1", metav1.ConditionTrue, 2)
	eventually(t, 10*time.Second, func() error {
		var list eventsv1.EventList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "Budget" && e.Regarding.Name == "team" && e.Reason == flowv1.ReasonSoftLimitReached && e.Type == "Warning" &&
				strings.Contains(e.Note, "spent 50% of a limit") {
				return nil
			}
		}
		return fmt.Errorf("no Warning %s Event about Budget team", flowv1.ReasonSoftLimitReached)
	})
}

// The manager stops while a call is in flight (its answer never written): after the
// restart the Session makes the call again, and the Budget counts the one answer the
// Session journaled, once.
func TestBudgetRestartMidCallCountsOnce(t *testing.T) {
	ns := newNamespace(t)
	chat := pricedChat(t)
	chat.SetLatency(time.Hour) // the first call hangs until the manager stops
	opts := Options{BudgetFlush: 100 * time.Millisecond}
	mgr := startManager(t, ns, opts)
	pricedJourney(t, ns, chat)
	create(t, sharedBudget(ns, "team", "1", nil))
	s := sessionOf(ns, "s", "priced")
	s.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "What is the copay?"}}
	create(t, s)
	eventually(t, 30*time.Second, func() error {
		if chat.Calls() != 1 {
			return fmt.Errorf("%d calls", chat.Calls())
		}
		return nil
	})
	if err := mgr.Stop(); err != nil {
		t.Fatalf("manager: %v", err)
	}
	chat.SetLatency(0)
	startManager(t, ns, opts)
	eventually(t, 30*time.Second, func() error {
		if got := get(t, ns, "s", &flowv1.Session{}); got.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %s, reason %s", got.Status.Phase, got.Status.Reason)
		}
		return nil
	})
	if chat.Calls() != 2 {
		t.Fatalf("%d calls, want the hung one and its repeat", chat.Calls())
	}
	charged, journaled, calls := spentBySessions(t, ns, "team")
	if calls != 1 || charged != journaled || charged.ModelCalls != 1 || charged.CostNano != 1500000 {
		t.Fatalf("charged %+v, journaled %+v in %d journaled calls: want one call of USD 0.0015", charged, journaled, calls)
	}
	eventually(t, 20*time.Second, func() error {
		b := get(t, ns, "team", &flowv1.Budget{})
		if spent := budget.Amounts(b.Status.Spent); spent.CostNano != 1500000 || b.Status.Holding != 0 || b.Status.Reserved.CostUSD != "0" {
			return fmt.Errorf("Budget status %+v", b.Status)
		}
		return nil
	})
}

// Two manager shards (different --shard-selector labels) run the Sessions of one
// Budget: each leases a slice in the Budget's status.shards and spends only within
// it, so together they stay within the limit; each writes its own entry, which the
// other never overwrites; the Sessions without room say which Budget they wait for,
// and all of them finish once the limit is raised.
func TestBudgetShards(t *testing.T) {
	ns := newNamespace(t)
	chat := pricedChat(t)
	const shardLabel = "journey.dev/shard"
	shards := map[string]labels.Selector{}
	for _, name := range []string{"a", "b"} {
		shard := labels.SelectorFromSet(labels.Set{shardLabel: name})
		shards[name] = shard
		env.StartManager(t, testenv.ManagerOptions{
			Namespaces: []string{ns},
			Cache:      CacheOptions(shard),
			UserAgent:  "manager-" + name,
			Setup: func(mgr ctrl.Manager) error {
				return Setup(mgr, Options{ShardSelector: shard, MaxConcurrentReconciles: 4, BudgetFlush: 100 * time.Millisecond, BudgetLease: 6 * time.Second})
			},
		})
	}
	pricedJourney(t, ns, chat)
	create(t, sharedBudget(ns, "team", "0.03", nil))
	const n = 30
	shardOf := map[string]string{}
	for i := range n {
		s := sessionOf(ns, fmt.Sprintf("s-%02d", i), "priced")
		shardOf[s.Name] = []string{"a", "b"}[i%2]
		s.Labels = map[string]string{shardLabel: shardOf[s.Name]}
		s.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "What is the copay?"}}
		create(t, s)
	}
	// chargedBy sums the Sessions' status.budgets by shard.
	chargedBy := func() map[string]engine.Spend {
		var list flowv1.SessionList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		out := map[string]engine.Spend{}
		for _, s := range list.Items {
			for _, c := range s.Status.Budgets {
				out[s.Labels[shardLabel]] = out[s.Labels[shardLabel]].Add(engine.ChargeSpend(c))
			}
		}
		return out
	}
	// The Budget runs out: the rest wait, each naming it.
	var waiting int
	eventually(t, 90*time.Second, func() error {
		var list flowv1.SessionList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		waiting = 0
		for _, s := range list.Items {
			switch c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionWaitingForBudget); {
			case s.Status.Phase == flowv1.PhaseCompleted:
			case c != nil && c.Status == metav1.ConditionTrue:
				if !strings.HasPrefix(c.Message, "Budget team has no room for the next RunPathway call, which could cost up to USD ") ||
					!strings.Contains(c.Message, "of its limit of USD 0.03 is left") {
					return fmt.Errorf("session %s waits with %q", s.Name, c.Message)
				}
				waiting++
			default:
				return fmt.Errorf("session %s: phase %s, reason %s", s.Name, s.Status.Phase, s.Status.Reason)
			}
		}
		if _, _, calls := spentBySessions(t, ns, "team"); waiting == 0 || int(calls)+waiting != n {
			return fmt.Errorf("%d calls made and %d Sessions waiting, want %d in all, some waiting", calls, waiting, n)
		}
		return nil
	})
	charged, journaled, calls := spentBySessions(t, ns, "team")
	if charged.CostNano > 30e6 || charged != journaled || charged.CostNano != calls*1500000 {
		t.Fatalf("charged %+v, journaled %+v in %d calls: want at most USD 0.03 across both shards, USD 0.0015 a call", charged, journaled, calls)
	}
	// Each shard's entry says what its own Sessions spent: neither overwrote the other.
	eventually(t, 20*time.Second, func() error {
		b := get(t, ns, "team", &flowv1.Budget{})
		by := chargedBy()
		if len(b.Status.Shards) != 2 {
			return fmt.Errorf("status.shards %+v, want the entries of both shards", b.Status.Shards)
		}
		var granted, total int64
		for _, e := range b.Status.Shards {
			name := strings.TrimPrefix(e.Shard, shardLabel+"=")
			if e.Shard != shards[name].String() {
				return fmt.Errorf("entry of shard %q", e.Shard)
			}
			if spent := budget.Amounts(e.Spent); spent.CostNano != by[name].CostNano || spent.ModelCalls != by[name].ModelCalls {
				return fmt.Errorf("shard %s entry spent %+v, its Sessions %+v", name, e.Spent, by[name])
			}
			granted += budget.Amounts(e.Granted).CostNano
			total += by[name].CostNano
		}
		if total > 30e6 {
			t.Fatalf("the Sessions of both shards spent USD %s, over the limit of USD 0.03", engine.FormatCost(total))
		}
		if spent := budget.Amounts(b.Status.Spent); spent.CostNano != total || b.Status.Waiting == 0 || granted > 30e6 {
			return fmt.Errorf("Budget status %+v: want spent USD %s (the sum of the entries), Sessions waiting, grants within the limit",
				b.Status, engine.FormatCost(total))
		}
		return nil
	})

	// Raised: the waiting Sessions of both shards go on by themselves.
	raiseBudget(t, ns, "team", "1")
	eventually(t, 60*time.Second, everySessionCompleted(ns))
	charged, journaled, calls = spentBySessions(t, ns, "team")
	if charged != journaled || calls != n || charged.CostNano != n*1500000 {
		t.Errorf("after raising: charged %+v, journaled %+v, %d calls", charged, journaled, calls)
	}
}

// everySessionCompleted checks that every Session of ns has completed.
func everySessionCompleted(ns string) func() error {
	return func() error {
		var list flowv1.SessionList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, s := range list.Items {
			if s.Status.Phase != flowv1.PhaseCompleted {
				return fmt.Errorf("session %s: phase %s, reason %s", s.Name, s.Status.Phase, s.Status.Reason)
			}
		}
		return nil
	}
}
