package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Attributes of a Session's spans.
const (
	AttrSessionName      = attribute.Key("journey.session.name")
	AttrSessionNamespace = attribute.Key("journey.session.namespace")
	AttrSessionUID       = attribute.Key("journey.session.uid")
	AttrJourney          = attribute.Key("journey.name")
	AttrRevision         = attribute.Key("journey.revision")
	// AttrStep is the step number after the step (status.step); AttrStepBefore before.
	AttrStep       = attribute.Key("journey.step")
	AttrStepBefore = attribute.Key("journey.step.before")
	// AttrPathway and AttrPhase are the pathway and phase after the step; the
	// .before attributes before.
	AttrPathway       = attribute.Key("journey.pathway")
	AttrPathwayBefore = attribute.Key("journey.pathway.before")
	AttrPhase         = attribute.Key("journey.phase")
	AttrPhaseBefore   = attribute.Key("journey.phase.before")
	// AttrOutcome is what the step did: Changed, Performed, AgentRetry, AgentStalled.
	AttrOutcome = attribute.Key("journey.step.outcome")
	// AttrEffect is the kind of agent call the step made, when it made one.
	AttrEffect = attribute.Key("journey.effect")
)

// Step is the trace of one step of a Session: begun before the step (Begin), so that
// the calls it makes are its children, and recorded (End) once the step's status is
// written; a step whose write is lost, or that changed nothing, is not recorded. A nil
// *Step records nothing. The step's span id is chosen at Begin and given to the span
// at End, so the spans of the calls made in between are its children.
type Step struct {
	p                    *Provider
	name, namespace, uid string
	journey              string
	approvals            []flowv1.Approval
	old                  *flowv1.SessionStatus
	root                 trace.SpanContext
	newRoot              bool
	id                   trace.SpanID
	start                time.Time

	// What the step did (Result).
	status          *flowv1.SessionStatus
	outcome, effect string
	err             error
	journeyEvents   []Event
	block           string
}

// Begin begins the trace of a step of s: the returned context carries p and, as its
// span, the step's span context under the Session's root span (rebuilt from
// status.traceContext, or the Session's own at its first step). A nil p returns ctx
// and a nil Step.
func (p *Provider) Begin(ctx context.Context, s *flowv1.Session) (context.Context, *Step) {
	if p == nil {
		return ctx, nil
	}
	st := &Step{
		p: p, name: s.Name, namespace: s.Namespace, uid: string(s.UID), journey: s.Spec.JourneyRef.Name,
		approvals: s.Spec.Approvals, old: s.Status.DeepCopy(), id: newSpanID(), start: time.Now(),
	}
	root, ok := RootOf(&s.Status)
	if !ok {
		t, sp := sessionRoot(st.uid)
		root, st.newRoot = remote(t, sp), true
	}
	st.root = root
	ctx = trace.ContextWithRemoteSpanContext(ctx, remote(root.TraceID(), st.id))
	return ContextWith(ctx, p), st
}

// RootOf is the Session's root span context, from status.traceContext.
func RootOf(status *flowv1.SessionStatus) (trace.SpanContext, bool) {
	tc := status.TraceContext
	if tc == nil {
		return trace.SpanContext{}, false
	}
	t, err1 := trace.TraceIDFromHex(tc.TraceID)
	s, err2 := trace.SpanIDFromHex(tc.SpanID)
	if err1 != nil || err2 != nil {
		return trace.SpanContext{}, false
	}
	return remote(t, s), true
}

func remote(t trace.TraceID, s trace.SpanID) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: t, SpanID: s, TraceFlags: trace.FlagsSampled, Remote: true})
}

// Result is what a step did, as its trace records it.
type Result struct {
	// Status is the step's result; Changed says whether the step changed it.
	Status  *flowv1.SessionStatus
	Changed bool
	// Outcome is what the step did, Effect the kind of agent call it made ("" for
	// none) and Err the agent's error.
	Outcome, Effect string
	Err             error
	// Events are the Session's Events of the step, as the controller emits them.
	Events []Event
	// Block is the reason of the block (a cap, or loop prevention) the Session is in
	// after the step, "" for none: the Event with that reason is recorded as a block.
	Block string
}

// Result says what the step did. A step that changed the status gets the Session's
// trace context stamped into r.Status (when it has none), and is recorded by End; one
// that changed nothing is not.
func (st *Step) Result(r Result) {
	if st == nil || r.Status == nil || !r.Changed {
		return
	}
	if r.Status.TraceContext == nil {
		r.Status.TraceContext = &flowv1.TraceContext{TraceID: st.root.TraceID().String(), SpanID: st.root.SpanID().String()}
	}
	st.status, st.outcome, st.effect, st.err = r.Status, r.Outcome, r.Effect, r.Err
	st.journeyEvents, st.block = r.Events, r.Block
}

// End records the step's span, now that its status is written: the Session's root
// span too at its first step, the pathway, phase and step before and after, the
// journey's events, a link to the step that obtained a journaled answer this step
// applies, and the agent's error as the span's error. A step without a Result that
// changed the status records nothing.
func (st *Step) End() {
	if st == nil || st.status == nil {
		return
	}
	status := st.status
	bg := context.Background()
	if st.newRoot && status.TraceContext != nil {
		_, root := st.p.tracer.Start(withIDs(bg, st.root.TraceID(), st.root.SpanID()), "session "+st.name,
			trace.WithNewRoot(), trace.WithTimestamp(st.start), trace.WithAttributes(st.sessionAttrs()...))
		root.End(trace.WithTimestamp(st.start))
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(st.start), trace.WithAttributes(st.sessionAttrs()...)}
	if link, ok := st.appliedLink(status); ok {
		opts = append(opts, trace.WithLinks(link))
	}
	ctx := withIDs(trace.ContextWithRemoteSpanContext(bg, st.root), st.root.TraceID(), st.id)
	_, span := st.p.tracer.Start(ctx, "step "+st.journey, opts...)
	span.SetAttributes(
		AttrStepBefore.Int64(st.old.Step), AttrStep.Int64(status.Step),
		AttrPathwayBefore.String(st.old.CurrentPathway), AttrPathway.String(status.CurrentPathway),
		AttrPhaseBefore.String(string(st.old.Phase)), AttrPhase.String(string(status.Phase)),
		AttrOutcome.String(st.outcome), AttrRevision.String(status.JourneyRevision),
	)
	if st.effect != "" {
		span.SetAttributes(AttrEffect.String(st.effect))
	}
	st.events(span, status)
	if st.err != nil {
		span.SetStatus(codes.Error, st.err.Error())
	}
	span.End()
}

func (st *Step) sessionAttrs() []attribute.KeyValue {
	return []attribute.KeyValue{
		AttrSessionName.String(st.name), AttrSessionNamespace.String(st.namespace),
		AttrSessionUID.String(st.uid), AttrJourney.String(st.journey),
		semconv.GenAIConversationID(st.uid),
	}
}

// appliedLink links to the step that obtained the journaled answer this step applied:
// the Session's pending effect before the step, gone or replaced after it.
func (st *Step) appliedLink(status *flowv1.SessionStatus) (trace.Link, bool) {
	pe := st.old.PendingEffect
	if pe == nil || pe.SpanID == "" || (status.PendingEffect != nil && status.PendingEffect.ID == pe.ID) {
		return trace.Link{}, false
	}
	s, err := trace.SpanIDFromHex(pe.SpanID)
	if err != nil {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: remote(st.root.TraceID(), s), Attributes: []attribute.KeyValue{
		AttrEffectID.String(pe.ID), AttrEffect.String(string(pe.Kind)),
	}}, true
}
