package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/plugin"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// Tool servers that ignore idempotency keys (toolServers[].idempotency: None), against
// the real control plane and a go-sdk MCP server that counts its payments by key: a
// call sent and never answered has an unknown outcome after the manager stops, is
// never sent again on its own, and each tools[].onUnknown settles it.

// shopJourney is journey name: one pathway (name-checkout) whose openai agent may pay an order
// through three tools of the shop server, all its tool pay, that differ in what
// happens when a call's outcome is unknown: pay_ask asks a person (the default),
// pay_probe asks the read-only pay_status, pay_fail fails the call. The shop's
// idempotency is idempotency.
func shopJourney(ns, name, shopURL, chatURL string, idempotency flowv1.ToolIdempotency) (*flowv1.Journey, *flowv1.Pathway) {
	p := &flowv1.Pathway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-checkout"},
		Spec: flowv1.PathwaySpec{
			Agents:    []flowv1.Name{"gpt"},
			Tools:     []flowv1.ToolName{"pay_ask", "pay_probe", "pay_fail"},
			Signature: flowv1.Signature{Instructions: "Pay the customer's order."},
		},
	}
	j := journeyOf(ns, name, p)
	j.Spec.Agents = []flowv1.AgentSpec{{Name: "gpt", Provider: flowv1.ProviderOpenAI, Model: "test-model", BaseURL: chatURL, MaxRetries: ptr.To[int32](0)}}
	j.Spec.ToolServers = []flowv1.ToolServer{{Name: "shop", URL: shopURL, Timeout: &metav1.Duration{Duration: 20 * time.Second}, Idempotency: idempotency}}
	j.Spec.Tools = []flowv1.Tool{
		{Name: "pay_ask", Server: "shop", ServerTool: "pay", Approval: flowv1.ToolApprovalNever},
		{Name: "pay_probe", Server: "shop", ServerTool: "pay", Approval: flowv1.ToolApprovalNever,
			OnUnknown: flowv1.OnUnknownProbe, Probe: &flowv1.ToolProbe{Tool: "pay_status"}},
		{Name: "pay_fail", Server: "shop", ServerTool: "pay", Approval: flowv1.ToolApprovalNever, OnUnknown: flowv1.OnUnknownFail},
		{Name: "pay_status", Server: "shop", Approval: flowv1.ToolApprovalNever},
	}
	return j, p
}

// startShop creates shop journey name and waits until its tools are pinned.
func startShop(t *testing.T, ns, name, shopURL, chatURL string, idempotency flowv1.ToolIdempotency) {
	t.Helper()
	j, p := shopJourney(ns, name, shopURL, chatURL, idempotency)
	create(t, p, j)
	eventually(t, 30*time.Second, func() error {
		j := get(t, ns, name, &flowv1.Journey{})
		if len(j.Status.Tools) < 4 || j.Status.ReadyRevision == "" {
			return fmt.Errorf("tools %+v, revision %q, issues %v", j.Status.Tools, j.Status.ReadyRevision, j.Status.Issues)
		}
		return nil
	})
}

// payScript is a model that calls tool to pay order o-<session>, then answers with
// the call's result: "Result: <what the tool result said>".
func payScript(tool, session string) modelScript {
	return func(results []testenv.ToolResult) testenv.Reply {
		if len(results) == 0 {
			return callTool(tool, fmt.Sprintf(`{"order":"o-%s","amount":1200}`, session))
		}
		b, _ := json.Marshal(map[string]any{"reply": "Result: " + results[len(results)-1].Content, "outputs": map[string]any{}, "outcome": "success", "complete": true})
		return testenv.Answer(string(b))
	}
}

// holdFirstDeliveries is a Hold for an EffectServer that holds the answer of the
// first delivery of each key (after the payment) until the client gives up or the
// test ends, and sends the order it paid on held.
func holdFirstDeliveries() (hold func(ctx context.Context, key, order string), held <-chan string) {
	orders := make(chan string, 64)
	var mu sync.Mutex
	seen := map[string]bool{}
	return func(ctx context.Context, key, order string) {
		mu.Lock()
		first := !seen[key]
		seen[key] = true
		mu.Unlock()
		if !first {
			return
		}
		orders <- order
		<-ctx.Done()
	}, orders
}

// stalledOnUnknown waits until Session name is Stalled with reason OutcomeUnknown and
// returns it.
func stalledOnUnknown(t *testing.T, ns, name string) *flowv1.Session {
	t.Helper()
	var s *flowv1.Session
	eventually(t, 60*time.Second, func() error {
		s = get(t, ns, name, &flowv1.Session{})
		if reason, _ := engine.Blocked(&s.Status); reason != flowv1.ReasonOutcomeUnknown {
			return fmt.Errorf("phase %s, blocked %q, turn %+v", s.Status.Phase, reason, s.Status.Turn)
		}
		return nil
	})
	return s
}

// TestOutcomeUnknownAfterAStop: five Sessions pay through a shop that ignores keys;
// the shop pays each and holds its answer while the manager is stopped. The calls were
// marked sent before they were made, so the new manager sends none of them again: each
// call's outcome is unknown, and its tool's onUnknown settles it. AskHuman waits for
// kubectl journey answer (done: the model gets the person's result; not done: sent
// again with the same key; fail: the model is told), Probe asks pay_status with the
// key and gets the payment, Fail tells the model at once.
func TestOutcomeUnknownAfterAStop(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	hold, held := holdFirstDeliveries()
	shop := testenv.NewEffectServer(t, testenv.EffectOptions{Hold: hold})
	tools := map[string]string{"ask-done": "pay_ask", "ask-not-done": "pay_ask", "ask-fail": "pay_ask", "probe": "pay_probe", "fail": "pay_fail"}
	scripts := map[string]modelScript{}
	for name, tool := range tools {
		scripts[name] = payScript(tool, name)
	}
	model := newReactModel(t, scripts)

	first := env.StartManager(t, managerOptions(ns, Options{}))
	startShop(t, ns, "shop", shop.URL, model.BaseURL(), flowv1.ToolIdempotencyNone)
	for name := range tools {
		create(t, sessionOf(ns, name, "shop"))
		send(t, ns, name, "m1", "Please pay my order.")
	}
	for range tools {
		select {
		case <-held:
		case <-time.After(60 * time.Second):
			t.Fatalf("the shop was paid for %d orders only", len(shop.Effects()))
		}
	}
	if err := first.Stop(); err != nil {
		t.Fatalf("stopping the manager: %v", err)
	}
	keys := map[string]string{}
	for name := range tools {
		s := get(t, ns, name, &flowv1.Session{})
		if s.Status.Turn == nil || len(s.Status.Turn.ToolCalls) != 1 {
			t.Fatalf("%s: after the stop the turn holds no call: %+v", name, s.Status.Turn)
		}
		c := s.Status.Turn.ToolCalls[0]
		if c.State != flowv1.ToolCallPending || c.SentAt == nil {
			t.Fatalf("%s: after the stop the call is %s, sentAt %v: want Pending and marked sent", name, c.State, c.SentAt)
		}
		keys[name] = c.IdempotencyKey
	}

	startManager(t, ns, Options{})
	for _, name := range []string{"ask-done", "ask-not-done", "ask-fail"} {
		s := stalledOnUnknown(t, ns, name)
		c := s.Status.Turn.ToolCalls[0]
		if c.State != flowv1.ToolCallOutcomeUnknown {
			t.Errorf("%s: call %s is %s, want OutcomeUnknown", name, c.ID, c.State)
		}
		cond := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionStalled)
		for _, want := range []string{"kubectl journey answer " + name + " " + c.ID, "pay_ask", keys[name], "sent at"} {
			if !strings.Contains(cond.Message, want) {
				t.Errorf("%s: Stalled message %q does not say %q", name, cond.Message, want)
			}
		}
	}
	probe, fail := finished(t, ns, "probe"), finished(t, ns, "fail")
	for name, n := range shop.Deliveries() {
		if n != 1 {
			t.Errorf("key %s delivered %d times before any answer, want once", name, n)
		}
	}

	// The probe learnt the payment from pay_status; the model got it as the result.
	if c := probe.Status.LastTurn.ToolCalls[0]; c.State != flowv1.ToolCallDone {
		t.Errorf("probe: call %+v, want Done", c)
	}
	if shop.Probes() != 1 {
		t.Errorf("pay_status asked %d times, want once", shop.Probes())
	}
	if reply := probe.Status.LastTurn.AssistantText; !strings.Contains(reply, `"order":"o-probe"`) {
		t.Errorf("probe: the model answered %q, not with the payment pay_status gave", reply)
	}
	// Fail: the model was told the outcome is unknown.
	if c := fail.Status.LastTurn.ToolCalls[0]; c.State != flowv1.ToolCallFailed || !strings.Contains(c.Error, "unknown") {
		t.Errorf("fail: call %+v, want Failed saying its outcome is unknown", c)
	}
	if reply := fail.Status.LastTurn.AssistantText; !strings.Contains(reply, "unknown") {
		t.Errorf("fail: the model answered %q, not told the outcome is unknown", reply)
	}

	// A person answers the three AskHuman calls with kubectl journey answer.
	kubeconfig := env.Kubeconfig(t, testenv.Admin("operator-on-call"))
	for name, flags := range map[string][]string{
		"ask-done":     {"--done", "paid by hand, receipt R-7"},
		"ask-not-done": {"--not-done"},
		"ask-fail":     {"--fail", "--reason", "the card was declined"},
	} {
		call := get(t, ns, name, &flowv1.Session{}).Status.Turn.ToolCalls[0].ID
		var out, errOut bytes.Buffer
		cmd := plugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		cmd.SetArgs(append([]string{"answer", name, call, "-n", ns, "--kubeconfig", kubeconfig}, flags...))
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("kubectl journey answer %s %s %v: %v: %s", name, call, flags, err, errOut.String())
		}
	}
	done, notDone, failed := finished(t, ns, "ask-done"), finished(t, ns, "ask-not-done"), finished(t, ns, "ask-fail")
	if c := done.Status.LastTurn.ToolCalls[0]; c.State != flowv1.ToolCallDone {
		t.Errorf("ask-done: call %+v, want Done", c)
	}
	if reply := done.Status.LastTurn.AssistantText; !strings.Contains(reply, "receipt R-7") {
		t.Errorf("ask-done: the model answered %q, not with the person's result", reply)
	}
	if c := notDone.Status.LastTurn.ToolCalls[0]; c.State != flowv1.ToolCallDone {
		t.Errorf("ask-not-done: call %+v, want Done, sent again", c)
	}
	if c := failed.Status.LastTurn.ToolCalls[0]; c.State != flowv1.ToolCallFailed || !strings.Contains(c.Error, "the card was declined") {
		t.Errorf("ask-fail: call %+v, want Failed with the person's reason", c)
	}
	// Only "not done" sent a call again, with the same key; a shop that ignores keys
	// paid it twice.
	want := map[string]int{}
	for name, key := range keys {
		want[key] = 1
		if name == "ask-not-done" {
			want[key] = 2
		}
	}
	if got := shop.Deliveries(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("deliveries by key %v, want %v", got, want)
	}
	for name := range tools {
		if n := len(model.asked(name)); n != 2 {
			t.Errorf("%s: the model was asked %d times, want twice (the call, then its outcome)", name, n)
		}
	}
}
