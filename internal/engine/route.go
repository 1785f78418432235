package engine

import (
	"fmt"

	"github.com/google/cel-go/interpreter"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
	"github.com/journeyops/journey-operator/internal/engine/match"
	"github.com/journeyops/journey-operator/internal/expr"
)

// firing is a global transition that fired, and why.
type firing struct {
	gt         *flowv1.GlobalTransition
	confidence flowv1.Confidence
	agent      string
	reason     string
}

// route is the Route stage of a message turn: the global transitions that apply in the
// current pathway are tried in one order, priority then declaration, whatever their
// trigger: an intent whose patterns match or a condition that holds fires. The
// journey's classifier is asked at most once per message, and only about the
// llmFallback intents that come before the first transition that fired on its own (the
// only ones that could still win): an LLM one through a journaled effect, a builtin
// one inline. The first that fires moves the Session; the turn goes on with the Run
// stage in the (new) current pathway.
func (r *run) route() stageResult {
	t := r.st.Turn
	text, ok := r.message(t.MessageID)
	if !ok {
		r.addFailure(flowv1.Failure{Source: flowv1.FailureSystem, Component: "engine", Kind: flowv1.FailureValidation,
			Message: fmt.Sprintf("message %q is no longer in spec.messages", t.MessageID)})
		return turnOver
	}
	f, candidates := r.firstFiring(text)
	if len(candidates) > 0 {
		picked, res, waiting := r.classify(text, candidates)
		if waiting {
			return res
		}
		if picked != nil {
			f = picked
		}
	}
	if f != nil && !r.takeGlobal(f) {
		return turnOver
	}
	t.Outputs = nil
	t.Pathway = r.st.CurrentPathway
	return goTo(flowv1.StageRun)
}

// firstFiring walks the transitions that apply, by priority then declaration, and
// returns the first that fires on its own (a matching pattern, a true condition), with
// the llmFallback intents met before it whose patterns did not match: those the
// classifier may still pick over it. A condition that fails to evaluate is recorded
// and skipped. Without a classifier there are no candidates.
func (r *run) firstFiring(text string) (*firing, []*flowv1.GlobalTransition) {
	_, _, classifier := r.snap.classifier()
	var candidates []*flowv1.GlobalTransition
	var act interpreter.Activation
	for _, gt := range r.snap.transitions {
		if !gt.AppliesIn(r.st.CurrentPathway) {
			continue
		}
		if in := gt.Trigger.Intent; in != nil {
			if match.Index(text, in.Patterns) >= 0 {
				return &firing{gt: gt, confidence: "1", reason: "pattern match"}, candidates
			}
			if classifier && in.LLMFallback {
				candidates = append(candidates, gt)
			}
			continue
		}
		if act == nil {
			act = r.conditionVars(text)
		}
		fire, err := expr.EvalBool(string(gt.Trigger.Condition), act)
		if err != nil {
			r.addFailure(flowv1.Failure{Source: flowv1.FailureSystem, Component: string(gt.Name), Kind: flowv1.FailureValidation, Message: err.Error()})
			continue
		}
		if fire {
			return &firing{gt: gt, confidence: "1", reason: "condition " + string(gt.Trigger.Condition)}, candidates
		}
	}
	return nil, candidates
}

// classify asks the journey's classifier about candidates and returns the transition
// its answer picks: an LLM classifier's journaled answer, or the builtin classifier's,
// computed inline (it is pure). waiting says the stage stops with res instead: it
// waits on the LLM classifier, or the budget is spent and the Session is blocked.
func (r *run) classify(text string, candidates []*flowv1.GlobalTransition) (f *firing, res stageResult, waiting bool) {
	ag, remote, ok := r.snap.classifier()
	if !ok {
		return nil, turnOver, false
	}
	intents := make([]agent.Intent, 0, len(candidates))
	for _, gt := range candidates {
		in := gt.Trigger.Intent
		intents = append(intents, agent.Intent{Name: string(gt.Name), Description: in.Description, Patterns: in.Patterns})
	}
	req := agent.IntentRequest{Message: text, Intents: intents, Context: r.context(), CacheTTL: r.snap.lim.intentCacheTTL, Pathway: r.st.CurrentPathway}
	if !remote {
		ans := builtin.Classify(req)
		return r.pick(string(ag.Name), ans.Intent, ans.Confidence, ans.Reasoning, candidates), turnOver, false
	}
	rec, res := r.remote(flowv1.EffectClassifyIntent, []flowv1.AgentSpec{ag}, "", req)
	if rec == nil {
		return nil, res, true
	}
	return r.classified(rec, candidates), turnOver, false
}

// classified reads the LLM classifier's journaled answer (see pick).
func (r *run) classified(rec *flowv1.EffectRecord, candidates []*flowv1.GlobalTransition) *firing {
	res := rec.Result
	r.addUsage(res.Usage)
	if res.Failure != nil {
		r.addFailure(*res.Failure)
		return nil
	}
	return r.pick(rec.Agent, res.Intent, parseConfidence(res.Confidence, 0), res.Reasoning, candidates)
}

// pick is the transition among candidates that a classifier's answer names, if its
// confidence reaches the journey's threshold; none for "none", and a failure for an
// intent not asked about.
func (r *run) pick(by, intent string, conf float64, reason string, candidates []*flowv1.GlobalTransition) *firing {
	if intent == "" || intent == agent.NoIntent || conf < r.snap.lim.intentThreshold {
		return nil
	}
	for _, gt := range candidates {
		if string(gt.Name) == intent {
			if reason == "" {
				reason = "classified by " + by
			}
			return &firing{gt: gt, confidence: formatConfidence(conf), agent: by, reason: reason}
		}
	}
	r.addFailure(flowv1.Failure{Source: flowv1.FailureLLM, Component: by, Kind: flowv1.FailureValidation,
		Message: fmt.Sprintf("intent %q is not one of the intents asked about", intent)})
	return nil
}

// conditionVars are the variables of a condition: message, context, session, and
// outputs (the previous turn's, decoded only if a condition reads them).
func (r *run) conditionVars(text string) interpreter.Activation {
	act := (expr.Vars{Message: text, Context: r.context(), Session: builtin.SessionVars(r.sessionInfo(r.st.CurrentPathway))}).Activation()
	if raw := r.st.Turn.Outputs; raw != nil {
		act = interpreter.NewHierarchicalActivation(act, lazy{expr.VarOutputs, func() any {
			m, _ := decodeJSON(raw)
			return m
		}})
	}
	return act
}

// takeGlobal applies a global transition that fired: the move, then its context
// updates. It reports whether the turn goes on (a refused detour goes on in the
// current pathway under Graceful recovery).
func (r *run) takeGlobal(f *firing) bool {
	gt := f.gt
	from := r.st.CurrentPathway
	m := move{
		to: gt.To, action: flowv1.ActionAdvance, source: flowv1.SourceTransition, transition: string(gt.Name),
		confidence: f.confidence, agent: f.agent, reasoning: f.reason,
	}
	if r.st.LastTurn != nil {
		r.st.LastTurn.Transition = string(gt.Name)
	}
	switch r.move(m) {
	case moveStopped:
		return false
	case moveRefused:
		return true
	}
	if len(gt.ContextUpdate) > 0 {
		return r.contextUpdate(gt, from)
	}
	return true
}
