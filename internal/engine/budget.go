package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// promptOverheadChars stands for what an agent's prompt holds besides the request and
// the agent's instructions: the signature's description and the answer's JSON schema.
const promptOverheadChars = 2048

// limits are the Session's limits: the revision's, with the caps spec.limits and
// Resume interventions (status.interventionLimits) override; where both override a
// cap, the higher applies.
func (r *run) limits() limits {
	l := r.snap.lim
	overrideLimits(&l, r.spec.Limits, false)
	overrideLimits(&l, r.st.InterventionLimits, r.spec.Limits != nil)
	return l
}

// overrideLimits applies the caps o sets to l. With higher, an override only raises
// a cap (another override was applied before it).
func overrideLimits(l *limits, o *flowv1.SessionLimits, higher bool) {
	if o == nil {
		return
	}
	set := func(cap *int, v int32) {
		if v > 0 && (!higher || int(v) > *cap) {
			*cap = int(v)
		}
	}
	set(&l.turns, o.MaxTurns)
	set(&l.iterations, o.MaxIterations)
	set(&l.transitions, o.MaxTransitions)
	if b := o.Budget; b != nil {
		if b.MaxTokens > 0 && (!higher || b.MaxTokens > l.maxTokens) {
			l.maxTokens = b.MaxTokens
		}
		if c, ok := parseNano(string(b.MaxCostUSD)); ok && c > 0 && (!higher || c > l.maxCost) {
			l.maxCost = c
		}
		if b.MaxToolCalls > 0 && (!higher || b.MaxToolCalls > l.maxToolCalls) {
			l.maxToolCalls = b.MaxToolCalls
		}
	}
}

// overBudget reports whether the Session has spent its budget, and how.
func (r *run) overBudget() (string, bool) {
	l := r.limits()
	u := r.st.Usage
	if l.maxTokens > 0 && u.PromptTokens+u.CompletionTokens >= l.maxTokens {
		return fmt.Sprintf("%d tokens used, budget is %d", u.PromptTokens+u.CompletionTokens, l.maxTokens), true
	}
	if l.maxCost > 0 {
		if c, _ := parseNano(u.CostUSD); c >= l.maxCost {
			return fmt.Sprintf("USD %s spent, budget is %s", formatNano(c), formatNano(l.maxCost)), true
		}
	}
	return "", false
}

// unaffordable reports whether the worst case of eff's agent calls could take the
// Session over its budget, and why: such a call is not made.
func (r *run) unaffordable(eff *Effect) (string, bool) {
	l := r.limits()
	if l.maxTokens <= 0 && l.maxCost <= 0 {
		return "", false
	}
	tokens, cost := worstCase(eff)
	u := r.st.Usage
	used := u.PromptTokens + u.CompletionTokens
	if l.maxTokens > 0 && used+tokens > l.maxTokens {
		return fmt.Sprintf("the next %s call could use up to %d tokens; %d of the budget of %d are left",
			eff.Kind, tokens, max(l.maxTokens-used, 0), l.maxTokens), true
	}
	spent, _ := parseNano(u.CostUSD)
	if l.maxCost > 0 && spent+cost > l.maxCost {
		return fmt.Sprintf("the next %s call could cost up to USD %s; USD %s of the budget of %s is left",
			eff.Kind, formatNano(cost), formatNano(max(l.maxCost-spent, 0)), formatNano(l.maxCost)), true
	}
	return "", false
}

// toolCallsSpent reports whether one more tool call would take the Session past
// its budget of tool calls, and why: such a call is not made.
func (r *run) toolCallsSpent() (string, bool) {
	l := r.limits()
	if used := r.st.Usage.ToolCalls; l.maxToolCalls > 0 && used+1 > l.maxToolCalls {
		return fmt.Sprintf("the tool-call budget is used up: %d tool calls made, budget is %d", used, l.maxToolCalls), true
	}
	return "", false
}

// worstCase is the most the calls of eff can use: for each remote agent, a prompt
// estimated from the request, the agent's instructions and the schema, plus the
// answers of the agents before it in the pipeline, and a full answer of the agent's
// token cap, at its pricing (cost in billionths of a dollar, rounded up). Builtin
// agents cost nothing.
func worstCase(eff *Effect) (tokens, costNano int64) {
	base := promptOverheadChars + requestChars(eff)
	var earlier int64 // answer tokens of the agents before, which a pipeline passes on
	for _, a := range eff.Agents {
		if a.Provider != flowv1.ProviderOpenAI {
			continue
		}
		chars := base + len(a.Instructions) + int(earlier)*4
		prompt, answer := agent.EstimateTokens(chars), agent.MaxTokens(a)
		tokens += prompt + answer
		costNano += int64(math.Ceil(agent.WorstCaseCost(a, prompt) * 1e9))
		earlier += answer
	}
	return tokens, costNano
}

// requestChars is the length of the JSON of eff's request.
func requestChars(eff *Effect) int {
	var req any
	switch {
	case eff.Pathway != nil:
		req = eff.Pathway
	case eff.Decision != nil:
		req = eff.Decision
	case eff.Intent != nil:
		req = eff.Intent
	default:
		return 0
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return 0
	}
	return len(raw)
}

// stallOnBudget stops the Session before a call it cannot afford: Stalled with
// BudgetExceeded, nothing spent, the turn kept in progress so that it goes on where it
// stopped once a person raises the budget in spec.limits.
func (r *run) stallOnBudget(msg string) stageResult {
	turn := r.st.Turn
	r.block(flowv1.ReasonBudgetExceeded, flowv1.FinishBudgetExceeded, nil, msg)
	r.st.Turn = turn
	return stageResult{pause: true}
}

// liftableCaps are the Stalled reasons that spec.limits can lift.
var liftableCaps = map[string]bool{flowv1.ReasonBudgetExceeded: true, flowv1.ReasonTurnLimit: true}

// liftCap lets a Session that a cap stalled try again when spec.limits overrides the
// limits: the Stalled condition goes and the turn it stopped, if any, goes on. It
// reports whether the step goes on. A try that stalls again on the same cap with the
// same message changes nothing (Step keeps the old status).
func (r *run) liftCap() bool {
	st := r.st
	reason, _ := Blocked(st)
	if !liftableCaps[reason] || r.spec.Limits == nil {
		return false
	}
	c := apimeta.FindStatusCondition(st.Conditions, flowv1.ConditionStalled)
	r.lifted = &liftedCap{reason: reason, message: c.Message}
	apimeta.RemoveStatusCondition(&st.Conditions, flowv1.ConditionStalled)
	if lt := st.LastTurn; lt != nil && st.Turn != nil && lt.FinishReason == flowv1.FinishBudgetExceeded {
		lt.FinishReason = ""
		unanswer(lt)
		lt.Failures = slices.DeleteFunc(lt.Failures, func(f flowv1.Failure) bool {
			return f.Source == flowv1.FailurePolicy && f.Component == "engine" && strings.HasPrefix(c.Message, capitalize(f.Message))
		})
	}
	return true
}

// liftedCap is the cap a step tried to lift.
type liftedCap struct{ reason, message string }

// stalledAgain reports whether a step that tried to lift a cap stalled on it again,
// for the same reason: the override did not help and the step changes nothing.
func (r *run) stalledAgain() bool {
	if r.lifted == nil {
		return false
	}
	c := apimeta.FindStatusCondition(r.st.Conditions, flowv1.ConditionStalled)
	return c != nil && c.Reason == r.lifted.reason && c.Message == r.lifted.message
}

// capEvents are the Events of a step that lifted a cap under spec.limits: the
// Session, stalled by the cap before, goes on.
func capEvents(old, cur *flowv1.SessionStatus) []Event {
	was, wasBlocked := Blocked(old)
	if _, blocked := Blocked(cur); !wasBlocked || blocked || !liftableCaps[was] || cur.Step <= old.Step {
		return nil
	}
	for _, h := range cur.History {
		if h.Step > old.Step && h.Intervention != "" {
			return nil // an intervention lifted it: its own Event says so
		}
	}
	msg := was
	if c := apimeta.FindStatusCondition(old.Conditions, flowv1.ConditionStalled); c != nil {
		msg = fmt.Sprintf("%s (%s)", was, c.Message)
	}
	return []Event{{EventNormal, flowv1.ReasonLimitsOverridden,
		fmt.Sprintf("spec.limits lifted the cap that stalled the session, which goes on: %s", msg)}}
}
