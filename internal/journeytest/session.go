package journeytest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
	protocol "github.com/journeyops/journey-operator/internal/step"
)

// MaxEngineSteps bounds the engine steps of one settle: a journey that does not settle
// within them fails its test instead of looping forever.
const MaxEngineSteps = 1000

// Default Session identity of a test.
const (
	DefaultSessionName = "journey-test"
	DefaultSessionUID  = "00000000-0000-0000-0000-000000000000"
)

// reply is an agent's answer to an effect: what the agent returned (the controller
// journals it with Effect.Record), or a journal entry to store verbatim.
type reply struct {
	resp   any
	err    error
	record *flowv1.EffectRecord
}

// answerer answers the effects of a step.
type answerer interface {
	answer(eff *engine.Effect) (reply, error)
}

// session is a Session driven offline by the Session controller's own step protocol
// (package step): each write's effects answered from the test, journaled and applied
// as the controller's writes are, nothing written when nothing changed. The clock
// starts at the creation time and advances one second per write.
type session struct {
	snap       *engine.Snapshot
	name, uid  string
	created    time.Time
	now        time.Time
	generation int64
	spec       flowv1.SessionSpec
	st         *flowv1.SessionStatus
	started    bool
	// tools are the test's scripted results of server tools.
	tools []ToolResult
}

func newSession(snap *engine.Snapshot, name, uid string, start time.Time, spec flowv1.SessionSpec) *session {
	if name == "" {
		name = DefaultSessionName
	}
	if uid == "" {
		uid = DefaultSessionUID
	}
	return &session{snap: snap, name: name, uid: uid, created: start, now: start, generation: 1, spec: spec, st: &flowv1.SessionStatus{}}
}

// progress is what one settle did.
type progress struct {
	history []flowv1.HistoryEntry
	replies []string
	effects []string
	// decisions are the decisions made, each as it was first written (its state
	// then is the confidence band it fell in).
	decisions []flowv1.DecisionRecord
	// stalled is set when an agent failed terminally: the controller stalls the Session
	// and waits for a change of its spec.
	stalled bool
}

// performer answers a settle's effects with an answerer, noting each effect.
type performer struct {
	answers answerer
	p       *progress
}

func (f performer) Perform(_ context.Context, eff *engine.Effect) (protocol.Answer, error) {
	f.p.effects = append(f.p.effects, protocol.Describe(eff))
	r, err := f.answers.answer(eff)
	return protocol.Answer{Response: r.resp, Err: r.err, Record: r.record}, err
}

// settle reconciles until a reconcile writes nothing, answering effects with a.
func (s *session) settle(a answerer) (*progress, error) {
	p := &progress{}
	loop := protocol.Loop{Performer: performer{answers: a, p: p}}
	for n := 0; ; n++ {
		if s.st.Phase.IsTerminal() {
			return p, nil // the controller only waits for the TTL now
		}
		if n >= MaxEngineSteps {
			return p, fmt.Errorf("the Session did not settle within %d engine steps (pathway %s, phase %s)", MaxEngineSteps, s.st.CurrentPathway, s.st.Phase)
		}
		res, err := loop.Step(context.Background(), s.snap, protocol.Input{Generation: s.generation, Input: engine.Input{
			Spec: &s.spec, Status: s.st, Now: s.now,
			SessionName: s.name, SessionUID: s.uid, CreationTime: s.created,
		}})
		switch {
		case err != nil:
			return p, err
		case res.Outcome == protocol.AgentRetry:
			return p, res.Err // the controller would try again later; offline nothing changes
		case res.Outcome == protocol.AgentStalled:
			s.st, s.now = res.Status, s.now.Add(time.Second)
			p.stalled = true
			return p, nil
		case res.Outcome == protocol.Unchanged:
			return p, nil
		}
		for _, h := range res.Status.History {
			if h.Step > s.st.Step {
				p.history = append(p.history, h)
			}
		}
		if d := res.Status.LastDecision; d != nil && (s.st.LastDecision == nil || s.st.LastDecision.ID != d.ID) {
			p.decisions = append(p.decisions, *d.DeepCopy())
		}
		if text, ok := finishedReply(s.st, res.Status); ok {
			p.replies = append(p.replies, text)
		}
		s.st = res.Status
		s.now = s.now.Add(time.Second)
	}
}

// finishedReply returns the reply of a turn that the step from old to cur finished.
func finishedReply(old, cur *flowv1.SessionStatus) (string, bool) {
	lt := cur.LastTurn
	if lt == nil || cur.Turn != nil || lt.AssistantText == "" {
		return "", false
	}
	if old.Turn == nil && old.Turns == cur.Turns && equality.Semantic.DeepEqual(old.LastTurn, lt) {
		return "", false
	}
	return lt.AssistantText, true
}

// send appends a step's input to the Session spec, as kubectl journey say, outcome and
// approve do. It returns the message id of a message.
func (s *session) send(step *Step) (string, error) {
	switch {
	case step.Message != nil:
		id := step.Message.ID
		if id == "" {
			id = fmt.Sprintf("m%d", len(s.spec.Messages)+1)
		}
		for _, m := range s.spec.Messages {
			if m.ID == id {
				return id, fmt.Errorf("message id %q is used twice", id)
			}
		}
		s.spec.Messages = append(s.spec.Messages, flowv1.Message{ID: id, Text: step.Message.Text})
		s.generation++
		return id, nil
	case step.Outcome != nil:
		o := flowv1.ExternalOutcome{
			Pathway: flowv1.Name(step.Outcome.Pathway), Iteration: step.Outcome.Iteration,
			ResultType: step.Outcome.ResultType, Message: step.Outcome.Message,
		}
		if o.Pathway == "" {
			o.Pathway = flowv1.Name(s.st.CurrentPathway)
		}
		if o.Iteration == 0 {
			o.Iteration = max(s.st.Iteration, 1)
		}
		if step.Outcome.Data != nil {
			o.Data = step.Outcome.Data.DeepCopy()
		}
		s.spec.Outcomes = append(s.spec.Outcomes, o)
		s.generation++
	case step.Approval != nil:
		a := flowv1.Approval{
			DecisionID: step.Approval.DecisionID, Approve: ptr.To(*step.Approval.Approve),
			Destination: flowv1.Name(step.Approval.Destination), By: step.Approval.By, Reason: step.Approval.Reason,
		}
		if a.DecisionID == "" {
			if s.st.LastDecision == nil {
				return "", errors.New("approval: the Session has made no decision to approve (status.lastDecision is empty); give decisionID")
			}
			a.DecisionID = s.st.LastDecision.ID
		}
		s.spec.Approvals = append(s.spec.Approvals, a)
		s.generation++
	case step.Suspend != nil:
		if s.spec.Suspend != *step.Suspend {
			s.spec.Suspend = *step.Suspend
			s.generation++
		}
	case step.Cancel:
		if !s.spec.Cancel {
			s.spec.Cancel = true
			s.generation++
		}
	}
	return "", nil
}
