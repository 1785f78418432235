package engine

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Defaults of the journey's limits and loop prevention.
const (
	DefaultMaxPathwayDepth = 10
	DefaultMaxTurns        = 100
	// DefaultMaxCostNano is the cost cap of a Session whose Journey sets no
	// limits.budget.maxCostUSD (USD 5.00, in billionths); "0" sets none.
	DefaultMaxCostNano          = 5_000_000_000
	DefaultMaxIterations        = 5
	DefaultMaxTransitions       = 500
	DefaultRetryLimitPerPathway = 2
	DefaultSessionTimeout       = 24 * time.Hour
	DefaultMaxHistory           = 50
	DefaultLoopWindow           = 8
	DefaultMaxCycleRepeats      = 2
	// The defaults of limits.maxContextBytes and limits.maxTranscriptBytes are in
	// api/v1alpha1 (DefaultMaxContextBytes, DefaultMaxTranscriptBytes), with the byte
	// bounds they feed.
	// DefaultIntentConfidence is the classifier threshold without intentDetection.confidenceThreshold.
	DefaultIntentConfidence = 0.7
	// DefaultAutoAdvance and DefaultRequireApproval are the decision thresholds.
	DefaultAutoAdvance     = 0.8
	DefaultRequireApproval = 0.6
	// MaxContextVersions bounds status.contextHistory (also bounded in bytes by
	// flowv1.ContextHistoryBytes).
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
	lim         limits
	// serverTools are the server tools as the revision pins them, by tool name.
	serverTools map[string]ToolInfo
	toolSchemas map[string]*jsonschema.Resolved
}

type limits struct {
	depth, turns, iterations, transitions, retry, contextBytes, history int
	timeout                                                             time.Duration
	idle                                                                time.Duration // 0: none
	maxTokens                                                           int64
	maxCost                                                             int64 // nano-dollars; 0 = none
	maxToolCalls                                                        int64 // 0: none
	window, repeats                                                     int
	intentThreshold                                                     float64
	intentCacheTTL                                                      time.Duration // 0: the process default
	transcriptBytes                                                     int
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
		contextBytes: l.ContextBytes(),
		history:      or(l.MaxHistory, DefaultMaxHistory),
		timeout:      DefaultSessionTimeout,
		window:       or(j.LoopPrevention.Window, DefaultLoopWindow),
		repeats:      or(j.LoopPrevention.MaxCycleRepeats, DefaultMaxCycleRepeats),
	}
	out.transcriptBytes = l.TranscriptBytes()
	if l.RetryLimitPerPathway != nil {
		out.retry = int(*l.RetryLimitPerPathway)
	}
	if l.SessionTimeout != nil && l.SessionTimeout.Duration > 0 {
		out.timeout = l.SessionTimeout.Duration
	}
	if l.IdleTimeout != nil && l.IdleTimeout.Duration > 0 {
		out.idle = l.IdleTimeout.Duration
	}
	out.maxCost = DefaultMaxCostNano
	if b := l.Budget; b != nil {
		out.maxTokens = b.MaxTokens
		if b.MaxCostUSD != "" {
			out.maxCost, _ = parseNano(string(b.MaxCostUSD)) // "0": no cost cap
		}
		out.maxToolCalls = b.MaxToolCalls
	}
	out.intentThreshold = DefaultIntentConfidence
	if d := j.IntentDetection; d != nil && d.CacheTTL != nil {
		out.intentCacheTTL = d.CacheTTL.Duration
	}
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

// classifier returns the journey's intent classifier (intentDetection.agent) and
// whether it has one. remote says it is an LLM (journaled) call; a builtin one scores
// the message inline.
func (s *Snapshot) classifier() (spec flowv1.AgentSpec, remote, ok bool) {
	d := s.journey.IntentDetection
	if d == nil {
		return flowv1.AgentSpec{}, false, false
	}
	spec, remote = s.resolveAgent(string(d.Agent))
	return spec, remote, true
}

// CallLimits bounds the attempts of eff when its agents fail transiently: how many
// attempts it may take (the retry limit of the pathway it is about, or of the current
// one, plus the first attempt) and how long after its first attempt it is given up
// (the pathway's timeout; 0 for none).
func (s *Snapshot) CallLimits(eff *Effect) (attempts int, timeout time.Duration) {
	var p *flowv1.PathwaySpec
	switch {
	case eff.Pathway != nil:
		p = eff.Pathway.Spec
	case eff.Decision != nil:
		p = s.pathways[eff.Decision.Pathway]
	case eff.Intent != nil:
		p = s.pathways[eff.Intent.Pathway]
	case eff.Tool != nil:
		p = s.pathways[eff.Tool.Pathway]
	}
	if p != nil && p.Timeout != nil {
		timeout = p.Timeout.Duration
	}
	return s.retryLimit(p) + 1, timeout
}

func (s *Snapshot) retryLimit(p *flowv1.PathwaySpec) int {
	if p != nil && p.Retry != nil {
		return int(p.Retry.Limit)
	}
	return s.lim.retry
}
