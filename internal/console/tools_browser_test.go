package console_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// clinicJourney creates, in ns, a journey that finds a cardiologist and books the
// first free slot through the clinic MCP server at url; booking needs an approval.
func (c *cluster) clinicJourney(t *testing.T, ns, url string) {
	t.Helper()
	p, j := testenv.ClinicBooking(ns, url)
	p.Spec.RunOn = ""
	j.Spec.Tools[1].Approval = flowv1.ToolApprovalAlways
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "heart"}, Spec: flowv1.SessionSpec{
		JourneyRef: flowv1.JourneyReference{Name: "clinic"},
		Messages:   []flowv1.Message{{ID: "m1", Text: "I need a heart check."}},
	}}
	for _, o := range []client.Object{p, j, s} {
		if err := c.admin.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
}

// TestConsoleShowsToolCalls: the Session page lists a Session's tool calls with their
// state and duration, and shows a tool call waiting for approval; ann approves it on
// the Approvals page, the call is made once, and the page shows who approved it.
func TestConsoleShowsToolCalls(t *testing.T) {
	c := setup(t)
	ctx := browser(t)
	// In team-a, where ann approves; it runs after the other browser tests, which
	// count team-a's journeys and decisions.
	const ns = "team-a"
	cl := clinic.New()
	srv := httptest.NewServer(cl.Handler())
	defer srv.Close()
	c.clinicJourney(t, ns, srv.URL+"/mcp")
	c.waitSession(t, ns, "heart", "waiting for the booking's approval", awaiting)

	visit(t, ctx, c.url+"sessions/"+ns+"/heart")
	waitFor(t, ctx, "the tool calls are listed", `document.querySelectorAll("#tool-calls tbody tr").length === 2`)
	rows := eval[[]string](t, ctx, `[...document.querySelectorAll("#tool-calls tbody tr")].map(r => r.innerText.replace(/\s+/g, " ").trim())`)
	if !strings.Contains(rows[0], "book find_doctors") || !strings.Contains(rows[0], "Done") || !strings.Contains(rows[0], "ms") {
		t.Errorf("find_doctors row %q; want its tool, Done and its duration", rows[0])
	}
	if !strings.Contains(rows[1], "book_slot") || !strings.Contains(rows[1], "Pending (awaiting approval)") || !strings.Contains(rows[1], `"doctor_id":"dr-lee"`) {
		t.Errorf("book_slot row %q; want it pending approval with its arguments", rows[1])
	}
	pending := eval[string](t, ctx, `document.getElementById("pending-tool").textContent`)
	if !strings.Contains(pending, "of tool book_slot") || !strings.Contains(pending, "dr-lee") {
		t.Errorf("the pending approval reads %q", pending)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll(".timeline .item-tool").length`); n != 2 {
		t.Errorf("the timeline has %d tool calls; want 2", n)
	}
	screenshot(t, ctx, "session-tools")
	if cl.Bookings() != 0 {
		t.Fatalf("the clinic booked %d slots before the approval", cl.Bookings())
	}

	visit(t, ctx, c.url+"approvals")
	card := "#approval-" + ns + "-heart"
	waitFor(t, ctx, "the tool call is listed", `!!document.querySelector("`+card+`") && document.querySelector("`+card+`").innerText.includes("book_slot")`)
	screenshot(t, ctx, "approvals-tool")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(card+` button[value=approve]`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the approval is confirmed", `!!document.querySelector(".flash") && document.querySelector(".flash").textContent.includes("approved")`)
	c.waitSession(t, ns, "heart", "completed after the approval", func(s *flowv1.Session) bool { return s.Status.Phase == flowv1.PhaseCompleted })

	visit(t, ctx, c.url+"sessions/"+ns+"/heart")
	waitFor(t, ctx, "the booking is done", `document.querySelector("#tool-calls tbody tr:nth-child(2)").dataset.state === "Done"`)
	if by := eval[string](t, ctx, `document.querySelector("#tool-calls tbody tr:nth-child(2) .by").textContent`); by != "ann" {
		t.Errorf("the booking was approved by %q; want ann", by)
	}
	if cl.Bookings() != 1 {
		t.Errorf("the clinic booked %d slots; want 1", cl.Bookings())
	}
}
