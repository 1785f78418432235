package engine

import (
	"fmt"
	"slices"

	"github.com/google/cel-go/interpreter"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
	"github.com/journeyops/journey-operator/internal/engine/match"
	"github.com/journeyops/journey-operator/internal/expr"
)

// route is the Route stage of a message turn: the global transitions that apply in the
// current pathway, by priority then declaration order; intent patterns first, then the
// LLM classifier for llmFallback intents when no pattern matched, then CEL conditions.
func (r *run) route() *Effect {
	st := r.st
	t := st.Turn
	text, ok := r.message(t.MessageID)
	if !ok {
		r.addFailure(flowv1.Failure{Source: flowv1.FailureSystem, Component: "engine", Kind: flowv1.FailureValidation,
			Message: fmt.Sprintf("message %q is no longer in spec.messages", t.MessageID)})
		r.endTurn()
		return nil
	}
	cur := st.CurrentPathway
	taken := false
	for _, gt := range r.snap.intents {
		if appliesIn(gt, cur) && match.Index(text, gt.Trigger.Intent.Patterns) >= 0 {
			taken = true
			if !r.takeGlobal(gt, "1", "", "pattern match") {
				return nil
			}
			break
		}
	}
	if !taken {
		eff, took := r.classify(text)
		if eff != nil || st.Turn == nil {
			return eff
		}
		taken = took
	}
	if !taken {
		var act interpreter.Activation
		for _, gt := range r.snap.conditions {
			if !appliesIn(gt, cur) {
				continue
			}
			if act == nil {
				act = (expr.Vars{Message: text, Context: r.context(), Session: builtin.SessionVars(r.sessionInfo(cur))}).Activation()
				if t.Outputs != nil {
					// The previous turn's outputs, decoded only if a condition reads them.
					raw := t.Outputs
					act = interpreter.NewHierarchicalActivation(act, lazy{expr.VarOutputs, func() any {
						m, _ := decodeJSON(raw)
						return m
					}})
				}
			}
			fire, err := expr.EvalBool(string(gt.Trigger.Condition), act)
			if err != nil {
				r.addFailure(flowv1.Failure{Source: flowv1.FailureSystem, Component: string(gt.Name), Kind: flowv1.FailureValidation, Message: err.Error()})
				continue
			}
			if fire {
				if !r.takeGlobal(gt, "1", "", "condition "+string(gt.Trigger.Condition)) {
					return nil
				}
				break
			}
		}
	}
	if st.Turn == nil {
		return nil
	}
	t.Outputs = nil
	t.Stage = flowv1.StageRun
	t.Pathway = st.CurrentPathway
	return nil
}

// classify asks the LLM classifier about the llmFallback intents that apply, when
// there are any and the journey has a remote classifier. It returns the effect to
// wait on, or whether a transition was taken on its journaled answer.
func (r *run) classify(text string) (eff *Effect, taken bool) {
	ag, ok := r.snap.classifier()
	if !ok {
		return nil, false
	}
	cur := r.st.CurrentPathway
	var intents []agent.Intent
	for _, gt := range r.snap.intents {
		if appliesIn(gt, cur) && gt.Trigger.Intent.LLMFallback {
			in := gt.Trigger.Intent
			intents = append(intents, agent.Intent{Name: string(gt.Name), Description: in.Description, Patterns: in.Patterns})
		}
	}
	if len(intents) == 0 {
		return nil, false
	}
	req := agent.IntentRequest{Message: text, Intents: intents, Context: r.context()}
	rec, eff := r.remote(flowv1.EffectClassifyIntent, []flowv1.AgentSpec{ag}, "", req)
	if rec == nil {
		return eff, false
	}
	res := rec.Result
	r.addUsage(res.Usage)
	if res.Failure != nil {
		r.addFailure(*res.Failure)
		return nil, false
	}
	conf := parseConfidence(res.Confidence, 0)
	if res.Intent == "" || res.Intent == agent.NoIntent || conf < r.snap.lim.intentThreshold {
		return nil, false
	}
	for _, gt := range r.snap.intents {
		if string(gt.Name) == res.Intent && appliesIn(gt, cur) && gt.Trigger.Intent.LLMFallback {
			reason := res.Reasoning
			if reason == "" {
				reason = "classified by " + rec.Agent
			}
			r.takeGlobal(gt, formatConfidence(conf), rec.Agent, reason)
			return nil, true
		}
	}
	r.addFailure(flowv1.Failure{Source: flowv1.FailureLLM, Component: rec.Agent, Kind: flowv1.FailureValidation,
		Message: fmt.Sprintf("intent %q is not one of the intents asked about", res.Intent)})
	return nil, false
}

// takeGlobal applies a global transition that fired: the move, then its context
// updates. It reports whether the turn goes on (a refused detour goes on in the
// current pathway under Graceful recovery).
func (r *run) takeGlobal(gt *flowv1.GlobalTransition, conf flowv1.Confidence, agentName, reason string) bool {
	from := r.st.CurrentPathway
	m := move{
		to: gt.To, action: flowv1.ActionAdvance, source: flowv1.SourceTransition, transition: string(gt.Name),
		confidence: conf, agent: agentName, reasoning: reason,
	}
	if r.st.LastTurn != nil {
		r.st.LastTurn.Transition = string(gt.Name)
	}
	if !r.move(m) {
		return r.st.Turn != nil
	}
	if len(gt.ContextUpdate) > 0 {
		r.contextUpdate(gt, from)
	}
	return r.st.Turn != nil
}

// contextUpdate applies a global transition's context updates, all or nothing.
func (r *run) contextUpdate(gt *flowv1.GlobalTransition, pathway string) {
	base := r.context()
	next := base
	keys := make([]string, 0, len(gt.ContextUpdate))
	for _, u := range gt.ContextUpdate {
		var value any
		if u.Value != nil {
			v, err := decodeValue(u.Value.Raw)
			if err != nil {
				r.addFailure(flowv1.Failure{Source: flowv1.FailureSystem, Component: string(gt.Name), Kind: flowv1.FailureValidation,
					Message: fmt.Sprintf("contextUpdate %s: value: %v", u.Field, err)})
				continue
			}
			value = v
		}
		switch u.Op {
		case flowv1.ContextSet:
			next = with(next, u.Field, value)
		case flowv1.ContextCopy:
			v, ok := next[u.From]
			if !ok {
				continue
			}
			next = with(next, u.Field, v)
		case flowv1.ContextAppend:
			if u.From != "" {
				v, ok := next[u.From]
				if !ok || v == nil {
					continue
				}
				value = v
			}
			var list []any
			switch cur := next[u.Field].(type) {
			case []any:
				list = cur
			case nil:
			default:
				list = []any{cur}
			}
			next = with(next, u.Field, appendUnique(list, []any{value}))
		default:
			continue
		}
		keys = append(keys, u.Field)
	}
	if err := r.commitContext(next, keys, pathway); err != nil {
		r.contextTooLarge(pathway, err)
	}
}

func with(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for key, val := range m {
		out[key] = val
	}
	out[k] = v
	return out
}

func decodeValue(raw []byte) (any, error) {
	m, err := decodeObject(append(append([]byte(`{"v":`), raw...), '}'))
	if err != nil {
		return nil, err
	}
	return m["v"], nil
}

// runPathway is the Run stage: the current pathway runs the turn, builtin inline or
// through its remote agents. External pathways do not run on messages: the message
// only routes.
func (r *run) runPathway() *Effect {
	st := r.st
	t := st.Turn
	name := st.CurrentPathway
	p := r.current()
	if p == nil {
		r.fail(flowv1.ReasonInvalidSpec, fmt.Sprintf("pathway %q is not in journey revision %s", name, r.snap.revision), nil)
		return nil
	}
	t.Pathway = name
	if st.LastTurn != nil {
		st.LastTurn.Pathway = name
	}
	if p.Executor == flowv1.ExecutorExternal {
		r.endTurn()
		return nil
	}
	text := ""
	if t.Trigger == flowv1.TurnMessage {
		text, _ = r.message(t.MessageID)
	}
	req := r.pathwayRequest(name, p, text)
	if agents, remote := r.snap.pathwayAgents(p); remote {
		pipeline := p.Pipeline
		if pipeline == "" {
			pipeline = flowv1.PipelineSequential
		}
		rec, eff := r.remote(flowv1.EffectRunPathway, agents, pipeline, req)
		if rec == nil {
			return eff
		}
		res := rec.Result
		r.addUsage(res.Usage)
		if res.Failure != nil {
			r.applyResult(agent.PathwayResponse{}, res.Failure)
			return nil
		}
		outputs, err := decodeJSON(res.Outputs)
		if err != nil {
			r.applyResult(agent.PathwayResponse{}, &flowv1.Failure{Source: flowv1.FailureLLM, Component: rec.Agent, Kind: flowv1.FailureValidation, Message: "outputs: " + err.Error()})
			return nil
		}
		complete := res.Complete == nil || *res.Complete
		r.applyResult(agent.PathwayResponse{Reply: res.Reply, Outputs: outputs, ResultType: res.ResultType, Complete: complete}, nil)
		return nil
	}
	resp, err := builtin.Run(req)
	if err != nil {
		f := failureOf(err, name)
		r.applyResult(agent.PathwayResponse{}, &f)
		return nil
	}
	r.applyResult(resp, nil)
	return nil
}

// pathwayRequest is the question a pathway's agents answer for one turn.
func (r *run) pathwayRequest(name string, p *flowv1.PathwaySpec, text string) agent.PathwayRequest {
	ctx := r.context()
	req := agent.PathwayRequest{
		Pathway: name,
		Spec:    p,
		Message: text,
		Context: ctx,
		Session: r.sessionInfo(name),
	}
	if len(p.Signature.Inputs) > 0 {
		req.Inputs = make(map[string]any, len(p.Signature.Inputs))
		for _, in := range p.Signature.Inputs {
			if v, ok := ctx[in.Name]; ok {
				req.Inputs[in.Name] = v
			} else if in.Default != nil {
				if v, err := decodeValue(in.Default.Raw); err == nil {
					req.Inputs[in.Name] = v
				}
			} else if text != "" && isMessageInput(in.Name) {
				req.Inputs[in.Name] = text
			}
		}
	}
	// The user's earlier messages, most recent last (at most 10).
	n := int(r.st.ProcessedMessages)
	if r.st.Turn != nil && r.st.Turn.Trigger == flowv1.TurnMessage {
		n-- // the message of this turn is req.Message
	}
	n = min(n, len(r.spec.Messages))
	for i := max(0, n-10); i < n; i++ {
		req.History = append(req.History, agent.Exchange{Role: "user", Text: r.spec.Messages[i].Text})
	}
	return req
}

// isMessageInput says whether a signature input receives the user's message when the
// context has no value for it: "message", "question" or a name ending in "_message".
func isMessageInput(name string) bool {
	return name == "message" || name == "question" || len(name) > 8 && name[len(name)-8:] == "_message"
}

// applyResult applies a pathway turn's result: usage, the typed outcome, accumulation
// into the context, then the Decide stage for a complete turn. A failure (an agent
// error, an invalid builtin expression) is recoverable: Graceful stays in the pathway.
func (r *run) applyResult(resp agent.PathwayResponse, failure *flowv1.Failure) {
	st := r.st
	name := st.CurrentPathway
	p := r.current()
	lt := st.LastTurn
	st.PathwayTurns++
	if failure != nil {
		r.turnFailed(*failure)
		return
	}
	rt := resp.ResultType
	if rt == "" {
		rt = flowv1.ResultSuccess
	}
	lt.AssistantText = resp.Reply
	lt.ResultType = rt
	lt.Complete = resp.Complete
	var outputs *apiextensionsv1.JSON
	if len(resp.Outputs) > 0 {
		outputs = toJSON(resp.Outputs)
	}
	lt.Outputs = outputs
	if len(p.Accumulate) > 0 && len(resp.Outputs) > 0 {
		upd := make(map[string]any, len(p.Accumulate))
		keys := make([]string, 0, len(p.Accumulate))
		for _, f := range p.Accumulate {
			if v, ok := resp.Outputs[f]; ok {
				upd[f] = v
				keys = append(keys, f)
			}
		}
		if len(upd) > 0 {
			if err := r.commitContext(mergeObject(r.context(), upd), keys, name); err != nil {
				if !r.contextTooLarge(name, err) {
					return
				}
			}
		}
	}
	if !resp.Complete {
		r.endTurn()
		return
	}
	st.Turn.Stage = flowv1.StageDecide
	st.Turn.ResultType = rt
	st.Turn.Outputs = outputs
}

// turnFailed records a failed pathway run under the journey's errorRecovery.
func (r *run) turnFailed(f flowv1.Failure) {
	if !r.recoverable(flowv1.ReasonFailed, f) {
		return
	}
	r.st.LastTurn.FinishReason = flowv1.FinishError
	r.endTurn()
}

func (r *run) contextTooLarge(pathway string, err error) bool {
	return r.recoverable(flowv1.ReasonContextTooLarge, flowv1.Failure{Source: flowv1.FailurePolicy, Component: pathway, Kind: flowv1.FailurePolicyKind, Message: err.Error()})
}

func (r *run) addUsage(u flowv1.Usage) {
	if u == (flowv1.Usage{}) {
		return
	}
	r.st.Usage = addUsage(r.st.Usage, u)
	if r.st.LastTurn != nil {
		r.st.LastTurn.Usage = addUsage(r.st.LastTurn.Usage, u)
	}
}

// pick returns the outcome transition for a result type and its name. A partial
// success without onPartialSuccess takes onSuccess.
func pick(tr *flowv1.OutcomeTransitions, rt flowv1.ResultType) (*flowv1.OutcomeTransition, string) {
	if tr == nil {
		return nil, ""
	}
	switch rt {
	case flowv1.ResultSuccess:
		return tr.OnSuccess, onSuccess
	case flowv1.ResultFailure:
		return tr.OnFailure, onFailure
	case flowv1.ResultPartialSuccess:
		if tr.OnPartialSuccess != nil {
			return tr.OnPartialSuccess, onPartialSuccess
		}
		return tr.OnSuccess, onSuccess
	case flowv1.ResultUnclear:
		return tr.OnUnclear, onUnclear
	}
	return nil, ""
}

// decideStage picks where a complete turn goes: the outcome transition for its result
// type, else next, else back from a detour, else the journey completes. A failure with
// no onFailure is a recoverable error; an unclear result with no onUnclear stays.
func (r *run) decideStage() *Effect {
	st := r.st
	t := st.Turn
	name := st.CurrentPathway
	p := r.current()
	rt := t.ResultType
	if rt == "" {
		rt = flowv1.ResultSuccess
	}
	failed := rt == flowv1.ResultFailure
	tr, trName := pick(p.Transitions, rt)
	if tr == nil {
		switch rt {
		case flowv1.ResultFailure:
			r.turnFailed(flowv1.Failure{Source: flowv1.FailureSystem, Component: name, Kind: flowv1.FailureException,
				Message: fmt.Sprintf("pathway %s failed and has no onFailure transition", name)})
			return nil
		case flowv1.ResultUnclear:
			r.endTurn()
			return nil
		}
		r.followNext(p)
		r.endTurn()
		return nil
	}
	if d := tr.Decision; d != nil {
		outputs, _ := decodeJSON(t.Outputs)
		eff := r.decide(name, trName, d, rt, outputs, failed)
		if eff == nil {
			r.endTurn()
		}
		return eff
	}
	action := tr.Action
	to := string(tr.To)
	if action == "" {
		action = flowv1.ActionAdvance
		if to == name {
			action = flowv1.ActionRetry
		}
	}
	r.move(move{to: to, action: action, source: flowv1.SourceOutcome, transition: trName, confidence: "1", failed: failed})
	r.endTurn()
	return nil
}

// followNext moves a complete turn on without an outcome transition: to next, else
// back to the pathway a detour came from, else the journey completes.
func (r *run) followNext(p *flowv1.PathwaySpec) {
	st := r.st
	switch {
	case p.Next != "":
		action := flowv1.ActionAdvance
		if string(p.Next) == st.CurrentPathway {
			action = flowv1.ActionRetry
		}
		r.move(move{to: string(p.Next), action: action, source: flowv1.SourceNext, transition: "next", confidence: "1"})
	case len(st.PathwayStack) > 0:
		r.move(move{to: st.PathwayStack[len(st.PathwayStack)-1], action: flowv1.ActionAdvance, source: flowv1.SourceReturn, transition: "return", confidence: "1"})
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
func (r *run) decide(from, trName string, d *flowv1.Decision, rt flowv1.ResultType, outputs map[string]any, failed bool) *Effect {
	dc := decision{from: from, transition: trName, d: d, action: d.Action, failed: failed, outputs: outputs, id: decisionID(r.step)}
	var act interpreter.Activation
	if len(d.Rules) > 0 {
		act = (expr.Vars{Outputs: outputs, Context: r.context(), Session: builtin.SessionVars(r.sessionInfo(from))}).Activation()
	}
	for i, rule := range d.Rules {
		ok, err := expr.EvalBool(string(rule.When), act)
		if err != nil {
			r.addFailure(flowv1.Failure{Source: flowv1.FailureSystem, Component: fmt.Sprintf("%s.%s.rules[%d]", from, trName, i), Kind: flowv1.FailureValidation, Message: err.Error()})
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
		r.weigh(dc)
		return nil
	}
	ag, remote := r.snap.resolveAgent(string(d.Agent))
	req := agent.DecisionRequest{
		Pathway: from, Transition: trName, Decision: d, ResultType: rt,
		Outputs: outputs, Context: r.context(), Session: r.sessionInfo(from),
	}
	dc.source = flowv1.SourceAgent
	dc.agent = string(ag.Name)
	if remote {
		rec, eff := r.remote(flowv1.EffectDecide, []flowv1.AgentSpec{ag}, "", req)
		if rec == nil {
			return eff
		}
		dc.id = decisionID(rec.Step)
		res := rec.Result
		r.addUsage(res.Usage)
		if res.Failure != nil {
			r.addFailure(*res.Failure)
			dc.unclear = true
			dc.reasoning = res.Failure.Message
		} else {
			dc.to = res.Destination
			dc.confidence = parseConfidence(res.Confidence, 0)
			dc.reasoning = res.Reasoning
		}
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
	return nil
}

func (r *run) allowed(d *flowv1.Decision, to string) bool {
	if _, ok := r.snap.pathways[to]; !ok || to == "" {
		return false
	}
	for _, a := range d.AllowedDestinations {
		if string(a) == to {
			return true
		}
	}
	return false
}

// weigh applies a decision by its confidence: at or above autoAdvance it moves; at or
// above requireApproval it waits in AwaitingApproval; below (or unclear) it goes to the
// journey's escalation pathway, else the Session is Escalated.
func (r *run) weigh(dc decision) {
	st := r.st
	auto, approval := thresholds(dc.d)
	conf := formatConfidence(dc.confidence)
	st.Confidence = conf
	action := dc.action
	if action == "" {
		action = flowv1.ActionAdvance
		if dc.to == dc.from {
			action = flowv1.ActionRetry
		}
	}
	rec := &flowv1.DecisionRecord{
		ID: dc.id, Transition: dc.transition, From: dc.from, To: dc.to, Action: action, Source: dc.source,
		Agent: dc.agent, Confidence: conf, Reasoning: truncate(dc.reasoning, 1024),
	}
	for _, a := range dc.d.AllowedDestinations {
		rec.AllowedDestinations = append(rec.AllowedDestinations, string(a))
	}
	switch {
	case !dc.unclear && dc.confidence >= auto:
		rec.State = flowv1.DecisionApplied
		if r.move(move{to: dc.to, action: action, source: dc.source, transition: dc.transition, confidence: conf,
			agent: dc.agent, reasoning: dc.reasoning, failed: dc.failed, record: rec}) && dc.d.Messaging {
			r.passOutputs(dc.from, dc.outputs)
		}
	case !dc.unclear && dc.confidence >= approval:
		rec.State = flowv1.DecisionPending
		st.LastDecision = rec
		st.Phase = flowv1.PhaseAwaitingApproval
		if st.LastTurn != nil {
			st.LastTurn.FinishReason = flowv1.FinishAwaitingApproval
		}
	default:
		rec.State = flowv1.DecisionEscalated
		if esc := string(r.snap.journey.EscalationPathway); esc != "" {
			reason := fmt.Sprintf("confidence %s is below requireApproval %s: escalated", conf, formatConfidence(approval))
			if dc.unclear {
				reason = "unclear decision: escalated (" + dc.reasoning + ")"
			}
			r.move(move{to: esc, action: flowv1.ActionAdvance, source: dc.source, transition: dc.transition, confidence: conf,
				agent: dc.agent, reasoning: reason, record: rec})
			return
		}
		st.LastDecision = rec
		st.Phase = flowv1.PhaseEscalated
		if st.LastTurn != nil {
			st.LastTurn.FinishReason = flowv1.FinishEscalated
		}
	}
}

// passOutputs passes a pathway's outputs to the destination: context.messages.<pathway>.
func (r *run) passOutputs(from string, outputs map[string]any) {
	base := r.context()
	msgs := map[string]any{}
	if m, ok := base["messages"].(map[string]any); ok {
		msgs = with(m, from, nil)
	}
	var v any = map[string]any{}
	if outputs != nil {
		v = outputs
	}
	msgs[from] = v
	if err := r.commitContext(with(base, "messages", msgs), []string{"messages"}, from); err != nil {
		r.contextTooLarge(from, err)
	}
}

// approval processes the next entry of spec.approvals.
func (r *run) approval() {
	st := r.st
	a := r.spec.Approvals[st.ProcessedApprovals]
	st.ProcessedApprovals++
	var prevOutputs map[string]any
	if st.LastTurn != nil && st.LastTurn.Outputs != nil {
		prevOutputs, _ = decodeJSON(st.LastTurn.Outputs)
	}
	st.LastTurn = &flowv1.TurnOutcome{Trigger: flowv1.TurnApproval, Pathway: st.CurrentPathway}
	deny := func(msg string) {
		st.LastTurn.FinishReason = flowv1.FinishPolicyDenied
		r.addFailure(flowv1.Failure{Source: flowv1.FailurePolicy, Component: "approval", Kind: flowv1.FailurePolicyKind, Message: msg})
	}
	ld := st.LastDecision
	if !r.awaiting() || ld == nil || a.DecisionID != ld.ID || (ld.State != flowv1.DecisionPending && ld.State != flowv1.DecisionEscalated) {
		deny(fmt.Sprintf("approval for decision %q ignored: no decision with that id is waiting", a.DecisionID))
		return
	}
	d := r.decisionSpec(ld)
	if d != nil && d.Approvers != nil && len(d.Approvers.Users) > 0 && len(d.Approvers.Groups) == 0 && !contains(d.Approvers.Users, a.By) {
		deny(fmt.Sprintf("%q may not approve decision %s", a.By, ld.ID))
		return
	}
	by := a.By
	if by == "" {
		by = "an unnamed approver"
	}
	if !a.Approve {
		// A rejected decision sends the pathway back to work: it runs again (seed 003:
		// SEEK_APPROVAL rejected -> draft again). Not counted as a retry.
		rec := ld.DeepCopy()
		rec.State = flowv1.DecisionRejected
		rec.Source = flowv1.SourceApproval
		st.LastDecision = rec
		st.Phase = flowv1.PhaseRunning
		st.PathwayTurns = 0
		st.Transitions++
		reason := "rejected by " + by
		if a.Reason != "" {
			reason += ": " + a.Reason
		}
		r.appendHistory(flowv1.HistoryEntry{Time: r.now, Step: r.step, From: st.CurrentPathway, To: st.CurrentPathway,
			Action: flowv1.ActionRetry, Source: flowv1.SourceApproval, Transition: ld.Transition, Confidence: ld.Confidence,
			Iteration: st.Iteration, Reason: truncate(reason, 1024)})
		st.LastTurn.Transition = ld.Transition
		st.LastTurn.FinishReason = flowv1.FinishSuccess
		return
	}
	dest := ld.To
	if a.Destination != "" {
		if !contains(ld.AllowedDestinations, string(a.Destination)) {
			deny(fmt.Sprintf("destination %q is not one of the decision's allowed destinations", a.Destination))
			return
		}
		dest = string(a.Destination)
	}
	if _, ok := r.snap.pathways[dest]; !ok {
		deny(fmt.Sprintf("approval of decision %s needs a destination", ld.ID))
		return
	}
	action := ld.Action
	if dest != ld.To || action == "" {
		action = flowv1.ActionAdvance
		if dest == ld.From {
			action = flowv1.ActionRetry
		}
		if ld.Action == flowv1.ActionJumpBack {
			action = flowv1.ActionJumpBack
		}
	}
	rec := ld.DeepCopy()
	rec.State = flowv1.DecisionApproved
	rec.Source = flowv1.SourceApproval
	rec.To = dest
	rec.Action = action
	st.Phase = flowv1.PhaseRunning
	st.LastTurn.Transition = ld.Transition
	reason := "approved by " + by
	if a.Reason != "" {
		reason += ": " + a.Reason
	}
	if r.move(move{to: dest, action: action, source: flowv1.SourceApproval, transition: ld.Transition, confidence: ld.Confidence,
		reasoning: reason, record: rec}) && d != nil && d.Messaging {
		r.passOutputs(ld.From, prevOutputs)
	}
	if st.LastTurn.FinishReason == "" {
		st.LastTurn.FinishReason = flowv1.FinishSuccess
	}
}

// decisionSpec finds the Decision a decision record came from.
func (r *run) decisionSpec(ld *flowv1.DecisionRecord) *flowv1.Decision {
	p := r.snap.pathways[ld.From]
	if p == nil || p.Transitions == nil {
		return nil
	}
	for _, o := range outcomeTransitions(p.Transitions) {
		if o.name == ld.Transition {
			return o.t.Decision
		}
	}
	return nil
}

func contains[T ~string](list []T, s string) bool {
	for _, v := range list {
		if string(v) == s {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// context returns the decoded context (an invalid stored context reads as empty).
func (r *run) context() map[string]any {
	if r.ctx == nil {
		r.ctx, _ = decodeJSON(r.st.Context)
		if r.ctx == nil {
			r.ctx = map[string]any{}
		}
	}
	return r.ctx
}

// commitContext makes next the context, keys being the top-level keys that may have
// changed. It records a context version with the previous values of the keys that did
// change, or fails with errContextTooLarge, leaving the context unchanged.
func (r *run) commitContext(next map[string]any, keys []string, pathway string) error {
	st := r.st
	base := r.context()
	size := sizeOf(next)
	if size > r.snap.lim.contextBytes {
		return fmt.Errorf("%w: %d bytes, over maxContextBytes %d", errContextTooLarge, size, r.snap.lim.contextBytes)
	}
	prev := map[string]any{}
	var changed []string
	for _, k := range keys {
		if _, seen := prev[k]; seen {
			continue
		}
		old, had := base[k]
		nv, has := next[k]
		if had == has && equalValues(old, nv) {
			continue
		}
		prev[k] = old
		changed = append(changed, k)
	}
	if len(changed) == 0 {
		return nil
	}
	slices.Sort(changed)
	st.ContextVersion++
	st.ContextHistory = append(st.ContextHistory, flowv1.ContextVersion{
		Version: st.ContextVersion, Pathway: pathway, Keys: changed, Previous: toJSON(prev),
	})
	r.trimContextHistory()
	st.Context = &apiextensionsv1.JSON{Raw: appendJSON(make([]byte, 0, size), next)}
	r.ctx = next
	return nil
}

// trimContextHistory keeps at most MaxContextVersions versions whose previous values
// take at most maxContextBytes in total.
func (r *run) trimContextHistory() {
	h := r.st.ContextHistory
	total := 0
	keep := 0
	for i := len(h) - 1; i >= 0 && keep < MaxContextVersions; i-- {
		n := 0
		if h[i].Previous != nil {
			n = len(h[i].Previous.Raw)
		}
		if keep > 0 && total+n > r.snap.lim.contextBytes {
			break
		}
		total += n
		keep++
	}
	if keep < len(h) {
		r.st.ContextHistory = append([]flowv1.ContextVersion(nil), h[len(h)-keep:]...)
	}
}

// dropDetourContext undoes the context changes a detour made (returnBehavior
// preserveContext: false): the trailing context versions recorded in pathway.
func (r *run) dropDetourContext(pathway string) {
	st := r.st
	h := st.ContextHistory
	i := len(h)
	for i > 0 && h[i-1].Pathway == pathway {
		i--
	}
	if i == len(h) {
		return
	}
	ctx := r.context()
	for j := len(h) - 1; j >= i; j-- {
		ctx = undo(ctx, h[j])
	}
	keys := map[string]bool{}
	var all []string
	for _, v := range h[i:] {
		for _, k := range v.Keys {
			if !keys[k] {
				keys[k] = true
				all = append(all, k)
			}
		}
	}
	// Recorded as a new version of the pathway returned to, so it can be undone too.
	_ = r.commitContext(ctx, all, st.PathwayStack[len(st.PathwayStack)-1])
}

func undo(ctx map[string]any, v flowv1.ContextVersion) map[string]any {
	prev, _ := decodeJSON(v.Previous)
	out := make(map[string]any, len(ctx))
	for k, val := range ctx {
		out[k] = val
	}
	for _, k := range v.Keys {
		if p, ok := prev[k]; ok && p != nil {
			out[k] = p
		} else {
			delete(out, k)
		}
	}
	return out
}

// Rollback returns a copy of status whose context is as it was at version: the
// context versions after it are undone (a key whose previous value is null is
// removed) and dropped, and contextVersion becomes version. It fails when
// contextHistory no longer reaches back to version.
func Rollback(status *flowv1.SessionStatus, version int64) (*flowv1.SessionStatus, error) {
	out := status.DeepCopy()
	if version == status.ContextVersion {
		return out, nil
	}
	if version < 0 || version > status.ContextVersion {
		return nil, fmt.Errorf("context version %d is not between 0 and %d", version, status.ContextVersion)
	}
	ctx, err := decodeJSON(status.Context)
	if err != nil {
		return nil, fmt.Errorf("context: %w", err)
	}
	h := out.ContextHistory
	want := status.ContextVersion
	i := len(h) - 1
	for ; want > version; want-- {
		if i < 0 || h[i].Version != want {
			return nil, fmt.Errorf("context version %d is no longer in contextHistory", want)
		}
		ctx = undo(ctx, h[i])
		i--
	}
	out.ContextHistory = h[:i+1]
	if len(out.ContextHistory) == 0 {
		out.ContextHistory = nil
	}
	out.ContextVersion = version
	out.Context = nil
	if len(ctx) > 0 {
		out.Context = toJSON(ctx)
	}
	return out, nil
}
