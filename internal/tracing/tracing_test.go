package tracing

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestNilProviderTracesNothing: without --tracing nothing is started, stamped or
// recorded, and requests go out without a traceparent.
func TestNilProviderTracesNothing(t *testing.T) {
	var p *Provider
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "u1"}}
	ctx, st := p.Begin(context.Background(), s)
	if st != nil || From(ctx) != nil || trace.SpanContextFromContext(ctx).IsValid() {
		t.Fatalf("a nil provider began a step: %v %v", st, trace.SpanContextFromContext(ctx))
	}
	status := &flowv1.SessionStatus{Step: 1}
	st.Result(Result{Status: status, Changed: true, Outcome: "Changed"})
	st.End()
	if status.TraceContext != nil {
		t.Errorf("status stamped without tracing: %+v", status.TraceContext)
	}
	if _, span := StartChat(ctx, "m"); span.IsRecording() {
		t.Error("a chat span records without tracing")
	}
	if _, span := StartTool(ctx, "t", "k", ""); span.IsRecording() {
		t.Error("a tool span records without tracing")
	}
}

// TestExecuteToolSpan: the hook a tool performer calls makes an execute_tool span
// under the step, with the tool, idempotency key and approval, the arguments and result
// only with content capture, and the error's class.
func TestExecuteToolSpan(t *testing.T) {
	for _, content := range []bool{false, true} {
		rec := tracetest.NewSpanRecorder()
		p := NewWithProcessor(rec, content)
		s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "u1"}}
		ctx, _ := p.Begin(context.Background(), s)
		step := trace.SpanContextFromContext(ctx)
		tctx, span := StartTool(ctx, "lookup_patient", "u1/4/lookup", "approved by alice")
		if got := trace.SpanContextFromContext(tctx); got.SpanID() == step.SpanID() || got.TraceID() != step.TraceID() {
			t.Fatalf("tool context %v: want a child span of the step %v", got, step)
		}
		ToolContent(tctx, span, `{"patient":"Jane Roe"}`, `{"found":true}`)
		EndTool(span, errors.New("server said no"), "Transient")

		ended := rec.Ended()
		if len(ended) != 1 {
			t.Fatalf("%d spans, want 1", len(ended))
		}
		got := ended[0]
		a := attrs(got.Attributes())
		if got.Name() != "execute_tool lookup_patient" || got.Parent().SpanID() != step.SpanID() {
			t.Errorf("span %q parent %v: want execute_tool lookup_patient under the step", got.Name(), got.Parent().SpanID())
		}
		for k, want := range map[attribute.Key]string{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_patient",
			AttrToolIdempotencyKey: "u1/4/lookup", AttrToolApproval: "approved by alice", AttrErrorClass: "Transient",
		} {
			if a[k].AsString() != want {
				t.Errorf("%s = %q, want %q", k, a[k].AsString(), want)
			}
		}
		if got.Status().Code != codes.Error {
			t.Errorf("status %v, want Error", got.Status())
		}
		_, hasArgs := a["gen_ai.tool.call.arguments"]
		if hasArgs != content || (content && !strings.Contains(a["gen_ai.tool.call.arguments"].AsString(), "Jane Roe")) {
			t.Errorf("content %v: arguments recorded %v (%v)", content, hasArgs, a["gen_ai.tool.call.arguments"])
		}
	}
}

// TestPropagation: a request made under a span carries its traceparent; one without,
// none; the caller's request is not changed.
func TestPropagation(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("traceparent"))
		mu.Unlock()
	}))
	defer srv.Close()
	p := NewWithProcessor(tracetest.NewSpanRecorder(), false)
	ctx, span := p.tracer.Start(context.Background(), "parent")
	defer span.End()
	c := HTTPClient(nil)
	for _, rctx := range []context.Context{ctx, context.Background()} {
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if req.Header.Get("traceparent") != "" {
			t.Error("the caller's request was changed")
		}
	}
	sc := span.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if len(got) != 2 || got[0] != want || got[1] != "" {
		t.Errorf("traceparents %q, want [%s, none]", got, want)
	}
}

// blockingExporter blocks every export until release is closed.
type blockingExporter struct{ release chan struct{} }

func (e blockingExporter) ExportSpans(ctx context.Context, _ []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
	}
	return nil
}
func (blockingExporter) Shutdown(context.Context) error { return nil }

// TestFullQueueDropsAndCounts: with the exporter stuck, ending spans never waits; what
// the bounded queue cannot hold is dropped and counted.
func TestFullQueueDropsAndCounts(t *testing.T) {
	exp := blockingExporter{release: make(chan struct{})}
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped_test"})
	p, err := New(context.Background(), Options{Exporter: exp, QueueSize: 4, Dropped: dropped})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for range n {
		_, span := p.tracer.Start(context.Background(), "s")
		span.End() // would hang here if a full queue blocked
	}
	// At most: the queue (4), the one the feeder holds, the batch processor's queue
	// (4) and one batch in the exporter (up to 4).
	if got := counterValue(t, dropped); got < n-13 || got > n {
		t.Errorf("dropped %v of %d spans, want all but at most 13", got, n)
	}
	close(exp.release)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}
