package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// TestStepsOfOneSession: two providers (two replicas, or before and after a restart)
// put a Session's steps in one trace under one root span; a step that changed nothing
// is not recorded; the step that applies a journaled answer links to the step that
// obtained it; the journey's events are on the step spans, reasoning only with
// content capture.
func TestStepsOfOneSession(t *testing.T) {
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: "ns", UID: "uid-1"}}
	s.Spec.JourneyRef.Name = "triage"
	s.Spec.Approvals = []flowv1.Approval{{DecisionID: "d-2", Approve: ptr.To(true), By: "alice"}}

	// Replica A: the first step obtains an answer and journals it.
	recA := tracetest.NewSpanRecorder()
	a := NewWithProcessor(recA, false)
	ctx, st := a.Begin(context.Background(), s)
	obtained := trace.SpanContextFromContext(ctx).SpanID()
	first := &flowv1.SessionStatus{Step: 1, Phase: flowv1.PhaseRunning, CurrentPathway: "intake",
		PendingEffect: &flowv1.EffectRecord{ID: "uid-1/1/ab", Kind: flowv1.EffectDecide, SpanID: obtained.String()}}
	st.Result(Result{Status: first, Changed: true, Outcome: "Performed", Effect: "Decide"})
	st.End()
	if first.TraceContext == nil {
		t.Fatal("the first step did not stamp the trace context")
	}
	s.Status = *first

	// Replica B: a reconcile that changes nothing, then the step that applies the answer.
	recB := tracetest.NewSpanRecorder()
	b := NewWithProcessor(recB, false)
	_, idle := b.Begin(context.Background(), s)
	idle.Result(Result{Status: s.Status.DeepCopy(), Outcome: "Unchanged"})
	idle.End()
	_, st = b.Begin(context.Background(), s)
	second := s.Status.DeepCopy()
	second.Step, second.CurrentPathway, second.PendingEffect = 2, "booking", nil
	second.History = []flowv1.HistoryEntry{{Step: 2, From: "intake", To: "booking", Action: flowv1.ActionAdvance,
		Source: "Agent", Transition: "to-booking", Confidence: "0.9", Reason: "the patient said: chest pain"}}
	second.LastDecision = &flowv1.DecisionRecord{ID: "d-2", Transition: "to-booking", From: "intake", To: "booking",
		Confidence: "0.9", AllowedDestinations: []string{"booking", "faq"}, State: flowv1.DecisionApproved,
		Source: "Agent", Reasoning: "the patient said: chest pain"}
	st.Result(Result{Status: second, Changed: true, Outcome: "Changed",
		Events: []Event{{Type: "Normal", Reason: "Advance", Message: "intake -> booking (to-booking)"}}})
	st.End()

	spansA, spansB := recA.Ended(), recB.Ended()
	if len(spansA) != 2 || len(spansB) != 1 {
		t.Fatalf("replica A recorded %d spans (want root and step), B %d (want one step)", len(spansA), len(spansB))
	}
	root, stepA, stepB := spansA[0], spansA[1], spansB[0]
	if root.Name() != "session s1" || root.SpanContext().SpanID().String() != first.TraceContext.SpanID ||
		root.SpanContext().TraceID().String() != first.TraceContext.TraceID {
		t.Errorf("root %s %v, want session s1 with status %+v", root.Name(), root.SpanContext(), first.TraceContext)
	}
	for _, sp := range []interface {
		Parent() trace.SpanContext
		Name() string
	}{stepA, stepB} {
		if sp.Parent().SpanID() != root.SpanContext().SpanID() || sp.Parent().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("%s: parent %v, want the root span", sp.Name(), sp.Parent())
		}
	}
	if stepA.SpanContext().SpanID() != obtained {
		t.Errorf("step span %v, want the id its calls saw (%v)", stepA.SpanContext().SpanID(), obtained)
	}
	if l := stepB.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != obtained {
		t.Errorf("links %+v, want one to the step that obtained the answer", l)
	}
	a2 := attrs(stepB.Attributes())
	if a2[AttrStep].AsInt64() != 2 || a2[AttrStepBefore].AsInt64() != 1 || a2[AttrPathwayBefore].AsString() != "intake" ||
		a2[AttrPathway].AsString() != "booking" || a2[AttrPhase].AsString() != "Running" {
		t.Errorf("step attributes %v", a2)
	}
	events := map[string]map[string]string{}
	for _, e := range stepB.Events() {
		m := map[string]string{}
		for _, kv := range e.Attributes {
			m[string(kv.Key)] = kv.Value.String()
			if kv.Value.String() == "the patient said: chest pain" {
				t.Errorf("event %s records %s without content capture", e.Name, kv.Key)
			}
		}
		events[e.Name] = m
	}
	if tr := events[EventTransition]; tr["journey.from"] != "intake" || tr["journey.to"] != "booking" || tr["journey.rule"] != "to-booking" || tr["journey.action"] != "Advance" {
		t.Errorf("transition event %v", tr)
	}
	if d := events[EventDecision]; d["journey.decision.destination"] != "booking" || d["journey.decision.approver"] != "alice" ||
		d["journey.confidence"] != "0.9" || d["journey.decision.allowed_destinations"] != `["booking","faq"]` {
		t.Errorf("decision event %v", d)
	}
	if e, dup := events[EventJourney]; dup {
		t.Errorf("the transition's Event is recorded again: %v", e)
	}
}

// TestBlockAndEvents: the Events the controller hands a step are on its span: the one
// of the block as a block, with its message; the others as journey events, their
// messages only with content capture.
func TestBlockAndEvents(t *testing.T) {
	for _, content := range []bool{false, true} {
		rec := tracetest.NewSpanRecorder()
		p := NewWithProcessor(rec, content)
		s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: "ns", UID: "uid-1"}}
		s.Spec.JourneyRef.Name = "triage"
		_, st := p.Begin(context.Background(), s)
		status := &flowv1.SessionStatus{Step: 1, Phase: flowv1.PhaseRunning, CurrentPathway: "intake"}
		st.Result(Result{Status: status, Changed: true, Outcome: "Changed", Block: flowv1.ReasonTransitionLimit, Events: []Event{
			{Type: "Normal", Reason: "Started", Message: "Started in pathway intake on journey revision r1"},
			{Type: "Warning", Reason: flowv1.ReasonTransitionLimit, Message: "500 transitions"},
		}})
		st.End()
		spans := rec.Ended()
		if len(spans) != 2 {
			t.Fatalf("%d spans, want the root and the step", len(spans))
		}
		got := map[string]map[attribute.Key]attribute.Value{}
		for _, e := range spans[1].Events() {
			got[e.Name] = attrs(e.Attributes)
		}
		if b := got[EventBlock]; b[AttrReason].AsString() != flowv1.ReasonTransitionLimit || b[AttrEventMessage].AsString() != "500 transitions" {
			t.Errorf("block event %v", b)
		}
		j := got[EventJourney]
		if j[AttrEventType].AsString() != "Normal" || j[AttrEventReason].AsString() != "Started" {
			t.Errorf("journey event %v", j)
		}
		if _, msg := j[AttrEventMessage]; msg != content {
			t.Errorf("content %v: the event's message recorded %v", content, msg)
		}
	}
}
