package journeytest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// ownedHistory is the simulated history with the (0-based) step that took each entry.
func (sim *simulation) history() ([]flowv1.HistoryEntry, []int) {
	var h []flowv1.HistoryEntry
	var owner []int
	for i, r := range sim.results {
		for _, e := range r.History {
			h = append(h, e)
			owner = append(owner, i)
		}
	}
	return h, owner
}

// divergence finds the first step where the simulation differs from the live Session:
// its index (0-based; -1 for none) and what differs.
func (sim *simulation) divergence() (int, string) {
	live := sim.live.Session.Status
	h, owner := sim.history()
	liveH := live.History
	if sim.stopped != nil && len(liveH) > len(h) {
		// Only what the simulation got to can be compared.
		liveH = liveH[:len(h)]
	}
	if i, why := historyDivergence(h, liveH); i >= 0 {
		if i < len(owner) {
			return owner[i], why
		}
		return len(sim.results) - 1, why
	}
	if sim.stopped != nil {
		var missing *MissingAnswerError
		if errors.As(sim.stopped.Err, &missing) && missing.Complete {
			return sim.stopped.Index - 1, missing.Error()
		}
		return -1, ""
	}
	if why := statusDivergence(&live, sim.status); why != "" {
		return len(sim.results) - 1, why
	}
	return -1, ""
}

// Record turns a live Session into a journey test: the Journey revision it is pinned to
// as inline manifests, its inputs as steps (in the order the engine takes them), and
// expectations from what the Session did. notes say what the test could not capture.
func Record(l *LiveSession) (*Case, []string, error) {
	sim, err := simulate(l)
	if err != nil {
		return nil, nil, err
	}
	sess := l.Session
	manifests, err := manifestsOf(sess.Spec.JourneyRef.Name, sess.Namespace, sim.data)
	if err != nil {
		return nil, nil, err
	}
	c := &Case{
		Name:        sess.Name,
		Description: fmt.Sprintf("Recorded from session %s/%s (phase %s) on journey revision %s.", sess.Namespace, sess.Name, orDash(string(sess.Status.Phase)), l.Revision),
		Manifests:   manifests,
		Journey:     sess.Spec.JourneyRef.Name,
		Revision:    l.Revision,
		Session:     SessionMeta{Name: sess.Name, UID: string(sess.UID)},
		Start:       creation(sess),
		ServerTools: sim.data.Tools,
	}
	if sess.Spec.InitialContext != nil {
		c.InitialContext = sess.Spec.InitialContext.DeepCopy()
	}
	diverged, why := sim.divergence()
	notes := sim.notes(diverged, why)

	last := len(sim.steps) - 1
	for i := range sim.steps {
		step := sim.steps[i]
		switch {
		case i == 0:
			step.Name = "the Session is created"
		}
		for _, rec := range sim.answers[i+1] {
			step.Answers = append(step.Answers, answerOf(&rec))
		}
		aligned := i < len(sim.results) && sim.results[i].Err == nil && (diverged < 0 || i < diverged)
		if aligned {
			step.Expect = expectOf(&sim.results[i])
		} else if step.Message != nil {
			// The first transition the Session took for this message, from its history.
			id := step.Message.ID
			if id == "" {
				id = fmt.Sprintf("m%d", messageNumber(sim.steps[:i+1]))
			}
			for _, h := range sess.Status.History {
				if h.MessageID == id {
					m := matchOf(h)
					step.Expect = &Expect{Transition: &m}
					break
				}
			}
		}
		if i == last {
			step.Expect = finalExpect(step.Expect, &sess.Status)
		}
		c.Steps = append(c.Steps, step)
	}
	return c, notes, nil
}

// notes say what a test recorded from the simulated Session cannot capture; diverged
// and why are where and how today's engine diverges from it.
func (sim *simulation) notes(diverged int, why string) []string {
	sess := sim.live.Session
	var notes []string
	if sess.Status.Phase == flowv1.PhaseRunning || sess.Status.Phase == flowv1.PhasePending {
		notes = append(notes, fmt.Sprintf("session %s is %s: it has not settled, so the recorded expectations may not be where it ends", sess.Name, sess.Status.Phase))
	}
	if diverged >= 0 {
		notes = append(notes, fmt.Sprintf("today's engine diverges from the Session at step %d (%s): %s; the test expects what the Session did and fails there",
			diverged+1, sim.results[diverged].Input, why))
	}
	if sim.stopped != nil {
		var missing *MissingAnswerError
		switch {
		case errors.As(sim.stopped.Err, &missing) && missing.Complete:
			// Reported as the divergence.
		case errors.As(sim.stopped.Err, &missing):
			notes = append(notes, fmt.Sprintf("step %d calls an LLM agent (%s) whose answer the Session no longer holds (status.journal is empty or dropped its oldest answers): add it under steps[%d].answers",
				sim.stopped.Index, missing.Effect, sim.stopped.Index-1))
		default:
			notes = append(notes, fmt.Sprintf("step %d could not run offline: %v", sim.stopped.Index, sim.stopped.Err))
		}
	}
	if n := sess.Status.JournalDropped; n > 0 {
		notes = append(notes, fmt.Sprintf("status.journal dropped the Session's %d oldest agent answers (limits.maxJournal, or its byte bound)", n))
	}
	if h, _ := sim.history(); len(h) > len(sess.Status.History) && sim.stopped == nil {
		notes = append(notes, fmt.Sprintf("the Session keeps its last %d transitions only; the first %d steps' transitions are what today's engine does", len(sess.Status.History), len(h)-len(sess.Status.History)))
	}
	return notes
}

func messageNumber(steps []Step) int {
	n := 0
	for _, s := range steps {
		if s.Message != nil {
			n++
		}
	}
	return n
}

func matchOf(h flowv1.HistoryEntry) TransitionMatch {
	m := TransitionMatch{Name: h.Transition, From: h.From, To: h.To, Action: h.Action, Source: h.Source}
	if m.Action == flowv1.ActionAdvance {
		m.Action = ""
	}
	return m
}

// expectOf expects what a step did: its transitions and where it left the Session.
func expectOf(sr *StepResult) *Expect {
	st := sr.Status
	e := &Expect{Pathway: st.CurrentPathway, Phase: st.Phase, Transitions: []TransitionMatch{}}
	it := st.Iteration
	e.Iteration = &it
	for _, h := range sr.History {
		e.Transitions = append(e.Transitions, matchOf(h))
	}
	return e
}

// finalExpect adds what the live Session ended with.
func finalExpect(e *Expect, st *flowv1.SessionStatus) *Expect {
	if e == nil {
		e = &Expect{}
	}
	e.Pathway, e.Phase = st.CurrentPathway, st.Phase
	it := st.Iteration
	e.Iteration = &it
	if st.Confidence != "" {
		e.Confidence = &ConfidenceRange{Min: string(st.Confidence), Max: string(st.Confidence)}
	}
	if lt := st.LastTurn; lt != nil {
		e.FinishReason = lt.FinishReason
		if lt.AssistantText != "" {
			e.Reply = &TextMatch{Contains: []string{lt.AssistantText}}
		}
	}
	if c := apimeta.FindStatusCondition(st.Conditions, flowv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		e.Stalled = c.Reason
	}
	expectToolCalls(e, st.LastTurn)
	if st.Context != nil {
		var ctx map[string]any
		if err := json.Unmarshal(st.Context.Raw, &ctx); err == nil && len(ctx) > 0 {
			if e.Fields == nil {
				e.Fields = map[string]any{}
			}
			for k, v := range ctx {
				p := path{{name: "context"}, {name: k}}
				e.Fields[p.String()] = v
			}
		}
	}
	return e
}

// expectToolCalls expects the tool and state of each tool call of the last turn lt.
func expectToolCalls(e *Expect, lt *flowv1.TurnOutcome) {
	if lt == nil || len(lt.ToolCalls) == 0 {
		return
	}
	if e.Fields == nil {
		e.Fields = map[string]any{}
	}
	for i, c := range lt.ToolCalls {
		e.Fields[fmt.Sprintf("lastTurn.toolCalls[%d].tool", i)] = c.Tool
		e.Fields[fmt.Sprintf("lastTurn.toolCalls[%d].state", i)] = string(c.State)
	}
}

// ReplayReport says whether today's engine does what a live Session did.
type ReplayReport struct {
	Session, Revision string
	// Result is the offline run of the Session's inputs.
	Result *Result
	// Step is the first step (from 1) where the engine diverges, 0 for none; Detail
	// says how.
	Step   int
	Detail string
	// Incomplete is set when the replay could not run every step (an LLM answer the
	// Session no longer holds).
	Incomplete error
}

// Replay runs a live Session's inputs offline on its pinned revision with today's
// engine and reports the first step where the engine does something else than the
// Session did: another transition, or another final status.
func Replay(l *LiveSession) (*ReplayReport, error) {
	sim, err := simulate(l)
	if err != nil {
		return nil, err
	}
	rep := &ReplayReport{Session: l.Session.Name, Revision: l.Revision}
	res := &Result{Name: l.Session.Name, Revision: l.Revision, Status: sim.status}
	res.Steps = append(res.Steps, sim.results...)
	for i := len(sim.results); i < len(sim.steps); i++ {
		step := &sim.steps[i]
		id := fmt.Sprintf("m%d", messageNumber(sim.steps[:i+1]))
		if step.Message != nil && step.Message.ID != "" {
			id = step.Message.ID
		}
		res.Steps = append(res.Steps, StepResult{Index: i + 1, Input: step.describe(id), Skipped: true})
	}
	if len(res.Steps) > 0 {
		res.Steps[0].Name = "created"
	}
	rep.Result = res
	if i, why := sim.divergence(); i >= 0 {
		rep.Step, rep.Detail = i+1, why
		res.Steps[i].Failures = append(res.Steps[i].Failures, "diverges: "+why)
	}
	if sim.stopped != nil {
		rep.Incomplete = sim.stopped.Err
	}
	return rep, nil
}

// Print writes the replay's per-step table and its verdict.
func (rep *ReplayReport) Print(w io.Writer) {
	PrintResult(w, rep.Result)
	switch {
	case rep.Step > 0:
		s := rep.Result.Steps[rep.Step-1]
		fmt.Fprintf(w, "First divergence at %s: %s\n", s.Title(), rep.Detail)
	case rep.Incomplete != nil:
		done := 0
		for _, s := range rep.Result.Steps {
			if !s.Skipped && s.Err == nil {
				done++
			}
		}
		what := fmt.Sprintf("the first %d steps", done)
		if done == 1 {
			what = "the first step"
		}
		fmt.Fprintf(w, "No divergence in %s; the replay stops at step %d: %v\n", what, done+1, rep.Incomplete)
	default:
		fmt.Fprintf(w, "No divergence: today's engine reproduces the transitions and the final status of session %s on revision %s\n", rep.Session, rep.Revision)
	}
}
