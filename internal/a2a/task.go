package a2a

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Metadata keys the gateway sets on tasks and events, and reads on requests.
const (
	// MetaEventID is the id of a streamed event (and of a task snapshot): where it
	// stands in the Session's conversation. tasks/resubscribe takes it back as
	// MetaLastEventID.
	MetaEventID = "flow.journey.dev/eventId"
	// MetaLastEventID, in the metadata of tasks/resubscribe, is the id of the last
	// event the client saw: the stream replays the events after it, then goes live.
	MetaLastEventID = "flow.journey.dev/lastEventId"
	// MetaGap, on a status-update event, says which exchanges the Session no longer
	// keeps (they were trimmed from status.transcript) and so cannot be replayed:
	// {"from": first missing exchange, "to": last missing exchange}.
	MetaGap = "flow.journey.dev/gap"
	// MetaPendingDecision is the key of the data part that describes the decision an
	// input-required task waits on.
	MetaPendingDecision = "pendingDecision"
)

// A task is a Session: its id and its context id are the Session's name.
//
// Its events are derived from the Session's status alone, so that any gateway replica
// streams the same events with the same ids, before and after a restart:
//
//   - one artifact-update event per exchange of status.transcript (a pathway run's
//     reply), numbered over the whole conversation: exchange n (from 1) has the id
//     t<n>.s<step>, step being the status.step that ended its turn; an exchange that
//     records an approval is a working status-update event saying who decided what;
//   - one status-update event when the Session has settled in a state an A2A client
//     acts on (input-required, completed, failed, canceled), after the exchanges that
//     led to it: t<n>.s<step>.<state>[.<decision>], n being the exchanges so far. It is
//     final: a stream ends with it;
//   - a gap event t<n>.gap when exchanges up to n were trimmed from the transcript
//     before the client saw them.
//
// An id is a cursor: the events after it are a pure function of the status and the id.

// cursor is a position in a Session's event log: the exchanges seen (their count over
// the whole conversation) and, after a state event, the settled state seen there.
type cursor struct {
	exchanges int64
	step      int64
	state     a2a.TaskState
	decision  string
	gap       bool
}

// id is the event id of c.
func (c cursor) id() string {
	if c.gap {
		return fmt.Sprintf("t%d.gap", c.exchanges)
	}
	id := fmt.Sprintf("t%d.s%d", c.exchanges, c.step)
	if c.state != "" {
		id += "." + string(c.state)
		if c.decision != "" {
			id += "." + c.decision
		}
	}
	return id
}

// parseCursor reads an event id.
func parseCursor(id string) (cursor, error) {
	parts := strings.SplitN(id, ".", 4)
	bad := fmt.Errorf("event id %q is not one this gateway sent (t<exchange>.s<step>[.<state>[.<decision>]] or t<exchange>.gap)", id)
	if len(parts) < 2 || !strings.HasPrefix(parts[0], "t") {
		return cursor{}, bad
	}
	n, err := strconv.ParseInt(parts[0][1:], 10, 64)
	if err != nil || n < 0 {
		return cursor{}, bad
	}
	c := cursor{exchanges: n}
	if parts[1] == "gap" && len(parts) == 2 {
		c.gap = true
		return c, nil
	}
	if !strings.HasPrefix(parts[1], "s") {
		return cursor{}, bad
	}
	if c.step, err = strconv.ParseInt(parts[1][1:], 10, 64); err != nil || c.step < 0 {
		return cursor{}, bad
	}
	if len(parts) > 2 {
		c.state = a2a.TaskState(parts[2])
	}
	if len(parts) > 3 {
		c.decision = parts[3]
	}
	return c, nil
}

// exchangeCount is how many exchanges the Session's conversation has had, the
// trimmed ones included.
func exchangeCount(s *flowv1.Session) int64 {
	return int64(s.Status.TranscriptDropped) + int64(len(s.Status.Transcript))
}

// settled reports whether the Session waits on someone outside it (a message, an
// approval, an intervention) or has ended, with everything sent to it so far taken in.
func settled(s *flowv1.Session) bool {
	st := &s.Status
	switch st.Phase {
	case flowv1.PhaseCompleted, flowv1.PhaseFailed, flowv1.PhaseCancelled:
		return true
	case flowv1.PhaseWaitingForInput, flowv1.PhaseAwaitingApproval, flowv1.PhaseEscalated:
	default:
		return false
	}
	if st.ObservedGeneration < s.Generation || st.Turn != nil || s.Spec.Cancel {
		return false
	}
	if stalled(s) != nil {
		return true
	}
	return st.ProcessedMessages >= s.Spec.MessageCount() && st.ProcessedApprovals >= s.Spec.ApprovalCount()
}

func stalled(s *flowv1.Session) *metav1.Condition {
	c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionStalled)
	if c != nil && c.Status == metav1.ConditionTrue {
		return c
	}
	return nil
}

// State is the A2A task state of the Session: WaitingForInput, AwaitingApproval and
// Escalated are input-required, Completed completed, Failed failed, Cancelled
// canceled, once the Session has taken in all that was sent to it; before, it is
// working (or submitted, before its first step).
func State(s *flowv1.Session) a2a.TaskState {
	if !settled(s) {
		if !s.Status.Phase.HasStarted() {
			return a2a.TaskStateSubmitted
		}
		return a2a.TaskStateWorking
	}
	switch s.Status.Phase {
	case flowv1.PhaseCompleted:
		return a2a.TaskStateCompleted
	case flowv1.PhaseFailed:
		return a2a.TaskStateFailed
	case flowv1.PhaseCancelled:
		return a2a.TaskStateCanceled
	}
	return a2a.TaskStateInputRequired
}

// here is the cursor of the Session as it is: after its exchanges, in its state.
func here(s *flowv1.Session) cursor {
	c := cursor{exchanges: exchangeCount(s), step: s.Status.Step}
	if settled(s) {
		c.state = State(s)
		if d := s.Status.PendingDecision(); d != nil && c.state == a2a.TaskStateInputRequired {
			c.decision = d.ID
		}
	}
	return c
}

// eventsAfter are the Session's events after cursor after, and the cursor after the
// last of them (after itself when there are none). final says the last event is a
// settled state: a stream ends there.
func eventsAfter(s *flowv1.Session, after cursor) (events []a2a.Event, last cursor, final bool) {
	info := taskInfo(s)
	last = after
	dropped := int64(s.Status.TranscriptDropped)
	if after.exchanges < dropped {
		from, to := after.exchanges+1, dropped
		last = cursor{exchanges: dropped, gap: true}
		ev := a2a.NewStatusUpdateEvent(info, a2a.TaskStateWorking, agentMessage(info,
			fmt.Sprintf("Exchanges %d to %d of this conversation are no longer kept by the Session (status.transcript is bounded) and cannot be replayed", from, to)))
		ev.Status.Timestamp = nil
		ev.Metadata = map[string]any{MetaEventID: last.id(), MetaGap: map[string]any{"from": from, "to": to}}
		events = append(events, ev)
	}
	for i := range s.Status.Transcript {
		n := dropped + int64(i) + 1
		if n <= last.exchanges {
			continue
		}
		x := &s.Status.Transcript[i]
		last = cursor{exchanges: n, step: x.Step}
		if x.Approval != nil {
			ev := a2a.NewStatusUpdateEvent(info, a2a.TaskStateWorking, agentMessage(info, describeApproval(x.Approval)))
			ev.Status.Timestamp = nil
			ev.Metadata = map[string]any{MetaEventID: last.id()}
			events = append(events, ev)
			continue
		}
		events = append(events, replyEvent(info, n, x, last.id()))
	}
	now := here(s)
	if now.state == "" {
		return events, last, false
	}
	if len(events) == 0 && after.state == now.state && after.decision == now.decision && after.exchanges == now.exchanges {
		// The client saw this state already.
		return nil, after, true
	}
	ev := &a2a.TaskStatusUpdateEvent{
		TaskID: info.TaskID, ContextID: info.ContextID, Final: true,
		Status:   status(s),
		Metadata: map[string]any{MetaEventID: now.id()},
	}
	return append(events, ev), now, true
}

// describeApproval says what an approval the transcript records decided.
func describeApproval(a *flowv1.Approval) string {
	verb := "rejected"
	if a.Approves() {
		verb = "approved"
	}
	text := fmt.Sprintf("Decision %s %s", a.DecisionID, verb)
	if a.By != "" {
		text += " by " + a.By
	}
	if a.Destination != "" {
		text += " (destination " + string(a.Destination) + ")"
	}
	return text
}

// replyEvent is the artifact-update event of exchange n: the reply of a pathway run.
func replyEvent(info taskRef, n int64, x *flowv1.Exchange, id string) *a2a.TaskArtifactUpdateEvent {
	return &a2a.TaskArtifactUpdateEvent{
		TaskID: info.TaskID, ContextID: info.ContextID, LastChunk: true,
		Artifact: replyArtifact(n, x),
		Metadata: map[string]any{MetaEventID: id},
	}
}

func replyArtifact(n int64, x *flowv1.Exchange) *a2a.Artifact {
	meta := map[string]any{"pathway": x.Pathway, "step": x.Step}
	if x.MessageID != "" {
		meta["messageId"] = x.MessageID
	}
	return &a2a.Artifact{
		ID:          a2a.ArtifactID(fmt.Sprintf("reply-%d", n)),
		Name:        "reply",
		Description: fmt.Sprintf("The reply of pathway %s", x.Pathway),
		Parts:       a2a.ContentParts{a2a.TextPart{Text: x.Assistant}},
		Metadata:    meta,
	}
}

// taskRef names a Session's task: its id and context id are the Session's name.
type taskRef a2a.TaskInfo

func (t taskRef) TaskInfo() a2a.TaskInfo { return a2a.TaskInfo(t) }

func taskInfo(s *flowv1.Session) taskRef {
	return taskRef{TaskID: a2a.TaskID(s.Name), ContextID: s.Name}
}

func agentMessage(info taskRef, text string, parts ...a2a.Part) *a2a.Message {
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, info, append(a2a.ContentParts{a2a.TextPart{Text: text}}, parts...)...)
	m.ID = ""
	return m
}

// status is the A2A task status of the Session, with a message that says what it
// waits for: its last reply, the decision it waits on (a data part under
// pendingDecision), or why it stalled.
func status(s *flowv1.Session) a2a.TaskStatus {
	info := taskInfo(s)
	state := State(s)
	st := a2a.TaskStatus{State: state}
	if t := s.Status.LastActivityTime; t != nil {
		ts := t.UTC().Truncate(time.Second)
		st.Timestamp = &ts
	}
	text := ""
	if lt := s.Status.LastTurn; lt != nil {
		text = lt.AssistantText
	}
	var parts []a2a.Part
	if state == a2a.TaskStateInputRequired {
		if d := s.Status.PendingDecision(); d != nil {
			parts = append(parts, a2a.DataPart{Data: map[string]any{MetaPendingDecision: pendingDecision(d)}})
			text = describeDecision(d)
		} else if c := stalled(s); c != nil {
			text = c.Message
		}
	}
	if text == "" && len(parts) == 0 {
		return st
	}
	st.Message = agentMessage(info, text, parts...)
	st.Message.ID = fmt.Sprintf("%s-s%d", s.Name, s.Status.Step)
	return st
}

// pendingDecision is the decision a Session waits on, as the data an A2A client reads,
// with how to answer it.
func pendingDecision(d *flowv1.DecisionRecord) map[string]any {
	m := map[string]any{
		"decision":   d.ID,
		"from":       d.From,
		"to":         d.To,
		"state":      string(d.State),
		"confidence": string(d.Confidence),
		"reasoning":  d.Reasoning,
		"answer":     `send a message with a data part {"approve": true} (or false to reject; "to" picks another allowed destination, "reason" says why, "decision" names it)`,
	}
	if len(d.AllowedDestinations) > 0 {
		m["allowedDestinations"] = d.AllowedDestinations
	}
	if tool, ok := d.ToolCall(); ok {
		m["toolCall"] = tool
	}
	return m
}

func describeDecision(d *flowv1.DecisionRecord) string {
	if tool, ok := d.ToolCall(); ok {
		return fmt.Sprintf("Tool call %s (%s) waits for approval", d.ID, tool)
	}
	what := "waits for approval"
	if d.State == flowv1.DecisionEscalated {
		what = "was escalated and waits for a person"
	}
	return fmt.Sprintf("Decision %s (%s -> %s, confidence %s) %s", d.ID, d.From, d.To, d.Confidence, what)
}

// Task is the A2A task of the Session: its state, the conversation as history (each
// message and the replies it got, the newest historyLength kept when it is set), and
// each kept reply as an artifact.
func Task(s *flowv1.Session, historyLength *int) *a2a.Task {
	info := taskInfo(s)
	t := &a2a.Task{
		ID: info.TaskID, ContextID: info.ContextID,
		Status: status(s),
		Metadata: map[string]any{
			MetaEventID: here(s).id(),
			"namespace": s.Namespace,
			"journey":   s.Spec.JourneyRef.Name,
			"phase":     string(s.Status.Phase),
			"pathway":   s.Status.CurrentPathway,
			"step":      s.Status.Step,
		},
	}
	dropped := int64(s.Status.TranscriptDropped)
	for i := range s.Status.Transcript {
		x := &s.Status.Transcript[i]
		n := dropped + int64(i) + 1
		if x.Approval != nil {
			m := a2a.NewMessageForTask(a2a.MessageRoleUser, info, a2a.TextPart{Text: describeApproval(x.Approval)})
			m.ID = fmt.Sprintf("approval-%d", x.InputNumber)
			t.History = append(t.History, m)
			continue
		}
		if x.User != "" {
			m := a2a.NewMessageForTask(a2a.MessageRoleUser, info, a2a.TextPart{Text: x.User})
			m.ID = x.MessageID
			t.History = append(t.History, m)
		}
		if x.Assistant != "" {
			m := a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.TextPart{Text: x.Assistant})
			m.ID = fmt.Sprintf("reply-%d", n)
			t.History = append(t.History, m)
		}
		t.Artifacts = append(t.Artifacts, replyArtifact(n, x))
	}
	if historyLength != nil {
		if k := max(*historyLength, 0); k < len(t.History) {
			t.History = t.History[len(t.History)-k:]
		}
	}
	return t
}
