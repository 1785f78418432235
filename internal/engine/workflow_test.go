package engine

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// workflow is an engine-owned review loop as a journey of External executors:
// plan -> generate -> review -> (complete | revise -> review ...). A review failure
// starts a new cycle (JumpBack: iteration + 1); a review that reports an error, or a
// failed revision, fails the Session; cancellation is spec.cancel.
func workflow() def {
	ext := func(next string) *flowv1.PathwaySpec {
		return &flowv1.PathwaySpec{Executor: flowv1.ExecutorExternal, Next: flowv1.Name(next)}
	}
	review := ext("")
	review.Accumulate = []string{"findings"}
	review.Transitions = &flowv1.OutcomeTransitions{
		OnSuccess: &flowv1.OutcomeTransition{Action: flowv1.ActionClose},
		OnFailure: &flowv1.OutcomeTransition{Decision: &flowv1.Decision{
			AllowedDestinations: []flowv1.Name{"revise"},
			Rules: []flowv1.DecisionRule{
				{When: `has(outputs.error)`, To: "revise", Action: flowv1.ActionClose},
				{When: `true`, To: "revise", Action: flowv1.ActionJumpBack},
			},
		}},
	}
	revise := ext("review")
	revise.Transitions = &flowv1.OutcomeTransitions{OnFailure: &flowv1.OutcomeTransition{Action: flowv1.ActionClose}}
	return journeyOf("plan", map[string]*flowv1.PathwaySpec{
		"plan": ext("generate"), "generate": ext("review"), "review": review, "revise": revise,
	})
}

func TestWorkflowMatrix(t *testing.T) {
	type want struct {
		phase     flowv1.Phase
		pathway   string
		iteration int32
		moves     int // new history entries
	}
	type row struct {
		slice string
		setup func(*session) // brings the Session to the row's From state
		act   func(*session) // the trigger
		want  want
	}
	toPlan := func(s *session) { s.settle() }
	toGenerate := func(s *session) { toPlan(s); s.post("plan", 1, flowv1.ResultSuccess, `{"plan":"p"}`); s.settle() }
	toReview := func(s *session) { toGenerate(s); s.post("generate", 1, flowv1.ResultSuccess, ""); s.settle() }
	toRevise := func(s *session) {
		toReview(s)
		s.post("review", 1, flowv1.ResultFailure, `{"findings":["naming"]}`)
		s.settle()
	}
	rows := []row{
		{"A initialize", func(*session) {}, func(*session) {}, want{"", "", 0, 0}},
		{"B start", func(*session) {}, toPlan, want{flowv1.PhaseWaitingForInput, "plan", 1, 0}},
		{"C plan success", toPlan, func(s *session) { s.post("plan", 1, flowv1.ResultSuccess, "") }, want{flowv1.PhaseWaitingForInput, "generate", 1, 1}},
		{"D2 generation done", toGenerate, func(s *session) { s.post("generate", 1, flowv1.ResultSuccess, "") }, want{flowv1.PhaseWaitingForInput, "review", 1, 1}},
		{"E1 review pass", toReview, func(s *session) { s.post("review", 1, flowv1.ResultSuccess, "") }, want{flowv1.PhaseCompleted, "review", 1, 1}},
		{"E2 review fail", toReview, func(s *session) { s.post("review", 1, flowv1.ResultFailure, `{"findings":["naming"]}`) }, want{flowv1.PhaseWaitingForInput, "revise", 2, 1}},
		{"E3 review error", toReview, func(s *session) { s.post("review", 1, flowv1.ResultFailure, `{"error":"parser crashed"}`) }, want{flowv1.PhaseFailed, "review", 1, 1}},
		{"E4 review cancelled", toReview, func(s *session) { s.spec.Cancel = true }, want{flowv1.PhaseCancelled, "review", 1, 0}},
		{"F2 revision done", toRevise, func(s *session) { s.post("revise", 2, flowv1.ResultSuccess, "") }, want{flowv1.PhaseWaitingForInput, "review", 2, 1}},
		{"F2a revision error", toRevise, func(s *session) { s.post("revise", 2, flowv1.ResultFailure, "") }, want{flowv1.PhaseFailed, "revise", 2, 1}},
		{"F2b revision cancelled", toRevise, func(s *session) { s.spec.Cancel = true }, want{flowv1.PhaseCancelled, "revise", 2, 0}},
	}
	for _, r := range rows {
		t.Run(r.slice, func(t *testing.T) {
			s := newSession(t, workflow())
			r.setup(s)
			before := len(s.st.History)
			s.now = s.now.Add(time.Minute)
			r.act(s)
			if r.slice != "A initialize" && r.slice != "B start" {
				s.settle()
			}
			if s.st.Phase != r.want.phase || s.st.CurrentPathway != r.want.pathway || s.st.Iteration != r.want.iteration {
				t.Fatalf("got %s in %q iteration %d, want %s in %q iteration %d\n%s", s.st.Phase, s.st.CurrentPathway, s.st.Iteration,
					r.want.phase, r.want.pathway, r.want.iteration, dump(s.st))
			}
			if got := len(s.st.History) - before; got != r.want.moves {
				t.Errorf("%d new history entries, want %d: %s", got, r.want.moves, dump(s.st.History))
			}
			for _, h := range s.st.History[before:] {
				if !h.Time.Time.Equal(s.now) {
					t.Errorf("history time %v, want the step's clock %v", h.Time, s.now)
				}
			}
			if s.st.Phase.IsTerminal() && s.st.CompletionTime == nil {
				t.Error("terminal without completionTime")
			}
		})
	}
}

func TestWorkflowDetails(t *testing.T) {
	s := newSession(t, workflow())
	s.settle()
	// Waiting on an External executor is blocked: a step is a full no-op.
	before := s.st.DeepCopy()
	if eff := s.step(); eff != nil || !equality.Semantic.DeepEqual(before, s.st) {
		t.Fatalf("blocked step changed the status")
	}
	if c := s.condition(flowv1.ConditionReady); c == nil || c.Reason != flowv1.ReasonWaitingForInput || c.Message != "Waiting for the outcome of External pathway plan, iteration 1" {
		t.Errorf("Ready: %+v", c)
	}
	// A message only routes in an External pathway: no transition fires, it is consumed.
	s.say("m1", "hello?")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "plan")
	if s.st.ProcessedMessages != 1 {
		t.Errorf("message not consumed")
	}
	// Outcomes for other pathways or iterations are skipped.
	s.post("review", 1, flowv1.ResultSuccess, "")
	s.post("plan", 2, flowv1.ResultSuccess, "")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "plan")
	if s.st.ProcessedOutcomes != 2 || len(s.st.History) != 0 {
		t.Errorf("stale outcomes: processed %d, history %d", s.st.ProcessedOutcomes, len(s.st.History))
	}
	s.post("plan", 1, flowv1.ResultSuccess, `{"plan":"p"}`)
	s.post("generate", 1, flowv1.ResultSuccess, "")
	// One outcome per step: the first step moves plan -> generate only.
	s.step()
	if s.st.CurrentPathway != "generate" || s.st.Phase != flowv1.PhaseRunning {
		t.Fatalf("after one step: %s in %s", s.st.Phase, s.st.CurrentPathway)
	}
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "review")
	// Two review failures, each a new cycle with its own iteration.
	s.post("review", 1, flowv1.ResultFailure, `{"findings":["naming"]}`)
	s.post("revise", 2, flowv1.ResultSuccess, "")
	s.post("review", 2, flowv1.ResultFailure, `{"findings":["tests","naming"]}`)
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "revise")
	if s.st.Iteration != 3 {
		t.Errorf("iteration %d, want 3", s.st.Iteration)
	}
	// Findings accumulate without duplicates.
	if got := s.context()["findings"]; !equality.Semantic.DeepEqual(got, []any{"naming", "tests"}) {
		t.Errorf("findings %v", got)
	}
	if got := s.path(); got != "plan>generate>review>revise>review>revise" {
		t.Errorf("path %s", got)
	}
	for _, h := range s.st.History {
		if h.To == "revise" && (h.Action != flowv1.ActionJumpBack || h.Source != flowv1.SourceRule) {
			t.Errorf("revise entered by %s/%s", h.Action, h.Source)
		}
	}
	// The previous iteration's review outcome is ignored now.
	s.post("review", 2, flowv1.ResultSuccess, "")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "revise")
}

// Review failures keep starting new cycles until maxIterations, never LoopDetected:
// each JumpBack is a deliberate new cycle, and loop prevention looks only within one.
func TestReviewLoopStopsAtMaxIterations(t *testing.T) {
	s := newSession(t, workflow())
	s.settle()
	s.post("plan", 1, flowv1.ResultSuccess, "")
	s.settle()
	s.post("generate", 1, flowv1.ResultSuccess, "")
	s.settle()
	for it := int32(1); it <= 5; it++ {
		s.post("review", it, flowv1.ResultFailure, `{"findings":["again"]}`)
		s.settle()
		if it == 5 {
			break
		}
		if s.st.CurrentPathway != "revise" || s.st.Iteration != it+1 || s.stalled() != "" {
			t.Fatalf("after review %d failed: %s iteration %d stalled %q", it, s.st.CurrentPathway, s.st.Iteration, s.stalled())
		}
		s.post("revise", it+1, flowv1.ResultSuccess, "")
		s.settle()
	}
	if s.stalled() != flowv1.ReasonIterationLimit || s.st.Iteration != 5 {
		t.Fatalf("stalled %q at iteration %d, want IterationLimit at 5 (path %s)", s.stalled(), s.st.Iteration, s.path())
	}
}
