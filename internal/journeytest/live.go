package journeytest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/revision"
	"github.com/journeyops/journey-operator/internal/revision/revdata"
	protocol "github.com/journeyops/journey-operator/internal/step"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// LiveSession is a Session read from the cluster with the Journey revision it is
// pinned to.
type LiveSession struct {
	Session *flowv1.Session
	// Revision is the name of the ControllerRevision (status.journeyRevision), Raw its data.
	Revision string
	Raw      []byte
}

// Fetch reads a Session and the ControllerRevision it is pinned to.
func Fetch(ctx context.Context, c client.Reader, key types.NamespacedName) (*LiveSession, error) {
	s := &flowv1.Session{}
	if err := c.Get(ctx, key, s); err != nil {
		return nil, fmt.Errorf("getting session %q in namespace %q: %w", key.Name, key.Namespace, err)
	}
	name := s.Status.JourneyRevision
	if name == "" {
		return nil, fmt.Errorf("session %q has not started: status.journeyRevision is empty", key.Name)
	}
	raw, err := revdata.Read(ctx, c, key.Namespace, name)
	if err != nil {
		return nil, fmt.Errorf("getting the session's journey revision %s: %w", name, err)
	}
	return &LiveSession{Session: s, Revision: name, Raw: raw}, nil
}

// journal returns the agent answers the Session holds: status.journal, oldest first,
// and status.pendingEffect when a controller that keeps no journal wrote it. complete
// says the journal holds every answer the Session was given.
func (l *LiveSession) journal() (records []flowv1.EffectRecord, complete bool) {
	st := &l.Session.Status
	records = append(records, st.Journal...)
	if p := st.PendingEffect; p != nil && (len(records) == 0 || records[len(records)-1].ID != p.ID) {
		records = append(records, *p)
	}
	return records, len(st.Journal) > 0 && st.JournalDropped == 0
}

// journalAnswers answers effects from journaled records with the same kind and input
// hash, verbatim, each record once, oldest first; builtin tools are computed. used
// collects the records handed out, per step.
type journalAnswers struct {
	records  []flowv1.EffectRecord
	uid      string // the Session's, which its tool calls' idempotency keys carry
	taken    []bool
	complete bool
	step     int
	used     map[int][]flowv1.EffectRecord
	// ids maps the replay's names of tool calls to the names the Session gave them,
	// where the two differ.
	ids map[string]string
}

func (j *journalAnswers) answer(eff *engine.Effect) (reply, error) {
	if j.taken == nil {
		j.taken = make([]bool, len(j.records))
	}
	i := j.find(eff)
	if isBuiltinTool(eff) {
		// A builtin tool is computed, as the controller and a journey test compute it:
		// its journaled answer is not handed out (a recorded test carries none), only
		// the Session's name for the call is learnt from it.
		if i >= 0 {
			j.taken[i] = true
			j.rename(eff, &j.records[i])
		}
		return computeTool(eff), nil
	}
	if i < 0 {
		return reply{}, &MissingAnswerError{Step: j.step, Effect: protocol.Describe(eff), Kind: eff.Kind, Journal: true, Complete: j.complete}
	}
	j.taken[i] = true
	rec := j.records[i].DeepCopy()
	rec.InputHash = eff.InputHash
	if eff.Tool != nil {
		j.rename(eff, rec)
		rec.ToolCall = eff.Tool.ID
	}
	j.used[j.step] = append(j.used[j.step], *rec)
	return reply{record: rec}, nil
}

// find returns the oldest record not taken yet that answers eff, or -1: a record with
// eff's kind and input hash; else, as the replay numbers its steps anew and so names
// its tool calls otherwise than the Session did, the same call (same tool and
// arguments), or a question that tells the model of the same calls under the
// Session's names for them. No server is called.
func (j *journalAnswers) find(eff *engine.Effect) int {
	matches := []func(*flowv1.EffectRecord) bool{
		func(r *flowv1.EffectRecord) bool { return r.Kind == eff.Kind && r.InputHash == eff.InputHash },
	}
	if eff.Kind == flowv1.EffectCallTool && eff.Tool != nil {
		matches = append(matches, func(r *flowv1.EffectRecord) bool { return engine.SameToolCall(r, j.uid, *eff.Tool) })
	}
	if len(j.ids) > 0 {
		matches = append(matches, func(r *flowv1.EffectRecord) bool { return engine.SameQuestion(r, eff, j.ids) })
	}
	for _, match := range matches {
		for i := range j.records {
			if !j.taken[i] && match(&j.records[i]) {
				return i
			}
		}
	}
	return -1
}

// rename remembers the Session's name for the tool call eff when it is another one
// than the replay's.
func (j *journalAnswers) rename(eff *engine.Effect, r *flowv1.EffectRecord) {
	if eff.Tool == nil || r.ToolCall == eff.Tool.ID {
		return
	}
	if j.ids == nil {
		j.ids = map[string]string{}
	}
	j.ids[eff.Tool.ID] = r.ToolCall
}

// simulation is a live Session's inputs run through today's engine offline.
type simulation struct {
	live     *LiveSession
	data     *RevisionData
	steps    []Step
	results  []StepResult
	answers  map[int][]flowv1.EffectRecord
	stopped  *StepResult // the step that could not run, if any
	status   *flowv1.SessionStatus
	leftover []Step // inputs not simulated after a stop
}

// simulate sends the live Session's inputs (see inputsOf) one at a time, in the order
// the engine takes them (an approval when a decision waits, an outcome when an
// External pathway waits, else the next message), settling after each.
func simulate(l *LiveSession) (*simulation, error) {
	data, err := revdata.Decode(l.Revision, l.Raw)
	if err != nil {
		return nil, err
	}
	snap, err := revision.Compile(l.Revision, l.Raw)
	if err != nil {
		return nil, err
	}
	sess := l.Session
	in, err := inputsOf(sess)
	if err != nil {
		return nil, err
	}
	spec := flowv1.SessionSpec{JourneyRef: sess.Spec.JourneyRef}
	if sess.Spec.InitialContext != nil {
		spec.InitialContext = sess.Spec.InitialContext.DeepCopy()
	}
	start := sess.CreationTimestamp.Time
	if start.IsZero() {
		start = DefaultStart
	}
	s := newSession(snap, sess.Name, string(sess.UID), start, spec)
	sim := &simulation{live: l, data: data, answers: map[int][]flowv1.EffectRecord{}}
	records, complete := l.journal()
	ja := &journalAnswers{records: records, uid: string(sess.UID), complete: complete, used: sim.answers}

	msgs, outs, apprs := in.messages, in.outcomes, in.approvals
	next := func() (Step, bool) {
		awaiting := s.st.Phase.AwaitsApproval()
		p, _ := snap.Pathway(s.st.CurrentPathway)
		external := p.IsExternal()
		var step Step
		switch {
		case awaiting && len(apprs) > 0:
			step, apprs = approvalStep(apprs[0]), apprs[1:]
		case external && len(outs) > 0:
			step, outs = outcomeStep(outs[0]), outs[1:]
		case len(msgs) > 0:
			step, msgs = messageStep(msgs[0], len(in.messages)-len(msgs)+1), msgs[1:]
		case len(outs) > 0:
			step, outs = outcomeStep(outs[0]), outs[1:]
		case len(apprs) > 0:
			step, apprs = approvalStep(apprs[0]), apprs[1:]
		default:
			return Step{}, false
		}
		return step, true
	}
	steps := []Step{{Name: "created"}}
	for {
		st, ok := next()
		if !ok {
			break
		}
		steps = append(steps, st)
	}
	// When the Session was suspended or cancelled is not kept: after its inputs.
	if sess.Spec.Suspend {
		yes := true
		steps = append(steps, Step{Suspend: &yes})
	}
	if sess.Spec.Cancel {
		steps = append(steps, Step{Cancel: true})
	}
	for i := range steps {
		ja.step = i + 1
		sr := s.run(i, &steps[i], ja)
		sim.results = append(sim.results, sr)
		if sr.Err != nil {
			sim.stopped = &sim.results[len(sim.results)-1]
			sim.leftover = steps[i+1:]
			break
		}
	}
	sim.steps = steps
	sim.status = s.st
	return sim, nil
}

func messageStep(m flowv1.Message, n int) Step {
	in := &MessageInput{Text: m.Text}
	if m.ID != fmt.Sprintf("m%d", n) {
		in.ID = m.ID
	}
	return Step{Message: in}
}

func outcomeStep(o flowv1.ExternalOutcome) Step {
	in := &OutcomeInput{Pathway: string(o.Pathway), Iteration: o.Iteration, ResultType: o.ResultType, Message: o.Message}
	if o.Data != nil {
		in.Data = o.Data.DeepCopy()
	}
	return Step{Outcome: in}
}

// approvalStep approves the decision waiting when the step runs: decision ids are
// d-<status.step>, and a Session created with its inputs numbers its steps differently.
func approvalStep(a flowv1.Approval) Step {
	approve := a.Approves()
	return Step{Approval: &ApprovalInput{Approve: &approve, Destination: string(a.Destination), By: a.By, Reason: a.Reason}}
}

// sameEntry compares history entries without their time and step numbers.
func sameEntry(a, b flowv1.HistoryEntry) bool {
	a.Time, b.Time = metav1.Time{}, metav1.Time{}
	a.Step, b.Step = 0, 0
	return reflect.DeepEqual(a, b)
}

// historyDivergence compares the simulated history with the live one (which keeps only
// the last limits.maxHistory entries: the simulated tail is compared). It returns the
// index in sim of the first entry that differs, or -1.
func historyDivergence(sim, live []flowv1.HistoryEntry) (int, string) {
	offset := 0
	if len(sim) > len(live) && len(live) > 0 {
		// The live history lost its oldest entries: align the ends.
		offset = len(sim) - len(live)
	}
	for i := 0; i < max(len(sim)-offset, len(live)); i++ {
		switch {
		case i >= len(live):
			return offset + i, fmt.Sprintf("today's engine takes %s, the Session took no further transition", describeEntry(sim[offset+i]))
		case offset+i >= len(sim):
			return len(sim), fmt.Sprintf("the Session took %s, today's engine takes no further transition", describeEntry(live[i]))
		case !sameEntry(sim[offset+i], live[i]):
			return offset + i, fmt.Sprintf("the Session took %s, today's engine takes %s", describeFull(live[i]), describeFull(sim[offset+i]))
		}
	}
	return -1, ""
}

func describeFull(e flowv1.HistoryEntry) string {
	s := describeEntry(e)
	s += fmt.Sprintf(" [iteration %d, source %s", e.Iteration, orDash(string(e.Source)))
	if e.Confidence != "" {
		s += ", confidence " + string(e.Confidence)
	}
	if e.MessageID != "" {
		s += ", message " + e.MessageID
	}
	if e.Reason != "" {
		s += ", reason " + truncate.Line(e.Reason, 80)
	}
	return s + "]"
}

// statusDivergence compares the fields of the final status a person reads.
func statusDivergence(live, sim *flowv1.SessionStatus) string {
	type field struct {
		name      string
		live, sim any
	}
	lastTurn := func(st *flowv1.SessionStatus) (string, string) {
		if st.LastTurn == nil {
			return "", ""
		}
		return string(st.LastTurn.FinishReason), st.LastTurn.AssistantText
	}
	lf, lt := lastTurn(live)
	sf, stx := lastTurn(sim)
	stalled := func(st *flowv1.SessionStatus) string {
		if c := apimeta.FindStatusCondition(st.Conditions, flowv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
			return c.Reason
		}
		return ""
	}
	decision := func(st *flowv1.SessionStatus) any {
		if d := st.LastDecision; d != nil {
			return map[string]any{"transition": d.Transition, "from": d.From, "to": d.To, "action": d.Action, "source": d.Source, "state": d.State, "confidence": d.Confidence}
		}
		return nil
	}
	fields := []field{
		{"phase", live.Phase, sim.Phase},
		{"currentPathway", live.CurrentPathway, sim.CurrentPathway},
		{"iteration", live.Iteration, sim.Iteration},
		{"pathwayStack", live.PathwayStack, sim.PathwayStack},
		{"confidence", live.Confidence, sim.Confidence},
		{"processedMessages", live.ProcessedMessages, sim.ProcessedMessages},
		{"processedOutcomes", live.ProcessedOutcomes, sim.ProcessedOutcomes},
		{"processedApprovals", live.ProcessedApprovals, sim.ProcessedApprovals},
		{"transitions", live.Transitions, sim.Transitions},
		{"lastTurn.finishReason", lf, sf},
		{"lastTurn.assistantText", lt, stx},
		{"lastTurn.toolCalls", lastToolCalls(live), lastToolCalls(sim)},
		{"lastDecision", decision(live), decision(sim)},
		{"Stalled reason", stalled(live), stalled(sim)},
		{"usage", live.Usage, sim.Usage},
	}
	for _, f := range fields {
		if !equalJSON(f.live, f.sim) {
			return fmt.Sprintf("status.%s: the Session has %s, today's engine gives %s", f.name, compactJSON(f.live), compactJSON(f.sim))
		}
	}
	var lc, sc any
	if live.Context != nil {
		_ = json.Unmarshal(live.Context.Raw, &lc)
	}
	if sim.Context != nil {
		_ = json.Unmarshal(sim.Context.Raw, &sc)
	}
	if p, a, b, ok := firstDifference("status.context", lc, sc); ok {
		return fmt.Sprintf("%s: the Session has %s, today's engine gives %s", p, describeValue(a), describeValue(b))
	}
	return ""
}

// lastToolCalls are the tool calls of the status's last turn, nil for none, without
// their ids: an id carries the step the call was planned at, and a replay numbers its
// steps anew.
func lastToolCalls(st *flowv1.SessionStatus) []flowv1.ToolCallRecord {
	if st.LastTurn == nil {
		return nil
	}
	var out []flowv1.ToolCallRecord
	for _, c := range st.LastTurn.ToolCalls {
		c.ID = ""
		out = append(out, c)
	}
	return out
}

type absent struct{}

func describeValue(v any) string {
	if _, ok := v.(absent); ok {
		return "nothing (absent)"
	}
	return compactJSON(v)
}

// firstDifference returns the first path (in key order) where two decoded JSON values
// differ.
func firstDifference(path string, a, b any) (string, any, any, bool) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := sortedKeys(am)
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := (path + "." + k)
			if !identifier.MatchString(k) {
				p = fmt.Sprintf("%s[%q]", path, k)
			}
			av, ina := am[k]
			bv, inb := bm[k]
			x, y := any(av), any(bv)
			if !ina {
				x = absent{}
			}
			if !inb {
				y = absent{}
			}
			if !ina || !inb {
				return p, x, y, true
			}
			if q, x, y, ok := firstDifference(p, av, bv); ok {
				return q, x, y, true
			}
		}
		return "", nil, nil, false
	}
	if !equalJSON(a, b) {
		return path, a, b, true
	}
	return "", nil, nil, false
}

func creation(s *flowv1.Session) string {
	if s.CreationTimestamp.IsZero() {
		return ""
	}
	return s.CreationTimestamp.UTC().Format(time.RFC3339)
}
