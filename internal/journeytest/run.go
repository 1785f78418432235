package journeytest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
)

// Result is the outcome of one journey test.
type Result struct {
	// Name and Path identify the test.
	Name, Path string
	// Revision is the revision the manifests compiled to, Journey its journey and
	// Data what it holds.
	Revision string
	Journey  string
	Data     *RevisionData
	// Err is set when the test could not run at all (a bad file, an invalid journey).
	Err error
	// Steps are the steps' results, in order.
	Steps []StepResult
	// Spec and Status are the Session's spec (every input sent) and status at the end.
	Spec   *flowv1.SessionSpec
	Status *flowv1.SessionStatus
	// Duration is how long the test took.
	Duration time.Duration
}

// StepResult is what one step did and which of its expectations failed.
type StepResult struct {
	// Index is the step's number, from 1.
	Index int
	// Name is the step's name, Input a description of what it sent.
	Name, Input string
	// Status is the Session status once the step settled.
	Status *flowv1.SessionStatus
	// History are the transitions the step took.
	History []flowv1.HistoryEntry
	// Replies are the assistant texts of the turns the step ran.
	Replies []string
	// Effects describe the LLM calls the step made.
	Effects []string
	// Decisions are the decisions the step made, each as first written: its state
	// (Applied, RetriedWithFeedback, Pending, Escalated) is the band its confidence
	// fell in.
	Decisions []flowv1.DecisionRecord
	// Failures are the expectations that did not hold, one line each.
	Failures []string
	// Err is set when the step could not run (a missing answer, an engine that does not
	// settle); the steps after it are skipped.
	Err error
	// Skipped says the step did not run because an earlier one could not.
	Skipped  bool
	Duration time.Duration
}

// Failed reports whether the step failed.
func (s *StepResult) Failed() bool { return s.Err != nil || len(s.Failures) > 0 }

// Title is "step N" with the step's name and input, as failure messages name it.
func (s *StepResult) Title() string {
	t := fmt.Sprintf("step %d", s.Index)
	if s.Name != "" {
		t += fmt.Sprintf(" %q", s.Name)
	}
	return t + " (" + s.Input + ")"
}

// Failed reports whether the test failed.
func (r *Result) Failed() bool {
	if r.Err != nil {
		return true
	}
	for i := range r.Steps {
		if r.Steps[i].Failed() {
			return true
		}
	}
	return false
}

// Problems returns one line per failure: "step N "name" (input): what failed".
func (r *Result) Problems() []string {
	if r.Err != nil {
		return []string{r.Err.Error()}
	}
	var out []string
	for i := range r.Steps {
		s := &r.Steps[i]
		for _, f := range s.Failures {
			out = append(out, s.Title()+": "+f)
		}
		if s.Err != nil {
			out = append(out, s.Title()+": "+s.Err.Error())
		}
	}
	return out
}

// Error summarises the failures of a failed test ("" when it passed).
func (r *Result) Error() string {
	if !r.Failed() {
		return ""
	}
	return r.Name + ": " + strings.Join(r.Problems(), "; ")
}

// Run runs a test: it creates the Session, lets it settle, then sends each step's input
// and checks the step's expectations once the Session has settled again.
func Run(c *Case) *Result {
	begin := time.Now()
	res := &Result{Name: c.Name, Path: c.Path}
	defer func() { res.Duration = time.Since(begin) }()
	if c.Data == nil {
		if err := c.Resolve(); err != nil {
			res.Err = err
			return res
		}
	}
	snap, rev, err := Compile(c.Journey, c.Data)
	if err != nil {
		res.Err = err
		return res
	}
	res.Revision, res.Journey, res.Data = rev, c.Journey, c.Data
	if c.Revision != "" && c.Revision != rev {
		res.Err = fmt.Errorf("the manifests compile to revision %s, not %s: they are not the journey revision the test was recorded on", rev, c.Revision)
		return res
	}
	s, err := c.newSession(snap)
	if err != nil {
		res.Err = err
		return res
	}
	c.play(s, res, nil)
	res.Spec, res.Status = s.spec.DeepCopy(), s.st
	return res
}

func (c *Case) newSession(snap *engine.Snapshot) (*session, error) {
	start := DefaultStart
	if c.Start != "" {
		t, err := time.Parse(time.RFC3339, c.Start)
		if err != nil {
			return nil, fmt.Errorf("start: %w", err)
		}
		start = t
	}
	spec := flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: c.Journey}}
	if c.InitialContext != nil {
		spec.InitialContext = c.InitialContext.DeepCopy()
	}
	s := newSession(snap, c.Session.Name, c.Session.UID, start, spec)
	s.tools = c.Tools
	return s, nil
}

// play runs the steps on s. answers, when set, answers the effects instead of the
// steps' recorded answers.
func (c *Case) play(s *session, res *Result, answers answerer) {
	for i := range c.Steps {
		if n := len(res.Steps); n > 0 && (res.Steps[n-1].Err != nil || res.Steps[n-1].Skipped) {
			step := &c.Steps[i]
			res.Steps = append(res.Steps, StepResult{Index: i + 1, Name: step.Name, Input: s.describe(step), Skipped: true})
			continue
		}
		res.Steps = append(res.Steps, s.run(i, &c.Steps[i], answers))
	}
}

func (s *session) describe(step *Step) string {
	id := fmt.Sprintf("m%d", len(s.spec.Messages)+1)
	if step.Message != nil && step.Message.ID != "" {
		id = step.Message.ID
	}
	return step.describe(id)
}

// run runs step number i (from 0): the Session is created first if it was not, the
// clock advances, the step's input is sent and the Session settles; then the step's
// expectations are checked.
func (s *session) run(i int, step *Step, answers answerer) StepResult {
	begin := time.Now()
	sr := StepResult{Index: i + 1, Name: step.Name, Input: s.describe(step)}
	sc := &script{step: i + 1, answers: step.Answers, tools: step.Tools, caseTools: s.tools}
	a := answerer(sc)
	if answers != nil {
		a = answers
	}
	settle := func() bool {
		p, err := s.settle(a)
		sr.History = append(sr.History, p.history...)
		sr.Replies = append(sr.Replies, p.replies...)
		sr.Effects = append(sr.Effects, p.effects...)
		sr.Decisions = append(sr.Decisions, p.decisions...)
		if err != nil {
			sr.Err = err
			return false
		}
		return true
	}
	ok := true
	if !s.started {
		// The Session is created with its initial context only, and settles.
		s.started = true
		ok = settle()
	}
	if ok && step.After != "" {
		d, _ := time.ParseDuration(step.After)
		s.now = s.now.Add(d)
	}
	if ok {
		if _, err := s.send(step); err != nil {
			sr.Err = err
			ok = false
		}
	}
	if ok {
		settle()
	}
	sr.Status = s.st.DeepCopy()
	if sr.Err == nil {
		if answers == nil {
			sr.Failures = append(sr.Failures, sc.unused()...)
		}
		if step.Expect != nil {
			sr.Failures = append(sr.Failures, step.Expect.check(&sr)...)
		}
	}
	sr.Duration = time.Since(begin)
	return sr
}

// check returns one line per expectation that does not hold for the step's result.
func (e *Expect) check(sr *StepResult) []string {
	var f failures
	e.checkState(sr.Status, &f)
	e.checkTurns(sr, &f)
	e.checkFields(sr.Status, &f)
	return f
}

// failures are the expectations that do not hold, one line each.
type failures []string

func (f *failures) fail(format string, args ...any) { *f = append(*f, fmt.Sprintf(format, args...)) }

// checkState checks where the step left the Session.
func (e *Expect) checkState(st *flowv1.SessionStatus, f *failures) {
	fail := f.fail
	if e.Pathway != "" && st.CurrentPathway != e.Pathway {
		fail("pathway: want %s, got %s", e.Pathway, orDash(st.CurrentPathway))
	}
	if e.Phase != "" && st.Phase != e.Phase {
		fail("phase: want %s, got %s%s", e.Phase, orDash(string(st.Phase)), stalledNote(st))
	}
	if e.Iteration != nil && st.Iteration != *e.Iteration {
		fail("iteration: want %d, got %d", *e.Iteration, st.Iteration)
	}
	if c := e.Confidence; c != nil {
		got, err := strconv.ParseFloat(string(st.Confidence), 64)
		switch {
		case st.Confidence == "":
			fail("confidence: want %s, got none", c)
		case err != nil:
			fail("confidence: want %s, got %q", c, st.Confidence)
		default:
			lo, _ := strconv.ParseFloat(orValue(c.Min, "0"), 64)
			hi, _ := strconv.ParseFloat(orValue(c.Max, "1"), 64)
			if got < lo || got > hi {
				fail("confidence: want %s, got %s", c, st.Confidence)
			}
		}
	}
	if e.FinishReason != "" {
		got := ""
		if st.LastTurn != nil {
			got = string(st.LastTurn.FinishReason)
		}
		if got != string(e.FinishReason) {
			fail("finishReason: want %s, got %s", e.FinishReason, orDash(got))
		}
	}
	if e.Stalled != "" {
		c := apimeta.FindStatusCondition(st.Conditions, flowv1.ConditionStalled)
		switch {
		case c == nil || c.Status != metav1.ConditionTrue:
			fail("stalled: want Stalled with reason %s, the Session is not Stalled", e.Stalled)
		case c.Reason != e.Stalled:
			fail("stalled: want reason %s, got %s (%s)", e.Stalled, c.Reason, c.Message)
		}
	}
}

// checkTurns checks the replies and transitions of the step.
func (e *Expect) checkTurns(sr *StepResult, f *failures) {
	fail := f.fail
	if e.Reply != nil {
		all := strings.Join(sr.Replies, "\n")
		for _, want := range e.Reply.Contains {
			if !strings.Contains(all, want) {
				if len(sr.Replies) == 0 {
					fail("reply: want it to contain %q, the step got no reply", want)
				} else {
					fail("reply: want it to contain %q, got %q", want, all)
				}
			}
		}
	}
	if t := e.Transition; t != nil {
		found := false
		for _, h := range sr.History {
			if t.matches(h) {
				found = true
			}
		}
		if !found {
			fail("transition: want %s, got %s", t, describeHistory(sr.History))
		}
	}
	if e.Transitions != nil {
		ok := len(e.Transitions) == len(sr.History)
		for i := 0; ok && i < len(e.Transitions); i++ {
			ok = e.Transitions[i].matches(sr.History[i])
		}
		if !ok {
			want := make([]string, len(e.Transitions))
			for i, t := range e.Transitions {
				want[i] = t.String()
			}
			fail("transitions: want [%s], got %s", strings.Join(want, ", "), describeHistory(sr.History))
		}
	}
}

// checkFields checks the status fields the step expects.
func (e *Expect) checkFields(st *flowv1.SessionStatus, f *failures) {
	fail := f.fail
	if len(e.Fields) > 0 {
		var doc any
		raw, _ := json.Marshal(st)
		_ = json.Unmarshal(raw, &doc)
		for _, key := range sortedKeys(e.Fields) {
			want := e.Fields[key]
			p, _ := parsePath(key)
			got, ok := p.lookup(doc)
			switch {
			case want == nil && (!ok || got == nil):
			case want == nil:
				fail("%s: want it absent, got %s", key, compactJSON(got))
			case !ok:
				fail("%s: want %s, the field is absent", key, compactJSON(want))
			case !equalJSON(want, got):
				fail("%s: want %s, got %s", key, compactJSON(want), compactJSON(got))
			}
		}
	}
}

func stalledNote(st *flowv1.SessionStatus) string {
	if c := apimeta.FindStatusCondition(st.Conditions, flowv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return fmt.Sprintf(" (Stalled: %s: %s)", c.Reason, c.Message)
	}
	if st.Phase == flowv1.PhaseFailed {
		if c := apimeta.FindStatusCondition(st.Conditions, flowv1.ConditionReady); c != nil {
			return fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
		}
	}
	return ""
}

// describeHistory is "[name from→to (action), ...]" or "no transition".
func describeHistory(h []flowv1.HistoryEntry) string {
	if len(h) == 0 {
		return "no transition"
	}
	parts := make([]string, len(h))
	for i, e := range h {
		parts[i] = describeEntry(e)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func describeEntry(e flowv1.HistoryEntry) string {
	name := e.Transition
	if name == "" {
		name = string(e.Source)
	}
	if e.To == "" {
		return fmt.Sprintf("%s %s→(%s)", name, e.From, orDash(string(e.Action)))
	}
	s := fmt.Sprintf("%s %s→%s", name, e.From, e.To)
	if e.Action != "" && e.Action != flowv1.ActionAdvance {
		s += " (" + string(e.Action) + ")"
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func orValue(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
