package journeytest

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/engine"
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

// session is a Session driven offline the way the Session controller drives it: one
// engine step per reconcile, the one effect performed and journaled in
// status.pendingEffect before the status is written, nothing written when nothing
// changed. The clock starts at the creation time and advances one second per write.
type session struct {
	snap       *engine.Snapshot
	name, uid  string
	created    time.Time
	now        time.Time
	generation int64
	spec       flowv1.SessionSpec
	st         *flowv1.SessionStatus
	started    bool
	engineRuns int
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
	// stalled is set when an agent failed terminally: the controller stalls the Session
	// and waits for a change of its spec.
	stalled bool
}

// settle reconciles until a reconcile writes nothing, answering effects with a.
func (s *session) settle(a answerer) (*progress, error) {
	p := &progress{}
	for n := 0; ; n++ {
		if s.st.Phase.IsTerminal() {
			return p, nil // the controller only waits for the TTL now
		}
		if n >= MaxEngineSteps {
			return p, fmt.Errorf("the Session did not settle within %d engine steps (pathway %s, phase %s)", MaxEngineSteps, s.st.CurrentPathway, s.st.Phase)
		}
		status, eff := engine.Step(s.snap, engine.Input{
			Spec: &s.spec, Status: s.st, Now: s.now,
			SessionName: s.name, SessionUID: s.uid, CreationTime: s.created,
		})
		s.engineRuns++
		if eff != nil {
			p.effects = append(p.effects, describeEffect(eff))
			r, err := a.answer(eff)
			if err != nil {
				return p, err
			}
			if r.record != nil {
				status.PendingEffect = r.record.DeepCopy()
			} else {
				if r.err != nil && agent.ClassOf(r.err) == agent.Terminal {
					s.stall(flowv1.ReasonAgentTerminalError, r.err.Error())
					p.stalled = true
					return p, nil
				}
				status.PendingEffect = eff.Record(s.uid, status.Step, r.resp, r.err)
			}
			controller.AppendJournal(status, status.PendingEffect, s.snap.Journey().Limits.MaxJournal)
			controller.SetCondition(status, flowv1.ConditionAgentAvailable, metav1.ConditionTrue, flowv1.ReasonAgentReady, "The last agent call answered", s.now)
		}
		status.ObservedGeneration = s.generation
		if equality.Semantic.DeepEqual(s.st, status) {
			return p, nil
		}
		for _, h := range status.History {
			if h.Step > s.st.Step {
				p.history = append(p.history, h)
			}
		}
		if text, ok := finishedReply(s.st, status); ok {
			p.replies = append(p.replies, text)
		}
		s.st = status
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

// stall is what the controller writes when an agent fails terminally.
func (s *session) stall(reason, msg string) {
	st := s.st.DeepCopy()
	controller.SetCondition(st, flowv1.ConditionStalled, metav1.ConditionTrue, reason, msg, s.now)
	controller.SetCondition(st, flowv1.ConditionReady, metav1.ConditionFalse, reason, msg, s.now)
	apimeta.RemoveStatusCondition(&st.Conditions, flowv1.ConditionReconciling)
	st.ObservedGeneration = s.generation
	s.st = st
	s.now = s.now.Add(time.Second)
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
			DecisionID: step.Approval.DecisionID, Approve: *step.Approval.Approve,
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

func describeEffect(eff *engine.Effect) string {
	who := ""
	if len(eff.Agents) > 0 {
		who = " by agent " + string(eff.Agents[0].Name)
	}
	switch {
	case eff.Pathway != nil:
		return fmt.Sprintf("RunPathway of pathway %s%s", eff.Pathway.Pathway, who)
	case eff.Decision != nil:
		return fmt.Sprintf("Decide on %s.%s%s", eff.Decision.Pathway, eff.Decision.Transition, who)
	case eff.Intent != nil:
		return fmt.Sprintf("ClassifyIntent of %q%s", shorten(eff.Intent.Message, 40), who)
	}
	return string(eff.Kind) + who
}
