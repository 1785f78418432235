package engine

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
	"github.com/journeyops/journey-operator/internal/expr"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// decideStage is the Decide stage: where a complete turn goes. The outcome transition
// for its result type, else next, else back from a detour, else the journey completes.
// A failure with no onFailure is a recoverable error; an unclear result with no
// onUnclear stays.
func (r *run) decideStage() stageResult {
	t := r.st.Turn
	name := r.st.CurrentPathway
	p := r.current()
	rt := cmp.Or(t.ResultType, flowv1.ResultSuccess)
	failed := rt == flowv1.ResultFailure
	tr, trName := p.Transitions.ForResult(rt)
	switch {
	case tr == nil && failed:
		r.turnFailed(flowv1.Failure{Source: flowv1.FailureSystem, Component: name, Kind: flowv1.FailureException,
			Message: fmt.Sprintf("pathway %s failed and has no onFailure transition", name)})
	case tr == nil && rt == flowv1.ResultUnclear:
		// Stays and waits for input.
	case tr == nil:
		r.followNext(p)
	case tr.Decision != nil:
		outputs, _ := decodeJSON(t.Outputs)
		return r.decide(decision{from: name, transition: trName, d: tr.Decision, action: tr.Decision.Action,
			failed: failed, outputs: outputs, id: decisionID(r.step)}, rt)
	default:
		to := string(tr.To)
		r.move(move{to: to, action: defaultAction(tr.Action, to, name), source: flowv1.SourceOutcome, transition: trName,
			confidence: "1", failed: failed})
	}
	return turnOver
}

// defaultAction is action, or when it is empty, Retry for a move to the pathway the
// Session is in (from) and Advance otherwise.
func defaultAction(action flowv1.Action, to, from string) flowv1.Action {
	switch {
	case action != "":
		return action
	case to == from:
		return flowv1.ActionRetry
	}
	return flowv1.ActionAdvance
}

// followNext moves a complete turn on without an outcome transition: to next, else
// back to the pathway a detour came from, else the journey completes.
func (r *run) followNext(p *flowv1.PathwaySpec) {
	st := r.st
	switch {
	case p.Next != "":
		r.move(move{to: string(p.Next), action: defaultAction("", string(p.Next), st.CurrentPathway), source: flowv1.SourceNext,
			transition: "next", confidence: "1"})
	case len(st.PathwayStack) > 0:
		r.move(move{to: st.PathwayStack[len(st.PathwayStack)-1], action: flowv1.ActionAdvance, source: flowv1.SourceReturn,
			transition: "return", confidence: "1"})
	default:
		r.move(move{action: flowv1.ActionClose, source: flowv1.SourceNext, transition: "next", confidence: "1"})
	}
}

// decision is a decision's answer before its confidence is weighed.
type decision struct {
	id, from, transition string
	d                    *flowv1.Decision
	to                   string
	action               flowv1.Action
	source               flowv1.DecisionSource
	agent, reasoning     string
	confidence           float64
	unclear              bool
	failed               bool
	outputs              map[string]any
}

// decide asks a decision's rules, then its agent, and weighs the answer.
func (r *run) decide(dc decision, rt flowv1.ResultType) stageResult {
	if r.matchRule(&dc) {
		r.weigh(dc)
		return turnOver
	}
	d := dc.d
	ag, remote := r.snap.resolveAgent(string(d.Agent))
	req := agent.DecisionRequest{
		Pathway: dc.from, Transition: dc.transition, Decision: d, ResultType: rt,
		Outputs: dc.outputs, Context: r.context(), Session: r.sessionInfo(dc.from),
	}
	dc.source = flowv1.SourceAgent
	dc.agent = string(ag.Name)
	if remote {
		rec, res := r.remote(flowv1.EffectDecide, []flowv1.AgentSpec{ag}, "", req)
		if rec == nil {
			return res
		}
		r.decided(&dc, rec)
	} else {
		req.ID = dc.id
		resp := builtin.Decide(req, builtin.Confidence(ag))
		dc.to, dc.confidence, dc.reasoning = resp.Destination, resp.Confidence, resp.Reasoning
	}
	if !dc.unclear && !r.allowed(d, dc.to) {
		msg := "the decision agent chose no destination"
		if dc.to != "" {
			msg = fmt.Sprintf("destination %q is not one of allowedDestinations", dc.to)
		}
		r.addFailure(flowv1.Failure{Source: flowv1.FailureLLM, Component: dc.agent, Kind: flowv1.FailureValidation, Message: msg})
		dc.unclear = true
		dc.reasoning = msg
	}
	if dc.unclear {
		dc.to = ""
		dc.confidence = 0
	}
	r.weigh(dc)
	return turnOver
}

// matchRule fills dc from the first of the decision's rules whose condition holds and
// reports whether one did. A rule that fails to evaluate is recorded and skipped.
func (r *run) matchRule(dc *decision) bool {
	rules := dc.d.Rules
	if len(rules) == 0 {
		return false
	}
	act := (expr.Vars{Outputs: dc.outputs, Context: r.context(), Session: builtin.SessionVars(r.sessionInfo(dc.from))}).Activation()
	for i, rule := range rules {
		ok, err := expr.EvalBool(string(rule.When), act)
		if err != nil {
			r.addFailure(flowv1.Failure{Source: flowv1.FailureSystem, Component: fmt.Sprintf("%s.%s.rules[%d]", dc.from, dc.transition, i),
				Kind: flowv1.FailureValidation, Message: truncate.Bytes(fmt.Sprintf("rule %d (to %s): %v%s", i, rule.To, err,
					ruleValues(string(rule.When), map[string]map[string]any{"outputs": dc.outputs, "context": r.context()})), 1024, "…")})
			continue
		}
		if !ok {
			continue
		}
		dc.to = string(rule.To)
		dc.source = flowv1.SourceRule
		dc.confidence = parseConfidence(rule.Confidence, 1)
		dc.reasoning = fmt.Sprintf("rule %d: %s", i, rule.When)
		if rule.Action != "" {
			dc.action = rule.Action
		}
		return true
	}
	return false
}

// ruleField is a field of outputs or context that a rule's expression reads.
var ruleField = regexp.MustCompile(`\b(outputs|context)\.([A-Za-z_][A-Za-z0-9_]*)`)

// ruleValues says what the fields of outputs and context that a rule reads hold, for
// the message of its error: CEL's own ("no such overload") names no value.
func ruleValues(when string, vars map[string]map[string]any) string {
	var parts []string
	seen := map[string]bool{}
	for _, m := range ruleField.FindAllStringSubmatch(when, 8) {
		if seen[m[0]] {
			continue
		}
		seen[m[0]] = true
		v, ok := vars[m[1]][m[2]]
		if !ok {
			parts = append(parts, m[0]+" is not set")
			continue
		}
		raw, _ := json.Marshal(v)
		parts = append(parts, fmt.Sprintf("%s is %s (%s)", m[0], truncate.Bytes(string(raw), 128, "…"), jsonKind(v)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, ", ")
}

// jsonKind names the JSON type of a value decoded from JSON.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "bool"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	default:
		return "number"
	}
}

// decided fills dc from the decision agent's journaled answer; an agent error makes
// it unclear.
func (r *run) decided(dc *decision, rec *flowv1.EffectRecord) {
	dc.id = decisionID(rec.Step)
	res := rec.Result
	r.addUsage(res.Usage)
	if res.Failure != nil {
		r.addFailure(*res.Failure)
		dc.unclear = true
		dc.reasoning = res.Failure.Message
		return
	}
	dc.to = res.Destination
	dc.confidence = parseConfidence(res.Confidence, 0)
	dc.reasoning = res.Reasoning
}

func (r *run) allowed(d *flowv1.Decision, to string) bool {
	if _, ok := r.snap.pathways[to]; !ok || to == "" {
		return false
	}
	return contains(d.AllowedDestinations, to)
}

// weigh applies a decision by its confidence: at or above autoAdvance it moves; at or
// above requireApproval it waits in AwaitingApproval; below (or unclear) it goes to the
// journey's escalation pathway, else the Session is Escalated.
func (r *run) weigh(dc decision) {
	st := r.st
	auto, approval := thresholds(dc.d)
	conf := formatConfidence(dc.confidence)
	st.Confidence = conf
	action := defaultAction(dc.action, dc.to, dc.from)
	rec := &flowv1.DecisionRecord{
		ID: dc.id, Transition: dc.transition, From: dc.from, To: dc.to, Action: action, Source: dc.source,
		Agent: dc.agent, Confidence: conf, Reasoning: truncate.Bytes(dc.reasoning, 1024, ""),
	}
	for _, a := range dc.d.AllowedDestinations {
		rec.AllowedDestinations = append(rec.AllowedDestinations, string(a))
	}
	fb := feedbackThreshold(dc.d)
	switch {
	case !dc.unclear && dc.confidence < auto && fb > 0 && dc.confidence >= fb && !r.retriedWithFeedback(dc):
		// The pathway runs again at once, with the reasoning as feedback.
		rec.State = flowv1.DecisionRetriedWithFeedback
		rec.To, rec.Action = dc.from, flowv1.ActionRetry
		r.move(move{to: dc.from, action: flowv1.ActionRetry, source: dc.source, transition: dc.transition, confidence: conf,
			agent: dc.agent, reasoning: dc.reasoning, failed: dc.failed, record: rec})
	case !dc.unclear && dc.confidence >= auto:
		rec.State = flowv1.DecisionApplied
		if r.move(move{to: dc.to, action: action, source: dc.source, transition: dc.transition, confidence: conf,
			agent: dc.agent, reasoning: dc.reasoning, failed: dc.failed, record: rec}) == moved && dc.d.Messaging {
			r.passOutputs(dc.from, dc.outputs)
		}
	case !dc.unclear && dc.confidence >= approval:
		rec.State = flowv1.DecisionPending
		r.waitForApprover(rec, flowv1.PhaseAwaitingApproval, flowv1.FinishAwaitingApproval)
	default:
		rec.State = flowv1.DecisionEscalated
		esc := string(r.snap.journey.EscalationPathway)
		if esc == "" {
			r.waitForApprover(rec, flowv1.PhaseEscalated, flowv1.FinishEscalated)
			return
		}
		reason := fmt.Sprintf("confidence %s is below requireApproval %s: escalated", conf, formatConfidence(approval))
		if dc.unclear {
			reason = "unclear decision: escalated (" + dc.reasoning + ")"
		}
		r.move(move{to: esc, action: flowv1.ActionAdvance, source: dc.source, transition: dc.transition, confidence: conf,
			agent: dc.agent, reasoning: reason, record: rec})
	}
}

// waitForApprover makes rec the decision the Session waits on, in phase.
func (r *run) waitForApprover(rec *flowv1.DecisionRecord, phase flowv1.Phase, finish flowv1.FinishReason) {
	if rec.WaitingSince == nil {
		rec.WaitingSince = &r.now
	}
	r.st.LastDecision = rec
	r.st.Phase = phase
	if r.st.LastTurn != nil {
		r.st.LastTurn.FinishReason = finish
	}
}

// thresholds returns a decision's autoAdvance and requireApproval thresholds.
func thresholds(d *flowv1.Decision) (auto, approval float64) {
	auto, approval = DefaultAutoAdvance, DefaultRequireApproval
	if th := d.ConfidenceThresholds; th != nil {
		auto = parseConfidence(th.AutoAdvance, auto)
		approval = parseConfidence(th.RequireApproval, approval)
	}
	// A lone autoAdvance below the default requireApproval leaves no approval band.
	return auto, min(approval, auto)
}

// feedbackThreshold is the decision's retryWithFeedback threshold, 0 for none.
func feedbackThreshold(d *flowv1.Decision) float64 {
	if th := d.ConfidenceThresholds; th != nil && th.RetryWithFeedback != "" {
		return parseConfidence(th.RetryWithFeedback, 0)
	}
	return 0
}

// retriedWithFeedback reports whether the last decision already sent this decision's
// pathway back with feedback: the band re-runs a pathway once.
func (r *run) retriedWithFeedback(dc decision) bool {
	ld := r.st.LastDecision
	return ld != nil && ld.State == flowv1.DecisionRetriedWithFeedback && ld.From == dc.from && ld.Transition == dc.transition
}

// feedback is why the pathway runs again, when it does: the reasoning of the decision
// that sent it back with feedback, or the rejection of its approval.
func (r *run) feedback(pathway string) string {
	ld := r.st.LastDecision
	if ld == nil || ld.To != pathway || r.st.PathwayTurns > 0 {
		return ""
	}
	switch ld.State {
	case flowv1.DecisionRetriedWithFeedback, flowv1.DecisionRejected:
		return ld.Reasoning
	}
	return ""
}

// parseConfidence reads a confidence: def when it is empty or not a decimal in [0,1].
func parseConfidence(c flowv1.Confidence, def float64) float64 {
	if c == "" {
		return def
	}
	v, err := strconv.ParseFloat(string(c), 64)
	if err != nil || v < 0 || v > 1 {
		return def
	}
	return v
}
