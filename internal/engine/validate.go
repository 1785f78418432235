package engine

import (
	"fmt"
	"regexp"
	"strconv"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
	"github.com/journeyops/journey-operator/internal/expr"
)

// Validate returns every problem of a journey the API server cannot catch, one
// human-readable line each, in a stable order: missing Pathway specs, references to
// unknown pathways (next, to, allowedDestinations, escalationPathway, global
// transitions), pathways unreachable from the entry, agents referenced but not
// declared (pathway agents, decision agents, intentDetection), CEL that does not
// compile (conditions, decision rules, builtin outputs, outcome and complete), reply
// templates that do not parse, and thresholds that are not decimals in [0,1].
func Validate(journey *flowv1.JourneySpec, pathways map[string]*flowv1.PathwaySpec) []string {
	return validate(journey, pathways, false)
}

// ValidateKnown returns the problems Validate finds that do not depend on the
// Pathways missing from pathways (absent or nil: not created yet). With every Pathway
// there it is Validate; with some missing it leaves out the missing Pathways
// themselves and reachability, which they may change. The admission webhook refuses
// what it returns: what is known to be wrong whatever Pathways are created later.
func ValidateKnown(journey *flowv1.JourneySpec, pathways map[string]*flowv1.PathwaySpec) []string {
	if journey == nil {
		return validate(journey, pathways, false)
	}
	for _, entry := range journey.Pathways {
		if pathways[string(entry.Name)] == nil {
			return validate(journey, pathways, true)
		}
	}
	return validate(journey, pathways, false)
}

func validate(journey *flowv1.JourneySpec, pathways map[string]*flowv1.PathwaySpec, partial bool) []string {
	if journey == nil {
		return []string{"journey spec is missing"}
	}
	c := &checker{known: map[string]bool{}, agents: map[string]bool{}}
	for _, p := range journey.Pathways {
		if c.known[string(p.Name)] {
			c.add("pathway %q is declared twice", p.Name)
		}
		c.known[string(p.Name)] = true
	}
	for _, a := range journey.Agents {
		c.agents[string(a.Name)] = true
	}
	c.journey(journey)
	if journey.Redact != nil {
		for i, pat := range journey.Redact.Patterns {
			if _, err := regexp.Compile(pat); err != nil {
				c.add("redact.patterns[%d] %q is not a regular expression: %v", i, pat, err)
			}
		}
	}
	for i := range journey.Transitions {
		c.transition(&journey.Transitions[i])
	}
	c.rollout(journey.Rollout)
	for _, entry := range journey.Pathways {
		p := pathways[string(entry.Name)]
		if p == nil {
			if !partial {
				c.add("pathway %s: Pathway %q was not resolved", entry.Name, entry.PathwayRef)
			}
			continue
		}
		c.pathway(string(entry.Name), p)
	}
	c.tools(journey, pathways)
	if partial {
		return c.issues
	}
	for _, name := range unreachable(journey, pathways) {
		c.add("pathway %s is unreachable from the entry pathway %s", name, journey.EntryPathway)
	}
	return c.issues
}

// checker collects the issues Validate finds.
type checker struct {
	issues []string
	known  map[string]bool // declared pathways
	agents map[string]bool // declared agents
}

func (c *checker) add(format string, args ...any) {
	c.issues = append(c.issues, fmt.Sprintf(format, args...))
}

// pathwayRef checks that name, when set, is a declared pathway.
func (c *checker) pathwayRef(where, name string) {
	if name != "" && !c.known[name] {
		c.add("%s: pathway %q is not one of spec.pathways", where, name)
	}
}

// agentRef checks that name, when set, is a declared agent.
func (c *checker) agentRef(where, name string) {
	if name != "" && !c.agents[name] {
		c.add("%s: agent %q is not declared in spec.agents", where, name)
	}
}

// cel checks that src, when set, compiles.
func (c *checker) cel(where string, src flowv1.Expression) {
	if src == "" {
		return
	}
	if _, err := expr.Compile(string(src)); err != nil {
		c.add("%s: %v", where, err)
	}
}

// confidence checks that v, when set, is a decimal in [0,1].
func (c *checker) confidence(where string, v flowv1.Confidence) {
	if v == "" {
		return
	}
	if f, err := strconv.ParseFloat(string(v), 64); err != nil || f < 0 || f > 1 {
		c.add("%s: %q is not a decimal between 0 and 1", where, v)
	}
}

// journey checks the Journey's own fields: entry and escalation pathways, intent
// detection and agents.
func (c *checker) journey(j *flowv1.JourneySpec) {
	if j.EntryPathway == "" {
		c.add("spec.entryPathway is empty")
	} else {
		c.pathwayRef("spec.entryPathway", string(j.EntryPathway))
	}
	c.pathwayRef("spec.escalationPathway", string(j.EscalationPathway))
	if d := j.IntentDetection; d != nil {
		c.agentRef("spec.intentDetection", string(d.Agent))
		c.confidence("spec.intentDetection.confidenceThreshold", d.ConfidenceThreshold)
	}
	for _, a := range j.Agents {
		if a.Builtin != nil {
			c.confidence(fmt.Sprintf("agent %s: builtin.confidence", a.Name), a.Builtin.Confidence)
			c.builtinAgent(a)
		}
		if a.Provider == flowv1.ProviderOpenAI && a.Model == "" {
			c.add("agent %s: provider openai needs a model", a.Name)
		}
	}
}

// transition checks a global transition: its pathways, its trigger and its context
// updates.
func (c *checker) transition(t *flowv1.GlobalTransition) {
	where := fmt.Sprintf("transition %s", t.Name)
	if !t.FromAny() {
		c.pathwayRef(where+": from", t.From)
	}
	if t.To == "" {
		c.add("%s: to is empty", where)
	} else {
		c.pathwayRef(where+": to", t.To)
	}
	switch {
	case t.Trigger.Intent != nil && t.Trigger.Condition != "":
		c.add("%s: trigger sets both intent and condition", where)
	case t.Trigger.Intent != nil:
		if len(t.Trigger.Intent.Patterns) == 0 {
			c.add("%s: intent has no patterns", where)
		}
	case t.Trigger.Condition != "":
		c.cel(where+": condition", t.Trigger.Condition)
	default:
		c.add("%s: trigger sets neither intent nor condition", where)
	}
	for i, u := range t.ContextUpdate {
		c.contextUpdate(fmt.Sprintf("%s: contextUpdate[%d]", where, i), u)
	}
}

func (c *checker) contextUpdate(where string, u flowv1.ContextUpdate) {
	if u.Field == "" {
		c.add("%s has no field", where)
	}
	switch u.Op {
	case flowv1.ContextSet:
		if u.Value == nil {
			c.add("%s: op Set needs value", where)
		}
	case flowv1.ContextCopy:
		if u.From == "" {
			c.add("%s: op Copy needs from", where)
		}
	case flowv1.ContextAppend:
		if (u.From == "") == (u.Value == nil) {
			c.add("%s: op Append needs exactly one of from or value", where)
		}
	default:
		c.add("%s: unknown op %q", where, u.Op)
	}
}

// pathway checks a resolved Pathway: next, agents, builtin expressions and reply,
// returnBehavior and outcome transitions.
func (c *checker) pathway(name string, p *flowv1.PathwaySpec) {
	where := "pathway " + name
	c.pathwayRef(where+": next", string(p.Next))
	if p.IsExternal() && len(p.Agents) > 0 {
		c.add("%s: an External pathway has no agents", where)
	}
	for _, a := range p.Agents {
		c.agentRef(where+": agents", string(a))
	}
	if b := p.Builtin; b != nil {
		for _, o := range b.Outputs {
			c.cel(fmt.Sprintf("%s: builtin output %s", where, o.Name), o.Expression)
		}
		c.cel(where+": builtin outcome", b.Outcome)
		c.cel(where+": builtin complete", b.Complete)
		if b.Reply != "" {
			if _, err := builtin.Parse(b.Reply); err != nil {
				c.add("%s: builtin reply: %v", where, err)
			}
		}
	}
	if rb := p.ReturnBehavior; rb != nil && rb.Type != "" && rb.Type != flowv1.ReturnToPrevious && rb.Type != flowv1.ReturnNone {
		c.add("%s: returnBehavior.type %q is not ReturnToPrevious or None", where, rb.Type)
	}
	for trName, t := range p.Transitions.All() {
		c.outcome(where+": transitions."+trName, trName, t)
	}
}

// outcome checks an outcome transition: its form and, for a decision, its agent,
// destinations, rules and thresholds.
func (c *checker) outcome(where, name string, t *flowv1.OutcomeTransition) {
	if (t.To == "") == (t.Decision == nil) && t.Action != flowv1.ActionClose {
		c.add("%s: set exactly one of to or decision", where)
	}
	if (name == flowv1.TransitionOnPartialSuccess || name == flowv1.TransitionOnUnclear) && t.Decision == nil {
		c.add("%s: must use the decision form", where)
	}
	c.pathwayRef(where+": to", string(t.To))
	d := t.Decision
	if d == nil {
		return
	}
	c.agentRef(where+": decision.agent", string(d.Agent))
	if len(d.AllowedDestinations) == 0 {
		c.add("%s: decision has no allowedDestinations", where)
	}
	for _, dest := range d.AllowedDestinations {
		c.pathwayRef(where+": allowedDestinations", string(dest))
	}
	c.pathwayRef(where+": decision.onRejected", string(d.OnRejected))
	for i, rule := range d.Rules {
		c.cel(fmt.Sprintf("%s: rules[%d].when", where, i), rule.When)
		if !contains(d.AllowedDestinations, string(rule.To)) {
			c.add("%s: rules[%d].to %q is not one of allowedDestinations", where, i, rule.To)
		}
		c.confidence(fmt.Sprintf("%s: rules[%d].confidence", where, i), rule.Confidence)
	}
	if th := d.ConfidenceThresholds; th != nil {
		c.confidence(where+": autoAdvance", th.AutoAdvance)
		c.confidence(where+": requireApproval", th.RequireApproval)
		c.confidence(where+": retryWithFeedback", th.RetryWithFeedback)
		if parseConfidence(th.AutoAdvance, 1) < parseConfidence(th.RequireApproval, 0) {
			c.add("%s: autoAdvance must be greater than or equal to requireApproval", where)
		}
	}
}

// unreachable lists declared pathways no path from the entry reaches, in declaration
// order. Edges: next, outcome transitions (to and allowed destinations), global
// transitions (from the pathway, or from "*"), and the escalation pathway from every
// pathway with a decision.
func unreachable(journey *flowv1.JourneySpec, pathways map[string]*flowv1.PathwaySpec) []string {
	if journey.EntryPathway == "" {
		return nil
	}
	seen := map[string]bool{string(journey.EntryPathway): true}
	queue := []string{string(journey.EntryPathway)}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, m := range edges(journey, pathways, n) {
			if !seen[m] {
				seen[m] = true
				queue = append(queue, m)
			}
		}
	}
	var out []string
	for _, p := range journey.Pathways {
		if !seen[string(p.Name)] {
			out = append(out, string(p.Name))
		}
	}
	return out
}

// edges lists the pathways a Session in pathway name can move to (see unreachable).
func edges(journey *flowv1.JourneySpec, pathways map[string]*flowv1.PathwaySpec, name string) []string {
	var out []string
	for i := range journey.Transitions {
		if t := &journey.Transitions[i]; t.AppliesIn(name) {
			out = append(out, t.To)
		}
	}
	p := pathways[name]
	if p == nil {
		return out
	}
	if p.Next != "" {
		out = append(out, string(p.Next))
	}
	for _, t := range p.Transitions.All() {
		if t.To != "" {
			out = append(out, string(t.To))
		}
		if d := t.Decision; d != nil {
			for _, dest := range d.AllowedDestinations {
				out = append(out, string(dest))
			}
			if journey.EscalationPathway != "" {
				out = append(out, string(journey.EscalationPathway))
			}
		}
	}
	return out
}

// builtinAgent checks what a builtin agent adds to pathway turns: outputs that
// compile and a reply template that parses.
func (c *checker) builtinAgent(a flowv1.AgentSpec) {
	for _, o := range a.Builtin.Outputs {
		c.cel(fmt.Sprintf("agent %s: builtin output %s", a.Name, o.Name), o.Expression)
	}
	if a.Builtin.Reply != "" {
		if _, err := builtin.Parse(a.Builtin.Reply); err != nil {
			c.add("agent %s: builtin reply: %v", a.Name, err)
		}
	}
}

// rollout checks a rollout's analysis conditions: CEL over canary and stable that
// compiles to a bool and reads only counts that exist.
func (c *checker) rollout(r *flowv1.Rollout) {
	if r == nil || r.Analysis == nil {
		return
	}
	for _, cond := range []struct {
		where string
		src   flowv1.Expression
	}{
		{"spec.rollout.analysis.successCondition", r.Analysis.SuccessCondition},
		{"spec.rollout.analysis.failureCondition", r.Analysis.FailureCondition},
	} {
		if cond.src == "" {
			continue
		}
		if _, err := expr.CompileRollout(string(cond.src)); err != nil {
			c.add("%s: %v", cond.where, err)
		}
	}
}
