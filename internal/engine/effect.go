package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// Effect is the one agent call a step asks the controller to make. Exactly one of
// Pathway, Decision, Intent and Tool is set, by Kind.
type Effect struct {
	// Kind is ClassifyIntent, RunPathway, Decide or CallTool.
	Kind flowv1.EffectKind
	// Agents are the agents to call: the pathway's agents in pipeline order for
	// RunPathway (undeclared names as builtin agents), else the one agent.
	Agents []flowv1.AgentSpec
	// Pipeline combines the agents of a RunPathway effect.
	Pipeline flowv1.Pipeline
	Pathway  *agent.PathwayRequest
	Decision *agent.DecisionRequest
	Intent   *agent.IntentRequest
	// Tool is the call of a CallTool effect, made from its write-ahead record.
	Tool *agent.ToolRequest
	// InputHash is the SHA-256 (hex) of the effect kind and the canonical JSON of the
	// request (a DecisionRequest without its ID). The next step applies a journaled
	// answer only when the request it would make has the same hash.
	InputHash string
	// WriteFirst says the status returned with this CallTool effect marks the call
	// sent (a server without idempotency keys): it must be written before the call
	// is made, so that a call found sent and not answered is known to have an
	// unknown outcome rather than sent again.
	WriteFirst bool
	// ReadOnly says the CallTool effect changes nothing (a probe): it may be made in
	// any write, and again.
	ReadOnly bool
	// DegradedTo says this RunPathway effect runs on a Budget's degradeTo agent in
	// place of the pathway's own; its record says so too.
	DegradedTo *flowv1.Degradation
}

func newEffect(kind flowv1.EffectKind, agents []flowv1.AgentSpec, pipeline flowv1.Pipeline, req any) *Effect {
	e := &Effect{Kind: kind, Agents: agents, Pipeline: pipeline}
	switch r := req.(type) {
	case agent.PathwayRequest:
		e.Pathway = &r
	case agent.DecisionRequest:
		e.Decision = &r
	case agent.IntentRequest:
		e.Intent = &r
	case agent.ToolRequest:
		e.Tool = &r
	}
	e.InputHash = e.hash()
	return e
}

func (e *Effect) hash() string {
	var req any
	switch {
	case e.Pathway != nil:
		req = e.Pathway
	case e.Decision != nil:
		d := *e.Decision
		d.ID = "" // the id names the decision, it is not part of the question
		req = d
	case e.Intent != nil:
		req = e.Intent
	case e.Tool != nil:
		req = toolHashed(e.Tool)
	}
	raw, err := json.Marshal(req)
	if err != nil {
		// Requests hold JSON values only; keep the hash deterministic anyway.
		raw = []byte(err.Error())
	}
	h := sha256.New()
	h.Write([]byte(e.Kind))
	h.Write([]byte{'\n'})
	h.Write(raw)
	return hex.EncodeToString(h.Sum(nil))
}

// QuestionHash is the hash of what the agents are asked: the input hash without the
// parts of a pathway's spec its agents never see (where its outcome leads, what the
// context keeps of it, its retries, timeout, tool call cap, fallback reply and whether
// a Budget may degrade it). Two
// revisions that differ only there ask the same question, so an answer to one answers
// the other (see package rebuild).
func (e *Effect) QuestionHash() string {
	if e.Pathway == nil || e.Pathway.Spec == nil {
		return e.InputHash
	}
	req, spec := *e.Pathway, *e.Pathway.Spec
	spec.Transitions, spec.Next, spec.ReturnBehavior, spec.Accumulate = nil, "", nil, nil
	spec.Retry, spec.Timeout, spec.MaxToolCalls, spec.FallbackReply = nil, nil, nil, ""
	spec.Degrade = ""
	req.Spec = &spec
	q := *e
	q.Pathway = &req
	return q.hash()
}

// Record turns the agent's answer to this effect, or its error, into the journal entry
// the controller stores in status.pendingEffect before it writes status. resp is the
// agent's PathwayResponse, DecisionResponse or IntentResponse (value or pointer). An
// error (Invalid or Terminal; Transient errors should not be journaled) is recorded as
// a typed failure: the next step treats it as a failed pathway turn, an unclear
// decision or no intent. The id is <sessionUID>/<step>/<first 12 hex digits of the
// input hash>.
func (e *Effect) Record(sessionUID string, step int64, resp any, err error) *flowv1.EffectRecord {
	rec := &flowv1.EffectRecord{
		ID:        fmt.Sprintf("%s/%d/%s", sessionUID, step, e.InputHash[:min(12, len(e.InputHash))]),
		Kind:      e.Kind,
		Step:      step,
		InputHash: e.InputHash,
	}
	if len(e.Agents) > 0 {
		rec.Agent = string(e.Agents[0].Name)
	}
	if e.DegradedTo != nil {
		rec.DegradedTo = e.DegradedTo.DeepCopy()
	}
	if e.Tool != nil {
		return e.recordTool(rec, resp, err)
	}
	res := &rec.Result
	if err != nil {
		f := failureOf(err, rec.Agent)
		res.Failure = &f
	}
	switch r := resp.(type) {
	case *agent.PathwayResponse:
		if r != nil {
			resp = *r
		}
	case *agent.DecisionResponse:
		if r != nil {
			resp = *r
		}
	case *agent.IntentResponse:
		if r != nil {
			resp = *r
		}
	}
	switch r := resp.(type) {
	case agent.PathwayResponse:
		res.Usage = usageOf(r.Usage)
		if err == nil {
			res.Reply = r.Reply
			res.ResultType = r.ResultType
			complete := r.Complete
			res.Complete = &complete
			if len(r.Outputs) > 0 {
				res.Outputs = &apiextensionsv1.JSON{Raw: encodeJSON(r.Outputs)}
			}
			// At most 64 calls are journaled: more than maxToolCalls allows anyway.
			for _, c := range r.ToolCalls[:min(len(r.ToolCalls), maxModelToolCalls)] {
				res.ToolCalls = append(res.ToolCalls, flowv1.ModelToolCall{ID: truncate.Bytes(c.ID, 256, ""), Name: truncate.Bytes(c.Name, 256, ""),
					Arguments: cutArguments(c.Arguments)})
			}
		}
	case agent.DecisionResponse:
		res.Usage = usageOf(r.Usage)
		if err == nil {
			res.Destination = r.Destination
			res.Reasoning = r.Reasoning
			if !recordConfidence(res, rec.Agent, r.Confidence) {
				res.Destination = ""
			}
		}
	case agent.IntentResponse:
		res.Usage = usageOf(r.Usage)
		if err == nil {
			res.Intent = r.Intent
			res.Reasoning = r.Reasoning
			if !recordConfidence(res, rec.Agent, r.Confidence) {
				res.Intent = agent.NoIntent
			}
		}
	default:
		if err == nil {
			res.Failure = &flowv1.Failure{Source: flowv1.FailureSystem, Component: rec.Agent, Kind: flowv1.FailureUnknown,
				Message: fmt.Sprintf("no answer (%T)", resp)}
		}
	}
	if res.Failure != nil && e.Kind == flowv1.EffectClassifyIntent {
		res.Intent = agent.NoIntent
	}
	return rec
}

// recordConfidence records an answer's confidence in res. One outside [0,1] is an
// invalid answer from agentName: it records the failure and reports false.
func recordConfidence(res *flowv1.AgentResult, agentName string, c float64) bool {
	conf, ok := confidenceOf(c)
	res.Confidence = conf
	if !ok {
		res.Failure = &flowv1.Failure{Source: flowv1.FailureLLM, Component: agentName, Kind: flowv1.FailureValidation,
			Message: fmt.Sprintf("confidence %v is not between 0 and 1", c)}
	}
	return ok
}

func failureOf(err error, component string) flowv1.Failure {
	var ae *agent.Error
	if errors.As(err, &ae) {
		f := ae.Failure()
		if f.Component == "" {
			f.Component = component
		}
		return f
	}
	return flowv1.Failure{Source: flowv1.FailureSystem, Component: component, Kind: flowv1.FailureUnknown, Message: err.Error()}
}

func usageOf(u agent.Usage) flowv1.Usage {
	out := flowv1.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if u.CostUSD > 0 && !math.IsInf(u.CostUSD, 0) {
		out.CostUSD = formatNano(int64(math.Round(u.CostUSD * 1e9)))
	}
	return out
}

// confidenceOf formats c as a Confidence (at most 6 decimals); ok is false when c is
// not in [0,1] (the result is then "0").
func confidenceOf(c float64) (flowv1.Confidence, bool) {
	if math.IsNaN(c) || c < 0 || c > 1 {
		return "0", false
	}
	return formatConfidence(c), true
}

func formatConfidence(c float64) flowv1.Confidence {
	c = math.Round(c*1e6) / 1e6
	return flowv1.Confidence(strconv.FormatFloat(c, 'f', -1, 64))
}

// parseNano parses a non-negative decimal string into billionths.
func parseNano(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" {
		whole = "0"
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w < 0 || w > math.MaxInt64/1_000_000_000-1 {
		return 0, false
	}
	if len(frac) > 9 {
		frac = frac[:9]
	}
	var f int64
	if frac != "" {
		f, err = strconv.ParseInt(frac, 10, 64)
		if err != nil || f < 0 {
			return 0, false
		}
		for i := len(frac); i < 9; i++ {
			f *= 10
		}
	}
	return w*1e9 + f, true
}

// formatNano formats billionths as a decimal string without trailing zeros.
func formatNano(n int64) string {
	if n <= 0 {
		return "0"
	}
	s := strconv.FormatInt(n/1e9, 10)
	if frac := n % 1e9; frac != 0 {
		f := fmt.Sprintf("%09d", frac)
		s += "." + strings.TrimRight(f, "0")
	}
	return s
}

func addUsage(a, b flowv1.Usage) flowv1.Usage {
	out := flowv1.Usage{PromptTokens: a.PromptTokens + b.PromptTokens, CompletionTokens: a.CompletionTokens + b.CompletionTokens,
		ToolCalls: a.ToolCalls + b.ToolCalls}
	x, _ := parseNano(a.CostUSD)
	y, _ := parseNano(b.CostUSD)
	if x+y > 0 {
		out.CostUSD = formatNano(x + y)
	}
	return out
}
