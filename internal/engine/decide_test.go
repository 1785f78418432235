package engine

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// planner is a planning agent's supervising state machine as a journey of builtin workflow
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
		// A failed Session is Stalled with the reason it failed for (kstatus: Failed).
		{"fatal error aborts", `{"collect":"sufficient_context","outline_abort":true}`, flowv1.PhaseFailed, "outline", "collect-context>outline", flowv1.ReasonFailed},
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

// The planner's thresholds: continue >= 0.7, 0.4-0.69 a person decides, < 0.4 escalate.
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

// The confidence bands: at or above autoAdvance the decision applies; between
// retryWithFeedback and autoAdvance the deciding pathway runs once more with the
// reasoning as feedback (a Retry), then asks for approval; between requireApproval and
// retryWithFeedback it waits for approval; below it escalates.
func TestConfidenceBands(t *testing.T) {
	for _, tt := range []struct {
		name     string
		th       flowv1.ConfidenceThresholds
		phase    flowv1.Phase
		pathway  string
		feedback bool
	}{
		{"apply", flowv1.ConfidenceThresholds{AutoAdvance: "0.5", RetryWithFeedback: "0.45", RequireApproval: "0.4"}, flowv1.PhaseCompleted, "complete", false},
		{"retry with feedback, then approval", flowv1.ConfidenceThresholds{AutoAdvance: "0.7", RetryWithFeedback: "0.45", RequireApproval: "0.4"}, flowv1.PhaseAwaitingApproval, "seek-approval", true},
		{"approval", flowv1.ConfidenceThresholds{AutoAdvance: "0.7", RetryWithFeedback: "0.6", RequireApproval: "0.4"}, flowv1.PhaseAwaitingApproval, "seek-approval", false},
		{"escalate", flowv1.ConfidenceThresholds{AutoAdvance: "0.9", RetryWithFeedback: "0.8", RequireApproval: "0.6"}, flowv1.PhaseEscalated, "seek-approval", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := planner()
			th := tt.th
			d.p["seek-approval"].Transitions.OnSuccess.Decision.ConfidenceThresholds = &th
			s := newSession(t, d)
			s.spec.InitialContext = raw(`{"collect":"sufficient_context","outline_ok_at":2,"schedule":"success"}`)
			s.settle()
			s.expect(tt.phase, tt.pathway)
			var retried []flowv1.HistoryEntry
			for _, h := range s.st.History {
				if h.From == "seek-approval" && h.To == "seek-approval" && h.Action == flowv1.ActionRetry {
					retried = append(retried, h)
				}
			}
			if tt.feedback {
				if len(retried) != 1 || s.st.Retries["seek-approval"] != 1 {
					t.Fatalf("want one retry with feedback, history %s", dump(s.st.History))
				}
				if ld := s.st.LastDecision; ld.State != flowv1.DecisionPending {
					t.Errorf("after the retry the decision waits for approval: %s", dump(ld))
				}
			} else if len(retried) != 0 {
				t.Errorf("retried with feedback outside the band: %s", dump(retried))
			}
		})
	}
}
