package tools

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// clinicServer serves a clinic on loopback and records the Idempotency-Key header of
// every request.
func clinicServer(t *testing.T) (*clinic.Clinic, *flowv1.ToolServer, func() []string) {
	c := clinic.New()
	h := c.Handler()
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if k := r.Header.Get(IdempotencyKeyHeader); k != "" {
			keys = append(keys, k)
		}
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return c, &flowv1.ToolServer{Name: "clinic", URL: srv.URL}, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Compact(slices.Clone(keys))
	}
}

func TestListAndCall(t *testing.T) {
	c, server, headerKeys := clinicServer(t)
	caller := &Caller{}
	ctx := context.Background()
	list, err := caller.List(ctx, "ns", server)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range list {
		names[tl.Name] = true
		if tl.Name == "book_slot" && (tl.Annotations == nil || tl.Annotations.DestructiveHint == nil || !*tl.Annotations.DestructiveHint) {
			t.Errorf("book_slot is not marked destructive")
		}
	}
	if !names["find_doctors"] || !names["book_slot"] {
		t.Fatalf("tools %v", names)
	}
	find, err := caller.CallTool(ctx, "ns", agent.ToolRequest{ID: "t-1-0", Tool: "find", ServerTool: "find_doctors", Server: server,
		Args: map[string]any{"specialty": "cardiology"}, IdempotencyKey: "k-find"})
	if err != nil || find.Error != "" {
		t.Fatalf("find: %v %q", err, find.Error)
	}
	docs := find.Result.(map[string]any)["doctors"].([]any)
	if len(docs) != 1 || docs[0].(map[string]any)["id"] != "dr-lee" {
		t.Fatalf("doctors %v", docs)
	}
	book := agent.ToolRequest{ID: "t-2-0", Tool: "book", ServerTool: "book_slot", Server: server,
		Args: map[string]any{"doctor_id": "dr-lee", "slot": "2026-12-01T09:00"}, IdempotencyKey: "k-book"}
	first, err := caller.CallTool(ctx, "ns", book)
	if err != nil || first.Error != "" {
		t.Fatalf("book: %v %q", err, first.Error)
	}
	again, err := caller.CallTool(ctx, "ns", book)
	if err != nil || again.Error != "" {
		t.Fatalf("book again: %v %q", err, again.Error)
	}
	if c.Bookings() != 1 || first.Result.(map[string]any)["booking_id"] != again.Result.(map[string]any)["booking_id"] {
		t.Fatalf("bookings %d: %v then %v", c.Bookings(), first.Result, again.Result)
	}
	if got := c.BookingKeys(); !slices.Equal(got, []string{"k-book", "k-book"}) {
		t.Errorf("_meta keys %v", got)
	}
	if got := headerKeys(); !slices.Equal(got, []string{"k-find", "k-book"}) {
		t.Errorf("Idempotency-Key headers %v", got)
	}
	// A tool error is the tool's answer, not a transport failure.
	bad := book
	bad.IdempotencyKey, bad.Args = "k-bad", map[string]any{"doctor_id": "dr-nobody", "slot": "x"}
	res, err := caller.CallTool(ctx, "ns", bad)
	if err != nil || res.Error == "" {
		t.Fatalf("bad booking: %v %+v", err, res)
	}
}

func TestUnreachableServerIsTransient(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	_, err := (&Caller{}).CallTool(context.Background(), "ns", agent.ToolRequest{Tool: "x", ServerTool: "x",
		Server: &flowv1.ToolServer{Name: "gone", URL: srv.URL}, IdempotencyKey: "k"})
	if err == nil || agent.ClassOf(err) != agent.Transient {
		t.Fatalf("err %v class %v", err, agent.ClassOf(err))
	}
}
