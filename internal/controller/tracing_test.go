package controller

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tracing"
)

const (
	traceM1 = "Hi, I need to book an appointment with a cardiologist. Here's my referral."
	traceM2 = "I'm wondering about the process"
)

// processed waits until the Session has processed n messages.
func processed(t *testing.T, ns, name string, n int32) *flowv1.Session {
	t.Helper()
	return settled(t, ns, name, func(s *flowv1.Session) error {
		if s.Status.ProcessedMessages < n {
			return fmt.Errorf("processed %d", s.Status.ProcessedMessages)
		}
		return nil
	})
}

// TestSessionTrace runs the healthcare sample with an openai classifier, the manager
// stopped and a new one (a new process: its own trace provider) started between the
// two messages. The Session is one trace: its id is the one in status, every status
// write is a span under the Session's root span covering the steps it carried, every
// model call a chat span with the usage the server returned, every request the server
// received carries a traceparent of the trace, a journaled answer names the span that
// obtained and applied it, and without content capture no attribute holds the user's
// text or the API key.
func TestSessionTrace(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cs := newChatServer(t, faqClassifier)
	recBefore, recAfter := tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()
	first := startManager(t, ns, Options{Tracing: tracing.NewWithProcessor(recBefore, false)})
	s := withOpenAITriage(t, ns, cs)
	create(t, s)
	send(t, ns, s.Name, "m1", traceM1)
	before := processed(t, ns, s.Name, 1)
	// Stopping the manager ends its trace provider: a span ended after that is dropped.
	stepSpanEnded(t, recBefore, before.Status.Step)
	if err := first.Stop(); err != nil {
		t.Errorf("manager: %v", err)
	}
	startManager(t, ns, Options{Tracing: tracing.NewWithProcessor(recAfter, false)})
	send(t, ns, s.Name, "m2", traceM2)
	got := processed(t, ns, s.Name, 2)
	stepSpanEnded(t, recAfter, got.Status.Step)

	tc := got.Status.TraceContext
	if tc == nil || before.Status.TraceContext == nil || *before.Status.TraceContext != *tc {
		t.Fatalf("trace context %+v before the restart, %+v after: want one, kept", before.Status.TraceContext, tc)
	}
	if len(recAfter.Ended()) == 0 {
		t.Fatal("the restarted manager recorded no spans")
	}
	spans := append(recBefore.Ended(), recAfter.Ended()...)
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		byID[sp.SpanContext().SpanID()] = sp
		if sp.SpanContext().TraceID().String() != tc.TraceID {
			t.Errorf("span %s in trace %s, want the Session's %s", sp.Name(), sp.SpanContext().TraceID(), tc.TraceID)
		}
		noSecrets(t, sp)
	}
	checkSteps(t, spans, got, tc)
	checkChats(t, spans, byID, cs)
	checkJournalLinks(t, spans, got)
}

// stepSpanEnded waits until rec holds the ended span of the status write that carried
// the Session to step: a step's span ends once its status is written, so the span of
// the last write may still be open when the status is seen.
func stepSpanEnded(t *testing.T, rec *tracetest.SpanRecorder, step int64) {
	t.Helper()
	eventually(t, 10*time.Second, func() error {
		for _, sp := range rec.Ended() {
			if strings.HasPrefix(sp.Name(), "step ") && attrsOf(sp)["journey.step"] == strconv.FormatInt(step, 10) {
				return nil
			}
		}
		return fmt.Errorf("the span of step %d has not ended", step)
	})
}

// noSecrets fails when an attribute of sp, or of its events, holds the user's text or
// the API key.
func noSecrets(t *testing.T, sp sdktrace.ReadOnlySpan) {
	t.Helper()
	all := slices.Clone(sp.Attributes())
	for _, e := range sp.Events() {
		all = append(all, e.Attributes...)
	}
	for _, kv := range all {
		v := kv.Value.String()
		for _, secret := range []string{traceM1, traceM2, "cardiologist", "wondering", "sk-test-123"} {
			if strings.Contains(v, secret) {
				t.Errorf("span %s attribute %s holds %q", sp.Name(), kv.Key, secret)
			}
		}
	}
}

// checkSteps: one root span, the one in status; one span per status write under it,
// covering the engine steps the write carried: every step is covered once.
func checkSteps(t *testing.T, spans []sdktrace.ReadOnlySpan, s *flowv1.Session, tc *flowv1.TraceContext) {
	t.Helper()
	var roots, steps []sdktrace.ReadOnlySpan
	for _, sp := range spans {
		switch {
		case sp.Name() == "session "+s.Name:
			roots = append(roots, sp)
		case strings.HasPrefix(sp.Name(), "step "):
			steps = append(steps, sp)
		}
	}
	if len(roots) != 1 || roots[0].SpanContext().SpanID().String() != tc.SpanID || roots[0].Parent().IsValid() {
		t.Fatalf("%d root spans, want one, without parent, with span id %s", len(roots), tc.SpanID)
	}
	numbers := map[int64]int{}
	for _, sp := range steps {
		if sp.Parent().SpanID().String() != tc.SpanID {
			t.Errorf("step span %v: parent %v, want the root span", sp.SpanContext().SpanID(), sp.Parent().SpanID())
		}
		a := attrsOf(sp)
		// A span covers the engine steps its write carried.
		for n := mustInt(t, a["journey.step.before"]) + 1; n <= mustInt(t, a["journey.step"]); n++ {
			numbers[n]++
		}
		if a["journey.session.name"] != s.Name || a["journey.pathway"] == "" || a["journey.phase"] == "" {
			t.Errorf("step span attributes %v", a)
		}
	}
	for n := int64(1); n <= s.Status.Step; n++ {
		if numbers[n] != 1 {
			t.Errorf("step %d has %d spans, want 1 (spans per step: %v)", n, numbers[n], numbers)
		}
	}
	if len(numbers) != int(s.Status.Step) {
		t.Errorf("spans for steps %v, want 1..%d", numbers, s.Status.Step)
	}
}

// checkChats: one chat span per request the server answered, under a step span, with
// its usage; every request carries the traceparent of its chat span.
func checkChats(t *testing.T, spans []sdktrace.ReadOnlySpan, byID map[trace.SpanID]sdktrace.ReadOnlySpan, cs *testenv.ChatServer) {
	t.Helper()
	chats := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		if sp.Name() != "chat test-model" {
			continue
		}
		chats[sp.SpanContext().SpanID().String()] = sp
		a := attrsOf(sp)
		if a["gen_ai.operation.name"] != "chat" || a["gen_ai.request.model"] != "test-model" ||
			a["gen_ai.usage.input_tokens"] != "120" || a["gen_ai.usage.output_tokens"] != "30" || a["journey.usage.cost_usd"] == "0" {
			t.Errorf("chat span attributes %v: want chat, test-model, 120 and 30 tokens, a cost", a)
		}
		if p, ok := byID[sp.Parent().SpanID()]; !ok || !strings.HasPrefix(p.Name(), "step ") {
			t.Errorf("chat span parent %v: want a recorded step span", sp.Parent().SpanID())
		}
	}
	reqs := cs.Requests()
	if len(reqs) < 2 || len(chats) != len(reqs) {
		t.Errorf("%d chat spans for %d requests, want one each (at least 2)", len(chats), len(reqs))
	}
	for _, r := range reqs {
		parts := strings.Split(r.Header.Get("traceparent"), "-")
		if len(parts) != 4 || chats[parts[2]] == nil || parts[1] != chats[parts[2]].SpanContext().TraceID().String() {
			t.Errorf("request %d traceparent %q: want one naming a chat span of the trace", r.N, r.Header.Get("traceparent"))
		}
	}
}

// checkJournalLinks: each journaled answer names the step span that obtained it,
// whose write carried the answer's step; the write applied it too (one write per
// model call), so no later step links back to it.
func checkJournalLinks(t *testing.T, spans []sdktrace.ReadOnlySpan, s *flowv1.Session) {
	t.Helper()
	linked := map[string]bool{}
	steps := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		if strings.HasPrefix(sp.Name(), "step ") {
			steps[sp.SpanContext().SpanID().String()] = sp
			for _, l := range sp.Links() {
				linked[l.SpanContext.SpanID().String()] = true
			}
		}
	}
	if len(s.Status.Journal) < 2 {
		t.Fatalf("journal %+v: want the two classifications", s.Status.Journal)
	}
	for _, e := range s.Status.Journal {
		sp, ok := steps[e.SpanID]
		if !ok {
			t.Errorf("journal entry %s span %q: want a step span", e.ID, e.SpanID)
			continue
		}
		a := attrsOf(sp)
		if before, after := mustInt(t, a["journey.step.before"]), mustInt(t, a["journey.step"]); e.Step <= before || e.Step > after {
			t.Errorf("journal entry %s of step %d: its span carried steps %d to %d", e.ID, e.Step, before+1, after)
		}
		if linked[e.SpanID] {
			t.Errorf("journal entry %s: a later step links to its span, so its write did not apply it", e.ID)
		}
	}
}

func attrsOf(sp sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range sp.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// failedExports is an exporter whose errors are kept.
type failedExports struct {
	sdktrace.SpanExporter
	mu   sync.Mutex
	errs []error
}

func (f *failedExports) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := f.SpanExporter.ExportSpans(ctx, spans)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.errs = append(f.errs, err)
	}
	return err
}

// TestUnreachableCollectorChangesNothing: with the OTLP exporter pointed at a closed
// port, a Session takes exactly the steps it takes without tracing.
func TestUnreachableCollectorChangesNothing(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	otlp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL("http://"+closed+"/v1/traces"),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	exp := &failedExports{SpanExporter: otlp}
	traced, err := tracing.New(context.Background(), tracing.Options{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	run := func(p *tracing.Provider) *flowv1.Session {
		ns := newNamespace(t)
		cs := newChatServer(t, faqClassifier)
		startManager(t, ns, Options{Tracing: p})
		s := withOpenAITriage(t, ns, cs)
		create(t, s)
		processed(t, ns, s.Name, 0) // started: the same steps follow in both runs
		send(t, ns, s.Name, "m1", traceM1)
		processed(t, ns, s.Name, 1)
		send(t, ns, s.Name, "m2", traceM2)
		return processed(t, ns, s.Name, 2)
	}
	plain, withTraces := run(nil), run(traced)
	if err := traced.ForceFlush(context.Background()); err == nil {
		t.Error("flushing to a closed port succeeded")
	}
	exp.mu.Lock()
	failures := len(exp.errs)
	exp.mu.Unlock()
	if failures == 0 {
		t.Error("no export failed: the test did not reach the closed port")
	}
	if plain.Status.TraceContext != nil || withTraces.Status.TraceContext == nil {
		t.Errorf("trace context %v without tracing, %v with: want none, then one", plain.Status.TraceContext, withTraces.Status.TraceContext)
	}
	if a, b := stepsOf(plain), stepsOf(withTraces); a != b {
		t.Errorf("steps without tracing:\n%s\nwith tracing to a closed port:\n%s", a, b)
	}
}

// stepsOf says what a Session's steps did, without times and ids.
func stepsOf(s *flowv1.Session) string {
	var b strings.Builder
	st := s.Status
	fmt.Fprintf(&b, "phase %s pathway %s step %d turns %d transitions %d usage %d/%d %s\n", st.Phase, st.CurrentPathway,
		st.Step, st.Turns, st.Transitions, st.Usage.PromptTokens, st.Usage.CompletionTokens, st.Usage.CostUSD)
	for _, h := range st.History {
		fmt.Fprintf(&b, "%d %s>%s %s %s %s %s %s\n", h.Step, h.From, h.To, h.Action, h.Source, h.Transition, h.Confidence, h.MessageID)
	}
	for _, e := range st.Journal {
		fmt.Fprintf(&b, "%s %d %s %s\n", e.Kind, e.Step, e.Result.Intent, e.Result.Confidence)
	}
	return b.String()
}
