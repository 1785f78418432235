package tracing

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// receiver is an OTLP/HTTP trace receiver: it decodes the protobuf export requests.
type receiver struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a protobuf POST to /v1/traces", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				rc.services = append(rc.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			rc.spans = append(rc.spans, ss.GetSpans()...)
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// TestOTLPHTTPExport sends a Session's step, with a chat span under it, over real
// OTLP/HTTP to a receiver found through OTEL_EXPORTER_OTLP_ENDPOINT.
func TestOTLPHTTPExport(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "journey-operator-test")
	p, err := New(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: "ns", UID: "uid-1"}}
	s.Spec.JourneyRef.Name = "triage"
	ctx, st := p.Begin(context.Background(), s)
	_, chat := StartChat(ctx, "test-model")
	EndChat(chat, ChatUsage{InputTokens: 120, OutputTokens: 30}, nil, "")
	status := &flowv1.SessionStatus{Step: 1, Phase: flowv1.PhaseRunning, CurrentPathway: "intake"}
	st.Result(Result{Status: status, Changed: true, Outcome: "Performed", Effect: "ClassifyIntent"})
	st.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	byName := map[string]*tracepb.Span{}
	for _, sp := range rc.spans {
		byName[sp.GetName()] = sp
		if got := hex.EncodeToString(sp.GetTraceId()); got != status.TraceContext.TraceID {
			t.Errorf("span %s in trace %s, want the Session's %s", sp.GetName(), got, status.TraceContext.TraceID)
		}
	}
	root, step, chatSpan := byName["session s1"], byName["step triage"], byName["chat test-model"]
	if len(rc.spans) != 3 || root == nil || step == nil || chatSpan == nil {
		t.Fatalf("received %d spans %v: want the root, the step and the chat span", len(rc.spans), keys(byName))
	}
	if hex.EncodeToString(root.GetSpanId()) != status.TraceContext.SpanID || len(root.GetParentSpanId()) != 0 {
		t.Errorf("root span %x parent %x: want %s, no parent", root.GetSpanId(), root.GetParentSpanId(), status.TraceContext.SpanID)
	}
	if string(step.GetParentSpanId()) != string(root.GetSpanId()) || string(chatSpan.GetParentSpanId()) != string(step.GetSpanId()) {
		t.Errorf("parents: step %x (root %x), chat %x (step %x)", step.GetParentSpanId(), root.GetSpanId(), chatSpan.GetParentSpanId(), step.GetSpanId())
	}
	if len(rc.services) == 0 || rc.services[0] != "journey-operator-test" {
		t.Errorf("service names %v, want OTEL_SERVICE_NAME's", rc.services)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
