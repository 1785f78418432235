package controller

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
	"github.com/journeyops/journey-operator/internal/tracing"
)

// TestToolCallsTraced: each tool call of a traced Session is an `execute_tool {tool}`
// span in the Session's trace with the call's idempotency key, and the MCP server
// receives the traceparent of that trace with the call.
func TestToolCallsTraced(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	var mu sync.Mutex
	var parents []string
	c := clinic.New()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tp := r.Header.Get("traceparent"); tp != "" {
			mu.Lock()
			parents = append(parents, tp)
			mu.Unlock()
		}
		c.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	startManager(t, ns, Options{Tracing: tracing.NewWithProcessor(rec, false)})
	p, j := testenv.ClinicBooking(ns, srv.URL)
	create(t, p, j, sessionOf(ns, "traced", "clinic"))
	var s *flowv1.Session
	eventually(t, 60*time.Second, func() error {
		s = get(t, ns, "traced", &flowv1.Session{})
		if s.Status.Phase != flowv1.PhaseCompleted || s.Status.TraceContext == nil {
			return fmt.Errorf("phase %s, trace context %v", s.Status.Phase, s.Status.TraceContext)
		}
		return nil
	})
	traceID := s.Status.TraceContext.TraceID

	keys := map[string]string{}
	for _, sp := range rec.Ended() {
		tool, ok := strings.CutPrefix(sp.Name(), "execute_tool ")
		if !ok {
			continue
		}
		if got := sp.SpanContext().TraceID().String(); got != traceID {
			t.Errorf("span %s in trace %s, want the Session's %s", sp.Name(), got, traceID)
		}
		for _, a := range sp.Attributes() {
			if a.Key == tracing.AttrToolIdempotencyKey {
				keys[tool] = a.Value.AsString()
			}
		}
	}
	for _, tool := range []string{"find_doctors", "book_slot"} {
		if k := keys[tool]; !strings.HasPrefix(k, string(s.UID)+"-") {
			t.Errorf("execute_tool %s: idempotency key %q, want one derived from the Session UID (spans: %v)", tool, k, keys)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if len(parents) < 2 {
		t.Fatalf("the MCP server received %d requests with a traceparent, want the two calls' at least", len(parents))
	}
	prop := propagation.TraceContext{}
	for _, tp := range parents {
		sc := trace.SpanContextFromContext(prop.Extract(t.Context(), propagation.MapCarrier{"traceparent": tp}))
		if sc.TraceID().String() != traceID {
			t.Errorf("traceparent %s is not in the Session's trace %s", tp, traceID)
		}
	}
}
