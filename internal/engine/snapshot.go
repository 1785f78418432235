package engine

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
	"github.com/journeyops/journey-operator/internal/expr"
)

// Defaults of the journey's limits and loop prevention.
const (
	DefaultMaxPathwayDepth      = 10
	DefaultMaxTurns             = 100
	DefaultMaxIterations        = 5
	DefaultMaxTransitions       = 500
	DefaultRetryLimitPerPathway = 2
	DefaultSessionTimeout       = 24 * time.Hour
	DefaultMaxContextBytes      = 262144
	DefaultMaxHistory           = 50
	DefaultLoopWindow           = 8
	DefaultMaxCycleRepeats      = 2
	// DefaultIntentConfidence is the classifier threshold without intentDetection.confidenceThreshold.
	DefaultIntentConfidence = 0.7
	// DefaultAutoAdvance and DefaultRequireApproval are the decision thresholds.
	DefaultAutoAdvance     = 0.8
	DefaultRequireApproval = 0.6
	// MaxContextVersions bounds status.contextHistory (also bounded to maxContextBytes
	// of previous values in total).
	MaxContextVersions = 10
)

// Snapshot is a compiled journey revision: the Journey spec and the resolved Pathway
// specs by local name. It is immutable and safe for concurrent use.
type Snapshot struct {
	revision    string
	journey     *flowv1.JourneySpec
	pathways    map[string]*flowv1.PathwaySpec
	agents      map[string]flowv1.AgentSpec
	transitions []*flowv1.GlobalTransition // priority desc, then declaration order
	intents     []*flowv1.GlobalTransition // the intent ones, same order
	conditions  []*flowv1.GlobalTransition // the condition ones, same order
	lim         limits
}

type limits struct {
	depth, turns, iterations, transitions, retry, contextBytes, history int
	timeout                                                             time.Duration
	maxTokens                                                           int64
	maxCost                                                             int64 // nano-dollars; 0 = none
	window, repeats                                                     int
	intentThreshold                                                     float64
}

// InvalidError is returned by NewSnapshot for a journey with issues.
type InvalidError struct {
	Revision string
	Issues   []string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("journey revision %s is invalid: %s", e.Revision, strings.Join(e.Issues, "; "))
}

// NewSnapshot compiles a journey revision. It copies its inputs and fails with an
// *InvalidError listing every issue Validate finds.
func NewSnapshot(revision string, journey *flowv1.JourneySpec, pathways map[string]*flowv1.PathwaySpec) (*Snapshot, error) {
	if issues := Validate(journey, pathways); len(issues) > 0 {
		return nil, &InvalidError{Revision: revision, Issues: issues}
	}
	s := &Snapshot{
		revision: revision,
		journey:  journey.DeepCopy(),
		pathways: make(map[string]*flowv1.PathwaySpec, len(journey.Pathways)),
		agents:   make(map[string]flowv1.AgentSpec, len(journey.Agents)),
	}
	for _, p := range journey.Pathways {
		s.pathways[string(p.Name)] = pathways[string(p.Name)].DeepCopy()
	}
	for _, a := range s.journey.Agents {
		s.agents[string(a.Name)] = a
	}
	for i := range s.journey.Transitions {
		s.transitions = append(s.transitions, &s.journey.Transitions[i])
	}
	slices.SortStableFunc(s.transitions, func(a, b *flowv1.GlobalTransition) int { return cmp.Compare(b.Priority, a.Priority) })
	for _, t := range s.transitions {
		if t.Trigger.Intent != nil {
			s.intents = append(s.intents, t)
		} else {
			s.conditions = append(s.conditions, t)
		}
	}
	s.lim = resolveLimits(s.journey)
	return s, nil
}

func resolveLimits(j *flowv1.JourneySpec) limits {
	l := j.Limits
	or := func(v int32, def int) int {
		if v > 0 {
			return int(v)
		}
		return def
	}
	out := limits{
		depth:        or(l.MaxPathwayDepth, DefaultMaxPathwayDepth),
		turns:        or(l.MaxTurns, DefaultMaxTurns),
		iterations:   or(l.MaxIterations, DefaultMaxIterations),
		transitions:  or(l.MaxTransitions, DefaultMaxTransitions),
		retry:        DefaultRetryLimitPerPathway,
		contextBytes: or(l.MaxContextBytes, DefaultMaxContextBytes),
		history:      or(l.MaxHistory, DefaultMaxHistory),
		timeout:      DefaultSessionTimeout,
		window:       or(j.LoopPrevention.Window, DefaultLoopWindow),
		repeats:      or(j.LoopPrevention.MaxCycleRepeats, DefaultMaxCycleRepeats),
	}
	if l.RetryLimitPerPathway != nil {
		out.retry = int(*l.RetryLimitPerPathway)
	}
	if l.SessionTimeout != nil && l.SessionTimeout.Duration > 0 {
		out.timeout = l.SessionTimeout.Duration
	}
	if b := l.Budget; b != nil {
		out.maxTokens = b.MaxTokens
		out.maxCost, _ = parseNano(string(b.MaxCostUSD))
	}
	out.intentThreshold = DefaultIntentConfidence
	if d := j.IntentDetection; d != nil && d.ConfidenceThreshold != "" {
		out.intentThreshold = parseConfidence(d.ConfidenceThreshold, DefaultIntentConfidence)
	}
	return out
}

// Revision is the revision's name.
func (s *Snapshot) Revision() string { return s.revision }

// Journey is the journey spec of the revision. Callers must not modify it.
func (s *Snapshot) Journey() *flowv1.JourneySpec { return s.journey }

// Pathway returns the spec of the pathway with local name name. Callers must not modify it.
func (s *Snapshot) Pathway(name string) (*flowv1.PathwaySpec, bool) {
	p, ok := s.pathways[name]
	return p, ok
}

// Agent returns the declared agent named name.
func (s *Snapshot) Agent(name string) (flowv1.AgentSpec, bool) {
	a, ok := s.agents[name]
	return a, ok
}

// Deadline is when a Session that started at start (its creation time, else its
// status.startTime) times out.
func (s *Snapshot) Deadline(start time.Time) time.Time {
	return start.Add(s.lim.timeout)
}

// resolveAgent returns the agent that answers for name: the declared one, else a
// builtin agent of that name. remote says whether it is an LLM (journaled) call.
func (s *Snapshot) resolveAgent(name string) (spec flowv1.AgentSpec, remote bool) {
	if a, ok := s.agents[name]; ok {
		return a, a.Provider == flowv1.ProviderOpenAI
	}
	return flowv1.AgentSpec{Name: flowv1.Name(name), Provider: flowv1.ProviderBuiltin}, false
}

// pathwayAgents returns the agents of a pathway in pipeline order and whether any of
// them is remote. A pathway without remote agents runs builtin, inline.
func (s *Snapshot) pathwayAgents(p *flowv1.PathwaySpec) ([]flowv1.AgentSpec, bool) {
	remote := false
	for _, n := range p.Agents {
		if _, r := s.resolveAgent(string(n)); r {
			remote = true
		}
	}
	if !remote {
		return nil, false
	}
	out := make([]flowv1.AgentSpec, 0, len(p.Agents))
	for _, n := range p.Agents {
		a, _ := s.resolveAgent(string(n))
		out = append(out, a)
	}
	return out, true
}

// classifier returns the intent classifier agent, when it is remote (a builtin one
// only matches patterns, which already failed when it would be asked).
func (s *Snapshot) classifier() (flowv1.AgentSpec, bool) {
	d := s.journey.IntentDetection
	if d == nil {
		return flowv1.AgentSpec{}, false
	}
	a, ok := s.agents[string(d.Agent)]
	if !ok || a.Provider != flowv1.ProviderOpenAI {
		return flowv1.AgentSpec{}, false
	}
	return a, true
}

func (s *Snapshot) retryLimit(p *flowv1.PathwaySpec) int {
	if p != nil && p.Retry != nil {
		return int(p.Retry.Limit)
	}
	return s.lim.retry
}

func isDetour(p *flowv1.PathwaySpec) bool {
	return p != nil && p.ReturnBehavior != nil && (p.ReturnBehavior.Type == "" || p.ReturnBehavior.Type == flowv1.ReturnToPrevious)
}

func appliesIn(t *flowv1.GlobalTransition, pathway string) bool {
	return t.From == "" || t.From == "*" || t.From == pathway
}

// Validate returns every problem of a journey the API server cannot catch, one
// human-readable line each, in a stable order: missing Pathway specs, references to
// unknown pathways (next, to, allowedDestinations, escalationPathway, global
// transitions), pathways unreachable from the entry, agents referenced but not
// declared (pathway agents, decision agents, intentDetection), CEL that does not
// compile (conditions, decision rules, builtin outputs, outcome and complete), reply
// templates that do not parse, and thresholds that are not decimals in [0,1].
func Validate(journey *flowv1.JourneySpec, pathways map[string]*flowv1.PathwaySpec) []string {
	if journey == nil {
		return []string{"journey spec is missing"}
	}
	var issues []string
	add := func(format string, args ...any) { issues = append(issues, fmt.Sprintf(format, args...)) }

	known := map[string]bool{}
	for _, p := range journey.Pathways {
		if known[string(p.Name)] {
			add("pathway %q is declared twice", p.Name)
		}
		known[string(p.Name)] = true
	}
	agents := map[string]bool{}
	for _, a := range journey.Agents {
		agents[string(a.Name)] = true
	}
	pathway := func(where, name string) {
		if name != "" && !known[name] {
			add("%s: pathway %q is not one of spec.pathways", where, name)
		}
	}
	agentRef := func(where, name string) {
		if name != "" && !agents[name] {
			add("%s: agent %q is not declared in spec.agents", where, name)
		}
	}
	celCheck := func(where string, src flowv1.Expression) {
		if src == "" {
			return
		}
		if _, err := expr.Compile(string(src)); err != nil {
			add("%s: %v", where, err)
		}
	}
	confCheck := func(where string, c flowv1.Confidence) {
		if c == "" {
			return
		}
		if v, err := strconv.ParseFloat(string(c), 64); err != nil || v < 0 || v > 1 {
			add("%s: %q is not a decimal between 0 and 1", where, c)
		}
	}

	if journey.EntryPathway == "" {
		add("spec.entryPathway is empty")
	} else {
		pathway("spec.entryPathway", string(journey.EntryPathway))
	}
	pathway("spec.escalationPathway", string(journey.EscalationPathway))
	if d := journey.IntentDetection; d != nil {
		agentRef("spec.intentDetection", string(d.Agent))
		confCheck("spec.intentDetection.confidenceThreshold", d.ConfidenceThreshold)
	}
	for _, a := range journey.Agents {
		if a.Builtin != nil {
			confCheck(fmt.Sprintf("agent %s: builtin.confidence", a.Name), a.Builtin.Confidence)
		}
		if a.Provider == flowv1.ProviderOpenAI && a.Model == "" {
			add("agent %s: provider openai needs a model", a.Name)
		}
	}
	for _, t := range journey.Transitions {
		where := fmt.Sprintf("transition %s", t.Name)
		if t.From != "" && t.From != "*" {
			pathway(where+": from", t.From)
		}
		if t.To == "" {
			add("%s: to is empty", where)
		} else {
			pathway(where+": to", t.To)
		}
		switch {
		case t.Trigger.Intent != nil && t.Trigger.Condition != "":
			add("%s: trigger sets both intent and condition", where)
		case t.Trigger.Intent != nil:
			if len(t.Trigger.Intent.Patterns) == 0 {
				add("%s: intent has no patterns", where)
			}
		case t.Trigger.Condition != "":
			celCheck(where+": condition", t.Trigger.Condition)
		default:
			add("%s: trigger sets neither intent nor condition", where)
		}
		for i, u := range t.ContextUpdate {
			if u.Field == "" {
				add("%s: contextUpdate[%d] has no field", where, i)
			}
			switch u.Op {
			case flowv1.ContextSet:
				if u.Value == nil {
					add("%s: contextUpdate[%d]: op Set needs value", where, i)
				}
			case flowv1.ContextCopy:
				if u.From == "" {
					add("%s: contextUpdate[%d]: op Copy needs from", where, i)
				}
			case flowv1.ContextAppend:
				if (u.From == "") == (u.Value == nil) {
					add("%s: contextUpdate[%d]: op Append needs exactly one of from or value", where, i)
				}
			default:
				add("%s: contextUpdate[%d]: unknown op %q", where, i, u.Op)
			}
		}
	}

	for _, entry := range journey.Pathways {
		name := string(entry.Name)
		p := pathways[name]
		where := "pathway " + name
		if p == nil {
			add("%s: Pathway %q was not resolved", where, entry.PathwayRef)
			continue
		}
		pathway(where+": next", string(p.Next))
		if p.Executor == flowv1.ExecutorExternal && len(p.Agents) > 0 {
			add("%s: an External pathway has no agents", where)
		}
		for _, a := range p.Agents {
			agentRef(where+": agents", string(a))
		}
		if b := p.Builtin; b != nil {
			for _, o := range b.Outputs {
				celCheck(fmt.Sprintf("%s: builtin output %s", where, o.Name), o.Expression)
			}
			celCheck(where+": builtin outcome", b.Outcome)
			celCheck(where+": builtin complete", b.Complete)
			if b.Reply != "" {
				if _, err := builtin.Parse(b.Reply); err != nil {
					add("%s: builtin reply: %v", where, err)
				}
			}
		}
		if rb := p.ReturnBehavior; rb != nil && rb.Type != "" && rb.Type != flowv1.ReturnToPrevious && rb.Type != "None" {
			add("%s: returnBehavior.type %q is not ReturnToPrevious or None", where, rb.Type)
		}
		if tr := p.Transitions; tr != nil {
			for _, o := range outcomeTransitions(tr) {
				w := where + ": transitions." + o.name
				t := o.t
				if (t.To == "") == (t.Decision == nil) && t.Action != flowv1.ActionClose {
					add("%s: set exactly one of to or decision", w)
				}
				if (o.name == onPartialSuccess || o.name == onUnclear) && t.Decision == nil {
					add("%s: must use the decision form", w)
				}
				pathway(w+": to", string(t.To))
				d := t.Decision
				if d == nil {
					continue
				}
				agentRef(w+": decision.agent", string(d.Agent))
				if len(d.AllowedDestinations) == 0 {
					add("%s: decision has no allowedDestinations", w)
				}
				allowed := map[string]bool{}
				for _, dest := range d.AllowedDestinations {
					pathway(w+": allowedDestinations", string(dest))
					allowed[string(dest)] = true
				}
				for i, r := range d.Rules {
					celCheck(fmt.Sprintf("%s: rules[%d].when", w, i), r.When)
					if !allowed[string(r.To)] {
						add("%s: rules[%d].to %q is not one of allowedDestinations", w, i, r.To)
					}
					confCheck(fmt.Sprintf("%s: rules[%d].confidence", w, i), r.Confidence)
				}
				if th := d.ConfidenceThresholds; th != nil {
					confCheck(w+": autoAdvance", th.AutoAdvance)
					confCheck(w+": requireApproval", th.RequireApproval)
					auto, appr := parseConfidence(th.AutoAdvance, 1), parseConfidence(th.RequireApproval, 0)
					if auto < appr {
						add("%s: autoAdvance must be greater than or equal to requireApproval", w)
					}
				}
			}
		}
	}

	for _, name := range unreachable(journey, pathways) {
		add("pathway %s is unreachable from the entry pathway %s", name, journey.EntryPathway)
	}
	return issues
}

const (
	onSuccess        = "onSuccess"
	onFailure        = "onFailure"
	onPartialSuccess = "onPartialSuccess"
	onUnclear        = "onUnclear"
)

type namedTransition struct {
	name string
	t    *flowv1.OutcomeTransition
}

func outcomeTransitions(tr *flowv1.OutcomeTransitions) []namedTransition {
	var out []namedTransition
	for _, o := range []namedTransition{
		{onSuccess, tr.OnSuccess}, {onFailure, tr.OnFailure}, {onPartialSuccess, tr.OnPartialSuccess}, {onUnclear, tr.OnUnclear},
	} {
		if o.t != nil {
			out = append(out, o)
		}
	}
	return out
}

// unreachable lists declared pathways no path from the entry reaches, in declaration
// order. Edges: next, outcome transitions (to and allowed destinations), global
// transitions (from the pathway, or from "*"), and the escalation pathway from every
// pathway with a decision.
func unreachable(journey *flowv1.JourneySpec, pathways map[string]*flowv1.PathwaySpec) []string {
	if journey.EntryPathway == "" {
		return nil
	}
	edges := func(name string) []string {
		var out []string
		for _, t := range journey.Transitions {
			if t.From == "" || t.From == "*" || t.From == name {
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
		if p.Transitions != nil {
			for _, o := range outcomeTransitions(p.Transitions) {
				if o.t.To != "" {
					out = append(out, string(o.t.To))
				}
				if d := o.t.Decision; d != nil {
					for _, dest := range d.AllowedDestinations {
						out = append(out, string(dest))
					}
					if journey.EscalationPathway != "" {
						out = append(out, string(journey.EscalationPathway))
					}
				}
			}
		}
		return out
	}
	seen := map[string]bool{string(journey.EntryPathway): true}
	queue := []string{string(journey.EntryPathway)}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, m := range edges(n) {
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
