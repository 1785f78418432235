package journeytest

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// TestRecordAndReplayServerTools: a Session calls the clinic MCP server through the
// controller (a read, then an approved booking); with the server stopped, the Session
// replays without divergence and the test recorded from it passes, and the server gets
// no call from either.
func TestRecordAndReplayServerTools(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	env := testenv.New(t)
	k := env.Client
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartManager(t, testenv.ManagerOptions{
		Namespaces: []string{ns},
		Setup:      func(mgr ctrl.Manager) error { return controller.Setup(mgr, controller.Options{}) },
	})
	cl := clinic.New()
	srv := httptest.NewServer(cl.Handler())
	defer srv.Close()

	// The booking waits for a message, finds a doctor of its specialty, and needs an approval.
	p, j := testenv.ClinicBooking(ns, srv.URL+"/mcp")
	p.Spec.RunOn = ""
	p.Spec.Builtin.ToolCalls[0].Args = "{'specialty': message.contains('heart') ? 'cardiology' : 'general'}"
	j.Spec.Tools[1].Approval = flowv1.ToolApprovalAlways
	for _, o := range []client.Object{p, j} {
		if err := k.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Name: "booking", Namespace: ns}, Spec: flowv1.SessionSpec{
		JourneyRef: flowv1.JourneyReference{Name: "clinic"},
		Messages:   []flowv1.Message{{ID: "m1", Text: "I need a heart check."}},
	}}
	if err := k.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(s)
	s = waitSettled(t, k, key)
	if s.Status.Phase != flowv1.PhaseAwaitingApproval || s.Status.LastDecision == nil {
		t.Fatalf("the booking does not wait for an approval: phase %s, turn %+v", s.Status.Phase, s.Status.Turn)
	}
	s.Spec.Approvals = append(s.Spec.Approvals, flowv1.Approval{DecisionID: s.Status.LastDecision.ID, Approve: ptr.To(true), By: "alice"})
	if err := k.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	s = waitSettled(t, k, key)
	lt := s.Status.LastTurn
	if s.Status.Phase != flowv1.PhaseCompleted || lt == nil || lt.AssistantText != "Booked b-1 at 2026-12-01T09:00" ||
		len(lt.ToolCalls) != 2 || lt.ToolCalls[1].ApprovedBy != "alice" {
		t.Fatalf("the Session ended %s with last turn %+v", s.Status.Phase, lt)
	}
	if cl.Calls("find_doctors") != 1 || cl.Bookings() != 1 {
		t.Fatalf("the clinic got %d finds and %d bookings", cl.Calls("find_doctors"), cl.Bookings())
	}

	// The server is gone: nothing below may call it.
	srv.Close()
	calls := cl.Calls("find_doctors") + cl.Calls("book_slot")

	l, err := Fetch(ctx, k, key)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Replay(l)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Step != 0 || rep.Incomplete != nil {
		var out strings.Builder
		rep.Print(&out)
		t.Fatalf("replay of a Session with tool calls:\n%s", out.String())
	}
	if got := rep.Result.Status.LastTurn; got == nil || got.AssistantText != lt.AssistantText || len(got.ToolCalls) != 2 || got.ToolCalls[1].DurationMs != lt.ToolCalls[1].DurationMs {
		t.Fatalf("the replayed last turn %+v differs from the Session's %+v", got, lt)
	}

	rc, notes, r := recordAndRun(t, l)
	raw, _ := Marshal(rc)
	if len(notes) > 0 || r.Failed() {
		t.Fatalf("recorded test: notes %q, %s\n%s", notes, r.Error(), raw)
	}
	for _, want := range []string{"kind: CallTool", "booking_id: b-1", "serverTools:", "find_doctors:", "lastTurn.toolCalls[1].state: Done"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the recorded test lacks %q:\n%s", want, raw)
		}
	}
	if got := r.Status.Context; got == nil || string(got.Raw) != string(s.Status.Context.Raw) {
		t.Errorf("the recorded test ends with context %s, the Session with %s", got.Raw, s.Status.Context.Raw)
	}
	if n := cl.Calls("find_doctors") + cl.Calls("book_slot"); n != calls {
		t.Errorf("replay and the recorded test called the server %d times", n-calls)
	}

	// The replay does check the tool calls: a Session whose last turn names another
	// approver diverges from what the journal replays.
	changed := *l
	changed.Session = l.Session.DeepCopy()
	changed.Session.Status.LastTurn.ToolCalls[1].ApprovedBy = "mallory"
	if rep, err := Replay(&changed); err != nil || rep.Step == 0 || !strings.Contains(rep.Detail, "status.lastTurn.toolCalls") {
		t.Fatalf("a changed tool call replays without divergence: %v, %+v", err, rep)
	}
	// A journaled answer only answers the same call: other arguments find none.
	changed.Session = l.Session.DeepCopy()
	changed.Session.Spec.Messages[0].Text = "I need a skin check."
	if rep, err := Replay(&changed); err != nil || rep.Step != 2 || !strings.Contains(rep.Detail, "makes a tool call (CallTool of tool find_doctors) the Session never made") {
		t.Fatalf("a call with other arguments was answered from the journal: %v, %+v", err, rep)
	}
}
