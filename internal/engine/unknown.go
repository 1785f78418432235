package engine

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// Outcome unknown. A server whose idempotency is None does a call's work again when
// the call is sent again, so a call to it is sent at most once on its own: waitTool
// marks it sent (sentAt) in the status it returns with the CallTool effect, and that
// status is written before the request is made (Effect.WriteFirst). A call found sent
// with no answer recorded (the manager stopped after sending, the step was abandoned,
// the connection was lost or timed out) has an unknown outcome. It is never sent
// again on its own; the tool's onUnknown decides what happens:
//
//   - AskHuman: the Session stalls (Stalled, reason OutcomeUnknown, its message naming
//     kubectl journey answer) with the turn kept in progress, until an Answer
//     intervention names the call: Done (with its result), NotDone (it is sent again,
//     with the same key), or Fail (the model is told it failed);
//   - Probe: the probe tool (read-only) is called with the call's key; its answer
//     {"done": true, "result": ...} or {"done": false} settles the call as Done or
//     sends it again; any other answer leaves it to a person, as AskHuman;
//   - Fail: the call fails, and the model is told its outcome is unknown.

// unkeyed reports whether call c goes to a server that does not honour idempotency
// keys.
func (r *run) unkeyed(c *flowv1.ToolCallProgress) bool {
	t, ok := r.snap.tool(c.Tool)
	if !ok || t.Server == "" {
		return false
	}
	s, ok := r.snap.toolServer(string(t.Server))
	return ok && s.Unkeyed()
}

// lostAnswer reports whether answer f of a call to a server without idempotency keys
// leaves its outcome unknown: the request may have reached the server (a timeout, a
// lost connection), as opposed to an answer the tool gave.
func lostAnswer(f *flowv1.Failure) bool {
	return f != nil && (f.Source == flowv1.FailureTransport || f.Kind == flowv1.FailureTimeout)
}

// unknownOutcome settles call c when its outcome is unknown: a call marked sent whose
// answer was never recorded becomes OutcomeUnknown (counted as made), and the tool's
// onUnknown acts on it. wait is true when the step ends on c (res says how: a probe
// to make, a person to wait for); otherwise c is Done, Failed, or Pending to be sent
// again, and the caller goes on with it. react says a model is told of a failure as
// the call's result (ReAct), rather than the run failing on it (builtin tool calls).
func (r *run) unknownOutcome(c *flowv1.ToolCallProgress, react bool) (res stageResult, wait bool) {
	if c.State == flowv1.ToolCallPending && c.SentAt != nil {
		r.markUnknown(c, fmt.Sprintf("sent at %s, its answer was never recorded", c.SentAt.UTC().Format(time.RFC3339)))
	}
	if c.State != flowv1.ToolCallOutcomeUnknown {
		return turnOver, false
	}
	tool, _ := r.snap.tool(c.Tool)
	why := ""
	switch tool.UnknownAction() {
	case flowv1.OnUnknownFail:
		r.failUnknown(c, fmt.Sprintf("tool %s: the outcome of the call is unknown (%s); onUnknown is Fail", c.Tool, c.Error), react)
		return turnOver, false
	case flowv1.OnUnknownProbe:
		var probing bool
		if res, probing, why = r.probe(c, tool); probing || why == "" {
			return res, probing
		}
	}
	r.askHuman(c, why)
	return stageResult{pause: true}, true
}

// markUnknown makes c a call whose outcome is unknown, for why. The call was sent:
// it counts as a tool call made.
func (r *run) markUnknown(c *flowv1.ToolCallProgress, why string) {
	c.State, c.Error = flowv1.ToolCallOutcomeUnknown, truncate.Bytes(why, 1024, "")
	r.addUsage(flowv1.Usage{ToolCalls: 1})
	r.syncToolCall(c)
}

// failUnknown fails call c, whose outcome is unknown, with msg.
func (r *run) failUnknown(c *flowv1.ToolCallProgress, msg string, react bool) {
	c.State, c.Error = flowv1.ToolCallFailed, truncate.Bytes(msg, 1024, "")
	r.syncToolCall(c)
	if react {
		r.addFailure(toolFailure(c))
	}
}

// resend makes call c, whose outcome is unknown, a call to send again: same key,
// marked sent anew when it is.
func (r *run) resend(c *flowv1.ToolCallProgress) {
	c.State, c.Error, c.SentAt = flowv1.ToolCallPending, "", nil
	r.syncToolCall(c)
}

// settleDone makes call c Done with result.
func (r *run) settleDone(c *flowv1.ToolCallProgress, result *apiextensionsv1.JSON) {
	c.State, c.Error, c.Result = flowv1.ToolCallDone, "", result
	if c.Result == nil {
		c.Result = &apiextensionsv1.JSON{Raw: []byte("null")}
	}
	if t, ok := r.snap.tool(c.Tool); ok && t.Cache == flowv1.ToolCacheSession {
		r.remember(c)
	}
	r.syncToolCall(c)
}

// probeID is the id of the probe of call id.
func probeID(id string) string { return id + "/probe" }

// probe asks tool's probe whether call c was done, or applies its journaled answer.
// probing is true while the probe is made (res is its effect); otherwise the answer
// settled c (why is empty) or could not tell (why says so).
func (r *run) probe(c *flowv1.ToolCallProgress, tool *flowv1.Tool) (res stageResult, probing bool, why string) {
	id := probeID(c.ID)
	if p := r.pending; p != nil && p.Kind == flowv1.EffectCallTool && p.ToolCall == id {
		r.pending = nil
		r.addUsage(flowv1.Usage{ToolCalls: 1})
		return turnOver, false, r.applyProbe(c, p)
	}
	name := string(tool.Probe.Tool)
	t, ok := r.snap.tool(name)
	if !ok {
		return turnOver, false, fmt.Sprintf("probe tool %s is not declared in spec.tools", name)
	}
	req := agent.ToolRequest{ID: id, Tool: name, IdempotencyKey: c.IdempotencyKey + "/probe", Pathway: r.st.CurrentPathway,
		Args: map[string]any{"idempotencyKey": c.IdempotencyKey, "tool": cmp.Or(tool.ServerTool, string(tool.Name))}}
	if t.Builtin != nil {
		req.Builtin, req.Context = t.Builtin.Expression, r.context()
	} else if s, ok := r.snap.toolServer(string(t.Server)); ok {
		req.Server, req.ServerTool = s.DeepCopy(), cmp.Or(t.ServerTool, string(t.Name))
	}
	eff := newEffect(flowv1.EffectCallTool, nil, "", req)
	eff.ReadOnly = true
	r.pending = nil
	return waitOn(eff), true, ""
}

// applyProbe applies the probe's answer p to call c: {"done": true, "result": ...}
// makes it Done (with result, else the whole answer), {"done": false} sends it again.
// why says why the answer cannot tell, "" when it settled c.
func (r *run) applyProbe(c *flowv1.ToolCallProgress, p *flowv1.EffectRecord) string {
	probe := p.Agent
	if f := p.Result.Failure; f != nil {
		return fmt.Sprintf("probe %s failed: %s", probe, f.Message)
	}
	var answer struct {
		Done   *bool            `json:"done"`
		Result *json.RawMessage `json:"result"`
	}
	var raw []byte
	if p.Result.ToolResult != nil {
		raw = p.Result.ToolResult.Raw
	}
	if err := json.Unmarshal(raw, &answer); err != nil || answer.Done == nil {
		return fmt.Sprintf("probe %s answered %s, which says neither done true nor done false", probe, truncate.Bytes(string(raw), 256, "..."))
	}
	if !*answer.Done {
		r.resend(c)
		return ""
	}
	result := &apiextensionsv1.JSON{Raw: raw}
	if answer.Result != nil {
		result = &apiextensionsv1.JSON{Raw: *answer.Result}
	}
	r.settleDone(c, result)
	return ""
}

// askHuman stalls the Session on call c, whose outcome is unknown, until an Answer
// intervention names it; why, when set, says why a probe could not tell.
func (r *run) askHuman(c *flowv1.ToolCallProgress, why string) {
	msg := fmt.Sprintf("The outcome of tool call %s is unknown: %s", c.ID, unknownPreview(c))
	if why != "" {
		msg += "; " + why
	}
	name := cmp.Or(r.in.SessionName, "SESSION")
	msg += fmt.Sprintf("; say what became of it: kubectl journey answer %s %s --done RESULT (it was done), --not-done (send it again) or --fail", name, c.ID)
	setCondition(r.st, flowv1.ConditionStalled, metav1.ConditionTrue, flowv1.ReasonOutcomeUnknown, truncate.Bytes(msg, 32768, ""), r.now)
}

// unknownPreview shows a call whose outcome is unknown: tool, arguments (cut), key and
// when it was sent.
func unknownPreview(c *flowv1.ToolCallProgress) string {
	sent := "never marked sent"
	if c.SentAt != nil {
		sent = "sent at " + c.SentAt.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%s, idempotency key %s, %s, no answer recorded", toolPreview(c), c.IdempotencyKey, sent)
}

// answerCall applies an Answer intervention: a person says what became of the tool
// call it names, whose outcome is unknown: Done (with the answer's content, else its
// result text, as the call's result), NotDone (sent again, same key) or Fail. The
// Session, stalled on the call, goes on.
func (r *run) answerCall(iv *flowv1.Intervention) string {
	st := r.st
	c := st.TurnToolCall(iv.Call)
	if c == nil {
		return fmt.Sprintf("tool call %q is not a call of the turn in progress%s", iv.Call, r.waitingCalls())
	}
	if c.State != flowv1.ToolCallOutcomeUnknown && c.State != flowv1.ToolCallAwaitingInput {
		return fmt.Sprintf("tool call %s is %s: only a call whose outcome is unknown or whose server asked for input takes an answer%s", c.ID, c.State, r.waitingCalls())
	}
	if why := c.AnswerFits(iv.Outcome, iv.Content); why != "" {
		return why + r.waitingCalls()
	}
	if c.State == flowv1.ToolCallAwaitingInput {
		r.answerInput(c, iv)
		return ""
	}
	what := ""
	switch iv.Outcome {
	case flowv1.AnswerDone:
		result := iv.Content
		if result == nil {
			result = toJSONValue(iv.Result)
		}
		r.settleDone(c, result.DeepCopy())
		what = fmt.Sprintf("answered tool call %s: done", c.ID)
	case flowv1.AnswerNotDone:
		r.resend(c)
		what = fmt.Sprintf("answered tool call %s: not done, sent again", c.ID)
	case flowv1.AnswerFail:
		msg := fmt.Sprintf("tool %s: the outcome of the call was unknown; %s answered that it failed", c.Tool, who(iv.By))
		if iv.Reason != "" {
			msg += ": " + iv.Reason
		}
		p := r.current()
		r.failUnknown(c, msg, p == nil || p.Builtin == nil || len(p.Builtin.ToolCalls) == 0)
		what = fmt.Sprintf("answered tool call %s: failed", c.ID)
	default:
		return fmt.Sprintf("outcome %q is not one a call whose outcome is unknown takes (Done, NotDone or Fail)", iv.Outcome)
	}
	if reason, _ := Blocked(st); reason == flowv1.ReasonOutcomeUnknown {
		// Another call still unknown stalls the turn again when it comes to it.
		apimeta.RemoveStatusCondition(&st.Conditions, flowv1.ConditionStalled)
	}
	r.recordIntervention(iv, st.CurrentPathway, "", what)
	return ""
}

// waitingCalls names the calls of the turn that wait for an answer, for a refusal.
func (r *run) waitingCalls() string {
	var ids []string
	for c := range r.st.AnswerableToolCalls() {
		ids = append(ids, c.ID)
	}
	switch len(ids) {
	case 0:
		return " (no call waits for an answer)"
	case 1:
		return " (call " + ids[0] + " waits for one)"
	}
	return fmt.Sprintf(" (calls %v wait for one)", ids)
}

// toJSONValue is s as a JSON string.
func toJSONValue(s string) *apiextensionsv1.JSON {
	raw, _ := json.Marshal(s)
	return &apiextensionsv1.JSON{Raw: raw}
}
