package tracing

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Span event names on a step's span.
const (
	// EventTransition: a transition the step took.
	EventTransition = "journey.transition"
	// EventDecision: a decision the step made, or that a person approved or rejected.
	EventDecision = "journey.decision"
	// EventBlock: the step blocked the Session (a cap, or loop prevention).
	EventBlock = "journey.block"
	// EventJourney: any other event of the step, as the Session's Kubernetes Events
	// say it (started, awaiting approval, escalated, turn failed, completed...).
	EventJourney = "journey.event"
)

// Attributes of the journey's span events.
const (
	AttrFrom                = attribute.Key("journey.from")
	AttrTo                  = attribute.Key("journey.to")
	AttrAction              = attribute.Key("journey.action")
	AttrRule                = attribute.Key("journey.rule")
	AttrSource              = attribute.Key("journey.source")
	AttrConfidence          = attribute.Key("journey.confidence")
	AttrIteration           = attribute.Key("journey.iteration")
	AttrMessageID           = attribute.Key("journey.message_id")
	AttrReason              = attribute.Key("journey.reason")
	AttrDecisionID          = attribute.Key("journey.decision.id")
	AttrDecisionState       = attribute.Key("journey.decision.state")
	AttrDestination         = attribute.Key("journey.decision.destination")
	AttrAllowedDestinations = attribute.Key("journey.decision.allowed_destinations")
	AttrApprover            = attribute.Key("journey.decision.approver")
	AttrReasoning           = attribute.Key("journey.decision.reasoning")
	AttrEventType           = attribute.Key("journey.event.type")
	AttrEventReason         = attribute.Key("journey.event.reason")
	AttrEventMessage        = attribute.Key("journey.event.message")
	AttrEffectID            = attribute.Key("journey.effect.id")
)

// Event is one of the Kubernetes Events the controller emits for a step of a Session.
// The trace takes them as the controller computed them (EventsOf converts the
// engine's), so that tracing, and the providers that trace their calls, do not depend
// on the engine.
type Event struct {
	// Type is Normal or Warning.
	Type string
	// Reason is a transition action or a condition reason.
	Reason string
	// Message is a sentence for people.
	Message string
}

// EventsOf converts events of any type with Event's fields (the engine's) into the
// trace's.
func EventsOf[E ~struct{ Type, Reason, Message string }](events []E) []Event {
	if len(events) == 0 {
		return nil
	}
	out := make([]Event, len(events))
	for i, e := range events {
		out[i] = Event(e)
	}
	return out
}

// eventNormal is the type of the Events that are not warnings.
const eventNormal = "Normal"

// events adds the journey's events of the step to span: its transitions, its
// decision, a block, and the Session's other Events. Reasons and reasoning (which may
// quote the conversation) only with content capture on.
func (st *Step) events(span trace.Span, cur *flowv1.SessionStatus) {
	content := st.p.content
	actions := map[string]bool{}
	if cur.Step > st.old.Step {
		for _, h := range cur.History {
			if h.Step <= st.old.Step || h.Action == flowv1.ActionBlock {
				continue
			}
			actions[string(h.Action)] = true
			attrs := []attribute.KeyValue{
				AttrFrom.String(h.From), AttrTo.String(h.To), AttrAction.String(string(h.Action)),
				AttrRule.String(h.Transition), AttrSource.String(string(h.Source)),
				AttrConfidence.String(string(h.Confidence)), AttrIteration.Int(int(h.Iteration)),
				AttrMessageID.String(h.MessageID),
			}
			if content && h.Reason != "" {
				attrs = append(attrs, AttrReason.String(h.Reason))
			}
			span.AddEvent(EventTransition, trace.WithAttributes(attrs...))
		}
	}
	if d := cur.LastDecision; d != nil && decisionChanged(st.old.LastDecision, d) {
		span.AddEvent(EventDecision, trace.WithAttributes(st.decisionAttrs(d, content)...))
	}
	block := st.block
	for _, e := range st.journeyEvents {
		switch {
		case e.Type == eventNormal && actions[e.Reason]:
			continue // a transition, above
		case block != "" && e.Reason == block:
			span.AddEvent(EventBlock, trace.WithAttributes(AttrReason.String(e.Reason), AttrEventMessage.String(e.Message)))
			continue
		}
		attrs := []attribute.KeyValue{AttrEventType.String(e.Type), AttrEventReason.String(e.Reason)}
		if content {
			attrs = append(attrs, AttrEventMessage.String(e.Message))
		}
		span.AddEvent(EventJourney, trace.WithAttributes(attrs...))
	}
}

func decisionChanged(old, cur *flowv1.DecisionRecord) bool {
	return old == nil || old.ID != cur.ID || old.State != cur.State || old.To != cur.To
}

func (st *Step) decisionAttrs(d *flowv1.DecisionRecord, content bool) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		AttrDecisionID.String(d.ID), AttrDecisionState.String(string(d.State)),
		AttrRule.String(d.Transition), AttrFrom.String(d.From), AttrDestination.String(d.To),
		AttrAction.String(string(d.Action)), AttrConfidence.String(string(d.Confidence)),
		AttrAllowedDestinations.StringSlice(d.AllowedDestinations), AttrSource.String(string(d.Source)),
		AttrAgent.String(d.Agent),
	}
	if d.State == flowv1.DecisionApproved || d.State == flowv1.DecisionRejected {
		for i := len(st.approvals) - 1; i >= 0; i-- {
			if a := st.approvals[i]; a.DecisionID == d.ID && a.By != "" {
				attrs = append(attrs, AttrApprover.String(a.By))
				break
			}
		}
	}
	if content && d.Reasoning != "" {
		attrs = append(attrs, AttrReasoning.String(d.Reasoning))
	}
	return attrs
}
