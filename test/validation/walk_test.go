package validation

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
	"github.com/journeyops/journey-operator/internal/engine/match"
	"github.com/journeyops/journey-operator/internal/expr"
)

// walk runs a sample journey turn by turn with the builtin provider. It is a small
// reference reading of DESIGN.md for the sample stories, not the engine.
type walk struct {
	t         *testing.T
	s         sample
	cur       string
	stack     []string
	iteration int32
	ctx       map[string]any
	phase     string
	pending   string // the destination of a decision awaiting approval
	turns     []walkTurn
}

type walkTurn struct {
	trigger    string // Message, Entry, Outcome
	transition string // the global transition the message took, if any
	ran        string // the pathway that ran
	reply      string
}

func newWalk(t *testing.T, s sample) *walk {
	w := &walk{t: t, s: s, iteration: 1, ctx: map[string]any{}, phase: "Running"}
	if ic := s.session.Spec.InitialContext; ic != nil {
		if err := json.Unmarshal(ic.Raw, &w.ctx); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *walk) start() { w.enter(string(w.s.journey.Spec.EntryPathway)) }

// enter moves into pathway p and runs it at once when it runs on entry.
func (w *walk) enter(p string) {
	w.t.Helper()
	spec, ok := w.s.pathways[p]
	if !ok {
		w.t.Fatalf("no pathway %q", p)
	}
	w.cur, w.phase = p, "WaitingForInput"
	if spec.RunOn == flowv1.RunOnEntry {
		w.phase = "Running"
		w.run("Entry", "", "")
	}
}

// message processes one user message: global transitions, then the pathway.
func (w *walk) message(text string) walkTurn {
	w.t.Helper()
	if w.phase != "WaitingForInput" {
		w.t.Fatalf("message %q in phase %s", text, w.phase)
	}
	tr := w.route(text)
	if tr != nil {
		for _, u := range tr.ContextUpdate {
			w.update(u)
		}
		if rb := w.s.pathways[tr.To].ReturnBehavior; rb != nil && rb.Type != "None" {
			w.stack = append(w.stack, w.cur)
			if max := w.s.journey.Spec.Limits.MaxPathwayDepth; max > 0 && len(w.stack) > int(max) {
				w.t.Fatalf("stack overflow: %v", w.stack)
			}
		}
		w.cur = tr.To
	}
	name := ""
	if tr != nil {
		name = string(tr.Name)
	}
	w.phase = "Running"
	return w.run("Message", text, name)
}

// route returns the global transition a message takes: from the current pathway or
// "*", highest priority first, ties in declaration order.
func (w *walk) route(text string) *flowv1.GlobalTransition {
	var cands []flowv1.GlobalTransition
	for _, tr := range w.s.journey.Spec.Transitions {
		if tr.From == w.cur || tr.From == "*" || tr.From == "" {
			cands = append(cands, tr)
		}
	}
	slices.SortStableFunc(cands, func(a, b flowv1.GlobalTransition) int { return int(b.Priority - a.Priority) })
	for _, tr := range cands {
		switch {
		case tr.Trigger.Intent != nil:
			if match.Index(text, tr.Trigger.Intent.Patterns) >= 0 {
				return &tr
			}
		case tr.Trigger.Condition != "":
			ok, err := expr.Bool(string(tr.Trigger.Condition), w.vars(text, nil))
			if err != nil {
				w.t.Fatalf("transition %s: %v", tr.Name, err)
			}
			if ok {
				return &tr
			}
		}
	}
	return nil
}

func (w *walk) update(u flowv1.ContextUpdate) {
	var v any
	switch {
	case u.From != "":
		v = w.ctx[u.From]
	case u.Value != nil:
		if err := json.Unmarshal(u.Value.Raw, &v); err != nil {
			w.t.Fatal(err)
		}
	}
	switch u.Op {
	case flowv1.ContextAppend:
		list, _ := w.ctx[u.Field].([]any)
		w.ctx[u.Field] = appendNew(list, v)
	default:
		w.ctx[u.Field] = v
	}
	w.normalize()
}

func (w *walk) vars(message string, outputs map[string]any) expr.Vars {
	return expr.Vars{Context: w.ctx, Message: message, Outputs: outputs, Session: builtin.SessionVars(w.session())}
}

func (w *walk) session() agent.SessionInfo {
	return agent.SessionInfo{Name: w.s.session.Name, Pathway: w.cur, Iteration: w.iteration}
}

// run runs the current pathway for one turn and follows its outcome.
func (w *walk) run(trigger, message, transition string) walkTurn {
	w.t.Helper()
	spec := w.s.pathways[w.cur]
	resp, err := builtin.Run(agent.PathwayRequest{
		Pathway: w.cur, Spec: &spec, Message: message, Context: w.ctx, Session: w.session(),
	})
	if err != nil {
		w.t.Fatalf("pathway %s: %v", w.cur, err)
	}
	turn := walkTurn{trigger: trigger, transition: transition, ran: w.cur, reply: resp.Reply}
	w.turns = append(w.turns, turn)
	w.accumulate(spec, resp.Outputs)
	if !resp.Complete {
		w.phase = "WaitingForInput"
		return turn
	}
	w.completed(spec, resp.ResultType, resp.Outputs)
	return turn
}

// outcome applies an External executor's outcome for the current pathway and iteration.
func (w *walk) outcome(o flowv1.ExternalOutcome) {
	w.t.Helper()
	if string(o.Pathway) != w.cur || o.Iteration != w.iteration {
		w.t.Fatalf("outcome for %s/%d while in %s/%d", o.Pathway, o.Iteration, w.cur, w.iteration)
	}
	var data map[string]any
	if o.Data != nil {
		if err := json.Unmarshal(o.Data.Raw, &data); err != nil {
			w.t.Fatal(err)
		}
	}
	spec := w.s.pathways[w.cur]
	w.turns = append(w.turns, walkTurn{trigger: "Outcome", ran: w.cur, reply: o.Message})
	w.accumulate(spec, data)
	w.completed(spec, o.ResultType, data)
}

func (w *walk) accumulate(spec flowv1.PathwaySpec, outputs map[string]any) {
	for _, k := range spec.Accumulate {
		if v, ok := outputs[k]; ok {
			w.ctx[k] = merge(w.ctx[k], v)
		}
	}
	w.normalize()
}

// normalize round-trips the context through JSON, as status.context does.
func (w *walk) normalize() {
	data, err := json.Marshal(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	w.ctx = map[string]any{}
	if err := json.Unmarshal(data, &w.ctx); err != nil {
		w.t.Fatal(err)
	}
}

// completed follows a complete turn: a detour returns, else the outcome transition,
// else next, else the journey completes.
func (w *walk) completed(spec flowv1.PathwaySpec, rt flowv1.ResultType, outputs map[string]any) {
	w.t.Helper()
	if len(w.stack) > 0 && spec.ReturnBehavior != nil {
		w.cur, w.stack = w.stack[len(w.stack)-1], w.stack[:len(w.stack)-1]
		w.phase = "WaitingForInput"
		return
	}
	ot := outcomeTransitions(spec)[map[flowv1.ResultType]string{
		flowv1.ResultSuccess: "onSuccess", flowv1.ResultFailure: "onFailure",
		flowv1.ResultPartialSuccess: "onPartialSuccess", flowv1.ResultUnclear: "onUnclear",
	}[rt]]
	switch {
	case ot != nil && ot.Action == flowv1.ActionClose:
		w.phase = "Completed"
	case ot != nil && ot.To != "":
		w.move(string(ot.To), ot.Action)
	case ot != nil && ot.Decision != nil:
		w.decide(ot.Decision, outputs)
	case spec.Next != "":
		w.move(string(spec.Next), "")
	default:
		w.phase = "Completed"
	}
}

func (w *walk) decide(d *flowv1.Decision, outputs map[string]any) {
	w.t.Helper()
	dest, conf, action := "", 0.0, d.Action
	for _, r := range d.Rules {
		ok, err := expr.Bool(string(r.When), w.vars("", outputs))
		if err != nil {
			w.t.Fatalf("rule %q: %v", r.When, err)
		}
		if ok {
			dest, conf = string(r.To), parseConfidence(w.t, r.Confidence, 1)
			if r.Action != "" {
				action = r.Action
			}
			break
		}
	}
	if dest == "" {
		spec := flowv1.AgentSpec{}
		for _, a := range w.s.journey.Spec.Agents {
			if a.Name == d.Agent {
				spec = a
			}
		}
		resp := builtin.Decide(agent.DecisionRequest{Decision: d}, builtin.Confidence(spec))
		dest, conf = resp.Destination, resp.Confidence
	}
	auto, approval := 0.8, 0.6
	if th := d.ConfidenceThresholds; th != nil {
		auto = parseConfidence(w.t, th.AutoAdvance, auto)
		approval = parseConfidence(w.t, th.RequireApproval, approval)
	}
	switch {
	case conf >= auto:
		w.move(dest, action)
	case conf >= approval:
		w.phase, w.pending = "AwaitingApproval", dest
	case w.s.journey.Spec.EscalationPathway != "":
		w.move(string(w.s.journey.Spec.EscalationPathway), "")
	default:
		w.phase = "Escalated"
	}
}

func (w *walk) approve() {
	w.t.Helper()
	if w.phase != "AwaitingApproval" {
		w.t.Fatalf("approve in phase %s", w.phase)
	}
	dest := w.pending
	w.pending = ""
	w.move(dest, "")
}

func (w *walk) move(dest string, action flowv1.Action) {
	w.t.Helper()
	if action == flowv1.ActionJumpBack {
		w.iteration++
	}
	if len(w.turns) > 100 {
		w.t.Fatalf("more than 100 turns: %v", w.turns)
	}
	w.enter(dest)
}

func (w *walk) assertPath(want ...string) {
	w.t.Helper()
	var got []string
	for _, turn := range w.turns {
		got = append(got, turn.ran)
	}
	if !slices.Equal(got, want) {
		w.t.Fatalf("pathways run: %v\nwant %v", got, want)
	}
	for _, turn := range w.turns {
		w.t.Logf("[%s] %s", turn.ran, turn.reply)
	}
}

func (w *walk) assertDone(phase string) {
	w.t.Helper()
	if w.phase != phase {
		w.t.Fatalf("phase %s in %s, want %s", w.phase, w.cur, phase)
	}
}

func parseConfidence(t *testing.T, c flowv1.Confidence, def float64) float64 {
	if c == "" {
		return def
	}
	f, err := strconv.ParseFloat(string(c), 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// merge is the accumulate rule: lists append without duplicates, objects deep-merge,
// anything else replaces.
func merge(old, v any) any {
	switch nv := v.(type) {
	case []any:
		if ol, ok := old.([]any); ok {
			for _, x := range nv {
				ol = appendNew(ol, x)
			}
			return ol
		}
	case map[string]any:
		if om, ok := old.(map[string]any); ok {
			out := map[string]any{}
			for k, x := range om {
				out[k] = x
			}
			for k, x := range nv {
				out[k] = merge(om[k], x)
			}
			return out
		}
	}
	return v
}

func appendNew(list []any, v any) []any {
	for _, x := range list {
		if reflect.DeepEqual(x, v) {
			return list
		}
	}
	return append(list, v)
}
