package engine

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// planner is seed 003's controller state machine as a journey of builtin workflow
// steps (runOn Entry) whose results come from the context, so each test steers it:
//
//	COLLECT_CONTEXT  sufficient_context -> outline; needs_clarification -> needs-clarification
//	outline (DRAFT+VALIDATE_OUTLINE)  valid -> roadmap; invalid_retryable -> outline (Retry, limit 2);
//	                                  invalid_fatal (unclear) -> needs-clarification;
//	                                  low_confidence (partial) -> collect-context (JumpBack); fatal_error -> ABORTED (Failed)
//	roadmap -> schedule; schedule  valid -> seek-approval; infeasible -> needs-sched-escalation
//	seek-approval  a decision at confidence 0.5 with thresholds 0.7/0.4: a person approves
//	               (complete), or sends it back to the outline with a destination override.
func planner(mods ...func(*flowv1.JourneySpec)) def {
	entry := func(outcome string, tr *flowv1.OutcomeTransitions, next string) *flowv1.PathwaySpec {
		return &flowv1.PathwaySpec{RunOn: flowv1.RunOnEntry, Transitions: tr, Next: flowv1.Name(next),
			Builtin: &flowv1.BuiltinPathway{Outcome: flowv1.Expression(outcome)}}
	}
	to := func(p string) *flowv1.OutcomeTransition { return &flowv1.OutcomeTransition{To: flowv1.Name(p)} }
	always := func(p string, action flowv1.Action) *flowv1.OutcomeTransition {
		return &flowv1.OutcomeTransition{Decision: &flowv1.Decision{AllowedDestinations: []flowv1.Name{flowv1.Name(p)},
			Rules: []flowv1.DecisionRule{{When: "true", To: flowv1.Name(p), Action: action}}}}
	}
	specs := map[string]*flowv1.PathwaySpec{
		"collect-context": entry(`context.collect == "sufficient_context" ? "success" : "failure"`,
			&flowv1.OutcomeTransitions{OnSuccess: to("outline"), OnFailure: to("needs-clarification")}, ""),
		"outline": entry(`has(context.outline_fatal) ? "unclear" : has(context.outline_low) ? "partial_success" : has(context.outline_abort) ? "failure" : session.turns >= context.outline_ok_at ? "success" : "failure"`,
			&flowv1.OutcomeTransitions{
				OnSuccess:        to("roadmap"),
				OnFailure:        &flowv1.OutcomeTransition{Decision: &flowv1.Decision{AllowedDestinations: []flowv1.Name{"outline"}, Rules: []flowv1.DecisionRule{{When: "has(context.outline_abort)", To: "outline", Action: flowv1.ActionClose}, {When: "true", To: "outline"}}}},
				OnUnclear:        always("needs-clarification", ""),
				OnPartialSuccess: always("collect-context", flowv1.ActionJumpBack),
			}, ""),
		"roadmap":  entry(`"success"`, nil, "schedule"),
		"schedule": entry(`context.schedule`, &flowv1.OutcomeTransitions{OnSuccess: to("seek-approval"), OnFailure: to("needs-sched-escalation")}, ""),
		"seek-approval": {RunOn: flowv1.RunOnEntry, Transitions: &flowv1.OutcomeTransitions{OnSuccess: &flowv1.OutcomeTransition{Decision: &flowv1.Decision{
			Agent:                "approval-handler",
			AllowedDestinations:  []flowv1.Name{"complete", "outline"},
			ConfidenceThresholds: &flowv1.ConfidenceThresholds{AutoAdvance: "0.7", RequireApproval: "0.4"},
		}}}},
		"complete":               {RunOn: flowv1.RunOnEntry},
		"needs-clarification":    {},
		"needs-sched-escalation": {},
	}
	return journeyOf("collect-context", specs, append([]func(*flowv1.JourneySpec){func(j *flowv1.JourneySpec) {
		j.Agents = []flowv1.AgentSpec{{Name: "approval-handler", Provider: flowv1.ProviderBuiltin, Builtin: &flowv1.BuiltinAgent{Confidence: "0.5"}}}
		j.Limits.MaxTurns = 10 // TURN_LIMIT
	}}, mods...)...)
}

func TestStateTransitions(t *testing.T) {
	tests := []struct {
		name    string
		ctx     string
		phase   flowv1.Phase
		pathway string
		path    string
		stalled string
	}{
		{"needs clarification", `{"collect":"needs_clarification"}`, flowv1.PhaseWaitingForInput, "needs-clarification", "collect-context>needs-clarification", ""},
		{"valid first time", `{"collect":"sufficient_context","outline_ok_at":2,"schedule":"success"}`, flowv1.PhaseAwaitingApproval, "seek-approval",
			"collect-context>outline>roadmap>schedule>seek-approval", ""},
		{"two retries then valid", `{"collect":"sufficient_context","outline_ok_at":4,"schedule":"success"}`, flowv1.PhaseAwaitingApproval, "seek-approval",
			"collect-context>outline>outline>outline>roadmap>schedule>seek-approval", ""},
		{"third invalid hits the retry limit", `{"collect":"sufficient_context","outline_ok_at":5}`, flowv1.PhaseRunning, "outline",
			"collect-context>outline>outline>outline", flowv1.ReasonRetryLimit},
		{"invalid fatal", `{"collect":"sufficient_context","outline_fatal":true}`, flowv1.PhaseWaitingForInput, "needs-clarification",
			"collect-context>outline>needs-clarification", ""},
		// Each low-confidence JumpBack is a new cycle: maxIterations (5) stops it, not loop
		// prevention.
		{"low confidence goes back", `{"collect":"sufficient_context","outline_low":true}`, flowv1.PhaseRunning, "outline",
			"collect-context>outline>collect-context>outline>collect-context>outline>collect-context>outline>collect-context>outline", flowv1.ReasonIterationLimit},
		{"fatal error aborts", `{"collect":"sufficient_context","outline_abort":true}`, flowv1.PhaseFailed, "outline", "collect-context>outline", ""},
		{"infeasible schedule", `{"collect":"sufficient_context","outline_ok_at":2,"schedule":"failure"}`, flowv1.PhaseWaitingForInput, "needs-sched-escalation",
			"collect-context>outline>roadmap>schedule>needs-sched-escalation", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSession(t, planner())
			s.spec.InitialContext = raw(tt.ctx)
			s.settle()
			if s.st.Phase != tt.phase || s.st.CurrentPathway != tt.pathway || s.path() != tt.path || s.stalled() != tt.stalled {
				t.Fatalf("got %s in %s via %s (stalled %q), want %s in %s via %s (stalled %q)\n%s",
					s.st.Phase, s.st.CurrentPathway, s.path(), s.stalled(), tt.phase, tt.pathway, tt.path, tt.stalled, dump(s.st))
			}
		})
	}
}

func TestRetryLimit(t *testing.T) {
	s := newSession(t, planner())
	s.spec.InitialContext = raw(`{"collect":"sufficient_context","outline_ok_at":99}`)
	s.settle()
	if s.stalled() != flowv1.ReasonRetryLimit || s.st.Retries["outline"] != 2 {
		t.Fatalf("stalled %q retries %v", s.stalled(), s.st.Retries)
	}
	last := s.st.History[len(s.st.History)-1]
	if last.Action != flowv1.ActionBlock || last.Source != flowv1.SourceCap || last.To != "outline" {
		t.Errorf("block entry: %s", dump(last))
	}
	if c := s.condition(flowv1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != flowv1.ReasonRetryLimit {
		t.Errorf("Ready %+v", c)
	}
	if s.condition(flowv1.ConditionReconciling) != nil {
		t.Error("Reconciling present while stalled")
	}
	// Blocked for good: new input changes nothing.
	s.say("m1", "please go on")
	before := s.st.DeepCopy()
	s.settle()
	if s.st.ProcessedMessages != before.ProcessedMessages || s.st.Step != before.Step {
		t.Error("a blocked session took a step")
	}
	// A per-pathway retry limit overrides the journey's.
	d := planner()
	d.p["outline"].Retry = &flowv1.RetryPolicy{Limit: 0}
	s = newSession(t, d)
	s.spec.InitialContext = raw(`{"collect":"sufficient_context","outline_ok_at":99}`)
	s.settle()
	if s.stalled() != flowv1.ReasonRetryLimit || s.path() != "collect-context>outline" {
		t.Errorf("retry limit 0: stalled %q path %s", s.stalled(), s.path())
	}
}

// Seed 003's thresholds: continue >= 0.7, 0.4-0.69 a person decides, < 0.4 escalate.
func TestConfidenceThresholds(t *testing.T) {
	for _, tt := range []struct {
		confidence flowv1.Confidence
		escalation bool
		phase      flowv1.Phase
		pathway    string
		state      flowv1.DecisionState
	}{
		{"0.75", false, flowv1.PhaseCompleted, "complete", flowv1.DecisionApplied},
		{"0.7", false, flowv1.PhaseCompleted, "complete", flowv1.DecisionApplied},
		{"0.69", false, flowv1.PhaseAwaitingApproval, "seek-approval", flowv1.DecisionPending},
		{"0.4", false, flowv1.PhaseAwaitingApproval, "seek-approval", flowv1.DecisionPending},
		{"0.39", false, flowv1.PhaseEscalated, "seek-approval", flowv1.DecisionEscalated},
		{"0.39", true, flowv1.PhaseWaitingForInput, "needs-clarification", flowv1.DecisionEscalated},
	} {
		t.Run(fmt.Sprintf("%s/%v", tt.confidence, tt.escalation), func(t *testing.T) {
			s := newSession(t, planner(func(j *flowv1.JourneySpec) {
				j.Agents[0].Builtin.Confidence = tt.confidence
				if tt.escalation {
					j.EscalationPathway = "needs-clarification"
				}
			}))
			s.spec.InitialContext = raw(`{"collect":"sufficient_context","outline_ok_at":2,"schedule":"success"}`)
			s.settle()
			s.expect(tt.phase, tt.pathway)
			d := s.st.LastDecision
			if d.State != tt.state || d.Confidence != tt.confidence || d.Source != flowv1.SourceAgent || d.Agent != "approval-handler" {
				t.Errorf("lastDecision %s", dump(d))
			}
			if s.st.Confidence != tt.confidence {
				t.Errorf("status.confidence %s", s.st.Confidence)
			}
		})
	}
}

func TestApprovals(t *testing.T) {
	start := func(t *testing.T) *session {
		s := newSession(t, planner())
		s.spec.InitialContext = raw(`{"collect":"sufficient_context","outline_ok_at":2,"schedule":"success"}`)
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval")
		if c := s.condition(flowv1.ConditionAwaitingApproval); c == nil || c.Status != metav1.ConditionTrue {
			t.Fatalf("AwaitingApproval %+v", c)
		}
		return s
	}
	t.Run("approved", func(t *testing.T) {
		s := start(t)
		id := s.st.LastDecision.ID
		s.say("m1", "any news?") // messages wait while a decision is pending
		s.approve("d-999", true, "")
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval")
		if f := s.st.LastTurn.Failures; len(f) != 1 || s.st.LastTurn.FinishReason != flowv1.FinishPolicyDenied {
			t.Errorf("unknown decision: %s", dump(s.st.LastTurn))
		}
		if s.st.ProcessedMessages != 0 {
			t.Error("a message was processed while awaiting approval")
		}
		s.approve(id, true, "")
		s.settle()
		s.expect(flowv1.PhaseCompleted, "complete")
		if d := s.st.History[len(s.st.History)-2]; d.Source != flowv1.SourceApproval || d.To != "complete" || d.Reason != "approved by alice" {
			t.Errorf("history %s", dump(d))
		}
		if s.st.ProcessedApprovals != 2 {
			t.Errorf("processedApprovals %d", s.st.ProcessedApprovals)
		}
	})
	t.Run("sent back with a destination", func(t *testing.T) {
		s := start(t)
		s.approve(s.st.LastDecision.ID, true, "roadmap") // not allowed: ignored
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval")
		s.approve(s.st.LastDecision.ID, true, "outline")
		s.step()
		s.expect(flowv1.PhaseRunning, "outline")
		if s.st.LastDecision.State != flowv1.DecisionApproved || s.st.LastDecision.To != "outline" {
			t.Errorf("lastDecision %s", dump(s.st.LastDecision))
		}
	})
	t.Run("rejected", func(t *testing.T) {
		s := start(t)
		id := s.st.LastDecision.ID
		s.approve(id, false, "")
		s.step()
		s.expect(flowv1.PhaseRunning, "seek-approval")
		if s.st.LastDecision.State != flowv1.DecisionRejected {
			t.Errorf("state %s", s.st.LastDecision.State)
		}
		// The pathway runs again and asks again, under a new decision id.
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval")
		if s.st.LastDecision.ID == id || s.st.LastDecision.State != flowv1.DecisionPending {
			t.Errorf("new decision %s", dump(s.st.LastDecision))
		}
		// Approving the old id now does nothing.
		s.approve(id, true, "")
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval")
	})
	t.Run("restricted approvers", func(t *testing.T) {
		d := planner()
		d.p["seek-approval"].Transitions.OnSuccess.Decision.Approvers = &flowv1.Approvers{Users: []string{"bob"}}
		s := newSession(t, d)
		s.spec.InitialContext = raw(`{"collect":"sufficient_context","outline_ok_at":2,"schedule":"success"}`)
		s.settle()
		s.approve(s.st.LastDecision.ID, true, "") // by alice
		s.settle()
		s.expect(flowv1.PhaseAwaitingApproval, "seek-approval")
		s.spec.Approvals = append(s.spec.Approvals, flowv1.Approval{DecisionID: s.st.LastDecision.ID, Approve: true, By: "bob"})
		s.settle()
		s.expect(flowv1.PhaseCompleted, "complete")
	})
}

func conversation(mods ...func(*flowv1.JourneySpec)) def {
	return journeyOf("chat", map[string]*flowv1.PathwaySpec{
		"chat": {Agents: []flowv1.Name{"bot"}, Builtin: &flowv1.BuiltinPathway{Complete: "false"}},
	}, append([]func(*flowv1.JourneySpec){func(j *flowv1.JourneySpec) {
		j.Agents = []flowv1.AgentSpec{{Name: "bot", Provider: flowv1.ProviderBuiltin}}
	}}, mods...)...)
}

func TestCaps(t *testing.T) {
	t.Run("turn limit", func(t *testing.T) {
		s := newSession(t, conversation(func(j *flowv1.JourneySpec) { j.Limits.MaxTurns = 3 }))
		for i := range 4 {
			s.say(fmt.Sprintf("m%d", i), "hi")
		}
		s.settle()
		if s.stalled() != flowv1.ReasonTurnLimit || s.st.Turns != 3 || s.st.ProcessedMessages != 3 {
			t.Fatalf("stalled %q turns %d processed %d", s.stalled(), s.st.Turns, s.st.ProcessedMessages)
		}
		if s.st.LastTurn.FinishReason != flowv1.FinishTurnLimit {
			t.Errorf("finishReason %s", s.st.LastTurn.FinishReason)
		}
		if s.st.Phase.IsTerminal() {
			t.Errorf("phase %s: a cap is not terminal", s.st.Phase)
		}
	})
	t.Run("wall time", func(t *testing.T) {
		s := newSession(t, conversation(func(j *flowv1.JourneySpec) { j.Limits.SessionTimeout = &metav1.Duration{Duration: 45 * time.Second} }))
		s.say("m1", "hi")
		s.settle()
		s.expect(flowv1.PhaseWaitingForInput, "chat")
		s.now = t0.Add(45 * time.Second)
		s.settle()
		if s.stalled() != "" {
			t.Fatal("timed out at the deadline")
		}
		s.now = t0.Add(46 * time.Second)
		s.settle() // idle, yet the timeout blocks it
		if s.stalled() != flowv1.ReasonSessionTimeout || s.st.LastTurn.FinishReason != flowv1.FinishDeadline {
			t.Fatalf("stalled %q %s", s.stalled(), dump(s.st.LastTurn))
		}
	})
	t.Run("budget", func(t *testing.T) {
		s := newSession(t, conversation(func(j *flowv1.JourneySpec) {
			j.Agents = []flowv1.AgentSpec{{Name: "bot", Provider: flowv1.ProviderOpenAI, Model: "m"}}
			j.Limits.Budget = &flowv1.Budget{MaxCostUSD: "2.0", MaxTokens: 100000}
		}))
		l := &llm{usage: agent.Usage{PromptTokens: 1000, CompletionTokens: 200, CostUSD: 0.9},
			pathway: func(agent.PathwayRequest) (agent.PathwayResponse, error) {
				return agent.PathwayResponse{Reply: "ok", ResultType: flowv1.ResultSuccess}, nil
			}}
		s.answer = l.answer
		for i := range 5 {
			s.say(fmt.Sprintf("m%d", i), "hi")
		}
		s.settle()
		if s.stalled() != flowv1.ReasonBudgetExceeded || l.calls[flowv1.EffectRunPathway] != 3 {
			t.Fatalf("stalled %q after %d calls", s.stalled(), l.calls[flowv1.EffectRunPathway])
		}
		if u := s.st.Usage; u.CostUSD != "2.7" || u.PromptTokens != 3000 || u.CompletionTokens != 600 {
			t.Errorf("usage %+v", u)
		}
	})
	t.Run("transition limit", func(t *testing.T) {
		d := journeyOf("a", map[string]*flowv1.PathwaySpec{"a": {RunOn: flowv1.RunOnEntry, Next: "b"}, "b": {RunOn: flowv1.RunOnEntry, Next: "c"}, "c": {RunOn: flowv1.RunOnEntry}},
			func(j *flowv1.JourneySpec) { j.Limits.MaxTransitions = 1 })
		s := newSession(t, d)
		s.settle()
		if s.stalled() != flowv1.ReasonTransitionLimit || s.st.CurrentPathway != "b" {
			t.Fatalf("stalled %q in %s", s.stalled(), s.st.CurrentPathway)
		}
	})
	t.Run("iteration limit", func(t *testing.T) {
		d := workflow()
		d.j.Limits.MaxIterations = 2
		d.j.LoopPrevention.MaxCycleRepeats = 10
		s := newSession(t, d)
		s.post("plan", 1, flowv1.ResultSuccess, "").post("generate", 1, flowv1.ResultSuccess, "")
		s.post("review", 1, flowv1.ResultFailure, "").post("revise", 2, flowv1.ResultSuccess, "").post("review", 2, flowv1.ResultFailure, "")
		s.settle()
		if s.stalled() != flowv1.ReasonIterationLimit || s.st.Iteration != 2 || s.st.LastTurn.FinishReason != flowv1.FinishIterationLimit {
			t.Fatalf("stalled %q iteration %d", s.stalled(), s.st.Iteration)
		}
	})
}

func TestSuspendAndCancel(t *testing.T) {
	s := newSession(t, conversation())
	s.spec.Suspend = true
	s.say("m1", "hi")
	s.settle()
	if s.st.ProcessedMessages != 0 {
		t.Fatal("a suspended session processed a message")
	}
	if c := s.condition(flowv1.ConditionReady); c == nil || c.Reason != flowv1.ReasonSuspended {
		t.Fatalf("Ready %+v", c)
	}
	s.spec.Suspend = false
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "chat")
	if c := s.condition(flowv1.ConditionReady); c.Reason != flowv1.ReasonWaitingForInput {
		t.Errorf("Ready after resume %+v", c)
	}
	s.spec.Cancel = true
	s.say("m2", "hi")
	s.settle()
	s.expect(flowv1.PhaseCancelled, "chat")
	if s.st.ProcessedMessages != 1 || s.st.CompletionTime == nil {
		t.Errorf("cancel: %s", dump(s.st))
	}
}
