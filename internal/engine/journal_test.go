package engine

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
)

// remoteHealthcare is the healthcare journey with every agent behind an LLM endpoint.
func remoteHealthcare() def {
	d := healthcare()
	for i := range d.j.Agents {
		d.j.Agents[i].Provider = flowv1.ProviderOpenAI
		d.j.Agents[i].Model = "gpt-4o-mini"
	}
	// Pathways without agents get one too, so every turn is journaled.
	d.j.Agents = append(d.j.Agents, flowv1.AgentSpec{Name: "assistant", Provider: flowv1.ProviderOpenAI, Model: "gpt-4o-mini"})
	for _, p := range d.p {
		if len(p.Agents) == 0 {
			p.Agents = []flowv1.Name{"assistant"}
		}
	}
	return d
}

// normalized drops what legitimately differs between a run with inline builtin
// answers and one through the journal: step numbers and the ids derived from them.
func normalized(st *flowv1.SessionStatus) *flowv1.SessionStatus {
	st = st.DeepCopy()
	st.Step = 0
	for i := range st.History {
		st.History[i].Step = 0
	}
	for i := range st.ContextHistory {
		st.ContextHistory[i].Step = 0
	}
	for i := range st.Transcript {
		st.Transcript[i].Step = 0
	}
	if st.LastDecision != nil {
		st.LastDecision.ID = ""
	}
	return st
}

func TestJournalReproducesBuiltinRun(t *testing.T) {
	messages := []string{
		"Hi, I need to book an appointment with a cardiologist.",
		"Wait, what is the copay for specialist visits?",
		"Thanks for the info",
		"Show me the available doctors",
		"I don't want this doctor",
		"Dr. Johnson looks great. Book the Tuesday 2pm slot.",
	}
	local := newSession(t, healthcare())
	remote := newSession(t, remoteHealthcare())
	fake := &llm{pathway: builtin.Run} // the LLM happens to answer like the builtin provider
	remote.answer = fake.answer
	for _, s := range []*session{local, remote} {
		s.spec.InitialContext = raw(`{"insurance_id":"INS-123456"}`)
		for i, m := range messages {
			s.say(fmt.Sprintf("m%d", i+1), m)
		}
		s.settle()
	}
	local.expect(flowv1.PhaseCompleted, "confirmation")
	if got, want := fake.calls[flowv1.EffectRunPathway], 7; got != want {
		t.Errorf("%d journaled pathway runs, want %d (6 messages and confirmation's entry run)", got, want)
	}
	if remote.steps <= local.steps {
		t.Errorf("journaled run took %d steps, inline %d: each agent call must be its own step", remote.steps, local.steps)
	}
	if a, b := normalized(local.st), normalized(remote.st); !equality.Semantic.DeepEqual(a, b) {
		t.Fatalf("statuses differ:\nbuiltin %s\njournal %s", dump(a), dump(b))
	}
}

func TestJournalCrashRepeatsOneCall(t *testing.T) {
	s := newSession(t, remoteHealthcare())
	fake := &llm{pathway: builtin.Run}
	s.answer = fake.answer
	s.say("m1", "Hi, here is my referral")
	first := s.step()
	if first == nil || first.Kind != flowv1.EffectRunPathway || first.Pathway.Pathway != "intake" || first.Pipeline != flowv1.PipelineSequential {
		t.Fatalf("want the intake run, got %+v", first)
	}
	if names := []flowv1.Name{first.Agents[0].Name, first.Agents[1].Name}; !reflect.DeepEqual(names, []flowv1.Name{"document-processor", "eligibility-checker"}) {
		t.Errorf("agents %v", names)
	}
	// The controller crashed before writing status: the next reconcile steps again
	// from the stored status and asks the very same question.
	stored := s.st.DeepCopy()
	s.st = &flowv1.SessionStatus{}
	again := s.step()
	if again == nil || again.InputHash != first.InputHash || !reflect.DeepEqual(again, first) {
		t.Fatalf("the repeated step asked something else")
	}
	if !equality.Semantic.DeepEqual(stored, s.st) {
		t.Fatalf("the repeated step produced another status")
	}
	s.perform(again)
	if s.st.PendingEffect.ID != fmt.Sprintf("uid-1/%d/%s", s.st.Step, first.InputHash[:12]) {
		t.Errorf("journal id %s", s.st.PendingEffect.ID)
	}
	// Applying the journaled answer moves on once; stepping again does not re-apply it.
	journaled := s.st.DeepCopy()
	s.step()
	if s.st.PendingEffect != nil || len(s.st.History) != 1 || s.st.CurrentPathway != "booking" {
		t.Fatalf("after applying: %s", dump(s.st))
	}
	after := s.st.DeepCopy()
	// A conflict made the controller drop that write: replaying the journal gives the same status.
	s.st = journaled
	s.step()
	if !equality.Semantic.DeepEqual(after, s.st) {
		t.Fatalf("replaying the journal gave another status")
	}
	s.settle()
	if len(s.st.History) != 1 || fake.calls[flowv1.EffectRunPathway] != 1 {
		t.Errorf("transition applied %d times, %d calls", len(s.st.History), fake.calls[flowv1.EffectRunPathway])
	}
}

func TestJournalStaleAnswerIsAskedAgain(t *testing.T) {
	s := newSession(t, remoteHealthcare())
	s.say("m1", "Hi")
	eff := s.step()
	rec := eff.Record("uid-1", s.st.Step, agent.PathwayResponse{Reply: "x", Complete: true}, nil)
	rec.InputHash = strings.Repeat("0", 64) // an answer to another question
	s.st.PendingEffect = rec
	again := s.step()
	if again == nil || again.InputHash != eff.InputHash {
		t.Fatalf("want the question asked again, got %+v", again)
	}
	if s.st.PendingEffect != nil || s.st.LastTurn.AssistantText == "x" {
		t.Fatalf("stale answer used: %s", dump(s.st))
	}
	// A journal entry with no turn in progress is dropped.
	s = newSession(t, remoteHealthcare())
	s.settle()
	s.st.PendingEffect = rec
	if s.step(); s.st.PendingEffect != nil || s.st.Turns != 0 {
		t.Errorf("orphan journal entry: %s", dump(s.st))
	}
}

func TestJournalAgentErrors(t *testing.T) {
	for _, policy := range []flowv1.ErrorRecovery{flowv1.ErrorRecoveryGraceful, flowv1.ErrorRecoveryFailFast} {
		s := newSession(t, remoteHealthcare())
		s.snap.journey.ErrorRecovery = policy
		s.answer = func(*Effect) (any, error) {
			return nil, &agent.Error{Class: agent.Invalid, Kind: flowv1.FailureValidation, Source: flowv1.FailureLLM, Agent: "document-processor", Err: errors.New("bad JSON")}
		}
		s.say("m1", "Hi")
		s.settle()
		lt := s.st.LastTurn
		if lt.FinishReason != flowv1.FinishError || len(lt.Failures) != 1 || lt.Failures[0].Source != flowv1.FailureLLM || lt.Failures[0].Component != "document-processor" {
			t.Errorf("%s: lastTurn %s", policy, dump(lt))
		}
		if policy == flowv1.ErrorRecoveryFailFast {
			s.expect(flowv1.PhaseFailed, "intake")
		} else {
			// No onFailure: the person gets the fallback reply and the Session stays.
			s.expect(flowv1.PhaseWaitingForInput, "intake")
			if lt.ResultType != flowv1.ResultFailure || lt.AssistantText != FallbackReply {
				t.Errorf("lastTurn %s: want result failure and the fallback reply", dump(lt))
			}
		}
	}
	// With onFailure, the failed run is a failed turn that takes it (FailFast too).
	for _, policy := range []flowv1.ErrorRecovery{flowv1.ErrorRecoveryGraceful, flowv1.ErrorRecoveryFailFast} {
		s := newSession(t, remoteHealthcare())
		s.snap.journey.ErrorRecovery = policy
		s.snap.pathways["intake"].Transitions = &flowv1.OutcomeTransitions{OnFailure: &flowv1.OutcomeTransition{To: "escalation"}}
		s.answer = func(*Effect) (any, error) {
			return nil, &agent.Error{Class: agent.Invalid, Kind: flowv1.FailureTimeout, Source: flowv1.FailureTransport, Agent: "document-processor", Err: errors.New("gave up after 3 attempts")}
		}
		s.say("m1", "Hi")
		s.settle()
		s.expect(flowv1.PhaseWaitingForInput, "escalation")
		d := s.st.LastDecision
		if d == nil || d.Transition != flowv1.TransitionOnFailure || d.From != "intake" {
			t.Errorf("%s: lastDecision %s", policy, dump(d))
		}
		if lt := s.st.LastTurn; lt.ResultType != flowv1.ResultFailure || len(lt.Failures) != 1 || lt.Failures[0].Kind != flowv1.FailureTimeout {
			t.Errorf("%s: lastTurn %s", policy, dump(lt))
		}
	}
	// An intent classifier error means no intent; the message still runs.
	d := healthcare(func(j *flowv1.JourneySpec) {
		j.Agents = append(j.Agents, openai)
		j.IntentDetection = &flowv1.IntentDetection{Agent: "gpt"}
	})
	s := newSession(t, d)
	s.answer = func(*Effect) (any, error) {
		return nil, &agent.Error{Class: agent.Invalid, Kind: flowv1.FailureValidation, Source: flowv1.FailureLLM, Err: errors.New("bad JSON")}
	}
	s.say("m1", "Hello there")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "booking")
	if len(s.st.LastTurn.Failures) != 1 || s.st.LastTurn.Pathway != "intake" {
		t.Errorf("lastTurn %s", dump(s.st.LastTurn))
	}
}

func TestRecord(t *testing.T) {
	eff := newEffect(flowv1.EffectDecide, []flowv1.AgentSpec{openai}, "", agent.DecisionRequest{Pathway: "p", Decision: &flowv1.Decision{AllowedDestinations: []flowv1.Name{"a"}}})
	rec := eff.Record("u", 7, &agent.DecisionResponse{Destination: "a", Confidence: 0.8123456789, Reasoning: "r", Usage: agent.Usage{PromptTokens: 3, CostUSD: 0.0000015}}, nil)
	want := flowv1.EffectRecord{ID: "u/7/" + eff.InputHash[:12], Kind: flowv1.EffectDecide, Step: 7, InputHash: eff.InputHash, Agent: "gpt",
		Result: flowv1.AgentResult{Destination: "a", Confidence: "0.812346", Reasoning: "r", Usage: flowv1.Usage{PromptTokens: 3, CostUSD: "0.0000015"}}}
	if !reflect.DeepEqual(*rec, want) {
		t.Errorf("Record:\n got %s\nwant %s", dump(rec), dump(want))
	}
	rec = eff.Record("u", 7, agent.DecisionResponse{Destination: "a", Confidence: 1.5}, nil)
	if rec.Result.Destination != "" || rec.Result.Failure == nil || rec.Result.Confidence != "0" {
		t.Errorf("confidence out of range: %s", dump(rec))
	}
	rec = eff.Record("u", 7, nil, &agent.Error{Class: agent.Terminal, Kind: flowv1.FailureValidation, Source: flowv1.FailureSystem, Err: errors.New("no key")})
	if f := rec.Result.Failure; f == nil || f.Component != "gpt" || f.Kind != flowv1.FailureValidation || rec.Result.Destination != "" {
		t.Errorf("error: %s", dump(rec))
	}
	in := newEffect(flowv1.EffectClassifyIntent, []flowv1.AgentSpec{openai}, "", agent.IntentRequest{Message: "m"})
	if rec := in.Record("u", 1, nil, errors.New("boom")); rec.Result.Intent != agent.NoIntent || rec.Result.Failure.Kind != flowv1.FailureUnknown {
		t.Errorf("intent error: %s", dump(rec))
	}
	// The decision id is not part of the question.
	a := newEffect(flowv1.EffectDecide, nil, "", agent.DecisionRequest{ID: "d-1", Pathway: "p"})
	b := newEffect(flowv1.EffectDecide, nil, "", agent.DecisionRequest{ID: "d-2", Pathway: "p"})
	c := newEffect(flowv1.EffectDecide, nil, "", agent.DecisionRequest{ID: "d-2", Pathway: "q"})
	if a.InputHash != b.InputHash || a.InputHash == c.InputHash {
		t.Error("input hash must ignore the id and nothing else")
	}
}

func TestEvents(t *testing.T) {
	s := inBooking(t)
	old := s.st.DeepCopy()
	s.say("m2", "what is the copay?")
	s.step()
	ev := Events(old, s.st)
	if len(ev) != 1 || ev[0].Type != EventNormal || ev[0].Reason != "Advance" || !strings.Contains(ev[0].Message, "booking -> faq") {
		t.Errorf("events %+v", ev)
	}
	// Start, completion, blocks and escalations.
	s = newSession(t, planner())
	s.spec.InitialContext = raw(`{"collect":"sufficient_context","outline_ok_at":99}`)
	var all []Event
	for range 20 {
		old := s.st.DeepCopy()
		s.step()
		all = append(all, Events(old, s.st)...)
	}
	reasons := []string{}
	for _, e := range all {
		reasons = append(reasons, e.Type+"/"+e.Reason)
	}
	want := "Normal/Started Normal/Advance Normal/Retry Normal/Retry Warning/RetryLimit"
	if got := strings.Join(reasons, " "); got != want {
		t.Errorf("events %s, want %s", got, want)
	}
	s = newSession(t, qualityGate())
	s.answer = (&llm{decide: func(agent.DecisionRequest) (agent.DecisionResponse, error) {
		return agent.DecisionResponse{Destination: "staging", Confidence: 0.1}, nil
	}}).answer
	all = nil
	for range 5 {
		old := s.st.DeepCopy()
		if eff := s.step(); eff != nil {
			s.perform(eff)
		}
		all = append(all, Events(old, s.st)...)
	}
	if len(all) != 2 || all[1].Type != EventWarning || all[1].Reason != flowv1.ReasonEscalated {
		t.Errorf("escalation events %+v", all)
	}
	// Escalated is reported like AwaitingApproval: healthy, waiting on a person.
	if c := s.condition(flowv1.ConditionReady); c.Status != metav1.ConditionTrue || c.Reason != flowv1.ReasonEscalated {
		t.Errorf("Ready %+v", c)
	}
	if c := s.condition(flowv1.ConditionAwaitingApproval); c.Status != metav1.ConditionTrue || c.Reason != flowv1.ReasonEscalated {
		t.Errorf("AwaitingApproval %+v", c)
	}
}

func TestJournalReproducesBuiltinDecisions(t *testing.T) {
	local := newSession(t, planner())
	remote := newSession(t, planner(func(j *flowv1.JourneySpec) {
		j.Agents[0] = flowv1.AgentSpec{Name: "approval-handler", Provider: flowv1.ProviderOpenAI, Model: "m"}
	}))
	fake := &llm{decide: func(req agent.DecisionRequest) (agent.DecisionResponse, error) {
		return builtin.Decide(req, 0.5), nil
	}}
	remote.answer = fake.answer
	for _, s := range []*session{local, remote} {
		s.spec.InitialContext = raw(`{"collect":"sufficient_context","outline_ok_at":2,"schedule":"success"}`)
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval")
		s.approve(s.st.LastDecision.ID, true, "")
		s.settle()
	}
	local.expect(flowv1.PhaseCompleted, "complete")
	if fake.calls[flowv1.EffectDecide] != 1 {
		t.Fatalf("%d decision calls", fake.calls[flowv1.EffectDecide])
	}
	if a, b := normalized(local.st), normalized(remote.st); !equality.Semantic.DeepEqual(a, b) {
		t.Fatalf("statuses differ:\nbuiltin %s\njournal %s", dump(a), dump(b))
	}
}

// One write may carry several steps: the Started Event names the pathway the Session
// started in, not the one the write left it in.
func TestStartedNamesTheFirstPathway(t *testing.T) {
	s := newSession(t, planner())
	s.spec.InitialContext = raw(`{"collect":"sufficient_context","outline_ok_at":99}`)
	first := s.st.DeepCopy()
	for range 3 {
		s.step()
	}
	if s.st.CurrentPathway == "collect-context" {
		t.Fatalf("the Session is still in collect-context after 3 steps; the test needs it to have moved")
	}
	for _, e := range Events(first, s.st) {
		if e.Reason == ReasonStarted {
			if !strings.Contains(e.Message, "Started in pathway collect-context ") {
				t.Errorf("Started event %q, want it to name collect-context", e.Message)
			}
			return
		}
	}
	t.Errorf("no Started event in %+v", Events(first, s.st))
}
