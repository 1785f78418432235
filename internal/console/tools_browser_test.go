package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// elicitingDesk is a go-sdk MCP server whose tool register asks the user to fill in
// a form before it acts, and keeps the answers it was given.
type elicitingDesk struct {
	mu      sync.Mutex
	answers []*mcp.ElicitResult
}

func (d *elicitingDesk) seen() []*mcp.ElicitResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*mcp.ElicitResult(nil), d.answers...)
}

func newElicitingDesk(t *testing.T) (*elicitingDesk, string) {
	d := &elicitingDesk{}
	server := mcp.NewServer(&mcp.Implementation{Name: "desk"}, nil)
	ask := &mcp.ElicitParams{Message: "Who is the appointment for?", RequestedSchema: map[string]any{
		"type": "object", "required": []any{"name"},
		"properties": map[string]any{
			"name": map[string]any{"type": "string"},
			"age":  map[string]any{"type": "integer"},
			"plan": map[string]any{"type": "string", "enum": []any{"basic", "plus"}},
		},
	}}
	server.AddTool(&mcp.Tool{Name: "register", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.Elicit(ctx, ask)
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no answer: " + err.Error()}}}, nil
			}
			d.mu.Lock()
			d.answers = append(d.answers, res)
			d.mu.Unlock()
			return &mcp.CallToolResult{StructuredContent: map[string]any{"registered": res.Action == "accept", "for": res.Content}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	return d, srv.URL
}

// TestConsoleAnswersAToolServersQuestion: a tool server asks the user to fill in a
// form during a call; the Session page shows the question and the form's fields, a
// wrong value is refused with the field named and nothing sent, and the filled-in
// form reaches the server once, typed as its schema asks, recorded as ann's answer.
func TestConsoleAnswersAToolServersQuestion(t *testing.T) {
	c := setup(t)
	ctx := browser(t)
	const ns = "team-a"
	desk, url := newElicitingDesk(t)
	p := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "desk-work"}, Spec: flowv1.PathwaySpec{
		RunOn: flowv1.RunOnEntry, Tools: []flowv1.ToolName{"register"},
		Builtin: &flowv1.BuiltinPathway{Reply: "done", ToolCalls: []flowv1.BuiltinToolCall{{Tool: "register", Args: "{}"}},
			Outputs: []flowv1.BuiltinOutput{{Name: "register", Expression: "tools.register"}}},
		Accumulate: []string{"register"},
	}}
	j := &flowv1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "desk"}, Spec: flowv1.JourneySpec{
		EntryPathway: "work", Pathways: []flowv1.PathwayEntry{{Name: "work", PathwayRef: "desk-work"}},
		ToolServers: []flowv1.ToolServer{{Name: "desk", URL: url, Timeout: &metav1.Duration{Duration: 30 * time.Second}}},
		Tools:       []flowv1.Tool{{Name: "register", Server: "desk", Approval: flowv1.ToolApprovalNever}},
	}}
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "patient"}, Spec: flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "desk"}}}
	for _, o := range []client.Object{p, j, s} {
		if err := c.admin.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
	waiting := c.waitSession(t, ns, "patient", "waiting for the form", func(s *flowv1.Session) bool {
		for range s.Status.AnswerableToolCalls() {
			return true
		}
		return false
	})
	call := waiting.Status.Turn.ToolCalls[0].ID
	form := "#ask-" + call

	visit(t, ctx, c.url+"sessions/"+ns+"/patient")
	waitFor(t, ctx, "the question and its fields are shown", `!!document.querySelector("`+form+` q.asks") && document.querySelectorAll("`+form+` [name^='field.']").length === 3`)
	if q := eval[string](t, ctx, `document.querySelector("`+form+` q.asks").textContent`); q != "Who is the appointment for?" {
		t.Errorf("the page asks %q", q)
	}
	if state := eval[string](t, ctx, `document.querySelector("#tool-`+call+` .state").textContent`); state != "AwaitingInput (asks: Who is the appointment for?)" {
		t.Errorf("the call's state reads %q", state)
	}
	screenshot(t, ctx, "session-asks")

	// A wrong value: refused by the plugin's check of the schema, the field named.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(form+` input[name="field.name"]`), "Ada Lovelace"),
		chromedp.SendKeys(chromedp.CSS(form+` input[name="field.age"]`), "old"),
		chromedp.Click(chromedp.CSS(form+` button[value=Accept]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the wrong value is refused", `!!document.querySelector(".error") && document.querySelector(".error").textContent.includes('field "age" must be an integer')`)
	if got := c.waitSession(t, ns, "patient", "unchanged", func(*flowv1.Session) bool { return true }); len(got.Spec.Interventions) != 0 {
		t.Fatalf("a refused answer was stored: %+v", got.Spec.Interventions)
	}

	visit(t, ctx, c.url+"sessions/"+ns+"/patient")
	waitFor(t, ctx, "the form is offered again", `!!document.querySelector("`+form+` input[name='field.age']")`)
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(form+` input[name="field.name"]`), "Ada Lovelace"),
		chromedp.SendKeys(chromedp.CSS(form+` input[name="field.age"]`), "36"),
		chromedp.SetValue(chromedp.CSS(form+` select[name="field.plan"]`), "plus"),
		chromedp.Click(chromedp.CSS(form+` button[value=Accept]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the answer is confirmed", `!!document.querySelector(".flash") && document.querySelector(".flash").textContent.includes("(Answer Accept to `+call+`) sent")`)
	got := c.waitSession(t, ns, "patient", "completed with the answer", func(s *flowv1.Session) bool { return s.Status.Phase == flowv1.PhaseCompleted })
	answers := desk.seen()
	if len(answers) != 1 || answers[0].Action != "accept" || answers[0].Content["name"] != "Ada Lovelace" || answers[0].Content["age"] != float64(36) || answers[0].Content["plan"] != "plus" {
		t.Fatalf("the server got %+v; want the filled-in form once", answers)
	}
	if len(got.Spec.Interventions) != 1 {
		t.Fatalf("interventions %+v; want the answer", got.Spec.Interventions)
	}
	if iv := got.Spec.Interventions[0]; iv.Action != flowv1.InterventionAnswer || iv.Outcome != flowv1.AnswerAccept || iv.Call != call || iv.By != "ann" {
		t.Errorf("intervention %+v; want ann's Accept of %s", iv, call)
	}
	visit(t, ctx, c.url+"sessions/"+ns+"/patient")
	waitFor(t, ctx, "nothing waits for an answer any more", `document.getElementById("phase").textContent === "Completed" && !document.getElementById("asks")`)
}
