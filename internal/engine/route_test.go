package engine

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// healthcare is the healthcare referral journey (intake, booking, an FAQ detour,
// persuasion, confirmation and an escalation), with builtin agents.
func healthcare(mods ...func(*flowv1.JourneySpec)) def {
	specs := map[string]*flowv1.PathwaySpec{
		"intake": {
			Signature: flowv1.Signature{Intent: "Gather patient details and validate referral eligibility"},
			Agents:    []flowv1.Name{"document-processor", "eligibility-checker"},
			Builtin: &flowv1.BuiltinPathway{
				Outputs: []flowv1.BuiltinOutput{
					{Name: "patient_info", Expression: `{"insurance": has(context.insurance_id) ? context.insurance_id : "unknown"}`},
					{Name: "eligibility_status", Expression: `has(context.insurance_id) ? "eligible" : "pending"`},
				},
				Reply: `Thanks, your referral is {{ .outputs.eligibility_status }}.`,
			},
			Accumulate: []string{"patient_info", "eligibility_status"},
			Next:       "booking",
		},
		"booking": {
			Signature: flowv1.Signature{Intent: "Match patient with best available specialist"},
			Agents:    []flowv1.Name{"slot-finder", "doctor-matcher"},
			Pipeline:  flowv1.PipelineParallel,
			Builtin: &flowv1.BuiltinPathway{
				Outputs: []flowv1.BuiltinOutput{
					{Name: "selected_doctor", Expression: `{"id": "dr" + string(has(context.rejected_doctors) ? size(context.rejected_doctors) + 1 : 1)}`},
				},
				Reply:    `How about {{ .outputs.selected_doctor.id }}?`,
				Complete: `message.lowerAscii().contains("book the")`,
			},
			Accumulate: []string{"rejected_doctors", "preferences", "selected_doctor"},
			Next:       "confirmation",
		},
		"faq": {
			Signature:      flowv1.Signature{Intent: "Provide clear, helpful answers to patient questions"},
			Agents:         []flowv1.Name{"rag-faq-agent"},
			ReturnBehavior: &flowv1.ReturnBehavior{Type: flowv1.ReturnToPrevious},
			// Answer, then return once the patient moves on.
			Builtin: &flowv1.BuiltinPathway{Complete: `session.pathwayTurns >= 1`},
		},
		"persuasion": {
			Signature: flowv1.Signature{Intent: "Address concerns and encourage booking completion"},
			Next:      "booking",
		},
		"confirmation": {
			Signature: flowv1.Signature{Intent: "Finalize booking"},
			RunOn:     flowv1.RunOnEntry,
		},
		// A person takes over: the pathway never completes on its own.
		"escalation": {Signature: flowv1.Signature{Intent: "Hand over to a person"}, Builtin: &flowv1.BuiltinPathway{Complete: "false"}},
	}
	return journeyOf("intake", specs, append([]func(*flowv1.JourneySpec){func(j *flowv1.JourneySpec) {
		for _, a := range []string{"document-processor", "eligibility-checker", "slot-finder", "doctor-matcher", "rag-faq-agent"} {
			j.Agents = append(j.Agents, flowv1.AgentSpec{Name: flowv1.Name(a), Provider: flowv1.ProviderBuiltin})
		}
		j.Transitions = []flowv1.GlobalTransition{
			{Name: "faq-detour", From: "*", To: "faq", Priority: 10,
				Trigger: flowv1.Trigger{Intent: &flowv1.IntentTrigger{Patterns: []string{"question", "help", "what is", "how do I", "why"}, LLMFallback: true}}},
			{Name: "reject-doctor", From: "booking", To: "booking", Priority: 5,
				Trigger:       flowv1.Trigger{Intent: &flowv1.IntentTrigger{Patterns: []string{"different doctor", "another option", "don't want"}}},
				ContextUpdate: []flowv1.ContextUpdate{{Field: "rejected_doctors", Op: flowv1.ContextAppend, From: "selected_doctor"}}},
			{Name: "hesitation", From: "booking", To: "persuasion", Priority: 5,
				Trigger: flowv1.Trigger{Intent: &flowv1.IntentTrigger{Patterns: []string{"not sure", "maybe later", "let me think", "hesitant"}}}},
			{Name: "escalate", From: "*", To: "escalation", Priority: 100,
				Trigger: flowv1.Trigger{Condition: "has(context.escalation_count) && context.escalation_count >= 3"}},
		}
	}}, mods...)...)
}

func TestHealthcareIntakeProceedsToBooking(t *testing.T) {
	s := newSession(t, healthcare())
	s.spec.InitialContext = raw(`{"insurance_id":"INS-123456","referral_source":"primary_care"}`)
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "intake")
	if s.st.Iteration != 1 || s.st.JourneyRevision != "rev-1" || s.st.StartTime == nil {
		t.Fatalf("start: %s", dump(s.st))
	}

	s.say("m1", "Hi, I need to book an appointment with a cardiologist. Here's my referral.")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "booking")
	lt := s.st.LastTurn
	if lt.MessageID != "m1" || lt.Pathway != "intake" || lt.AssistantText != "Thanks, your referral is eligible." || lt.FinishReason != flowv1.FinishSuccess {
		t.Errorf("lastTurn: %s", dump(lt))
	}
	ctx := s.context()
	if ctx["eligibility_status"] != "eligible" || !reflect.DeepEqual(ctx["patient_info"], map[string]any{"insurance": "INS-123456"}) {
		t.Errorf("context: %v", ctx)
	}
	if s.st.ContextVersion != 1 || len(s.st.ContextHistory) != 1 || s.st.ContextHistory[0].Pathway != "intake" {
		t.Errorf("context versions: %s", dump(s.st.ContextHistory))
	}
	if h := s.st.History; len(h) != 1 || h[0].Source != flowv1.SourceNext || h[0].Action != flowv1.ActionAdvance || h[0].MessageID != "m1" {
		t.Errorf("history: %s", dump(h))
	}
	if s.st.PathwayTurns != 0 || s.st.Turns != 1 || s.st.ProcessedMessages != 1 {
		t.Errorf("counters: turns %d pathwayTurns %d processed %d", s.st.Turns, s.st.PathwayTurns, s.st.ProcessedMessages)
	}
	if c := s.condition(flowv1.ConditionAwaitingInput); c == nil || c.Status != "True" {
		t.Errorf("AwaitingInput: %v", c)
	}
	if s.condition(flowv1.ConditionReconciling) != nil || s.condition(flowv1.ConditionStalled) != nil {
		t.Errorf("Reconciling/Stalled present while waiting: %v", s.st.Conditions)
	}
}

// inBooking returns a session that has gone through intake into booking.
func inBooking(t *testing.T, mods ...func(*flowv1.JourneySpec)) *session {
	s := newSession(t, healthcare(mods...))
	s.answer = (&llm{}).answer // a classifier, if any, finds no intent
	s.say("m1", "Here's my referral and insurance info")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "booking")
	return s
}

func TestHealthcareFAQDetourAndReturn(t *testing.T) {
	s := inBooking(t)
	s.say("m2", "Wait, what is the copay for specialist visits?")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "faq")
	if !reflect.DeepEqual(s.st.PathwayStack, []string{"booking"}) {
		t.Fatalf("stack: %v", s.st.PathwayStack)
	}
	d := s.st.LastDecision
	if d.Transition != "faq-detour" || d.Source != flowv1.SourceTransition || d.From != "booking" || d.To != "faq" {
		t.Errorf("lastDecision: %s", dump(d))
	}
	if s.st.LastTurn.Transition != "faq-detour" || s.st.LastTurn.Pathway != "faq" {
		t.Errorf("lastTurn: %s", dump(s.st.LastTurn))
	}

	// Another question inside the detour is a self-transition: nothing is pushed, the
	// FAQ answers it and, complete now, returns to booking (not to itself).
	s.say("m3", "And why is that? Thanks for the info")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "booking")
	if len(s.st.PathwayStack) != 0 {
		t.Errorf("stack after return: %v", s.st.PathwayStack)
	}
	last := s.st.History[len(s.st.History)-1]
	if last.Source != flowv1.SourceReturn || last.From != "faq" || last.To != "booking" {
		t.Errorf("return: %s", dump(last))
	}
	if got := s.path(); got != "intake>booking>faq>faq>booking" {
		t.Errorf("path %s", got)
	}
}

func TestHealthcareWordAwareIntent(t *testing.T) {
	s := inBooking(t)
	// "why" must not match "Whyte", so this stays in booking.
	s.say("m2", "Is Dr Whyte available on Tuesday?")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "booking")
	if s.st.LastTurn.Transition != "" || s.st.LastTurn.Pathway != "booking" {
		t.Errorf("lastTurn: %s", dump(s.st.LastTurn))
	}
}

func TestHealthcareRejectedDoctorsAccumulate(t *testing.T) {
	s := inBooking(t)
	s.say("m2", "Show me the available doctors")
	s.settle()
	if got := s.context()["selected_doctor"]; !reflect.DeepEqual(got, map[string]any{"id": "dr1"}) {
		t.Fatalf("selected_doctor %v", got)
	}
	s.say("m3", "I don't want this doctor")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "booking")
	ctx := s.context()
	if want := []any{map[string]any{"id": "dr1"}}; !reflect.DeepEqual(ctx["rejected_doctors"], want) {
		t.Fatalf("rejected_doctors %v, want %v", ctx["rejected_doctors"], want)
	}
	// The booking ran after the rejection and chose the next doctor.
	if got := ctx["selected_doctor"]; !reflect.DeepEqual(got, map[string]any{"id": "dr2"}) {
		t.Errorf("selected_doctor %v", got)
	}
	if len(s.st.PathwayStack) != 0 {
		t.Errorf("a self-transition must not push: %v", s.st.PathwayStack)
	}
	s.say("m4", "Can you show me another option?")
	s.settle()
	ctx = s.context()
	if want := []any{map[string]any{"id": "dr1"}, map[string]any{"id": "dr2"}}; !reflect.DeepEqual(ctx["rejected_doctors"], want) {
		t.Fatalf("rejected_doctors %v, want %v", ctx["rejected_doctors"], want)
	}
	// Rejecting the same doctor twice does not duplicate it.
	s.say("m5", "I don't want Dr. Smith")
	s.settle()
	if n := len(s.context()["rejected_doctors"].([]any)); n != 3 {
		t.Errorf("rejected %d doctors, want 3", n)
	}

	s.say("m6", "Dr. Johnson looks great. Book the Tuesday 2pm slot.")
	s.settle()
	// Confirmation runs on entry, then the journey completes.
	s.expect(flowv1.PhaseCompleted, "confirmation")
	if s.st.CompletionTime == nil {
		t.Error("completionTime not set")
	}
	if c := s.condition(flowv1.ConditionReady); c == nil || c.Reason != flowv1.ReasonCompleted || c.Status != "True" {
		t.Errorf("Ready: %v", c)
	}
}

func TestHealthcareStackOverflow(t *testing.T) {
	for _, policy := range []flowv1.ErrorRecovery{flowv1.ErrorRecoveryGraceful, flowv1.ErrorRecoveryFailFast} {
		t.Run(string(policy), func(t *testing.T) {
			s := inBooking(t, func(j *flowv1.JourneySpec) {
				j.Limits.MaxPathwayDepth = 3
				j.ErrorRecovery = policy
			})
			s.st.PathwayStack = []string{"intake", "persuasion", "intake"}
			s.say("m2", "Another question: what is the copay?")
			s.settle()
			failure := s.st.LastTurn.Failures
			if len(failure) != 1 || failure[0].Source != flowv1.FailurePolicy || failure[0].Component != "faq-detour" {
				t.Fatalf("failures: %s", dump(failure))
			}
			if len(s.st.PathwayStack) != 3 {
				t.Errorf("stack grew: %v", s.st.PathwayStack)
			}
			if policy == flowv1.ErrorRecoveryFailFast {
				s.expect(flowv1.PhaseFailed, "booking")
				if c := s.condition(flowv1.ConditionReady); c.Reason != flowv1.ReasonStackOverflow {
					t.Errorf("Ready reason %s", c.Reason)
				}
				return
			}
			// Graceful: the detour is refused and booking still answers.
			s.expect(flowv1.PhaseWaitingForInput, "booking")
			if s.st.LastTurn.Pathway != "booking" || s.st.LastTurn.AssistantText != "How about dr1?" {
				t.Errorf("lastTurn: %s", dump(s.st.LastTurn))
			}
		})
	}
}

// The ambiguous message matches no pattern: the LLM classifier is asked (an effect),
// and its journaled answer routes the message.
func TestHealthcareAmbiguousMessageUsesLLM(t *testing.T) {
	withLLM := func(j *flowv1.JourneySpec) {
		j.Agents = append(j.Agents, flowv1.AgentSpec{Name: "triage", Provider: flowv1.ProviderOpenAI, Model: "gpt-4o-mini"})
		j.IntentDetection = &flowv1.IntentDetection{Agent: "triage", ConfidenceThreshold: "0.7"}
	}
	for _, tt := range []struct {
		name   string
		answer agent.IntentResponse
		want   string
	}{
		{"confident", agent.IntentResponse{Intent: "faq-detour", Confidence: 0.9, Reasoning: "asks about the process"}, "faq"},
		{"below threshold", agent.IntentResponse{Intent: "faq-detour", Confidence: 0.5}, "booking"},
		{"none", agent.IntentResponse{Intent: agent.NoIntent, Confidence: 0.99}, "booking"},
		{"not asked about", agent.IntentResponse{Intent: "reject-doctor", Confidence: 0.99}, "booking"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := inBooking(t, withLLM)
			s.say("m2", "I'm wondering about the process")
			eff := s.step()
			if eff == nil || eff.Kind != flowv1.EffectClassifyIntent {
				t.Fatalf("want a ClassifyIntent effect, got %+v", eff)
			}
			if eff.Intent.Message != "I'm wondering about the process" || len(eff.Intent.Intents) != 1 || eff.Intent.Intents[0].Name != "faq-detour" {
				t.Errorf("intent request: %+v", eff.Intent)
			}
			if eff.Agents[0].Name != "triage" || len(eff.InputHash) != 64 {
				t.Errorf("effect: %+v", eff)
			}
			if s.st.Phase != flowv1.PhaseRunning || s.st.Turn == nil || s.st.Turn.Stage != flowv1.StageRoute {
				t.Fatalf("turn in progress: %s", dump(s.st))
			}
			if c := s.condition(flowv1.ConditionReconciling); c == nil {
				t.Error("Reconciling missing while an agent call is due")
			}
			s.answer = func(*Effect) (any, error) { return tt.answer, nil }
			s.perform(eff)
			s.settle()
			s.expect(flowv1.PhaseWaitingForInput, tt.want)
			if s.st.PendingEffect != nil || s.st.Turn != nil {
				t.Errorf("journal not consumed: %s", dump(s.st))
			}
			if tt.want == "faq" {
				d := s.st.LastDecision
				if d.Agent != "triage" || d.Confidence != "0.9" || d.Reasoning != "asks about the process" {
					t.Errorf("lastDecision: %s", dump(d))
				}
			}
		})
	}
	// Patterns still win without asking.
	s := inBooking(t, withLLM)
	s.say("m2", "what is the copay?")
	if eff := s.step(); eff != nil {
		t.Fatalf("pattern match asked the LLM: %+v", eff)
	}
	s.expect(flowv1.PhaseWaitingForInput, "faq")
}

// Priority is one order over every trigger kind: the priority-100 escalate condition
// beats the priority-10 FAQ pattern on the same message, and the reverse when the
// priorities are swapped.
func TestHealthcareEscalationCondition(t *testing.T) {
	s := newSession(t, healthcare())
	s.spec.InitialContext = raw(`{"escalation_count": 3}`)
	s.say("m1", "what is going on?")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "escalation")
	if d := s.st.LastDecision; d.Transition != "escalate" || d.Reasoning == "" {
		t.Errorf("lastDecision %s", dump(d))
	}

	swapped := func(j *flowv1.JourneySpec) {
		for i := range j.Transitions {
			switch j.Transitions[i].Name {
			case "faq-detour":
				j.Transitions[i].Priority = 100
			case "escalate":
				j.Transitions[i].Priority = 10
			}
		}
	}
	s = newSession(t, healthcare(swapped))
	s.spec.InitialContext = raw(`{"escalation_count": 3}`)
	s.say("m1", "what is going on?")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "faq")
	s.say("m2", "hello")
	s.settle()
	// No pattern matches "hello": the escalate condition fires.
	s.expect(flowv1.PhaseWaitingForInput, "escalation")
}

// The classifier is asked once per message, only about the llmFallback intents tried
// before the first transition that fires on its own; when a higher-priority rule
// fires it is not asked at all.
func TestClassifierAskedOnlyForIntentsThatCouldWin(t *testing.T) {
	withLLM := func(j *flowv1.JourneySpec) {
		j.Agents = append(j.Agents, flowv1.AgentSpec{Name: "triage", Provider: flowv1.ProviderOpenAI, Model: "gpt-4o-mini"})
		j.IntentDetection = &flowv1.IntentDetection{Agent: "triage", CacheTTL: &metav1.Duration{Duration: 90 * time.Second}}
		j.Transitions = append(j.Transitions,
			flowv1.GlobalTransition{Name: "billing", From: "*", To: "faq", Priority: 50,
				Trigger: flowv1.Trigger{Intent: &flowv1.IntentTrigger{Patterns: []string{"invoice"}, LLMFallback: true}}},
			flowv1.GlobalTransition{Name: "stuck", From: "*", To: "escalation", Priority: 20,
				Trigger: flowv1.Trigger{Condition: `message.contains("stuck")`}})
	}
	// "stuck" fires at priority 20: only billing (50) could still win, not faq-detour (10).
	s := inBooking(t, withLLM)
	s.say("m2", "I am stuck")
	eff := s.step()
	if eff == nil || eff.Kind != flowv1.EffectClassifyIntent {
		t.Fatalf("want a ClassifyIntent effect, got %+v", eff)
	}
	if len(eff.Intent.Intents) != 1 || eff.Intent.Intents[0].Name != "billing" {
		t.Errorf("asked about %+v, want billing only", eff.Intent.Intents)
	}
	if eff.Intent.CacheTTL != 90*time.Second {
		t.Errorf("cacheTTL %v, want 90s", eff.Intent.CacheTTL)
	}
	asked := 0
	s.answer = func(*Effect) (any, error) {
		asked++
		return agent.IntentResponse{Intent: agent.NoIntent, Confidence: 1}, nil
	}
	s.perform(eff)
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "escalation")
	if asked != 1 {
		t.Errorf("classifier asked %d times, want 1", asked)
	}
	if d := s.st.LastDecision; d.Transition != "stuck" {
		t.Errorf("lastDecision %s", dump(d))
	}

	// The classifier's pick beats the lower rule.
	s = inBooking(t, withLLM)
	s.say("m2", "I am stuck with a bill")
	s.answer = func(*Effect) (any, error) { return agent.IntentResponse{Intent: "billing", Confidence: 0.9}, nil }
	s.settle()
	if d := s.st.LastDecision; d.Transition != "billing" {
		t.Errorf("lastDecision %s, want billing", dump(d))
	}

	// A priority-100 condition that fires leaves nothing for the classifier.
	s = newSession(t, healthcare(withLLM))
	s.spec.InitialContext = raw(`{"escalation_count": 5}`)
	s.say("m1", "I'm wondering about the process")
	if eff := s.step(); eff != nil {
		t.Fatalf("the classifier was asked although escalate fired first: %+v", eff)
	}
	s.expect(flowv1.PhaseWaitingForInput, "escalation")
}

// A builtin classifier scores the llmFallback intents no pattern matched by the words
// the message shares with their description and patterns, inline (no effect), and the
// journey's threshold decides.
func TestBuiltinClassifierRoutesByWords(t *testing.T) {
	withBuiltin := func(threshold flowv1.Confidence, fallback bool) func(*flowv1.JourneySpec) {
		return func(j *flowv1.JourneySpec) {
			j.Agents = append(j.Agents, flowv1.AgentSpec{Name: "triage", Provider: flowv1.ProviderBuiltin})
			j.IntentDetection = &flowv1.IntentDetection{Agent: "triage", ConfidenceThreshold: threshold}
			for i := range j.Transitions {
				if in := j.Transitions[i].Trigger.Intent; j.Transitions[i].Name == "faq-detour" {
					in.Description = "Questions on costs, or what the insurance plan covers."
					in.LLMFallback = fallback
				}
			}
		}
	}
	for _, tc := range []struct {
		name      string
		threshold flowv1.Confidence
		fallback  bool
		message   string
		// want is the pathway after the message; confidence the detour's, if taken.
		want, confidence string
	}{
		{name: "every word matches", fallback: true, message: "Is it covered by my insurance plan?", want: "faq", confidence: "1"},
		{name: "one word of two is below the default 0.7", fallback: true, message: "Does my insurance pay?", want: "booking"},
		{name: "one word of two reaches 0.5", threshold: "0.5", fallback: true, message: "Does my insurance pay?", want: "faq", confidence: "0.5"},
		{name: "no word matches", threshold: "0.5", fallback: true, message: "Dr. Johnson looks great", want: "booking"},
		{name: "without llmFallback the classifier is not asked", fallback: false, message: "Is it covered by my insurance plan?", want: "booking"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := inBooking(t, withBuiltin(tc.threshold, tc.fallback))
			s.answer = nil
			s.say("m2", tc.message)
			if eff := s.step(); eff != nil {
				t.Fatalf("the builtin classifier asked for an effect: %+v", eff)
			}
			s.settle()
			if s.st.CurrentPathway != tc.want {
				t.Fatalf("in %s after %q, want %s; lastDecision %s", s.st.CurrentPathway, tc.message, tc.want, dump(s.st.LastDecision))
			}
			if tc.want != "faq" {
				if d := s.st.LastDecision; d != nil && d.Transition == "faq-detour" {
					t.Errorf("faq-detour taken: %s", dump(d))
				}
				return
			}
			d := s.st.LastDecision
			if d.Transition != "faq-detour" || d.Agent != "triage" || string(d.Confidence) != tc.confidence || !strings.HasPrefix(d.Reasoning, "word overlap: ") {
				t.Errorf("lastDecision %s, want faq-detour by triage with confidence %s", dump(d), tc.confidence)
			}
		})
	}
}

// Conditions see the previous turn's outputs.
func TestConditionSeesPreviousOutputs(t *testing.T) {
	d := conversation(func(j *flowv1.JourneySpec) {
		j.Pathways = append(j.Pathways, flowv1.PathwayEntry{Name: "done", PathwayRef: "done"})
		j.Transitions = []flowv1.GlobalTransition{{Name: "enough", To: "done", Trigger: flowv1.Trigger{Condition: `has(outputs.count) && outputs.count >= 2`}}}
	})
	d.p["chat"].Builtin.Outputs = []flowv1.BuiltinOutput{{Name: "count", Expression: `session.turns`}}
	d.p["done"] = &flowv1.PathwaySpec{Builtin: &flowv1.BuiltinPathway{Complete: "false"}}
	s := newSession(t, d)
	s.say("m1", "a").say("m2", "b")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "chat")
	s.say("m3", "c")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "done")
}
