package controller

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// TestToolCallExactlyOnceAcrossRestart: the clinic holds the first response of
// book_slot while the manager is stopped; a new manager delivers the call again with
// the same key, the clinic books once, and the Session completes once.
func TestToolCallExactlyOnceAcrossRestart(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	c, srv, held := holdingClinic(t)

	first := env.StartManager(t, managerOptions(ns, Options{}))
	p, j := testenv.ClinicBooking(ns, srv.URL)
	create(t, p, j, sessionOf(ns, "s1", "clinic"))

	var key string
	select {
	case key = <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("book_slot was never called")
	}
	if err := first.Stop(); err != nil {
		t.Fatalf("stopping the manager: %v", err)
	}
	s := get(t, ns, "s1", &flowv1.Session{})
	if s.Status.Turn == nil || len(s.Status.Turn.ToolCalls) != 2 || s.Status.Turn.ToolCalls[1].State != flowv1.ToolCallPending {
		t.Fatalf("after the crash the call is not pending in the journal: %+v", s.Status.Turn)
	}
	if got := s.Status.Turn.ToolCalls[1].IdempotencyKey; got != key || !strings.HasPrefix(key, string(s.UID)+"-") {
		t.Fatalf("journaled key %q, delivered key %q", got, key)
	}
	if c.Bookings() != 1 {
		t.Fatalf("bookings %d before the restart", c.Bookings())
	}

	startManager(t, ns, Options{})
	eventually(t, 60*time.Second, func() error {
		s = get(t, ns, "s1", &flowv1.Session{})
		if s.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %s, turn %+v", s.Status.Phase, s.Status.Turn)
		}
		return nil
	})
	keys := c.BookingKeys()
	if c.Bookings() != 1 || len(keys) < 2 || slices.IndexFunc(keys, func(k string) bool { return k != key }) >= 0 {
		t.Fatalf("bookings %d, delivered keys %v (want %q every time)", c.Bookings(), keys, key)
	}
	lt := s.Status.LastTurn
	if lt.AssistantText != "Booked b-1 at 2026-12-01T09:00" || len(lt.ToolCalls) != 2 || lt.ToolCalls[1].State != flowv1.ToolCallDone {
		t.Fatalf("last turn %+v", lt)
	}
	if s.Status.Transitions != 1 || len(s.Status.History) != 1 {
		t.Errorf("transitions %d, history %+v", s.Status.Transitions, s.Status.History)
	}
	if c.Calls("find_doctors") != 1 {
		t.Errorf("find_doctors called %d times", c.Calls("find_doctors"))
	}
}

func TestJourneyDiscoversTools(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	srv := httptest.NewServer(clinic.New().Handler())
	defer srv.Close()
	startManager(t, ns, Options{})
	p, j := testenv.ClinicBooking(ns, srv.URL)
	j.Spec.Tools = append(j.Spec.Tools, flowv1.Tool{Name: "cancel", Server: "clinic", ServerTool: "cancel_booking"})
	create(t, p, j)
	eventually(t, 30*time.Second, func() error {
		j = get(t, ns, "clinic", &flowv1.Journey{})
		c := apimeta.FindStatusCondition(j.Status.Conditions, flowv1.ConditionToolsAvailable)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != flowv1.ReasonToolMissing {
			return fmt.Errorf("ToolsAvailable %+v", c)
		}
		if !strings.Contains(c.Message, `server clinic has no tool "cancel_booking"`) {
			return fmt.Errorf("message %q", c.Message)
		}
		return nil
	})
	got := map[string]flowv1.DiscoveredTool{}
	for _, tl := range j.Status.Tools {
		got[tl.Name] = tl
	}
	if !got["find_doctors"].ReadOnly || got["find_doctors"].Destructive || !got["book_slot"].Destructive || got["book_slot"].Description == "" {
		t.Errorf("discovered %+v", j.Status.Tools)
	}
}

// TestDestructiveToolWaitsForApproval: book_slot, destructive on the server, waits in
// AwaitingApproval with no call; an approval makes exactly one call, a rejection none.
func TestDestructiveToolWaitsForApproval(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	c := clinic.New()
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	startManager(t, ns, Options{})
	p, j := testenv.ClinicBooking(ns, srv.URL)
	j.Spec.Tools[1].Approval = "" // the default, IfDestructive
	create(t, p, j)
	eventually(t, 30*time.Second, func() error {
		j = get(t, ns, "clinic", &flowv1.Journey{})
		if len(j.Status.Tools) != 2 {
			return fmt.Errorf("tools %+v", j.Status.Tools)
		}
		return nil
	})
	create(t, sessionOf(ns, "yes", "clinic"), sessionOf(ns, "no", "clinic"))
	waiting := func(name string) string {
		var id string
		eventually(t, 30*time.Second, func() error {
			s := get(t, ns, name, &flowv1.Session{})
			d := s.Status.PendingDecision()
			if s.Status.Phase != flowv1.PhaseAwaitingApproval || d == nil {
				return fmt.Errorf("phase %s", s.Status.Phase)
			}
			if !strings.Contains(d.Reasoning, "call book_slot") {
				return fmt.Errorf("decision %+v", d)
			}
			id = d.ID
			return nil
		})
		return id
	}
	yes, no := waiting("yes"), waiting("no")
	if c.Calls("book_slot") != 0 {
		t.Fatalf("book_slot called %d times before any approval", c.Calls("book_slot"))
	}
	answer := func(name, id string, ok bool) {
		approve(t, ns, name, flowv1.Approval{DecisionID: id, Approve: ptr.To(ok), By: "alice", Reason: "checked"})
	}
	answer("no", no, false)
	eventually(t, 30*time.Second, func() error {
		s := get(t, ns, "no", &flowv1.Session{})
		if s.Status.LastTurn == nil || len(s.Status.LastTurn.ToolCalls) != 2 || s.Status.LastTurn.ToolCalls[1].State != flowv1.ToolCallRejected {
			return fmt.Errorf("phase %s last turn %+v", s.Status.Phase, s.Status.LastTurn)
		}
		return nil
	})
	if c.Calls("book_slot") != 0 {
		t.Fatalf("a rejected call reached the server")
	}
	answer("yes", yes, true)
	eventually(t, 30*time.Second, func() error {
		s := get(t, ns, "yes", &flowv1.Session{})
		if s.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %s", s.Status.Phase)
		}
		if by := s.Status.LastTurn.ToolCalls[1].ApprovedBy; by != "alice" {
			return fmt.Errorf("approvedBy %q", by)
		}
		return nil
	})
	if c.Calls("book_slot") != 1 || c.Bookings() != 1 {
		t.Fatalf("book_slot calls %d, bookings %d", c.Calls("book_slot"), c.Bookings())
	}
}

// holdingClinic starts a clinic MCP server on loopback that holds the response of the
// first delivery of a side-effecting call (after the effect) until the test ends, and
// sends that delivery's idempotency key on held.
func holdingClinic(t *testing.T) (c *clinic.Clinic, srv *httptest.Server, held <-chan string) {
	t.Helper()
	c = clinic.New()
	keys, release := make(chan string, 1), make(chan struct{})
	var deliveries atomic.Int32
	c.Hold = func(ctx context.Context, key string) {
		if deliveries.Add(1) == 1 {
			keys <- key
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	}
	srv = httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: the held handler returns, then the server closes
	return c, srv, keys
}
