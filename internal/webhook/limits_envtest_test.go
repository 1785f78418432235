package webhook_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// pricedChat creates, in ns, the journey "priced": one pathway whose openai agent
// talks to cs at USD 1000 per million prompt tokens and USD 10000 per million answer
// tokens, with answers capped at 50 tokens, under a budget of maxCost.
func pricedChat(t *testing.T, ns string, cs *testenv.ChatServer, maxCost flowv1.Decimal) {
	t.Helper()
	ctx := context.Background()
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm"}, StringData: map[string]string{"apiKey": "sk-test"}},
		&flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"}, Spec: flowv1.PathwaySpec{
			Agents:    []flowv1.Name{"bot"},
			Signature: flowv1.Signature{Instructions: "Answer the patient."},
		}},
		&flowv1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "priced"}, Spec: flowv1.JourneySpec{
			EntryPathway: "chat",
			Pathways:     []flowv1.PathwayEntry{{Name: "chat", PathwayRef: "chat"}},
			Agents: []flowv1.AgentSpec{{Name: "bot", Provider: flowv1.ProviderOpenAI, Model: "test-model", BaseURL: cs.BaseURL(),
				APIKeySecretRef: &flowv1.SecretKeyRef{Name: "llm", Key: "apiKey"}, MaxTokens: ptr.To(int32(50)),
				Pricing: &flowv1.Pricing{PromptPerMTok: "1000", CompletionPerMTok: "10000"}}},
			Limits: flowv1.Limits{Budget: &flowv1.SessionBudget{MaxCostUSD: maxCost}},
		}},
	}
	for _, o := range objs {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		var j flowv1.Journey
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "priced"}, &j); err != nil {
			return err
		}
		if j.Status.ReadyRevision == "" {
			return fmt.Errorf("journey not ready: %v", j.Status.Issues)
		}
		return nil
	})
}

func sessionIn(t *testing.T, ns, name string) *flowv1.Session {
	t.Helper()
	var s flowv1.Session
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func setLimits(ns, name string, l *flowv1.SessionLimits) error {
	ctx := context.Background()
	var s flowv1.Session
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		return err
	}
	patch := client.MergeFrom(s.DeepCopy())
	s.Spec.Limits = l
	return admin.Patch(ctx, &s, patch)
}

// TestBudgetStallAndOverride: the real controllers and webhooks with the real
// go-openai client against the chat server. Each answer costs USD 2 (1000 prompt
// tokens and 100 answer tokens); the worst case of the next call (an estimated
// prompt plus 50 answer tokens) is over USD 1. Under a USD 3 cap, the second call is
// never made: the server sees one request and the Session stalls with
// BudgetExceeded. An override below what was spent is refused, naming the Session
// and the limit; one above it lets the stalled turn go on.
func TestBudgetStallAndOverride(t *testing.T) {
	t.Parallel()
	ns := testEnv.Namespace(t)
	cs := testenv.NewChatServer(t, func(testenv.ChatRequest) testenv.Reply {
		return testenv.Reply{Content: `{"reply":"noted","outcome":"success","complete":false}`, Usage: testenv.Usage{Prompt: 1000, Completion: 100}}
	})
	testEnv.StartManager(t, testenv.ManagerOptions{
		Namespaces: []string{ns},
		Setup:      func(mgr ctrl.Manager) error { return controller.Setup(mgr, controller.Options{}) },
	})
	pricedChat(t, ns, cs, "3")
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "patient"}, Spec: flowv1.SessionSpec{
		JourneyRef: flowv1.JourneyReference{Name: "priced"},
		Messages:   []flowv1.Message{{ID: "m1", Text: "I need a cardiologist"}, {ID: "m2", Text: "Next week please"}},
	}}
	if err := admin.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		got := sessionIn(t, ns, "patient")
		c := apimeta.FindStatusCondition(got.Status.Conditions, flowv1.ConditionStalled)
		if c == nil || c.Reason != flowv1.ReasonBudgetExceeded {
			return fmt.Errorf("Stalled %+v, usage %+v", c, got.Status.Usage)
		}
		return nil
	})
	// Give a wrong implementation time to make the call it must not make.
	time.Sleep(500 * time.Millisecond)
	got := sessionIn(t, ns, "patient")
	if n := len(cs.Requests()); n != 1 {
		t.Fatalf("the chat server saw %d requests; the second call's worst case exceeds the budget and must not be made", n)
	}
	if got.Status.Usage.CostUSD != "2" || got.Status.LastTurn.FinishReason != flowv1.FinishBudgetExceeded {
		t.Fatalf("usage %+v, last turn %+v", got.Status.Usage, got.Status.LastTurn)
	}
	if c := apimeta.FindStatusCondition(got.Status.Conditions, flowv1.ConditionStalled); !strings.Contains(c.Message, "could cost up to USD") {
		t.Errorf("Stalled message %q does not say why", c.Message)
	}

	err := setLimits(ns, "patient", &flowv1.SessionLimits{Budget: &flowv1.SessionBudget{MaxCostUSD: "1.5"}})
	wantDenied(t, err, `Session "patient" has used USD 2`, "spec.limits.budget.maxCostUSD 1.5 is below that")
	if err := setLimits(ns, "patient", &flowv1.SessionLimits{Budget: &flowv1.SessionBudget{MaxCostUSD: "10"}}); err != nil {
		t.Fatalf("raising the budget: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		got := sessionIn(t, ns, "patient")
		if c := apimeta.FindStatusCondition(got.Status.Conditions, flowv1.ConditionStalled); c != nil {
			return fmt.Errorf("still Stalled: %s", c.Message)
		}
		if got.Status.ProcessedMessages != 2 || got.Status.Phase != flowv1.PhaseWaitingForInput {
			return fmt.Errorf("phase %s, processed %d", got.Status.Phase, got.Status.ProcessedMessages)
		}
		return nil
	})
	if n := len(cs.Requests()); n != 2 {
		t.Errorf("the chat server saw %d requests after the override, want 2", n)
	}
	if !strings.Contains(cs.Request(t, 2).User(), "Next week please") {
		t.Errorf("the resumed call did not carry the message it stalled on: %+v", cs.Request(t, 2).Messages)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		var evs corev1.EventList
		if err := admin.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == flowv1.ReasonLimitsOverridden {
				return nil
			}
		}
		return fmt.Errorf("no %s event among %d", flowv1.ReasonLimitsOverridden, len(evs.Items))
	})
}
