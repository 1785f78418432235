package engine

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// intervene appends an intervention by alice.
func (s *session) intervene(iv flowv1.Intervention) *session {
	iv.ID = fmt.Sprintf("i-%d", s.spec.InterventionCount()+1)
	iv.By = "alice"
	s.spec.Interventions = append(s.spec.Interventions, iv)
	return s
}

// refusal is why the last intervention processed was refused, "" when it applied
// or none was processed.
func (s *session) refusal() string {
	n := len(s.st.Interventions)
	if n == 0 || s.st.Interventions[n-1].Result != flowv1.InterventionRefused {
		return ""
	}
	return s.st.Interventions[n-1].Message
}

// chatter is a conversation whose turns accumulate the messages in context.notes.
func chatter(mods ...func(*flowv1.JourneySpec)) def {
	d := conversation(mods...)
	d.p["chat"].Accumulate = []string{"notes"}
	d.p["chat"].Builtin.Outputs = []flowv1.BuiltinOutput{{Name: "notes", Expression: `[message]`}}
	return d
}

// stuck is a Session stopped one way, with a pathway to go to and a step to rewind to.
type stuck struct {
	name   string
	block  string // the Stalled reason, Failed, or "" when nothing blocks
	phase  flowv1.Phase
	make   func(t *testing.T) *session
	goTo   string
	rewind int32
}

func stuckSessions() []stuck {
	loop := journeyOf("plan", map[string]*flowv1.PathwaySpec{
		"plan":      phase("plan", &flowv1.OutcomeTransitions{OnSuccess: str("implement")}),
		"implement": phase("implement", &flowv1.OutcomeTransitions{OnSuccess: str("test"), OnFailure: str("plan")}),
		"test":      phase("test", &flowv1.OutcomeTransitions{OnSuccess: str("deploy")}),
		"deploy":    phase("deploy", nil),
	})
	return []stuck{
		{name: "loop", block: flowv1.ReasonLoopDetected, goTo: "test", rewind: 1, make: func(t *testing.T) *session {
			s := newSession(t, loop)
			s.spec.InitialContext = raw(`{"results":{"implement":"failure"}}`)
			return s
		}},
		{name: "retry limit", block: flowv1.ReasonRetryLimit, goTo: "roadmap", rewind: 1, make: func(t *testing.T) *session {
			s := newSession(t, planner())
			s.spec.InitialContext = raw(`{"collect":"sufficient_context","outline_ok_at":99}`)
			return s
		}},
		{name: "turn limit", block: flowv1.ReasonTurnLimit, goTo: "chat", rewind: 1, make: func(t *testing.T) *session {
			s := newSession(t, chatter(func(j *flowv1.JourneySpec) { j.Limits.MaxTurns = 2 }))
			return s.say("m1", "a").say("m2", "b").say("m3", "c")
		}},
		{name: "iteration limit", block: flowv1.ReasonIterationLimit, goTo: "plan", rewind: 1, make: func(t *testing.T) *session {
			d := workflow()
			d.j.Limits.MaxIterations = 2
			d.j.LoopPrevention.MaxCycleRepeats = 10
			s := newSession(t, d)
			s.post("plan", 1, flowv1.ResultSuccess, "").post("generate", 1, flowv1.ResultSuccess, "")
			s.post("review", 1, flowv1.ResultFailure, "").post("revise", 2, flowv1.ResultSuccess, "").post("review", 2, flowv1.ResultFailure, "")
			return s
		}},
		{name: "transition limit", block: flowv1.ReasonTransitionLimit, goTo: "c", rewind: 1, make: func(t *testing.T) *session {
			return newSession(t, journeyOf("a", map[string]*flowv1.PathwaySpec{
				"a": {RunOn: flowv1.RunOnEntry, Next: "b"}, "b": {RunOn: flowv1.RunOnEntry, Next: "c"}, "c": {RunOn: flowv1.RunOnEntry}},
				func(j *flowv1.JourneySpec) { j.Limits.MaxTransitions = 1 }))
		}},
		{name: "session timeout", block: flowv1.ReasonSessionTimeout, goTo: "chat", rewind: 1, make: func(t *testing.T) *session {
			s := newSession(t, chatter(func(j *flowv1.JourneySpec) { j.Limits.SessionTimeout = &metav1.Duration{Duration: 45 * time.Second} }))
			s.say("m1", "a")
			s.settle()
			s.now = t0.Add(time.Minute)
			return s
		}},
		{name: "idle timeout", block: flowv1.ReasonIdleTimeout, goTo: "chat", rewind: 1, make: func(t *testing.T) *session {
			s := newSession(t, chatter(func(j *flowv1.JourneySpec) { j.Limits.IdleTimeout = &metav1.Duration{Duration: 30 * time.Second} }))
			s.say("m1", "a")
			s.settle()
			s.now = t0.Add(time.Minute)
			return s
		}},
		{name: "failed", block: flowv1.ReasonFailed, goTo: "chat", rewind: 1, make: func(t *testing.T) *session {
			s := newSession(t, chatter(func(j *flowv1.JourneySpec) {
				j.Limits.MaxContextBytes = 1024
				j.ErrorRecovery = flowv1.ErrorRecoveryFailFast
			}))
			return s.say("m1", "a").say("m2", strings.Repeat("z", 1100))
		}},
		{name: "waiting", phase: flowv1.PhaseWaitingForInput, goTo: "chat", rewind: 1, make: func(t *testing.T) *session {
			return newSession(t, chatter()).say("m1", "a").say("m2", "b")
		}},
		{name: "completed", phase: flowv1.PhaseCompleted, goTo: "plan", rewind: 1, make: func(t *testing.T) *session {
			return newSession(t, loop)
		}},
	}
}

// TestInterventionsOnEveryBlock applies each intervention to a Session stopped each
// way: it applies (once, recorded as a person's act) or is refused with its reason.
func TestInterventionsOnEveryBlock(t *testing.T) {
	// refused maps block/action to the reason a refusal gives; the rest apply.
	capped := map[string]string{
		flowv1.ReasonTurnLimit:       "maxTurns 2 is used up",
		flowv1.ReasonIterationLimit:  "maxIterations 2 is reached",
		flowv1.ReasonTransitionLimit: "maxTransitions 1 is used up",
	}
	refusal := func(c stuck, action flowv1.InterventionAction) string {
		switch {
		case c.phase == flowv1.PhaseCompleted:
			return "the session is Completed, which is final"
		case c.block == "" && action == flowv1.InterventionResume:
			return "nothing blocks the session"
		case c.name == "iteration limit" && action == flowv1.InterventionRetry:
			return "pathway review is External" // checked before the block
		case capped[c.block] != "":
			return capped[c.block]
		}
		return ""
	}
	actions := []flowv1.InterventionAction{flowv1.InterventionResume, flowv1.InterventionRetry, flowv1.InterventionGoto, flowv1.InterventionRewind}
	for _, c := range stuckSessions() {
		for _, action := range actions {
			t.Run(c.name+"/"+string(action), func(t *testing.T) {
				s := c.make(t)
				s.settle()
				if got := s.stalled(); c.block != flowv1.ReasonFailed && got != c.block {
					t.Fatalf("set-up: stalled %q, want %q\n%s", got, c.block, dump(s.st))
				}
				if c.block == flowv1.ReasonFailed && s.st.Phase != flowv1.PhaseFailed || c.phase != "" && s.st.Phase != c.phase {
					t.Fatalf("set-up: phase %s", s.st.Phase)
				}
				if c.block != "" {
					if c := s.condition(flowv1.ConditionStalled); c == nil || !strings.Contains(c.Message, "kubectl journey ") || !strings.Contains(c.Message, "patient-12345") {
						t.Errorf("the Stalled condition does not name the command that gets the session going: %+v", c)
					}
				}
				iv := flowv1.Intervention{Action: action, Reason: "a person looked"}
				switch action {
				case flowv1.InterventionGoto:
					iv.Pathway = flowv1.Name(c.goTo)
				case flowv1.InterventionRewind:
					iv.Step = ptr.To(c.rewind)
				case flowv1.InterventionRetry:
					iv.Feedback = "try again"
				}
				old := s.st.DeepCopy()
				humans := countHuman(s.st)
				s.intervene(iv)
				s.step()
				if s.st.ProcessedInterventions != 1 {
					t.Fatalf("processedInterventions %d", s.st.ProcessedInterventions)
				}
				events := Events(old, s.st)
				if want := refusal(c, action); want != "" {
					if got := s.refusal(); !strings.Contains(got, want) {
						t.Fatalf("want refused with %q, records %s", want, dump(s.st.Interventions))
					}
					// A refusal is not a turn: the last turn and TurnFailed stay as they were.
					if !reflect.DeepEqual(s.st.LastTurn, old.LastTurn) || !reflect.DeepEqual(s.condition(flowv1.ConditionTurnFailed), apimeta.FindStatusCondition(old.Conditions, flowv1.ConditionTurnFailed)) {
						t.Errorf("a refused intervention changed the last turn %s or TurnFailed %+v", dump(s.st.LastTurn), s.condition(flowv1.ConditionTurnFailed))
					}
					if !eventWith(events, EventWarning, flowv1.ReasonInterventionRefused, want) || eventWith(events, EventNormal, flowv1.ReasonIntervened, "") {
						t.Errorf("events %+v", events)
					}
					if got := s.stalled(); c.block != "" && c.block != flowv1.ReasonFailed && got != c.block {
						t.Errorf("a refused intervention lifted %s: stalled %q", c.block, got)
					}
					if countHuman(s.st) != humans {
						t.Errorf("a refused intervention is in history")
					}
				} else {
					h := s.st.History[len(s.st.History)-1]
					if h.Intervention != action || h.Source != flowv1.SourceHuman || h.By != "alice" || !strings.Contains(h.Reason, "a person looked") {
						t.Fatalf("history entry %s", dump(h))
					}
					if !eventWith(events, EventNormal, flowv1.ReasonIntervened, string(action)+" by alice") {
						t.Errorf("events %+v", events)
					}
					if b, blocked := Blocked(s.st); blocked || s.st.Phase.IsTerminal() {
						t.Errorf("still stopped after %s: %s %s", action, b, s.st.Phase)
					}
				}
				// Applied exactly once, however many steps follow.
				n := countHuman(s.st)
				s.settle()
				if countHuman(s.st) != n || s.st.ProcessedInterventions != 1 {
					t.Errorf("the intervention applied again: %d person entries, processed %d", countHuman(s.st), s.st.ProcessedInterventions)
				}
			})
		}
	}
}

func countHuman(st *flowv1.SessionStatus) int {
	n := 0
	for _, h := range st.History {
		if h.Source == flowv1.SourceHuman {
			n++
		}
	}
	return n
}

func eventWith(events []Event, typ, reason, text string) bool {
	return slices.ContainsFunc(events, func(e Event) bool {
		return e.Type == typ && e.Reason == reason && strings.Contains(e.Message, text)
	})
}

// TestResumeRaisesCaps: a Resume with limits lifts a count cap and the Session
// answers the next message; its limits stay the Session's.
func TestResumeRaisesCaps(t *testing.T) {
	s := newSession(t, chatter(func(j *flowv1.JourneySpec) { j.Limits.MaxTurns = 2 }))
	s.say("m1", "a").say("m2", "b").say("m3", "c")
	s.settle()
	if s.stalled() != flowv1.ReasonTurnLimit {
		t.Fatalf("stalled %q", s.stalled())
	}
	s.intervene(flowv1.Intervention{Action: flowv1.InterventionResume, Limits: &flowv1.SessionLimits{MaxTurns: 3}})
	s.settle()
	if s.st.ProcessedMessages != 3 || s.st.LastTurn.MessageID != "m3" || s.st.LastTurn.FinishReason != flowv1.FinishSuccess {
		t.Fatalf("m3 not answered: %s", dump(s.st.LastTurn))
	}
	if l := s.st.InterventionLimits; l == nil || l.MaxTurns != 3 {
		t.Errorf("interventionLimits %+v", l)
	}
	// The raised cap holds: the fourth turn stalls again.
	s.say("m4", "d")
	s.settle()
	if s.stalled() != flowv1.ReasonTurnLimit || !strings.Contains(s.condition(flowv1.ConditionStalled).Message, "maxTurns 3") {
		t.Errorf("stalled %q %+v", s.stalled(), s.condition(flowv1.ConditionStalled))
	}
}

// TestResumeAfterBlocks: a resumed Session answers the next message, and what
// blocked it is reset, not only hidden.
func TestResumeAfterBlocks(t *testing.T) {
	t.Run("session timeout restarts from now", func(t *testing.T) {
		s := newSession(t, chatter(func(j *flowv1.JourneySpec) { j.Limits.SessionTimeout = &metav1.Duration{Duration: 45 * time.Second} }))
		s.say("m1", "a")
		s.settle()
		s.now = t0.Add(time.Minute)
		s.settle()
		s.intervene(flowv1.Intervention{Action: flowv1.InterventionResume}).say("m2", "b")
		s.settle()
		if s.stalled() != "" || s.st.LastTurn.MessageID != "m2" {
			t.Fatalf("stalled %q, last turn %s", s.stalled(), dump(s.st.LastTurn))
		}
		if got := s.snap.NextDeadline(&s.spec, s.st, t0); !got.Equal(s.now.Add(45 * time.Second)) {
			t.Errorf("next deadline %v, want 45s after the resume", got)
		}
		s.now = s.now.Add(46 * time.Second)
		s.settle()
		if s.stalled() != flowv1.ReasonSessionTimeout {
			t.Errorf("the restarted timeout did not fire: %q", s.stalled())
		}
	})
	t.Run("loop window restarts", func(t *testing.T) {
		c := stuckSessions()[0]
		s := c.make(t)
		s.settle()
		moves := strings.Count(s.path(), ">")
		s.intervene(flowv1.Intervention{Action: flowv1.InterventionResume})
		s.settle()
		// plan and implement run on entry: the loop goes round again, up to the limit.
		if s.stalled() != flowv1.ReasonLoopDetected || strings.Count(s.path(), ">") <= moves {
			t.Errorf("stalled %q, path %s: the window did not restart", s.stalled(), s.path())
		}
	})
	t.Run("retry count resets", func(t *testing.T) {
		s := newSession(t, planner())
		s.spec.InitialContext = raw(`{"collect":"sufficient_context","outline_ok_at":99}`)
		s.settle()
		s.intervene(flowv1.Intervention{Action: flowv1.InterventionResume})
		s.step()
		if s.st.Retries["outline"] != 0 || s.stalled() != "" {
			t.Errorf("retries %v stalled %q", s.st.Retries, s.stalled())
		}
	})
	t.Run("failed waits for input again", func(t *testing.T) {
		c := stuckSessions()[7]
		s := c.make(t)
		s.settle()
		s.intervene(flowv1.Intervention{Action: flowv1.InterventionResume}).say("m3", "hello")
		s.settle()
		s.expect(flowv1.PhaseWaitingForInput, "chat")
		if s.st.LastTurn.MessageID != "m3" || s.st.CompletionTime != nil || s.condition(flowv1.ConditionCompleted) != nil {
			t.Errorf("after resume: %s", dump(s.st))
		}
		if c := s.condition(flowv1.ConditionReady); c.Status != metav1.ConditionTrue {
			t.Errorf("Ready %+v", c)
		}
	})
}

// TestRetryFeedback: a Retry runs the current pathway again at once, with the
// intervention's feedback in the agents' request.
func TestRetryFeedback(t *testing.T) {
	var feedback []string
	l := &llm{pathway: func(req agent.PathwayRequest) (agent.PathwayResponse, error) {
		feedback = append(feedback, req.Feedback)
		return agent.PathwayResponse{Reply: "ok", Complete: false}, nil
	}}
	s := newSession(t, conversation(func(j *flowv1.JourneySpec) {
		j.Agents = []flowv1.AgentSpec{{Name: "bot", Provider: flowv1.ProviderOpenAI, Model: "m"}}
	}))
	s.answer = l.answer
	s.say("m1", "hi")
	s.settle()
	s.intervene(flowv1.Intervention{Action: flowv1.InterventionRetry, Feedback: "use the insurance id"})
	s.settle()
	if !slices.Equal(feedback, []string{"", "use the insurance id"}) {
		t.Fatalf("feedback per run %q", feedback)
	}
	if s.st.Turns != 2 || s.st.Retries != nil || s.st.LastDecision.Source != flowv1.SourceHuman {
		t.Errorf("turns %d retries %v decision %s", s.st.Turns, s.st.Retries, dump(s.st.LastDecision))
	}
	// Nothing to retry before any turn ran; an External pathway is run by its executor.
	s = newSession(t, conversation()).intervene(flowv1.Intervention{Action: flowv1.InterventionRetry})
	s.settle()
	if !strings.Contains(s.refusal(), "nothing to retry") {
		t.Errorf("records %s", dump(s.st.Interventions))
	}
	s = newSession(t, workflow())
	s.post("plan", 1, flowv1.ResultSuccess, "")
	s.settle()
	s.intervene(flowv1.Intervention{Action: flowv1.InterventionRetry})
	s.settle()
	if !strings.Contains(s.refusal(), "is External") {
		t.Errorf("records %s", dump(s.st.Interventions))
	}
}

// TestGoto: a person's move, to any pathway of the journey, recorded with source
// Human; a pathway that is not in the journey is refused.
func TestGoto(t *testing.T) {
	s := newSession(t, healthcare())
	s.say("m1", "Hi, I need to book an appointment with a cardiologist.")
	s.settle()
	from := s.st.CurrentPathway
	s.intervene(flowv1.Intervention{Action: flowv1.InterventionGoto, Pathway: "faq", Reason: "the patient asked about copays"})
	s.step()
	s.expect(flowv1.PhaseWaitingForInput, "faq")
	d := s.st.LastDecision
	if d.Source != flowv1.SourceHuman || d.From != from || d.To != "faq" || !strings.Contains(d.Reasoning, "copays") {
		t.Errorf("lastDecision %s", dump(d))
	}
	if !slices.Equal(s.st.PathwayStack, []string{from}) {
		t.Errorf("a detour pushes the pathway it leaves: stack %v", s.st.PathwayStack)
	}
	s.intervene(flowv1.Intervention{Action: flowv1.InterventionGoto, Pathway: "nowhere"})
	s.step()
	if !strings.Contains(s.refusal(), `pathway "nowhere" is not in journey revision rev-1`) {
		t.Errorf("records %s", dump(s.st.Interventions))
	}
	s.expect(flowv1.PhaseWaitingForInput, "faq")
}

// TestRewind restores exactly the state recorded after step N: pathway, stack,
// iteration and context; the transcript and journal keep what happened, marked.
func TestRewind(t *testing.T) {
	s := newSession(t, healthcare())
	s.spec.InitialContext = raw(`{"insurance_id":"INS-123456"}`)
	recorded := map[int64]*flowv1.SessionStatus{}
	for i, m := range []string{
		"Hi, I need to book an appointment with a cardiologist.",
		"Wait, what is the copay for specialist visits?",
		"Thanks for the info",
		"Show me the available doctors",
		"I don't want this doctor",
	} {
		s.say(fmt.Sprintf("m%d", i+1), m)
		for {
			before := s.st.Step
			s.step()
			if s.st.Step == before {
				break
			}
			recorded[s.st.Step] = s.st.DeepCopy()
		}
	}
	last := s.st.Step
	for n := int64(1); n < last; n++ {
		t.Run(fmt.Sprint("step ", n), func(t *testing.T) {
			r := &session{t: t, snap: s.snap, spec: *s.spec.DeepCopy(), st: s.st.DeepCopy(), now: s.now}
			r.intervene(flowv1.Intervention{Action: flowv1.InterventionRewind, Step: ptr.To(int32(n))})
			r.step()
			want := recorded[n]
			if r.st.CurrentPathway != want.CurrentPathway || !slices.Equal(r.st.PathwayStack, want.PathwayStack) || r.st.Iteration != want.Iteration {
				t.Errorf("at %s %v iteration %d, want %s %v iteration %d", r.st.CurrentPathway, r.st.PathwayStack, r.st.Iteration,
					want.CurrentPathway, want.PathwayStack, want.Iteration)
			}
			if !jsonEqual(r.st.Context, want.Context) {
				t.Errorf("context %s, want %s", r.st.Context.Raw, want.Context.Raw)
			}
			for _, e := range r.st.Transcript {
				if e.Rewound != (e.Step > n) {
					t.Errorf("exchange of step %d rewound=%v", e.Step, e.Rewound)
				}
			}
			for _, e := range r.st.Journal {
				if e.Rewound != (e.Step > n) {
					t.Errorf("journal entry of step %d rewound=%v", e.Step, e.Rewound)
				}
			}
			agentView := (&run{st: r.st}).history()
			if got, want := len(agentView), 2*countKept(r.st.Transcript); got > want {
				t.Errorf("agents see %d lines, more than the %d of the exchanges not rewound", got, want)
			}
		})
	}
	// A step no longer kept is refused.
	d := healthcare()
	d.j.Limits.MaxHistory = 1
	r := newSession(t, d)
	r.say("m1", "Hi, I need to book an appointment with a cardiologist.").say("m2", "Wait, what is the copay for specialist visits?").say("m3", "Thanks")
	r.settle()
	r.intervene(flowv1.Intervention{Action: flowv1.InterventionRewind, Step: ptr.To(int32(1))})
	r.settle()
	if !strings.Contains(r.refusal(), "no longer kept") {
		t.Errorf("records %s\nhistory %s", dump(r.st.Interventions), dump(r.st.History))
	}
}

func countKept(tr []flowv1.Exchange) int {
	n := 0
	for _, e := range tr {
		if !e.Rewound {
			n++
		}
	}
	return n
}

// Every processed intervention is recorded whole in status.interventions, with the
// step that processed it, Applied or Refused and why, in the write that processes it;
// a refusal is not a turn (TurnFailed and lastTurn stay as the last turn left them, and
// the next turn still sets TurnFailed from itself); the records stay within their
// bound, the newest kept.
func TestInterventionRecords(t *testing.T) {
	s := newSession(t, conversation())
	s.say("m1", "hi")
	s.settle()
	s.intervene(flowv1.Intervention{Action: flowv1.InterventionGoto, Pathway: "nowhere", Reason: "try"})
	s.step()
	refusedAt := s.st.Step
	s.intervene(flowv1.Intervention{Action: flowv1.InterventionRetry, Feedback: "shorter"})
	s.settle()
	want := []flowv1.InterventionRecord{
		{Step: refusedAt, Result: flowv1.InterventionRefused, Message: `pathway "nowhere" is not in journey revision rev-1`,
			Intervention: flowv1.Intervention{ID: "i-1", Action: flowv1.InterventionGoto, Pathway: "nowhere", Reason: "try", By: "alice"}},
		{Step: refusedAt + 1, Result: flowv1.InterventionApplied,
			Intervention: flowv1.Intervention{ID: "i-2", Action: flowv1.InterventionRetry, Feedback: "shorter", By: "alice"}},
	}
	if !reflect.DeepEqual(s.st.Interventions, want) {
		t.Fatalf("records %s\nwant %s", dump(s.st.Interventions), dump(want))
	}
	if h := s.st.History[len(s.st.History)-1]; h.Step != want[1].Step || h.Transition != "i-2" {
		t.Errorf("the applied record's step is not its history entry's: %s", dump(h))
	}

	// A refusal after a failed turn leaves TurnFailed True with the turn's own
	// failure; the next turn without a failure sets it False.
	f := newSession(t, conversation(func(j *flowv1.JourneySpec) {
		j.Agents = []flowv1.AgentSpec{{Name: "bot", Provider: flowv1.ProviderOpenAI, Model: "m"}}
	}))
	fail := true
	f.answer = (&llm{pathway: func(agent.PathwayRequest) (agent.PathwayResponse, error) {
		if fail {
			return agent.PathwayResponse{}, &agent.Error{Class: agent.Invalid, Kind: flowv1.FailureValidation, Source: flowv1.FailureLLM, Err: errors.New("bad JSON")}
		}
		return agent.PathwayResponse{Reply: "ok"}, nil
	}}).answer
	f.say("m1", "hi")
	f.settle()
	failed := f.condition(flowv1.ConditionTurnFailed)
	if failed == nil || failed.Status != metav1.ConditionTrue {
		t.Fatalf("set-up: TurnFailed %+v", failed)
	}
	lastTurn := f.st.LastTurn.DeepCopy()
	f.intervene(flowv1.Intervention{Action: flowv1.InterventionGoto, Pathway: "nowhere"})
	f.settle()
	if c := f.condition(flowv1.ConditionTurnFailed); f.refusal() == "" || !reflect.DeepEqual(c, failed) || !reflect.DeepEqual(f.st.LastTurn, lastTurn) {
		t.Errorf("a refusal changed TurnFailed %+v or the last turn %s", c, dump(f.st.LastTurn))
	}
	fail = false
	f.say("m2", "again")
	f.settle()
	if c := f.condition(flowv1.ConditionTurnFailed); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("after a turn without a failure TurnFailed is %+v", c)
	}

	// Many refusals with long reasons: the records keep the newest within their bound.
	for i := range 80 {
		s.intervene(flowv1.Intervention{Action: flowv1.InterventionGoto, Pathway: "nowhere", Reason: strings.Repeat("x", 400)})
		s.step()
		if n := len(s.st.Interventions); s.st.Interventions[n-1].Intervention.ID != fmt.Sprintf("i-%d", i+3) {
			t.Fatalf("the newest record is %s, want i-%d", s.st.Interventions[n-1].Intervention.ID, i+3)
		}
	}
	if n := StoredBytes(s.st.Interventions); n > flowv1.MaxInterventionRecordsBytes || len(s.st.Interventions) < 4 || len(s.st.Interventions) > flowv1.MaxInterventionRecords {
		t.Errorf("%d records take %d bytes, over %d", len(s.st.Interventions), n, flowv1.MaxInterventionRecordsBytes)
	}
}
