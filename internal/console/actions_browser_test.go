package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// stuckSession creates, in ns, the journey "capped" (one pathway that answers every
// message, at most one turn) when missing, and a Session of it sent two messages: the
// second stalls it on maxTurns.
func (c *cluster) stuckSession(t *testing.T, ns, name string) *flowv1.Session {
	t.Helper()
	ctx := context.Background()
	if err := c.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "capped"}, &flowv1.Journey{}); err != nil {
		for _, obj := range []client.Object{
			&flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"}, Spec: flowv1.PathwaySpec{
				Builtin: &flowv1.BuiltinPathway{Reply: "noted", Complete: "false"}}},
			&flowv1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "capped"}, Spec: flowv1.JourneySpec{
				EntryPathway: "chat", Pathways: []flowv1.PathwayEntry{{Name: "chat", PathwayRef: "chat"}},
				Limits: flowv1.Limits{MaxTurns: 1}}},
		} {
			if err := c.admin.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for j := (&flowv1.Journey{}); j.Status.ReadyRevision == ""; time.Sleep(50 * time.Millisecond) {
			if err := c.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "capped"}, j); err != nil || time.Now().After(deadline) {
				t.Fatalf("journey capped not ready: %v %v", err, j.Status.Issues)
			}
		}
	}
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: flowv1.SessionSpec{
		JourneyRef: flowv1.JourneyReference{Name: "capped"},
		Messages:   []flowv1.Message{{ID: "m-1", Text: "hello"}, {ID: "m-2", Text: "and again"}},
	}}
	if err := c.admin.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	return c.waitSession(t, ns, name, "stalled by maxTurns", func(s *flowv1.Session) bool {
		st := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionStalled)
		return st != nil && st.Status == metav1.ConditionTrue && st.Reason == flowv1.ReasonTurnLimit
	})
}

// failedSession creates, in ns, the journey "doomed" (its entry pathway fails and a
// failure closes the journey) when missing, and a Session of it; it waits until the
// Session has Failed.
func (c *cluster) failedSession(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if err := c.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "doomed"}, &flowv1.Journey{}); err != nil {
		for _, obj := range []client.Object{
			&flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed"}, Spec: flowv1.PathwaySpec{
				RunOn: flowv1.RunOnEntry, Builtin: &flowv1.BuiltinPathway{Reply: "sorry", Outcome: `"failure"`},
				Transitions: &flowv1.OutcomeTransitions{OnFailure: &flowv1.OutcomeTransition{Action: flowv1.ActionClose}}}},
			&flowv1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed"}, Spec: flowv1.JourneySpec{
				EntryPathway: "doomed", Pathways: []flowv1.PathwayEntry{{Name: "doomed", PathwayRef: "doomed"}}}},
		} {
			if err := c.admin.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "doomed"}}}
	if err := c.admin.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	c.waitSession(t, ns, name, "failed", func(s *flowv1.Session) bool { return s.Status.Phase == flowv1.PhaseFailed })
}

// A blocked Session's page says why, marks its failed turn, and offers Resume, Retry
// and Cancel, which act as the user through the real controller.
func TestConsoleActsOnBlockedSession(t *testing.T) {
	c := setup(t)
	ctx := browser(t)
	s := c.stuckSession(t, "team-a", "stuck")
	tf := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionTurnFailed)
	if tf == nil || tf.Status != metav1.ConditionTrue {
		t.Fatalf("a turn stopped by maxTurns did not set TurnFailed: %+v", s.Status.Conditions)
	}

	visit(t, ctx, c.url+"sessions/team-a/stuck")
	waitFor(t, ctx, "the page says the Session is blocked and offers the actions",
		`!!document.querySelector("#blocked button[value=Resume]") && !!document.querySelector("#blocked button[value=Retry]") && !!document.querySelector("#blocked button[value=Cancel]")`)
	if text := eval[string](t, ctx, `document.getElementById("blocked").textContent`); !strings.Contains(text, flowv1.ReasonTurnLimit) {
		t.Errorf("the Blocked section does not say why:\n%s", text)
	}
	if text := eval[string](t, ctx, `document.getElementById("turn-failed").textContent`); !strings.Contains(text, "The last turn failed") || !strings.Contains(text, tf.Reason) {
		t.Errorf("the failed turn is marked %q; want its reason %s", text, tf.Reason)
	}
	screenshot(t, ctx, "session-blocked")

	// maxTurns is used up: the controller refuses a Resume without higher limits, and
	// the page shows why.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`#blocked textarea[name=reason]`), "one more turn is fine"),
		chromedp.Click(chromedp.CSS(`#blocked button[value=Resume]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the resume is confirmed", `!!document.querySelector(".flash") && document.querySelector(".flash").textContent.includes("intervention i-1 (Resume) sent")`)
	got := c.waitSession(t, "team-a", "stuck", "the Resume processed", func(s *flowv1.Session) bool { return s.Status.ProcessedInterventions == 1 })
	if len(got.Spec.Interventions) != 1 {
		t.Fatalf("interventions %+v; want the Resume", got.Spec.Interventions)
	}
	if i := got.Spec.Interventions[0]; i.Action != flowv1.InterventionResume || i.Reason != "one more turn is fine" {
		t.Errorf("intervention %+v", i)
	}
	visit(t, ctx, c.url+"sessions/team-a/stuck")
	waitFor(t, ctx, "the refusal is shown", `document.getElementById("interventions").textContent.includes("refused: maxTurns 1 is used up")`)

	// Out of the console's namespaces: refused, nothing sent.
	refused := eval[string](t, ctx, `(async () => {
		const body = new URLSearchParams({csrf: document.querySelector("input[name=csrf]").value, action: "Cancel"});
		const r = await fetch("/sessions/team-b/pl-hidden/actions", {method: "POST", body});
		return r.status + " " + (await r.text());
	})()`)
	if !strings.Contains(refused, "404 ") || !strings.Contains(refused, "not shown") {
		t.Errorf("acting in team-b: %.300s", refused)
	}

	// Cancel ends it, through the real controller.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#blocked button[value=Cancel]`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the cancel is confirmed", `!!document.querySelector(".flash") && document.querySelector(".flash").textContent.includes("cancelled")`)
	c.waitSession(t, "team-a", "stuck", "cancelled", func(s *flowv1.Session) bool { return s.Status.Phase == flowv1.PhaseCancelled })
	visit(t, ctx, c.url+"sessions/team-a/stuck")
	waitFor(t, ctx, "a cancelled Session offers no actions", `document.getElementById("phase").textContent === "Cancelled" && !document.getElementById("blocked")`)

	// A failed Session: Resume lets it wait for input again.
	c.failedSession(t, "team-a", "lost")
	visit(t, ctx, c.url+"sessions/team-a/lost")
	waitFor(t, ctx, "a failed Session offers Resume and Retry, not Cancel",
		`!!document.querySelector("#blocked button[value=Resume]") && !document.querySelector("#blocked button[value=Cancel]")`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#blocked button[value=Resume]`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the resume is confirmed", `!!document.querySelector(".flash") && document.querySelector(".flash").textContent.includes("(Resume) sent")`)
	c.waitSession(t, "team-a", "lost", "resumed", func(s *flowv1.Session) bool {
		return s.Status.ProcessedInterventions == 1 && s.Status.Phase == flowv1.PhaseWaitingForInput
	})
	visit(t, ctx, c.url+"sessions/team-a/lost")
	waitFor(t, ctx, "the resumed Session is no longer blocked", `document.getElementById("phase").textContent === "WaitingForInput" && !document.getElementById("blocked")`)
}
