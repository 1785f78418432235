package main

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
)

var budgetSessions = flag.Int("budget-sessions", 1000, "Sessions sharing one Budget in BenchmarkBudgetWritesPerModelCall")

// BenchmarkBudgetWritesPerModelCall measures what a shared Budget costs the API server:
// many Sessions of an LLM journey share one Budget, each iteration sends every Session
// a message (one model call each), and the API server's own request counter says how
// many writes of the Budget and of the Sessions the manager made per model call. The
// ledger reserves in memory and writes Budget status in batches, so budget-writes/call
// should be far below 0.1 and session-writes/call stays 1 (the step's own write).
//
//	go test ./test/bench -run '^$' -bench BudgetWrites -benchtime 3x -budget-sessions 1000
func BenchmarkBudgetWritesPerModelCall(b *testing.B) {
	ctrl.SetLogger(logr.Discard())
	env, err := testenv.Start()
	if err != nil {
		b.Fatalf("control plane: %v", err)
	}
	b.Cleanup(func() { _ = env.Stop() })
	ns := env.Namespace(b)
	chat := testenv.NewChatServer(b, func(testenv.ChatRequest) testenv.Reply {
		return testenv.Reply{Content: `{"reply":"done","outcome":"success","complete":false}`, Usage: testenv.Usage{Prompt: 120, Completion: 30}}
	})
	env.StartManager(b, testenv.ManagerOptions{Namespaces: []string{ns}, Setup: func(mgr ctrl.Manager) error {
		return controller.Setup(mgr, controller.Options{MaxConcurrentReconciles: 32, BudgetFlush: time.Second})
	}})
	ctx := context.Background()
	c := env.Client
	p := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ask"},
		Spec: flowv1.PathwaySpec{Agents: []flowv1.Name{"gpt"}, Signature: flowv1.Signature{Instructions: "Answer."}}}
	j := &flowv1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "priced"}, Spec: flowv1.JourneySpec{
		EntryPathway: "ask", Pathways: []flowv1.PathwayEntry{{Name: "ask", PathwayRef: "ask"}},
		Agents: []flowv1.AgentSpec{{Name: "gpt", Provider: flowv1.ProviderOpenAI, Model: "test-model", BaseURL: chat.BaseURL(),
			MaxRetries: ptr.To[int32](0), MaxTokens: ptr.To[int32](50), Pricing: &flowv1.Pricing{PromptPerMTok: "10", CompletionPerMTok: "10"}}},
	}}
	bud := &flowv1.Budget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
		Spec: flowv1.BudgetSpec{Limits: flowv1.BudgetLimits{CostUSD: "1000000"}}}
	for _, o := range []client.Object{p, j, bud} {
		if err := c.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	testenv.Eventually(b, 30*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(j), j); err != nil || j.Status.ReadyRevision == "" {
			return fmt.Errorf("journey not ready: %w", err)
		}
		return nil
	})
	n := *budgetSessions
	for i := range n {
		s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("s-%04d", i)},
			Spec: flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "priced"}}}
		if err := c.Create(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	writes := func(resource string) writeCounts {
		body, err := dc.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			b.Fatal(err)
		}
		w, err := resourceWrites(body, resource)
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	budgetBefore, sessionsBefore, callsBefore := writes("budgets"), writes("sessions"), chat.Calls()
	b.ResetTimer()
	for round := range b.N {
		for i := range n {
			s := &flowv1.Session{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("s-%04d", i)}, s); err != nil {
				b.Fatal(err)
			}
			base := s.DeepCopy()
			s.Spec.Messages = append(s.Spec.Messages, flowv1.Message{ID: fmt.Sprintf("m-%d", round), Text: "What is the copay?"})
			if err := c.Patch(ctx, s, client.MergeFrom(base)); err != nil {
				b.Fatal(err)
			}
		}
		want := callsBefore + (round+1)*n
		testenv.Eventually(b, 10*time.Minute, func() error {
			if got := chat.Calls(); got < want {
				return fmt.Errorf("%d model calls, want %d", got, want)
			}
			return nil
		})
	}
	// The Budget's last batch: its status is written within a flush.
	time.Sleep(2 * time.Second)
	b.StopTimer()
	calls := float64(chat.Calls() - callsBefore)
	budgetWrites := writes("budgets").sub(budgetBefore)
	sessionWrites := writes("sessions").sub(sessionsBefore)
	b.ReportMetric(float64(budgetWrites.Spec+budgetWrites.Status)/calls, "budget-writes/call")
	b.ReportMetric(float64(sessionWrites.Status)/calls, "session-status-writes/call")
	b.ReportMetric(calls, "model-calls")
}
