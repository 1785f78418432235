package engine

import (
	"reflect"
	"strings"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// phase is a builtin workflow step (runOn Entry) whose result type is
// context.results[<name>] when set, else success.
func phase(name string, tr *flowv1.OutcomeTransitions) *flowv1.PathwaySpec {
	return &flowv1.PathwaySpec{RunOn: flowv1.RunOnEntry, Transitions: tr, Builtin: &flowv1.BuiltinPathway{
		Outcome: flowv1.Expression(`has(context.results) && "` + name + `" in context.results ? context.results["` + name + `"] : "success"`),
		Outputs: []flowv1.BuiltinOutput{{Name: "failures", Expression: `has(context.failures) ? context.failures : 0`}},
	}}
}

func str(to string) *flowv1.OutcomeTransition { return &flowv1.OutcomeTransition{To: flowv1.Name(to)} }

func choose(agentName string, dests ...string) *flowv1.OutcomeTransition {
	d := &flowv1.Decision{Agent: flowv1.Name(agentName)}
	for _, n := range dests {
		d.AllowedDestinations = append(d.AllowedDestinations, flowv1.Name(n))
	}
	return &flowv1.OutcomeTransition{Decision: d}
}

func TestSimpleSequential(t *testing.T) {
	d := journeyOf("plan", map[string]*flowv1.PathwaySpec{
		"plan":      phase("plan", &flowv1.OutcomeTransitions{OnSuccess: str("implement")}),
		"implement": phase("implement", &flowv1.OutcomeTransitions{OnSuccess: str("test"), OnFailure: str("plan")}),
		"test":      phase("test", &flowv1.OutcomeTransitions{OnSuccess: str("deploy")}),
		"deploy":    phase("deploy", nil),
	})
	s := newSession(t, d)
	s.settle()
	s.expect(flowv1.PhaseCompleted, "deploy")
	if got := s.path(); got != "plan>implement>test>deploy" {
		t.Errorf("path %s", got)
	}
	// Backtrack: implement fails -> plan, and the loop is caught by loop prevention.
	s = newSession(t, d)
	s.spec.InitialContext = raw(`{"results":{"implement":"failure"}}`)
	s.settle()
	if s.stalled() != flowv1.ReasonLoopDetected || !strings.HasPrefix(s.path(), "plan>implement>plan") {
		t.Fatalf("stalled %q path %s", s.stalled(), s.path())
	}
	if s.st.LastTurn.FinishReason != flowv1.FinishLoopDetected {
		t.Errorf("finishReason %s", s.st.LastTurn.FinishReason)
	}
	last := s.st.History[len(s.st.History)-1]
	if last.Action != flowv1.ActionBlock || !strings.Contains(last.Reason, "oscillating cycle detected: plan→implement→plan") {
		t.Errorf("block entry %s", dump(last))
	}
	// window 8, maxCycleRepeats 2: the third traversal is refused.
	if n := strings.Count(s.path(), ">"); n != 5 {
		t.Errorf("%d moves before the block, want 5: %s", n, s.path())
	}
}

func TestOscillationWindow(t *testing.T) {
	d := journeyOf("develop", map[string]*flowv1.PathwaySpec{
		"develop": phase("develop", &flowv1.OutcomeTransitions{OnSuccess: str("test")}),
		"test":    phase("test", &flowv1.OutcomeTransitions{OnSuccess: str("deploy"), OnFailure: str("develop")}),
		"deploy":  phase("deploy", nil),
	}, func(j *flowv1.JourneySpec) { j.LoopPrevention = flowv1.LoopPrevention{Window: 4, MaxCycleRepeats: 1} })
	s := newSession(t, d)
	s.spec.InitialContext = raw(`{"results":{"test":"failure"}}`)
	s.settle()
	if s.stalled() != flowv1.ReasonLoopDetected || s.path() != "develop>test>develop>test" {
		t.Fatalf("stalled %q path %s", s.stalled(), s.path())
	}
}

// qualityGate is an AI-based quality gate: test's success goes through a
// decision agent with thresholds 0.85/0.7, and messaging.
func qualityGate(mods ...func(*flowv1.JourneySpec)) def {
	gate := choose("quality-decision", "staging", "fix-critical", "fix-minor")
	gate.Decision.Prompt = "Evaluate test results and recommend next step"
	gate.Decision.ConfidenceThresholds = &flowv1.ConfidenceThresholds{AutoAdvance: "0.85", RequireApproval: "0.7"}
	gate.Decision.Messaging = true
	return journeyOf("test", map[string]*flowv1.PathwaySpec{
		"test":         phase("test", &flowv1.OutcomeTransitions{OnSuccess: gate}),
		"staging":      {},
		"fix-critical": {},
		"fix-minor":    {},
		"escalation":   {},
	}, append([]func(*flowv1.JourneySpec){func(j *flowv1.JourneySpec) {
		j.Agents = []flowv1.AgentSpec{{Name: "quality-decision", Provider: flowv1.ProviderOpenAI, Model: "gpt-4o"}}
		j.Transitions = []flowv1.GlobalTransition{{Name: "escalate", To: "escalation", Trigger: flowv1.Trigger{Condition: "false"}}}
	}}, mods...)...)
}

func TestQualityGate(t *testing.T) {
	for _, tt := range []struct {
		name       string
		answer     agent.DecisionResponse
		escalation bool
		phase      flowv1.Phase
		pathway    string
		state      flowv1.DecisionState
	}{
		{"auto advance", agent.DecisionResponse{Destination: "fix-minor", Confidence: 0.9, Reasoning: "2 flaky tests"}, false, flowv1.PhaseWaitingForInput, "fix-minor", flowv1.DecisionApplied},
		{"needs approval", agent.DecisionResponse{Destination: "staging", Confidence: 0.75}, false, flowv1.PhaseAwaitingApproval, "test", flowv1.DecisionPending},
		{"escalated", agent.DecisionResponse{Destination: "staging", Confidence: 0.5}, false, flowv1.PhaseEscalated, "test", flowv1.DecisionEscalated},
		{"escalation pathway", agent.DecisionResponse{Destination: "staging", Confidence: 0.5}, true, flowv1.PhaseWaitingForInput, "escalation", flowv1.DecisionEscalated},
		{"not allowed is unclear", agent.DecisionResponse{Destination: "deploy", Confidence: 0.99}, false, flowv1.PhaseEscalated, "test", flowv1.DecisionEscalated},
		{"empty is unclear", agent.DecisionResponse{Confidence: 0.99}, false, flowv1.PhaseEscalated, "test", flowv1.DecisionEscalated},
		{"unclear with escalation pathway", agent.DecisionResponse{Destination: "production", Confidence: 1}, true, flowv1.PhaseWaitingForInput, "escalation", flowv1.DecisionEscalated},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newSession(t, qualityGate(func(j *flowv1.JourneySpec) {
				if tt.escalation {
					j.EscalationPathway = "escalation"
				}
			}))
			s.spec.InitialContext = raw(`{"failures": 2}`)
			l := &llm{decide: func(agent.DecisionRequest) (agent.DecisionResponse, error) { return tt.answer, nil }}
			s.answer = l.answer
			s.settle()
			s.expect(tt.phase, tt.pathway)
			if l.calls[flowv1.EffectDecide] != 1 {
				t.Fatalf("decision agent asked %d times", l.calls[flowv1.EffectDecide])
			}
			req := l.lastReqs[0].(agent.DecisionRequest)
			if req.Pathway != "test" || req.Transition != "onSuccess" || req.ResultType != flowv1.ResultSuccess || req.Outputs["failures"] != float64(2) || req.ID == "" {
				t.Errorf("decision request %+v", req)
			}
			d := s.st.LastDecision
			if d.State != tt.state || d.Source != flowv1.SourceAgent || d.Agent != "quality-decision" || d.From != "test" {
				t.Errorf("lastDecision %s", dump(d))
			}
			if tt.name == "auto advance" {
				msgs := s.context()["messages"]
				if want := map[string]any{"test": map[string]any{"failures": float64(2)}}; !reflect.DeepEqual(msgs, want) {
					t.Errorf("messaging: context.messages = %v", msgs)
				}
				if d.Reasoning != "2 flaky tests" || d.Confidence != "0.9" {
					t.Errorf("decision %s", dump(d))
				}
			}
			for _, h := range s.st.History {
				if h.To != "" && h.To != "escalation" && h.To != tt.pathway {
					t.Errorf("jumped to %s", h.To)
				}
			}
			if strings.HasPrefix(tt.name, "not allowed") || strings.HasPrefix(tt.name, "empty") || strings.HasPrefix(tt.name, "unclear") {
				if d.To != "" || d.Confidence != "0" || len(s.st.LastTurn.Failures) != 1 {
					t.Errorf("unclear decision: %s", dump(s.st))
				}
			}
		})
	}
	// An approval moves a pending decision on, messaging included; an override must be allowed.
	s := newSession(t, qualityGate())
	s.answer = (&llm{decide: func(agent.DecisionRequest) (agent.DecisionResponse, error) {
		return agent.DecisionResponse{Destination: "staging", Confidence: 0.75}, nil
	}}).answer
	s.settle()
	id := s.st.LastDecision.ID
	s.approve(id, true, "fix-critical")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "fix-critical")
	if _, ok := s.context()["messages"].(map[string]any)["test"]; !ok {
		t.Errorf("messaging after approval: %v", s.context())
	}
	// An escalated unclear decision needs an approval with a destination.
	s = newSession(t, qualityGate())
	s.answer = (&llm{decide: func(agent.DecisionRequest) (agent.DecisionResponse, error) {
		return agent.DecisionResponse{Destination: "nowhere", Confidence: 1}, nil
	}}).answer
	s.settle()
	s.expect(flowv1.PhaseEscalated, "test")
	s.approve(s.st.LastDecision.ID, true, "")
	s.settle()
	s.expect(flowv1.PhaseEscalated, "test")
	s.approve(s.st.LastDecision.ID, true, "staging")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "staging")
}

func TestPartialSuccess(t *testing.T) {
	handler := choose("integration-handler", "retry-integration", "proceed-partial", "rollback")
	handler.Decision.Rules = []flowv1.DecisionRule{{When: "outputs.failures > 5", To: "rollback", Confidence: "0.95"}}
	d := journeyOf("integration", map[string]*flowv1.PathwaySpec{
		"integration":       phase("integration", &flowv1.OutcomeTransitions{OnSuccess: str("deploy"), OnFailure: str("rollback"), OnPartialSuccess: handler}),
		"deploy":            {},
		"rollback":          {},
		"retry-integration": {},
		"proceed-partial":   {},
	}, func(j *flowv1.JourneySpec) {
		j.Agents = []flowv1.AgentSpec{{Name: "integration-handler", Provider: flowv1.ProviderBuiltin, Builtin: &flowv1.BuiltinAgent{Confidence: "0.9"}}}
	})
	for _, tt := range []struct {
		ctx, pathway string
		source       flowv1.DecisionSource
	}{
		{`{}`, "deploy", flowv1.SourceOutcome},
		{`{"results":{"integration":"failure"}}`, "rollback", flowv1.SourceOutcome},
		{`{"results":{"integration":"partial_success"},"failures":2}`, "retry-integration", flowv1.SourceAgent},
		{`{"results":{"integration":"partial_success"},"failures":7}`, "rollback", flowv1.SourceRule},
	} {
		s := newSession(t, d)
		s.spec.InitialContext = raw(tt.ctx)
		s.settle()
		s.expect(flowv1.PhaseWaitingForInput, tt.pathway)
		if s.st.LastDecision.Source != tt.source {
			t.Errorf("%s: source %s", tt.ctx, s.st.LastDecision.Source)
		}
	}
}

func TestMultipleOutcomeTypes(t *testing.T) {
	d := journeyOf("analyze", map[string]*flowv1.PathwaySpec{
		"analyze": phase("analyze", &flowv1.OutcomeTransitions{
			OnSuccess: str("implement"),
			OnFailure: choose("failure-investigator", "debug", "escalate", "close"),
			OnUnclear: choose("uncertainty-resolver", "manual-review", "gather-data", "proceed"),
		}),
		"implement": {}, "debug": {}, "escalate": {}, "close": {}, "manual-review": {}, "gather-data": {}, "proceed": {},
	}, func(j *flowv1.JourneySpec) {
		j.Agents = []flowv1.AgentSpec{{Name: "failure-investigator", Provider: flowv1.ProviderOpenAI, Model: "m"},
			{Name: "uncertainty-resolver", Provider: flowv1.ProviderOpenAI, Model: "m"}}
	})
	for _, tt := range []struct{ result, pathway, transition string }{
		{"success", "implement", "onSuccess"},
		{"failure", "escalate", "onFailure"},
		{"unclear", "gather-data", "onUnclear"},
	} {
		s := newSession(t, d)
		s.spec.InitialContext = raw(`{"results":{"analyze":"` + tt.result + `"}}`)
		s.answer = (&llm{decide: func(r agent.DecisionRequest) (agent.DecisionResponse, error) {
			return agent.DecisionResponse{Destination: string(r.Decision.AllowedDestinations[1]), Confidence: 0.95}, nil
		}}).answer
		s.settle()
		s.expect(flowv1.PhaseWaitingForInput, tt.pathway)
		if h := s.st.History[0]; h.Transition != tt.transition {
			t.Errorf("%s: transition %s", tt.result, h.Transition)
		}
	}
}

// Without onPartialSuccess a partial success takes onSuccess; without onFailure a
// failure stays (Graceful) and an unclear result waits for more input.
func TestOutcomeFallbacks(t *testing.T) {
	d := journeyOf("work", map[string]*flowv1.PathwaySpec{
		"work":  phase("work", &flowv1.OutcomeTransitions{OnSuccess: str("next")}),
		"next":  {},
		"other": {},
	}, func(j *flowv1.JourneySpec) {
		j.Transitions = []flowv1.GlobalTransition{{Name: "go", To: "other", Trigger: flowv1.Trigger{Condition: "false"}}}
	})
	for result, want := range map[string]string{"partial_success": "next", "failure": "work", "unclear": "work", "success": "next"} {
		s := newSession(t, d)
		s.spec.InitialContext = raw(`{"results":{"work":"` + result + `"}}`)
		s.settle()
		s.expect(flowv1.PhaseWaitingForInput, want)
		if result == "failure" && (s.st.LastTurn.FinishReason != flowv1.FinishError || len(s.st.LastTurn.Failures) != 1) {
			t.Errorf("unhandled failure: %s", dump(s.st.LastTurn))
		}
	}
}
