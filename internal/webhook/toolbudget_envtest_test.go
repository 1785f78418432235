package webhook_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// TestToolCallBudgetStallAndOverride: the real controllers and webhooks with the
// clinic MCP server. The journey finds a cardiologist and books a slot (two tool
// calls) under a budget of one tool call: the server sees find_doctors only and the
// Session stalls with BudgetExceeded, the turn in progress. Raising
// spec.limits.budget.maxToolCalls on the Session makes the second call.
func TestToolCallBudgetStallAndOverride(t *testing.T) {
	t.Parallel()
	ns := testEnv.Namespace(t)
	ctx := context.Background()
	c := clinic.New()
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	testEnv.StartManager(t, testenv.ManagerOptions{
		Namespaces: []string{ns},
		Setup:      func(mgr ctrl.Manager) error { return controller.Setup(mgr, controller.Options{}) },
	})
	p, j := testenv.ClinicBooking(ns, srv.URL)
	p.Spec.Builtin.Reply = "Booked {{ .tools.book_slot.booking_id }}"
	j.Spec.Limits = flowv1.Limits{Budget: &flowv1.SessionBudget{MaxToolCalls: 1}}
	objs := []client.Object{
		p, j,
		&flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "patient"}, Spec: flowv1.SessionSpec{
			JourneyRef: flowv1.JourneyReference{Name: "clinic"},
		}},
	}
	for _, o := range objs {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 60*time.Second, func() error {
		got := sessionIn(t, ns, "patient")
		if c := apimeta.FindStatusCondition(got.Status.Conditions, flowv1.ConditionStalled); c == nil || c.Reason != flowv1.ReasonBudgetExceeded {
			return fmt.Errorf("Stalled %+v, usage %+v", c, got.Status.Usage)
		}
		return nil
	})
	// Give a wrong implementation time to make the call it must not make.
	time.Sleep(500 * time.Millisecond)
	if f, b := c.Calls("find_doctors"), c.Calls("book_slot"); f != 1 || b != 0 {
		t.Fatalf("the clinic saw find_doctors %d and book_slot %d times; want 1 and 0 under a budget of 1 tool call", f, b)
	}
	got := sessionIn(t, ns, "patient")
	if got.Status.Usage.ToolCalls != 1 || got.Status.Turn == nil {
		t.Fatalf("usage %+v, turn %+v: want 1 tool call and the turn in progress", got.Status.Usage, got.Status.Turn)
	}
	if c := apimeta.FindStatusCondition(got.Status.Conditions, flowv1.ConditionStalled); !strings.Contains(c.Message, "tool-call budget is used up") {
		t.Errorf("Stalled message %q does not say why", c.Message)
	}

	if err := setLimits(ns, "patient", &flowv1.SessionLimits{Budget: &flowv1.SessionBudget{MaxToolCalls: 2}}); err != nil {
		t.Fatalf("raising maxToolCalls: %v", err)
	}
	testenv.Eventually(t, 60*time.Second, func() error {
		got = sessionIn(t, ns, "patient")
		if got.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %s, conditions %+v", got.Status.Phase, got.Status.Conditions)
		}
		return nil
	})
	if f, b := c.Calls("find_doctors"), c.Calls("book_slot"); f != 1 || b != 1 {
		t.Errorf("after the override the clinic saw find_doctors %d and book_slot %d times; want 1 and 1", f, b)
	}
	if got.Status.Usage.ToolCalls != 2 || got.Status.LastTurn.AssistantText != "Booked b-1" {
		t.Errorf("usage %+v, reply %q", got.Status.Usage, got.Status.LastTurn.AssistantText)
	}
}
