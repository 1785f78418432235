// Package rebuild replays a Session's steps on a journey revision offline: the
// Session's inputs (messages, External outcomes, approvals, and the interventions
// status.interventions records, applied or refused) are given to the pure engine in
// the order and at the steps the Session took them, and every agent and tool call is answered from the Session's
// journal, never made. The steps are numbered as the Session numbered them, so the
// questions, tool call ids and idempotency keys come out the same, and a journaled
// answer answers the question of the same step with the same input hash.
//
// It serves two acts on a Session: an Upgrade (does the Session's journal replay the
// same on the target revision? then it may move) and a fork (the source's status
// after a step, rebuilt with no call, and whether its steps replay the same on the
// fork's revision).
package rebuild

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// Source is a Session as a replay reads it: its identity (agents and CEL see its
// name; its tool calls' idempotency keys carry its UID), spec and status.
type Source struct {
	Name, UID string
	Created   time.Time
	Spec      *flowv1.SessionSpec
	Status    *flowv1.SessionStatus
	// Inputs are its messages, outcomes and approvals from the first ever sent (see
	// InputsOf).
	Inputs *Inputs
	// Revision is the compiled revision the Session runs on, when the replay is on
	// another one: a question the replay asks otherwise than the Session did (its
	// input hash differs) is still answered by the journal when the Session's
	// revision asks, at that step, the question the journal answers, and the two
	// differ only in what the agents never see (engine.Effect.QuestionHash).
	Revision *engine.Snapshot
}

// SourceOf is s as a replay reads it; it fails when s no longer holds some of its
// inputs (a *ConversationLostError).
func SourceOf(s *flowv1.Session) (Source, error) {
	in, err := InputsOf(s)
	if err != nil {
		return Source{}, err
	}
	return Source{Name: s.Name, UID: string(s.UID), Created: s.CreationTimestamp.Time, Spec: &s.Spec, Status: &s.Status, Inputs: in}, nil
}

// Result is a replay: the status it reached and its verdict.
type Result struct {
	// Status is the replayed status after the last step replayed: the Session's own
	// after step upTo when the replay reproduces.
	Status *flowv1.SessionStatus
	// Check says whether every step up to upTo reproduced, else the first that did
	// not.
	Check *engine.ReplayCheck
}

// maxSteps bounds a replay: the engine makes progress at every step, so this only
// guards against a defect.
const maxSteps = 100000

// Replay replays the steps of src up to upTo (its current step when 0) on snap, the
// compiled journey revision named revision. It fails, replaying nothing, when src
// cannot be replayed at all: a step it has not taken, inputs or journal answers it no
// longer holds, an intervention processed at a step it no longer records.
func Replay(snap *engine.Snapshot, revision string, src Source, upTo int64) (*Result, error) {
	live := src.Status
	if upTo == 0 {
		upTo = live.Step
	}
	if upTo > live.Step {
		return nil, fmt.Errorf("step %d is not a step session %s has taken (it is at step %d)", upTo, src.Name, live.Step)
	}
	if upTo < 1 {
		return nil, fmt.Errorf("session %s has taken no step yet", src.Name)
	}
	r, err := newReplay(snap, revision, src, upTo)
	if err != nil {
		return nil, err
	}
	r.run()
	return &Result{Status: r.st, Check: r.verdict()}, nil
}

// replay is one replay's state.
type replay struct {
	snap     *engine.Snapshot
	revision string
	src      Source
	live     *flowv1.SessionStatus
	upTo     int64

	spec  flowv1.SessionSpec // the inputs given so far
	st    *flowv1.SessionStatus
	taken []bool      // journal records handed out
	ivs   []processed // the interventions the Session processed, in order
	eager bool        // the Session took its first message in its first step

	diverged *engine.ReplayCheck
	in       engine.Input // the input of the step being replayed
}

func newReplay(snap *engine.Snapshot, revision string, src Source, upTo int64) (*replay, error) {
	spec, live := src.Spec, src.Status
	switch {
	case src.Inputs == nil:
		return nil, fmt.Errorf("session %s: its inputs were not read (SourceOf)", src.Name)
	case live.JournalDropped > 0:
		return nil, fmt.Errorf("session %s dropped its %d oldest journal answers (limits.maxJournal): a replay would have to call agents again", src.Name, live.JournalDropped)
	}
	r := &replay{snap: snap, revision: revision, src: src, live: live, upTo: upTo,
		st: &flowv1.SessionStatus{}, taken: make([]bool, len(live.Journal))}
	r.spec = flowv1.SessionSpec{JourneyRef: spec.JourneyRef, Limits: spec.Limits.DeepCopy()}
	if spec.InitialContext != nil {
		r.spec.InitialContext = spec.InitialContext.DeepCopy()
	}
	ivs, err := processedInterventions(src.Name, revision, spec, live)
	if err != nil {
		return nil, err
	}
	r.ivs = ivs
	r.eager = r.tookFirstMessage()
	return r, nil
}

// tookFirstMessage reports whether the Session's first step took its first message
// as well as starting it: the Session was created with the message in spec.messages
// (as kubectl create does with a manifest that has messages), so that step started
// its turn too. A Session created without messages takes its first message in a
// later step.
//
// The Session's record says so when the first step ended the turn or moved (an
// exchange or a history entry of step 1 with a message). Otherwise, when the first
// step made a call, the journaled answer tells: its question is the one the first
// step asks on the Session's revision (or the replay's) given the first message, or
// the one it asks without it (a pathway that runs on entry). When neither asks it
// (the revisions changed the question), a first step that only starts the Session
// makes no call, so the call was the message's.
func (r *replay) tookFirstMessage() bool {
	live := r.live
	if live.ProcessedMessages == 0 || len(r.src.Inputs.Messages) == 0 {
		return false
	}
	for _, h := range live.History {
		if h.Step == 1 && h.MessageID != "" {
			return true
		}
	}
	for _, x := range live.Transcript {
		if x.Step == 1 && x.MessageID != "" {
			return true
		}
	}
	var rec *flowv1.EffectRecord
	for i := range live.Journal {
		if live.Journal[i].Step == 1 {
			rec = &live.Journal[i]
			break
		}
	}
	if rec == nil {
		return false
	}
	asks := func(snap *engine.Snapshot, message bool) *engine.Effect {
		spec := r.spec
		if message {
			spec.Messages = r.src.Inputs.Messages[:1]
		}
		_, eff := engine.Step(snap, engine.Input{Spec: &spec, Status: &flowv1.SessionStatus{}, Now: r.timeAt(1),
			SessionName: r.nameAt(1), SessionUID: r.uidAt(1), CreationTime: r.src.Created})
		return eff
	}
	answers := func(eff *engine.Effect) bool {
		return eff != nil && eff.Kind == rec.Kind && eff.InputHash == rec.InputHash
	}
	revisions := []*engine.Snapshot{r.snap}
	if r.src.Revision != nil {
		revisions = []*engine.Snapshot{r.src.Revision, r.snap}
	}
	for _, snap := range revisions {
		switch {
		case answers(asks(snap, true)):
			return true
		case answers(asks(snap, false)):
			return false
		}
	}
	return asks(revisions[0], false) == nil
}

// processed is an intervention the Session processed: at which step, and whether it
// refused it.
type processed struct {
	flowv1.Intervention
	step    int64
	refused bool
}

// processedInterventions are the interventions the Session processed, in order, each
// with the step that processed it, from status.interventions (its records) and
// spec.interventions; history tells the step of an applied one whose record was
// dropped. A fork starts with its source's records up to the fork step: those come
// first (the source processed them; the fork counts only its own). It fails when one
// cannot be placed.
func processedInterventions(session, revision string, spec *flowv1.SessionSpec, live *flowv1.SessionStatus) ([]processed, error) {
	var from int64 // the fork step: records and history entries up to it are the source's
	if spec.ForkOf != nil {
		from = spec.ForkOf.Step
	}
	var out []processed
	records := live.Interventions
	for len(records) > 0 && records[0].Step <= from {
		out = append(out, processed{Intervention: *records[0].Intervention.DeepCopy(), step: records[0].Step, refused: records[0].Result == flowv1.InterventionRefused})
		records = records[1:]
	}
	var history []flowv1.HistoryEntry
	for _, h := range live.History {
		if h.Step > from {
			history = append(history, h)
		}
	}
	step := map[string]int64{}
	refused := map[string]bool{}
	for _, h := range history {
		if h.Intervention != "" && h.Transition != "" {
			step[h.Transition] = h.Step
		}
	}
	for _, rec := range records {
		step[rec.Intervention.ID] = rec.Step
		refused[rec.Intervention.ID] = rec.Result == flowv1.InterventionRefused
	}
	dropped, err := droppedInterventions(session, revision, spec, records, history)
	if err != nil {
		return nil, err
	}
	for i, iv := range slices.Concat(dropped, spec.Interventions) {
		if i >= int(live.ProcessedInterventions) {
			break
		}
		k, ok := step[iv.ID]
		if !ok {
			return nil, fmt.Errorf("intervention %s (%s) of session %s was processed at a step neither status.interventions (its newest %d records) nor status.history keeps any longer: a replay cannot tell at which step to give it",
				iv.ID, iv.Action, session, len(live.Interventions))
		}
		out = append(out, processed{Intervention: *iv.DeepCopy(), step: k, refused: refused[iv.ID]})
	}
	return out, nil
}

// droppedInterventions rebuilds the processed interventions a client dropped from the
// front of spec.interventions (spec.interventionsDropped counts them: kubectl journey
// drops them when it appends the next one, and so does the controller's cache), in
// order, from their records. Older ones, whose records were dropped too, are rebuilt
// from history when they are Upgrades that applied: their id, who, and that they moved
// the Session, which is all a replay gives an Upgrade (it moves; the replay runs every
// step on revision, which the rebuilt Upgrade names). Any other, or one history no
// longer keeps, cannot be: the error says which.
func droppedInterventions(session, revision string, spec *flowv1.SessionSpec, records []flowv1.InterventionRecord, history []flowv1.HistoryEntry) ([]flowv1.Intervention, error) {
	if spec.InterventionsDropped == 0 {
		return nil, nil
	}
	inSpec := map[string]bool{}
	for _, iv := range spec.Interventions {
		inSpec[iv.ID] = true
	}
	var recorded []flowv1.Intervention
	for _, rec := range records {
		if id := rec.Intervention.ID; !inSpec[id] {
			recorded = append(recorded, *rec.Intervention.DeepCopy())
			inSpec[id] = true
		}
	}
	need := int(spec.InterventionsDropped) - len(recorded)
	var older []flowv1.Intervention
	for _, h := range history {
		if len(older) >= need {
			break
		}
		if h.Intervention == "" || h.Transition == "" || inSpec[h.Transition] {
			continue
		}
		if h.Intervention != flowv1.InterventionUpgrade {
			return nil, fmt.Errorf("session %s dropped its processed intervention %s (%s) from spec.interventions (spec.interventionsDropped is %d) and status.interventions no longer keeps its record: a replay needs what it asked for, and status.history holds it whole only for an Upgrade",
				session, h.Transition, h.Intervention, spec.InterventionsDropped)
		}
		older = append(older, flowv1.Intervention{ID: h.Transition, Action: flowv1.InterventionUpgrade, By: h.By, Revision: revision})
	}
	if len(older) < need {
		return nil, fmt.Errorf("session %s dropped %d processed interventions from spec.interventions, and status.interventions and status.history hold %d of them (they keep their newest records and entries): a replay cannot tell what the others asked for or at which step",
			session, spec.InterventionsDropped, len(recorded)+len(older))
	}
	return slices.Concat(older, recorded), nil
}

// run takes the replay's steps until step upTo, a divergence, or nothing more to do.
func (r *replay) run() {
	if r.eager {
		r.reveal()
	}
	for n := 0; n < maxSteps && r.st.Step < r.upTo && r.diverged == nil; n++ {
		k := r.st.Step + 1
		r.revealInterventions(k)
		in := engine.Input{Spec: &r.spec, Status: r.st, Now: r.timeAt(k),
			SessionName: r.nameAt(k), SessionUID: r.uidAt(k), CreationTime: r.src.Created}
		degraded := r.degradedAt(k)
		if degraded != nil {
			in.ReplayDegraded = degraded.DegradedTo
		}
		if n := r.st.ProcessedInterventions; int(n) < len(r.ivs) && r.ivs[n].step == k && r.ivs[n].Action == flowv1.InterventionUpgrade && !r.ivs[n].refused {
			iv := &r.ivs[n]
			// Applied on the Session when it was checked: applied here. Which revision
			// it came from is not the replay's. One the Session refused is given no
			// verdict, so it is refused here too.
			in.Upgrade = &engine.ReplayCheck{Revision: iv.Revision, Reproduces: true}
			r.st = r.st.DeepCopy()
			r.st.JourneyRevision = ""
			in.Status = r.st
		}
		next, eff := engine.Step(r.snap, in)
		r.in = in
		if eff == nil && next.Step == r.st.Step {
			if !r.reveal() {
				r.diverge(k, "status.step", fmt.Sprintf("the Session took step %d; on this revision there is nothing more to do", k))
			}
			continue
		}
		if eff != nil {
			if degraded != nil && next.Step == k && eff.DegradedTo == nil {
				r.diverge(k, "journal "+degraded.ID, fmt.Sprintf(
					"the Session made this call with agent %s, the degradeTo of Budget %s (onExhausted: Degrade); on this revision pathway %s cannot run on it (its degrade is not Allow, or %s is not an openai agent of the journey), so the answer does not apply",
					degraded.DegradedTo.Agent, degraded.DegradedTo.Budget, r.st.CurrentPathway, degraded.DegradedTo.Agent))
				return
			}
			rec := r.answer(next.Step, eff)
			if rec == nil {
				continue // diverged
			}
			engine.Journal(next, rec, r.snap.Journey().Limits.MaxJournal, in.Now)
		}
		next.AgentRetry = nil
		if next.Step > r.st.Step {
			r.compareStep(next)
		}
		r.st = next
	}
	// A call the Session made before where the replay stopped, and the replay did
	// not, is an earlier divergence than one the replay found without a call.
	r.compareJournal(r.st.Step + 1)
	if r.diverged == nil && r.upTo == r.live.Step {
		r.compareStatus()
	}
}

// reveal gives the replay the Session's next input, in the order the engine takes
// them: an approval while a decision waits, an outcome while an External pathway
// waits, else the next message, outcome or approval. Only inputs the Session
// processed are given. It reports whether there was one.
func (r *replay) reveal() bool {
	src, live := r.src.Inputs, r.live
	msgs, outs, apprs := len(r.spec.Messages), len(r.spec.Outcomes), len(r.spec.Approvals)
	moreMsgs := msgs < int(live.ProcessedMessages) && msgs < len(src.Messages)
	moreOuts := outs < int(live.ProcessedOutcomes) && outs < len(src.Outcomes)
	moreApprs := apprs < int(live.ProcessedApprovals) && apprs < len(src.Approvals)
	p, _ := r.snap.Pathway(r.st.CurrentPathway)
	switch {
	case r.st.Phase.AwaitsApproval() && moreApprs:
		r.spec.Approvals = append(r.spec.Approvals, *src.Approvals[apprs].DeepCopy())
	case p.IsExternal() && moreOuts:
		r.spec.Outcomes = append(r.spec.Outcomes, *src.Outcomes[outs].DeepCopy())
	case moreMsgs:
		r.spec.Messages = append(r.spec.Messages, src.Messages[msgs])
	case moreOuts:
		r.spec.Outcomes = append(r.spec.Outcomes, *src.Outcomes[outs].DeepCopy())
	case moreApprs:
		r.spec.Approvals = append(r.spec.Approvals, *src.Approvals[apprs].DeepCopy())
	default:
		return false
	}
	return true
}

// revealInterventions gives the replay the interventions the Session processed in
// step k.
func (r *replay) revealInterventions(k int64) {
	for n := len(r.spec.Interventions); n < len(r.ivs) && r.ivs[n].step == k; n++ {
		r.spec.Interventions = append(r.spec.Interventions, *r.ivs[n].DeepCopy())
	}
}

// nameAt and uidAt are the identity of the Session that took step k: a fork's steps
// up to the fork step were its source's (they asked its agents and tools in the
// source's name, with idempotency keys of the source's UID).
func (r *replay) nameAt(k int64) string {
	if f := r.src.Spec.ForkOf; f != nil && k <= f.Step {
		return f.Session
	}
	return r.src.Name
}

func (r *replay) uidAt(k int64) string {
	if f := r.src.Spec.ForkOf; f != nil && k <= f.Step {
		return f.UID
	}
	return r.src.UID
}

// timeAt is when the Session took step k, as far as it records: the time of its last
// history entry at or before k, else its start.
func (r *replay) timeAt(k int64) time.Time {
	t := r.src.Created
	if s := r.live.StartTime; s != nil {
		t = s.Time
	}
	for _, h := range r.live.History {
		if h.Step <= k && !h.Time.IsZero() {
			t = h.Time.Time
		}
	}
	return t
}

// degradedAt is the Session's record of a model call it made at step k on a Budget's
// degradeTo agent, not yet handed out; nil when it made none.
func (r *replay) degradedAt(k int64) *flowv1.EffectRecord {
	for i := range r.live.Journal {
		rec := &r.live.Journal[i]
		if !r.taken[i] && rec.Step == k && rec.Kind == flowv1.EffectRunPathway && rec.DegradedTo != nil {
			return rec
		}
	}
	return nil
}

// answer is the journaled answer to eff, asked at step: the Session's record of that
// step with eff's kind and input hash. nil, with the divergence recorded, when the
// Session has none: it asked another question there, or none.
func (r *replay) answer(step int64, eff *engine.Effect) *flowv1.EffectRecord {
	var other *flowv1.EffectRecord
	for i := range r.live.Journal {
		rec := &r.live.Journal[i]
		if r.taken[i] || rec.Step != step {
			continue
		}
		if rec.Kind == eff.Kind && (rec.InputHash == eff.InputHash || r.sameQuestion(rec, eff)) {
			r.taken[i] = true
			r.compareJournal(step)
			out := rec.DeepCopy()
			out.InputHash = eff.InputHash
			out.Rewound = false // a later Rewind marks it, when the replay takes it
			return out
		}
		if other == nil {
			other = rec
		}
	}
	r.compareJournal(step)
	if r.diverged != nil {
		return nil
	}
	what := describeEffect(eff)
	switch {
	case other != nil && other.Kind == eff.Kind:
		r.diverge(step, "journal "+other.ID, fmt.Sprintf("asks %s another question than the Session did (input hash %.12s, the Session's %.12s): its prompt, inputs or tools differ, so the journaled answer does not apply", what, eff.InputHash, other.InputHash))
	case other != nil:
		r.diverge(step, "journal "+other.ID, fmt.Sprintf("makes %s where the Session made a %s call", what, other.Kind))
	default:
		r.diverge(step, "journal", fmt.Sprintf("makes %s, a call the Session did not make: its journal holds no answer", what))
	}
	return nil
}

// sameQuestion reports whether rec, the Session's answer at this step, answers eff:
// the Session's own revision asks, from the same status, the question rec answers,
// and the agents see the same question in both.
func (r *replay) sameQuestion(rec *flowv1.EffectRecord, eff *engine.Effect) bool {
	if r.src.Revision == nil {
		return false
	}
	_, own := engine.Step(r.src.Revision, r.in)
	return own != nil && own.Kind == eff.Kind && own.InputHash == rec.InputHash && own.QuestionHash() == eff.QuestionHash()
}

func describeEffect(eff *engine.Effect) string {
	switch {
	case eff.Tool != nil:
		return fmt.Sprintf("a %s call of tool %s", eff.Kind, eff.Tool.Tool)
	case len(eff.Agents) > 0:
		return fmt.Sprintf("a %s call of agent %s", eff.Kind, eff.Agents[0].Name)
	}
	return fmt.Sprintf("a %s call", eff.Kind)
}

// compareJournal records a divergence at the first step before upTo where the Session
// made a call the replay did not.
func (r *replay) compareJournal(before int64) {
	for i := range r.live.Journal {
		rec := &r.live.Journal[i]
		if !r.taken[i] && rec.Step < before && rec.Step <= r.upTo {
			r.diverge(rec.Step, "journal "+rec.ID, fmt.Sprintf("the Session made a %s call of %s here; on this revision it is not made", rec.Kind, rec.Agent))
			return
		}
	}
}

// compareStep compares what step next.step left on record with the Session's record of
// it: its history entries and its transcript exchanges.
func (r *replay) compareStep(next *flowv1.SessionStatus) {
	k := next.Step
	if !r.compareInterventions(next) {
		return
	}
	got, want := entriesAt(next.History, k), entriesAt(r.live.History, k)
	if kept(r.live.History, k) {
		for i := range max(len(got), len(want)) {
			field := fmt.Sprintf("history[step %d]", k)
			switch {
			case i >= len(want):
				r.diverge(k, field, fmt.Sprintf("this revision takes %s, the Session took no transition", describe(got[i])))
				return
			case i >= len(got):
				r.diverge(k, field, fmt.Sprintf("the Session took %s, this revision takes no transition", describe(want[i])))
				return
			}
			if f, a, b, ok := firstDifference(entryFields(want[i]), entryFields(got[i])); ok {
				r.diverge(k, field+"."+f, fmt.Sprintf("the Session has %s, this revision gives %s", a, b))
				return
			}
		}
		// An Upgrade's entry names the revisions the Session moved between, which the
		// replay does not know: the rebuilt status keeps the Session's words.
		i := 0
		for j := range next.History {
			if e := &next.History[j]; e.Step == k {
				if e.Intervention == flowv1.InterventionUpgrade {
					e.Reason = want[i].Reason
				}
				i++
			}
		}
	}
	gx, wx := exchangesAt(next.Transcript, k), exchangesAt(r.live.Transcript, k)
	if len(r.live.Transcript) > 0 && r.live.Transcript[0].Step <= k || r.live.TranscriptDropped == 0 {
		for i := range min(len(gx), len(wx)) {
			if gx[i].Assistant != wx[i].Assistant {
				r.diverge(k, fmt.Sprintf("transcript[step %d].assistant", k), fmt.Sprintf("the Session replied %q, this revision replies %q",
					truncate.Line(wx[i].Assistant, 120), truncate.Line(gx[i].Assistant, 120)))
				return
			}
		}
	}
}

// compareInterventions compares the interventions step next.step processed with the
// Session's records of them: one the Session refused is refused again, one it applied
// applies again. A refused Upgrade's record keeps the Session's words (they name the
// verdict of the Session's own check). It reports whether they agree.
func (r *replay) compareInterventions(next *flowv1.SessionStatus) bool {
	k := next.Step
	for i := range next.Interventions {
		got := &next.Interventions[i]
		if got.Step != k {
			continue
		}
		var want *flowv1.InterventionRecord
		for j := range r.live.Interventions {
			if rec := &r.live.Interventions[j]; rec.Step == k && rec.Intervention.ID == got.Intervention.ID {
				want = rec
			}
		}
		if want == nil {
			continue // its record was dropped: history tells
		}
		field := fmt.Sprintf("status.interventions[%s].result", got.Intervention.ID)
		switch {
		case want.Result == flowv1.InterventionRefused && got.Result != flowv1.InterventionRefused:
			r.diverge(k, field, fmt.Sprintf("the Session refused %s %s (%s), this revision applies it", want.Intervention.Action, want.Intervention.ID, want.Message))
			return false
		case want.Result != flowv1.InterventionRefused && got.Result == flowv1.InterventionRefused:
			r.diverge(k, field, fmt.Sprintf("the Session applied %s %s, this revision refuses it: %s", want.Intervention.Action, want.Intervention.ID, got.Message))
			return false
		case got.Intervention.Action == flowv1.InterventionUpgrade:
			got.Message = want.Message
		}
	}
	return true
}

// compareStatus compares the replay's final status with the Session's.
func (r *replay) compareStatus() {
	a, b := r.live, r.st
	norm := func(p flowv1.Phase) flowv1.Phase {
		if p == flowv1.PhaseWaitingForInput {
			return flowv1.PhaseRunning // the replay is given only what the Session processed
		}
		return p
	}
	lastTurn := func(st *flowv1.SessionStatus) any {
		if st.LastTurn == nil {
			return nil
		}
		return map[string]any{"finishReason": st.LastTurn.FinishReason, "assistantText": st.LastTurn.AssistantText}
	}
	decision := func(st *flowv1.SessionStatus) any {
		if d := st.LastDecision; d != nil {
			return map[string]any{"id": d.ID, "transition": d.Transition, "from": d.From, "to": d.To, "action": d.Action, "state": d.State, "confidence": d.Confidence}
		}
		return nil
	}
	stalled := func(st *flowv1.SessionStatus) string {
		// What the engine blocked; a Stalled condition of the controller (an agent
		// error) is not the revision's doing.
		reason, _ := engine.Blocked(st)
		return reason
	}
	ctx := func(st *flowv1.SessionStatus) any {
		var v any
		if st.Context != nil {
			_ = json.Unmarshal(st.Context.Raw, &v)
		}
		return v
	}
	want := map[string]any{"phase": norm(a.Phase), "currentPathway": a.CurrentPathway, "pathwayStack": a.PathwayStack, "iteration": a.Iteration,
		"turns": a.Turns, "transitions": a.Transitions, "processedMessages": a.ProcessedMessages, "processedOutcomes": a.ProcessedOutcomes,
		"processedApprovals": a.ProcessedApprovals, "lastTurn": lastTurn(a), "lastDecision": decision(a), "blocked": stalled(a),
		"context": ctx(a), "usage": a.Usage}
	got := map[string]any{"phase": norm(b.Phase), "currentPathway": b.CurrentPathway, "pathwayStack": b.PathwayStack, "iteration": b.Iteration,
		"turns": b.Turns, "transitions": b.Transitions, "processedMessages": b.ProcessedMessages, "processedOutcomes": b.ProcessedOutcomes,
		"processedApprovals": b.ProcessedApprovals, "lastTurn": lastTurn(b), "lastDecision": decision(b), "blocked": stalled(b),
		"context": ctx(b), "usage": b.Usage}
	if f, x, y, ok := firstDifference(jsonValue(want), jsonValue(got)); ok {
		r.diverge(b.Step, "status."+f, fmt.Sprintf("the Session has %s, this revision gives %s", x, y))
	}
}

// diverge records the first divergence: the earliest step wins.
func (r *replay) diverge(step int64, field, msg string) {
	if r.diverged != nil && r.diverged.Step <= step {
		return
	}
	r.diverged = &engine.ReplayCheck{Revision: r.revision, Step: step, Field: field, Message: msg}
}

func (r *replay) verdict() *engine.ReplayCheck {
	if r.diverged != nil {
		return r.diverged
	}
	return &engine.ReplayCheck{Revision: r.revision, Reproduces: true}
}

func entriesAt(h []flowv1.HistoryEntry, step int64) []flowv1.HistoryEntry {
	var out []flowv1.HistoryEntry
	for _, e := range h {
		if e.Step == step {
			out = append(out, e)
		}
	}
	return out
}

// kept reports whether history h still holds the entries of step (it keeps the last
// limits.maxHistory).
func kept(h []flowv1.HistoryEntry, step int64) bool {
	return len(h) == 0 || h[0].Step <= step
}

func exchangesAt(t []flowv1.Exchange, step int64) []flowv1.Exchange {
	var out []flowv1.Exchange
	for _, x := range t {
		if x.Step == step {
			out = append(out, x)
		}
	}
	return out
}

// entryFields is a history entry as compared: without its time, and, for an Upgrade,
// without the reason that names the revision it came from.
func entryFields(e flowv1.HistoryEntry) any {
	e.Time = metav1.Time{}
	if e.Intervention == flowv1.InterventionUpgrade {
		e.Reason = ""
	}
	return jsonValue(e)
}

func describe(e flowv1.HistoryEntry) string {
	s := fmt.Sprintf("%s -> %s", orDash(e.From), orDash(e.To))
	if e.Action != "" {
		s = fmt.Sprintf("%s (%s)", s, e.Action)
	}
	if e.Transition != "" {
		s += " by " + e.Transition
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// jsonValue is v as decoded JSON, so that values compare as they are stored.
func jsonValue(v any) any {
	raw, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(raw, &out)
	return out
}

// firstDifference returns the first path (in key order) where two decoded JSON values
// differ, with both values as compact JSON ("nothing" when absent).
func firstDifference(a, b any) (string, string, string, bool) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if reflect.DeepEqual(a, b) {
			return "", "", "", false
		}
		return "", compact(a), compact(b), true
	}
	var keys []string
	for k := range am {
		keys = append(keys, k)
	}
	for k := range bm {
		if _, ok := am[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		av, ina := am[k]
		bv, inb := bm[k]
		switch {
		case !ina && !inb:
		case !ina:
			return k, "nothing", compact(bv), true
		case !inb:
			return k, compact(av), "nothing", true
		default:
			if p, x, y, ok := firstDifference(av, bv); ok {
				if p != "" {
					k += "." + p
				}
				return k, x, y, true
			}
		}
	}
	return "", "", "", false
}

func compact(v any) string {
	raw, _ := json.Marshal(v)
	return truncate.Line(string(raw), 160)
}
