package engine

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// Tool calls. Every call is its own effect, in three steps: a write-ahead record in
// status.turn.toolCalls (tool, canonical arguments, idempotency key) is written first;
// the next step asks for the call (a CallTool effect) and the caller journals its
// answer; the step after applies the answer to the record. A crash between the first
// and the last repeats the call with the same key, never re-plans it.

const (
	// DefaultMaxToolCalls bounds the tool calls of one turn without maxToolCalls.
	DefaultMaxToolCalls = 8
	// MaxRepeatedToolCalls is how many times one turn may call the same tool with the
	// same arguments; one more stops the turn (loop prevention).
	MaxRepeatedToolCalls = 2
	// maxToolCache bounds status.toolCache; the oldest entries go first.
	maxToolCache = 64
)

// tool returns the journey's tool named name.
func (s *Snapshot) tool(name string) (*flowv1.Tool, bool) {
	for i := range s.journey.Tools {
		if string(s.journey.Tools[i].Name) == name {
			return &s.journey.Tools[i], true
		}
	}
	return nil, false
}

// toolServer returns the journey's tool server named name.
func (s *Snapshot) toolServer(name string) (*flowv1.ToolServer, bool) {
	for i := range s.journey.ToolServers {
		if string(s.journey.ToolServers[i].Name) == name {
			return &s.journey.ToolServers[i], true
		}
	}
	return nil, false
}

// tools checks the journey's tools and the pathways' use of them: servers declared,
// builtin XOR server, CEL that compiles, pathway tools declared, builtin toolCalls
// among the pathway's tools.
func (c *checker) tools(j *flowv1.JourneySpec, pathways map[string]*flowv1.PathwaySpec) {
	servers := map[string]bool{}
	for _, s := range j.ToolServers {
		servers[string(s.Name)] = true
		if s.Sampling != nil {
			c.agentRef(fmt.Sprintf("toolServers %s: sampling.agent", s.Name), string(s.Sampling.Agent))
		}
	}
	declared := map[string]bool{}
	for _, t := range j.Tools {
		where := fmt.Sprintf("tool %s", t.Name)
		if declared[string(t.Name)] {
			c.add("%s is declared twice", where)
		}
		declared[string(t.Name)] = true
		switch {
		case t.Builtin != nil && t.Server != "":
			c.add("%s: sets both server and builtin", where)
		case t.Builtin != nil:
			c.cel(where+": builtin.expression", t.Builtin.Expression)
		case t.Server == "":
			c.add("%s: sets neither server nor builtin", where)
		case !servers[string(t.Server)]:
			c.add("%s: server %q is not declared in spec.toolServers", where, t.Server)
		}
		c.cel(where+": when", t.When)
	}
	for _, t := range j.Tools {
		if t.Probe != nil && !declared[string(t.Probe.Tool)] {
			c.add("tool %s: onUnknown probe tool %q is not declared in spec.tools", t.Name, t.Probe.Tool)
		}
	}
	for _, entry := range j.Pathways {
		p := pathways[string(entry.Name)]
		if p == nil {
			continue
		}
		for _, name := range p.Tools {
			if !declared[string(name)] {
				c.add("pathway %s: tool %q is not declared in spec.tools", entry.Name, name)
			}
		}
		c.toolPipeline(j, entry.Name, p)
		if p.Builtin == nil {
			continue
		}
		for i, tc := range p.Builtin.ToolCalls {
			where := fmt.Sprintf("pathway %s: builtin.toolCalls[%d]", entry.Name, i)
			if !contains(p.Tools, string(tc.Tool)) {
				c.add("%s: tool %q is not in the pathway's tools", where, tc.Tool)
			}
			c.cel(where+": args", tc.Args)
		}
	}
}

// toolHashed is the part of a tool call its effect's input hash covers: the call
// itself, not the context a builtin tool reads or the server's address.
func toolHashed(t *agent.ToolRequest) any {
	return struct {
		ID   string         `json:"id"`
		Tool string         `json:"tool"`
		Args map[string]any `json:"args"`
		Key  string         `json:"idempotencyKey"`
	}{t.ID, t.Tool, t.Args, t.IdempotencyKey}
}

// recordTool fills the journal record of a tool call with the tool's answer.
func (e *Effect) recordTool(rec *flowv1.EffectRecord, resp any, err error) *flowv1.EffectRecord {
	rec.ToolCall = e.Tool.ID
	rec.Agent = e.Tool.Tool
	res := &rec.Result
	var r agent.ToolResponse
	switch v := resp.(type) {
	case agent.ToolResponse:
		r = v
	case *agent.ToolResponse:
		if v != nil {
			r = *v
		}
	}
	res.DurationMs = r.DurationMs
	res.Usage = usageOf(r.Usage) // the server's sampling requests
	switch {
	case err != nil:
		f := failureOf(err, e.Tool.Tool)
		if f.Source == flowv1.FailureSystem {
			f.Source = flowv1.FailureTool
		}
		res.Failure = &f
	case r.Elicitation != nil:
		res.Elicitation = r.Elicitation.DeepCopy()
	case r.Error != "":
		res.Failure = &flowv1.Failure{Source: flowv1.FailureTool, Component: e.Tool.Tool, Kind: flowv1.FailureException, Message: truncate.Bytes(r.Error, 1024, "")}
	default:
		res.ToolResult = &apiextensionsv1.JSON{Raw: cutToolResult(encodeJSON(r.Result), flowv1.MaxToolResultBytes)}
	}
	return rec
}

// cutToolResult is a tool's result (its JSON) as the Session stores it: raw when it
// fits in limit bytes, else its first bytes as a JSON string ending with a note that
// says it was cut, within limit bytes. The model and the pathway's outputs get the
// same cut result.
func cutToolResult(raw []byte, limit int) []byte {
	if len(raw) <= limit {
		return raw
	}
	note := fmt.Sprintf(" … [cut: the tool's result was %d bytes of JSON, over the limit of %d; this is its beginning]", len(raw), limit)
	keep := limit - len(note) - 2
	for keep > 0 {
		out := encodeJSON(truncate.Bytes(string(raw), keep, "") + note)
		if len(out) <= limit {
			return out
		}
		keep -= len(out) - limit
	}
	return encodeJSON(strings.TrimSpace(note))
}

// argsDigest is the SHA-256 (hex) of the canonical JSON of args.
func argsDigest(args map[string]any) string {
	sum := sha256.Sum256(encodeJSON(orEmptyMap(args)))
	return hex.EncodeToString(sum[:])
}

func orEmptyMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// maxToolCalls is the pathway's bound on one turn's tool calls.
func maxToolCalls(p *flowv1.PathwaySpec) int {
	if p.MaxToolCalls != nil && *p.MaxToolCalls > 0 {
		return int(*p.MaxToolCalls)
	}
	return DefaultMaxToolCalls
}

// builtinTools makes the builtin provider's toolCalls of pathway p, in order, one per
// step. It returns the results by tool name once every call is answered (ok); until
// then res is what the Run stage does: wait on a call, pause after a write-ahead
// record, or end a turn whose call failed.
func (r *run) builtinTools(p *flowv1.PathwaySpec, req agent.PathwayRequest) (results map[string]any, res stageResult, ok bool) {
	results = map[string]any{}
	for i, tc := range p.Builtin.ToolCalls {
		req.Tools = results
		if i >= len(r.st.Turn.ToolCalls) {
			args, err := builtin.ToolArgs(tc.Args, req)
			if err != nil {
				return nil, r.toolRunFailed(flowv1.Failure{Source: flowv1.FailureTool, Component: string(tc.Tool), Kind: flowv1.FailureValidation,
					Message: fmt.Sprintf("builtin.toolCalls[%d] args: %v", i, err)}), false
			}
			if res, planned := r.planToolCall(p, string(tc.Tool), args, req.Context); !planned {
				return nil, res, false
			}
		}
		c := &r.st.Turn.ToolCalls[i]
		if c.State == flowv1.ToolCallPending && c.AwaitingApproval {
			if res, goOn := r.toolApproval(c); !goOn {
				return nil, res, false
			}
		}
		if c.State == flowv1.ToolCallPending {
			r.applyToolAnswer(c)
		}
		if res, wait := r.awaitInput(c); wait {
			return nil, res, false
		}
		if res, wait := r.unknownOutcome(c, false); wait {
			return nil, res, false
		}
		if c.State == flowv1.ToolCallPending {
			if r.wroteAhead(c) {
				return nil, stageResult{pause: true}, false
			}
			return nil, r.waitTool(c, req.Context), false
		}
		if c.State != flowv1.ToolCallDone {
			return nil, r.toolRunFailed(toolFailure(c)), false
		}
		v, _ := decodeValue(c.Result.Raw)
		results[c.Tool] = v
	}
	return results, turnOver, true
}

// wroteAhead reports whether c's write-ahead record is new in this step: it must be
// written before the call is made.
func (r *run) wroteAhead(c *flowv1.ToolCallProgress) bool {
	if r.old.Turn == nil {
		return true
	}
	for _, o := range r.old.Turn.ToolCalls {
		if o.ID == c.ID {
			return false
		}
	}
	return true
}

// planToolCall checks a call of tool with args and appends its record to the turn:
// Pending (a write-ahead record), Done from the Session's cache, or Failed when it is
// refused (a tool the pathway may not call, arguments that do not match its input
// schema, a missing prerequisite). Limits stop the turn. planned is false when the
// turn is over.
func (r *run) planToolCall(p *flowv1.PathwaySpec, name string, args map[string]any, ctx map[string]any) (res stageResult, planned bool) {
	return r.planCall(p, name, args, ctx, "")
}

// planCall is planToolCall for a call already refused when refused is set.
func (r *run) planCall(p *flowv1.PathwaySpec, name string, args, ctx map[string]any, refused string) (res stageResult, planned bool) {
	st := r.st
	i := len(st.Turn.ToolCalls)
	c := flowv1.ToolCallProgress{
		ToolCallRecord: flowv1.ToolCallRecord{ID: fmt.Sprintf("t-%d-%d", r.step, i), Tool: name, ArgsDigest: argsDigest(args), State: flowv1.ToolCallPending},
		IdempotencyKey: fmt.Sprintf("%s-%d-%d", r.in.SessionUID, r.step, i),
		Args:           toJSON(orEmptyMap(args)),
	}
	if r.toolLimit(p, name, c.ArgsDigest) {
		return turnOver, false
	}
	if refused == "" {
		refused = r.refusal(p, name, args, ctx)
	}
	tool, _ := r.snap.tool(name)
	switch {
	case refused != "":
		c.State, c.Error = flowv1.ToolCallFailed, truncate.Bytes(refused, 1024, "")
	case tool.Cache == flowv1.ToolCacheSession && r.cached(name, c.ArgsDigest) != nil:
		c.State, c.Cached, c.Result = flowv1.ToolCallDone, true, r.cached(name, c.ArgsDigest).DeepCopy()
	default:
		hold, err := r.needsApproval(tool, args, ctx)
		switch {
		case err != nil:
			c.State, c.Error = flowv1.ToolCallFailed, truncate.Bytes(fmt.Sprintf("tool %s: when: %v", name, err), 1024, "")
		case hold && r.awaitingToolApproval():
			// Another call of the turn waits for a person: this one is shown when its turn comes.
			c.AwaitingApproval = true
		case hold:
			r.holdForApproval(&c)
		}
	}
	st.Turn.ToolCalls = append(st.Turn.ToolCalls, c)
	r.syncToolCall(&st.Turn.ToolCalls[i])
	return turnOver, true
}

// toolLimit stops the turn when one more call of tool with args digest would pass
// maxToolCalls or repeat the same call too often (loop prevention).
func (r *run) toolLimit(p *flowv1.PathwaySpec, name, digest string) bool {
	calls := r.st.Turn.ToolCalls
	if len(calls) >= maxToolCalls(p) {
		r.stopTools(flowv1.FinishToolCallLimit, fmt.Sprintf("the turn reached maxToolCalls %d", maxToolCalls(p)))
		return true
	}
	repeats := 0
	for _, o := range calls {
		if o.Tool == name && o.ArgsDigest == digest {
			repeats++
		}
	}
	if repeats >= MaxRepeatedToolCalls {
		r.stopTools(flowv1.FinishLoopDetected, fmt.Sprintf("tool %s was called %d times with the same arguments in one turn", name, repeats+1))
		return true
	}
	return false
}

// refusal says why a call of tool name with args may not be made, "" when it may: a
// tool the pathway may not call, a missing prerequisite, arguments that do not match
// the tool's input schema.
func (r *run) refusal(p *flowv1.PathwaySpec, name string, args, ctx map[string]any) string {
	tool, ok := r.snap.tool(name)
	if !ok || !contains(p.Tools, name) {
		names := make([]string, len(p.Tools))
		for i, t := range p.Tools {
			names[i] = string(t)
		}
		return fmt.Sprintf("tool %q is not one of the pathway's tools (%s)", name, strings.Join(names, ", "))
	}
	for _, key := range tool.Requires {
		if _, has := ctx[key]; !has {
			return fmt.Sprintf("tool %s requires context key %q, which is not set", name, key)
		}
	}
	if err := r.snap.validateArgs(name, args); err != nil {
		return err.Error()
	}
	return ""
}

// awaitingToolApproval reports whether a call of the turn waits for a person.
func (r *run) awaitingToolApproval() bool {
	for _, c := range r.st.Turn.ToolCalls {
		if c.State == flowv1.ToolCallPending && c.AwaitingApproval {
			return true
		}
	}
	return false
}

// stopTools ends the turn on a tool limit: a Policy failure, no outputs. The run
// counts as the pathway's turn, so an entry pathway does not run again at once.
func (r *run) stopTools(finish flowv1.FinishReason, msg string) {
	r.st.PathwayTurns++
	r.addFailure(flowv1.Failure{Source: flowv1.FailurePolicy, Component: "engine", Kind: flowv1.FailurePolicyKind, Message: msg})
	r.st.LastTurn.FinishReason = finish
}

// toolFailure is the typed failure of a call that did not succeed.
func toolFailure(c *flowv1.ToolCallProgress) flowv1.Failure {
	kind := flowv1.FailureException
	if c.State == flowv1.ToolCallFailed && c.DurationMs == 0 {
		kind = flowv1.FailureValidation
	}
	if c.State == flowv1.ToolCallRejected {
		kind = flowv1.FailurePolicyKind
	}
	return flowv1.Failure{Source: flowv1.FailureTool, Component: c.Tool, Kind: kind, Message: cmp.Or(c.Error, "tool call "+string(c.State))}
}

// applyToolAnswer applies the journaled answer to call c, when the pending effect is
// that answer. It reports whether it did.
func (r *run) applyToolAnswer(c *flowv1.ToolCallProgress) bool {
	p := r.pending
	if p == nil || p.Kind != flowv1.EffectCallTool || p.ToolCall != c.ID {
		return false
	}
	r.pending = nil
	u := p.Result.Usage
	if q := p.Result.Elicitation; q != nil {
		// No answer yet: the server asked the user for input (elicit.go).
		r.addUsage(u)
		r.askedForInput(c, q)
		r.syncToolCall(c)
		return true
	}
	u.ToolCalls++ // the call was made: its answer, result or failure, is applied
	r.addUsage(u)
	c.DurationMs = p.Result.DurationMs
	if f := p.Result.Failure; f != nil && c.SentAt != nil && lostAnswer(f) {
		// The request may have reached a server that does not honour the key.
		c.State, c.Error = flowv1.ToolCallOutcomeUnknown, truncate.Bytes(fmt.Sprintf("sent at %s, no answer: %s", c.SentAt.UTC().Format(time.RFC3339), f.Message), 1024, "")
	} else if f != nil {
		c.State, c.Error = flowv1.ToolCallFailed, truncate.Bytes(f.Message, 1024, "")
	} else {
		r.settleDone(c, p.Result.ToolResult.DeepCopy())
	}
	r.syncToolCall(c)
	return true
}

// waitTool is the CallTool effect of the pending call c. When the Session's budget
// of tool calls is used up, the call is not made: the Session stalls with the turn
// in progress and c pending, to be made once spec.limits raises the budget.
func (r *run) waitTool(c *flowv1.ToolCallProgress, ctx map[string]any) stageResult {
	r.pending = nil // a journaled answer to another question is stale
	if why, over := r.toolCallsSpent(); over {
		return r.stallOnBudget(why)
	}
	args, _ := decodeJSON(c.Args)
	req := agent.ToolRequest{ID: c.ID, Tool: c.Tool, Args: orEmptyMap(args), IdempotencyKey: c.IdempotencyKey,
		ApprovedBy: c.ApprovedBy, Pathway: r.st.CurrentPathway, Elicitations: answeredInput(c)}
	if t, ok := r.snap.tool(c.Tool); ok {
		if t.Builtin != nil {
			req.Builtin, req.Context = t.Builtin.Expression, ctx
		} else if s, ok := r.snap.toolServer(string(t.Server)); ok {
			req.Server, req.ServerTool = s.DeepCopy(), cmp.Or(t.ServerTool, string(t.Name))
			req.Sampling = r.snap.sampling(s)
		}
	}
	if why, over := r.samplingUnaffordable(req.Sampling); over {
		return r.stallOnBudget(why)
	}
	if w, over := r.noRoom(flowv1.EffectCallTool, toolWorstCase(req.Sampling)); over {
		return r.waitForBudget(w)
	}
	eff := newEffect(flowv1.EffectCallTool, nil, "", req)
	if r.unkeyed(c) {
		// Sent at most once: the mark is written before the request is made.
		c.SentAt, eff.WriteFirst = &r.now, true
	}
	return waitOn(eff)
}

// cached returns the Session's cached result of tool with args digest, nil for none.
func (r *run) cached(tool, digest string) *apiextensionsv1.JSON {
	for _, e := range r.st.ToolCache {
		if e.Tool == tool && e.ArgsDigest == digest {
			return e.Result
		}
	}
	return nil
}

// remember caches the result of call c for the rest of the Session.
func (r *run) remember(c *flowv1.ToolCallProgress) {
	st := r.st
	st.ToolCache = append(st.ToolCache, flowv1.ToolCacheEntry{Tool: c.Tool, ArgsDigest: c.ArgsDigest, Result: c.Result.DeepCopy()})
	if n := len(st.ToolCache) - maxToolCache; n > 0 {
		st.ToolCache = append([]flowv1.ToolCacheEntry(nil), st.ToolCache[n:]...)
	}
}

// syncToolCall records c in lastTurn.toolCalls (replacing its earlier state).
func (r *run) syncToolCall(c *flowv1.ToolCallProgress) {
	lt := r.st.LastTurn
	if lt == nil {
		return
	}
	for i := range lt.ToolCalls {
		if lt.ToolCalls[i].ID == c.ID {
			lt.ToolCalls[i] = c.ToolCallRecord
			return
		}
	}
	lt.ToolCalls = append(lt.ToolCalls, c.ToolCallRecord)
}

// toolRunFailed ends the pathway's run on a tool call that failed or was rejected: the
// run counts as the pathway's turn (an entry pathway is not run again at once, which
// would ask the same question unchanged), and the failure routes like any failed run:
// onFailure, else the fallback reply under Graceful.
func (r *run) toolRunFailed(f flowv1.Failure) stageResult {
	r.st.PathwayTurns++
	return r.executionFailed(f)
}
