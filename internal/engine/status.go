package engine

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// settle sets the phase of a Session that is not blocked, suspended or finished, and
// makes the conditions agree with it. It is a function of the status alone (and
// spec.suspend), so a step with nothing to do changes nothing.
func (r *run) settle() {
	st := r.st
	_, blocked := Blocked(st)
	if !st.Phase.IsTerminal() && !blocked && !r.suspended && st.Phase.HasStarted() && !r.awaiting() {
		if inputWaiter(st) != nil && !r.interventionsPending() {
			st.Phase = flowv1.PhaseWaitingForInput // a tool call waits for the user's input
		} else if r.hasWork() {
			st.Phase = flowv1.PhaseRunning
		} else {
			st.Phase = flowv1.PhaseWaitingForInput
		}
	}
	r.turnCondition()
	r.conditions(blocked)
}

// conditions makes the Session's conditions agree with its phase, as kstatus reads
// them: Ready always (True while the Session is healthy, including while it waits on a
// person); Reconciling only while it runs; Stalled while a cap blocks it and once it
// failed or was cancelled; Completed once it finished (True only for Completed).
func (r *run) conditions(blocked bool) {
	st := r.st
	var (
		ready       = metav1.ConditionTrue
		reason, msg string
		reconciling bool
		stalled     bool
		input       bool
		approval    bool
	)
	cur := st.CurrentPathway
	budgetReason, budgetMsg, waitingForBudget := r.budgetConditions()
	switch {
	case st.Phase == flowv1.PhaseCompleted:
		reason, msg = flowv1.ReasonCompleted, fmt.Sprintf("The journey completed in pathway %s", cur)
	case st.Phase == flowv1.PhaseFailed:
		ready, stalled, reason, msg = metav1.ConditionFalse, true, r.readyReason, r.readyMessage
		if reason == "" {
			reason, msg = failedReason(st)
		}
		if hint := r.unblockHint(flowv1.ReasonFailed); !strings.HasSuffix(msg, hint) {
			msg += hint
		}
	case st.Phase == flowv1.PhaseCancelled:
		ready, stalled, reason, msg = metav1.ConditionFalse, true, flowv1.ReasonCancelled, "The session was cancelled"
	case r.suspended:
		ready, reason, msg = metav1.ConditionFalse, flowv1.ReasonSuspended, "The session is suspended"
	case blocked:
		c := apimeta.FindStatusCondition(st.Conditions, flowv1.ConditionStalled)
		ready, reason, msg = metav1.ConditionFalse, c.Reason, c.Message
	case waitingForBudget:
		// It goes on by itself once the Budget has room: not Ready, but Reconciling.
		ready, reconciling, reason, msg = metav1.ConditionFalse, true, budgetReason, budgetMsg
	case st.Phase.AwaitsApproval():
		// AwaitingApproval and Escalated alike: the Session is healthy and waits on a
		// person, as it waits for a message.
		approval = true
		reason, msg = string(st.Phase), approvalMessage(st)
	case st.Phase == flowv1.PhaseRunning:
		reconciling = true
		reason, msg = flowv1.ReasonProgressing, fmt.Sprintf("Working in pathway %s", cur)
	case st.Phase == flowv1.PhaseWaitingForInput && inputWaiter(st) != nil:
		input = true
		reason, msg = flowv1.ReasonInputRequested, r.inputMessage(inputWaiter(st))
	case st.Phase == flowv1.PhaseWaitingForInput:
		input = true
		reason, msg = flowv1.ReasonWaitingForInput, fmt.Sprintf("Waiting for a message in pathway %s", cur)
		if r.external() {
			msg = fmt.Sprintf("Waiting for the outcome of External pathway %s, iteration %d", cur, st.Iteration)
		}
	default:
		return // Pending: the controller owns the conditions until the first step
	}
	setCondition(st, flowv1.ConditionReady, ready, reason, msg, r.now)
	toggle(st, flowv1.ConditionReconciling, reconciling, flowv1.ReasonProgressing, msg, r.now)
	if stalled {
		setCondition(st, flowv1.ConditionStalled, metav1.ConditionTrue, reason, msg, r.now)
	} else if !blocked {
		apimeta.RemoveStatusCondition(&st.Conditions, flowv1.ConditionStalled)
	}
	if st.Phase.IsTerminal() {
		done := metav1.ConditionFalse
		if st.Phase == flowv1.PhaseCompleted {
			done = metav1.ConditionTrue
		}
		setCondition(st, flowv1.ConditionCompleted, done, reason, msg, r.now)
	}
	if input {
		setCondition(st, flowv1.ConditionAwaitingInput, metav1.ConditionTrue, reason, msg, r.now)
	} else if apimeta.FindStatusCondition(st.Conditions, flowv1.ConditionAwaitingInput) != nil {
		setCondition(st, flowv1.ConditionAwaitingInput, metav1.ConditionFalse, reason, "Not waiting for input", r.now)
	}
	if approval {
		setCondition(st, flowv1.ConditionAwaitingApproval, metav1.ConditionTrue, reason, msg, r.now)
	} else if apimeta.FindStatusCondition(st.Conditions, flowv1.ConditionAwaitingApproval) != nil {
		setCondition(st, flowv1.ConditionAwaitingApproval, metav1.ConditionFalse, reason, "No decision waits for approval", r.now)
	}
}

// failedReason is the reason of a Session that failed without saying why in this
// step: the Ready condition it already carries, else Failed.
func failedReason(st *flowv1.SessionStatus) (reason, msg string) {
	if c := apimeta.FindStatusCondition(st.Conditions, flowv1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
		return c.Reason, c.Message
	}
	return flowv1.ReasonFailed, "The journey failed"
}

// toggle sets a condition that is present only while true (Reconciling).
func toggle(st *flowv1.SessionStatus, typ string, on bool, reason, msg string, now metav1.Time) {
	if on {
		setCondition(st, typ, metav1.ConditionTrue, reason, msg, now)
	} else {
		apimeta.RemoveStatusCondition(&st.Conditions, typ)
	}
}

func approvalMessage(st *flowv1.SessionStatus) string {
	d := st.LastDecision
	if d == nil {
		return "A decision waits for a person"
	}
	if msg, ok := toolApprovalMessage(st); ok {
		return msg
	}
	if st.Phase == flowv1.PhaseEscalated {
		if d.To == "" {
			return fmt.Sprintf("Decision %s in pathway %s was unclear; approve it with a destination among %s", d.ID, d.From, strings.Join(d.AllowedDestinations, ", "))
		}
		return fmt.Sprintf("Decision %s (%s -> %s) has confidence %s, below requireApproval; a person must decide", d.ID, d.From, d.To, d.Confidence)
	}
	return fmt.Sprintf("Decision %s (%s -> %s, confidence %s) waits for approval", d.ID, d.From, d.To, d.Confidence)
}

// setCondition sets a condition at now. The generation a condition observed is the
// caller's to stamp (session.Observe): the engine keeps the one it finds.
func setCondition(st *flowv1.SessionStatus, typ string, status metav1.ConditionStatus, reason, msg string, now metav1.Time) {
	var gen int64
	if c := apimeta.FindStatusCondition(st.Conditions, typ); c != nil {
		gen = c.ObservedGeneration
	}
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncate.Bytes(msg, 1024, ""), LastTransitionTime: now, ObservedGeneration: gen,
	})
	summarize(st)
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || unicode.IsUpper(r) {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// Event is a Kubernetes Event a step calls for.
type Event struct {
	// Type is Normal or Warning.
	Type string
	// Reason is a transition action or a condition reason.
	Reason string
	// Message is a sentence for people.
	Message string
}

// Event types.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// Event reasons besides the condition reasons and transition actions.
const (
	// ReasonStarted: the Session took its first step.
	ReasonStarted = "Started"
	// ReasonTurnFailed: a turn recorded failures (an agent error, a refused detour, an
	// ignored approval).
	ReasonTurnFailed = "TurnFailed"
)

// startedIn is the pathway a Session started in: where the first transition of the
// steps between old and cur left from, since one write may carry several steps, else
// the pathway it is in.
func startedIn(old, cur *flowv1.SessionStatus) string {
	for _, h := range cur.History {
		if h.Step > old.Step && h.From != "" {
			return h.From
		}
	}
	return cur.CurrentPathway
}

// Events lists what happened between two statuses of a Session, for the controller to
// emit: the start, every transition (reason: its action), a block (Warning, reason:
// the Stalled reason), approvals asked for, escalations (Warning), failed turns
// (Warning) and the end (Completed, Failed as Warning, Cancelled). A note holds no
// text of the conversation: no decision reasoning, no approver's reason, no tool
// arguments, no agent's or tool server's error text (status keeps them all).
func Events(old, cur *flowv1.SessionStatus) []Event {
	if cur == nil {
		return nil
	}
	if old == nil {
		old = &flowv1.SessionStatus{}
	}
	var out []Event
	if !old.Phase.HasStarted() && cur.Phase.HasStarted() && cur.StartTime != nil {
		out = append(out, Event{EventNormal, ReasonStarted, fmt.Sprintf("Started in pathway %s on journey revision %s", startedIn(old, cur), cur.JourneyRevision)})
	}
	if old.JourneyRevision != "" && cur.JourneyRevision != old.JourneyRevision {
		out = append(out, Event{EventNormal, flowv1.ReasonUpgraded, fmt.Sprintf("Moved from journey revision %s to %s", old.JourneyRevision, cur.JourneyRevision)})
	}
	if cur.Step > old.Step {
		for _, h := range cur.History {
			if h.Step <= old.Step || h.Action == flowv1.ActionBlock || h.Intervention != "" {
				continue // interventions have Events of their own
			}
			out = append(out, Event{EventNormal, string(h.Action), historyMessage(h)})
		}
	}
	if d := cur.LastDecision; d != nil && d.State == flowv1.DecisionEscalated && (old.LastDecision == nil || old.LastDecision.ID != d.ID || old.LastDecision.State != d.State) {
		out = append(out, Event{EventWarning, flowv1.ReasonEscalated, fmt.Sprintf("Decision %s in pathway %s escalated (confidence %s)", d.ID, d.From, d.Confidence)})
	}
	if cur.Phase != old.Phase {
		switch cur.Phase {
		case flowv1.PhaseAwaitingApproval:
			out = append(out, Event{EventNormal, flowv1.ReasonAwaitingApproval, approvalEventMessage(cur)})
		case flowv1.PhaseCompleted:
			out = append(out, Event{EventNormal, flowv1.ReasonCompleted, fmt.Sprintf("The journey completed in pathway %s", cur.CurrentPathway)})
		case flowv1.PhaseFailed:
			msg := "The journey failed"
			reason := flowv1.ReasonFailed
			if c := apimeta.FindStatusCondition(cur.Conditions, flowv1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
				reason, msg = c.Reason, c.Message
			}
			out = append(out, Event{EventWarning, reason, msg})
		case flowv1.PhaseCancelled:
			out = append(out, Event{EventNormal, flowv1.ReasonCancelled, "The session was cancelled"})
		}
	}
	if reason, blocked := Blocked(cur); blocked && !cur.Phase.IsTerminal() {
		if was, wasBlocked := Blocked(old); !wasBlocked || was != reason {
			c := apimeta.FindStatusCondition(cur.Conditions, flowv1.ConditionStalled)
			out = append(out, Event{EventWarning, reason, c.Message})
		}
	}
	if c := apimeta.FindStatusCondition(cur.Conditions, flowv1.ConditionDegraded); c != nil && !apimeta.IsStatusConditionTrue(old.Conditions, flowv1.ConditionDegraded) {
		out = append(out, Event{EventNormal, flowv1.ReasonDegraded, c.Message})
	}
	if c := inputWaiter(cur); c != nil {
		if o := inputWaiter(old); o == nil || o.ID != c.ID || len(o.Elicitations) != len(c.Elicitations) {
			out = append(out, Event{EventNormal, flowv1.ReasonInputRequested,
				fmt.Sprintf("Tool call %s (%s) in pathway %s asks the user for input (status.turn.toolCalls has the question)", c.ID, c.Tool, cur.CurrentPathway)})
		}
	}
	out = append(out, capEvents(old, cur)...)
	out = append(out, interventionEvents(old, cur)...)
	out = append(out, timeoutEvents(old, cur)...)
	if lt := cur.LastTurn; lt != nil && len(lt.Failures) > 0 && cur.Step > old.Step && !sameFailures(old.LastTurn, lt) &&
		lt.Trigger != flowv1.TurnIntervention {
		_, blocked := Blocked(cur)
		if !blocked && cur.Phase != flowv1.PhaseFailed {
			msgs := make([]string, 0, len(lt.Failures))
			for _, f := range lt.Failures {
				msgs = append(msgs, failureNote(f))
			}
			out = append(out, Event{EventWarning, ReasonTurnFailed, truncate.Bytes(fmt.Sprintf("Turn in pathway %s: %s", lt.Pathway, strings.Join(msgs, "; ")), 1024, "")})
		}
	}
	return out
}

func sameFailures(a, b *flowv1.TurnOutcome) bool {
	if a == nil || len(a.Failures) != len(b.Failures) || a.MessageID != b.MessageID || a.Trigger != b.Trigger {
		return false
	}
	for i := range a.Failures {
		if a.Failures[i] != b.Failures[i] {
			return false
		}
	}
	return true
}

func historyMessage(h flowv1.HistoryEntry) string {
	var b strings.Builder
	switch h.Action {
	case flowv1.ActionClose:
		fmt.Fprintf(&b, "Closed the journey in %s", h.From)
	case flowv1.ActionRetry:
		fmt.Fprintf(&b, "Retrying %s", h.To)
	case flowv1.ActionJumpBack:
		fmt.Fprintf(&b, "%s -> %s: jumped back, iteration %d", h.From, h.To, h.Iteration)
	default:
		fmt.Fprintf(&b, "%s -> %s", h.From, h.To)
	}
	fmt.Fprintf(&b, " (%s %s", h.Source, h.Transition)
	if h.Confidence != "" {
		fmt.Fprintf(&b, ", confidence %s", h.Confidence)
	}
	b.WriteString(")")
	if h.MessageID != "" {
		fmt.Fprintf(&b, " on message %s", h.MessageID)
	}
	return b.String()
}

// approvalEventMessage is the AwaitingApproval Event's note: the condition's message
// without a tool call's arguments.
func approvalEventMessage(st *flowv1.SessionStatus) string {
	if tool, ok := st.LastDecision.ToolCall(); ok {
		return fmt.Sprintf("Tool call %s (%s) in pathway %s waits for approval", st.LastDecision.ID, tool, st.LastDecision.From)
	}
	return approvalMessage(st)
}

// failureNote is a failure for an Event: its source, kind and component, and its
// message only when the operator wrote it (System, Policy). An agent's or a tool
// server's error text may quote the conversation; it stays in
// status.lastTurn.failures.
func failureNote(f flowv1.Failure) string {
	switch f.Source {
	case flowv1.FailureSystem, flowv1.FailurePolicy:
		return fmt.Sprintf("%s %s %s: %s", f.Source, f.Kind, f.Component, f.Message)
	}
	return fmt.Sprintf("%s %s %s (status.lastTurn.failures has its message)", f.Source, f.Kind, f.Component)
}
