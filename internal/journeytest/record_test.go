package journeytest

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// liveObjects runs a journey test and returns the Session it leaves and the
// ControllerRevision it ran on, as the controllers would have left them.
func liveObjects(t *testing.T, c *Case) (*flowv1.Session, *appsv1.ControllerRevision) {
	t.Helper()
	r := Run(c)
	if r.Failed() {
		t.Fatal(r.Error())
	}
	raw, err := json.Marshal(c.Data)
	if err != nil {
		t.Fatal(err)
	}
	// The Session the test ran: its name and UID are what agents and CEL saw.
	name, uid := c.Session.Name, c.Session.UID
	if name == "" {
		name = DefaultSessionName
	}
	if uid == "" {
		uid = DefaultSessionUID
	}
	s := &flowv1.Session{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid), CreationTimestamp: metav1.NewTime(DefaultStart)},
		Spec:       *r.Spec,
		Status:     *r.Status,
	}
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: r.Revision, Namespace: "default"},
		Data:       runtime.RawExtension{Raw: raw},
	}
	return s, rev
}

func fetch(t *testing.T, objs ...client.Object) *LiveSession {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme).WithObjects(objs...).Build()
	var name string
	for _, o := range objs {
		if s, ok := o.(*flowv1.Session); ok {
			name = s.Name
		}
	}
	l, err := Fetch(context.Background(), c, types.NamespacedName{Namespace: "default", Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// recordAndRun records a live Session, writes the test as YAML, reads it back and runs it.
func recordAndRun(t *testing.T, l *LiveSession) (*Case, []string, *Result) {
	t.Helper()
	c, notes, err := Record(l)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	back.Name = c.Name
	if err := back.Resolve(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return back, notes, Run(back)
}

// TestRecordAndReplaySamples: a Session of each sample, recorded, makes a test that
// passes, on the same revision; and replaying it finds no divergence.
func TestRecordAndReplaySamples(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testsDir(), "*.yaml"))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, rev := liveObjects(t, load(t, f))
			l := fetch(t, s, rev)
			c, notes, r := recordAndRun(t, l)
			if len(notes) > 0 {
				t.Errorf("a builtin-only Session is recorded exactly, yet: %q", notes)
			}
			if r.Failed() {
				t.Fatalf("the recorded test fails: %s", r.Error())
			}
			if r.Revision != rev.Name || c.Revision != rev.Name {
				t.Fatalf("the recorded manifests compile to %s, want the Session's revision %s", r.Revision, rev.Name)
			}
			last := c.Steps[len(c.Steps)-1].Expect
			if last == nil || last.Phase != s.Status.Phase || last.Pathway != s.Status.CurrentPathway || len(last.Fields) == 0 {
				t.Fatalf("the last step does not expect the Session's final state: %+v", last)
			}
			rep, err := Replay(l)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Step != 0 || rep.Incomplete != nil {
				t.Fatalf("replay: step %d: %s; incomplete: %v", rep.Step, rep.Detail, rep.Incomplete)
			}
			var out strings.Builder
			rep.Print(&out)
			if !strings.Contains(out.String(), "No divergence: today's engine reproduces the transitions and the final status of session") {
				t.Fatalf("replay output:\n%s", out.String())
			}
		})
	}
}

// TestReplayFindsDivergence: a Session that did something else than today's engine
// does (here: its status is changed, as if an older engine had written it).
func TestReplayFindsDivergence(t *testing.T) {
	c := sampleTest(t, "healthcare-referral.yaml")
	t.Run("transition", func(t *testing.T) {
		s, rev := liveObjects(t, c)
		for i, h := range s.Status.History {
			if h.Transition == "reject-doctor" {
				s.Status.History[i].To = "persuasion"
			}
		}
		l := fetch(t, s, rev)
		rep, err := Replay(l)
		if err != nil {
			t.Fatal(err)
		}
		// Step 1 creates the Session, steps 2-6 send m1-m5.
		want := "the Session took reject-doctor booking→persuasion [iteration 1, source Transition, confidence 1, message m4, reason pattern match], today's engine takes reject-doctor booking→booking"
		if rep.Step != 5 || !strings.Contains(rep.Detail, want) {
			t.Fatalf("step %d: %s", rep.Step, rep.Detail)
		}
		var out strings.Builder
		rep.Print(&out)
		if !strings.Contains(out.String(), `First divergence at step 5 (message m4 "I don't want Dr. Smith. Can you show me another…"): the Session took`) {
			t.Fatalf("output:\n%s", out.String())
		}
		// A recorded test expects what the Session did, so it fails where the engine diverges.
		_, notes, r := recordAndRun(t, l)
		if len(notes) != 1 || !strings.Contains(notes[0], "today's engine diverges from the Session at step 5") {
			t.Fatalf("notes: %q", notes)
		}
		if !r.Failed() || !strings.Contains(r.Error(), "step 5 (message m4") || !strings.Contains(r.Error(), "transition: want {name=reject-doctor from=booking to=persuasion source=Transition}, got [reject-doctor booking→booking]") {
			t.Fatalf("the recorded test: %s", r.Error())
		}
	})
	t.Run("final status", func(t *testing.T) {
		s, rev := liveObjects(t, c)
		s.Status.Context.Raw = []byte(strings.Replace(string(s.Status.Context.Raw), "HC-TUESDAY-2PM", "HC-TUESDAY-3PM", 1))
		rep, err := Replay(fetch(t, s, rev))
		if err != nil {
			t.Fatal(err)
		}
		want := `status.context.confirmation_number: the Session has "HC-TUESDAY-3PM", today's engine gives "HC-TUESDAY-2PM"`
		if rep.Step != 6 || rep.Detail != want {
			t.Fatalf("step %d: %s", rep.Step, rep.Detail)
		}
	})
}

// answerLog answers from a script and keeps the journal entries the controller would
// write.
type answerLog struct {
	script  *script
	uid     string
	records []flowv1.EffectRecord
}

func (a *answerLog) answer(eff *engine.Effect) (reply, error) {
	r, err := a.script.answer(eff)
	if err == nil {
		a.records = append(a.records, *eff.Record(a.uid, 0, r.resp, r.err))
	}
	return r, err
}

// TestRecordLLMSession: the LLM answers come from status.journal; without it (a
// controller that keeps only status.pendingEffect, or a journal that dropped its oldest
// answers) record and replay say which step needs an answer.
func TestRecordLLMSession(t *testing.T) {
	c := load(t, filepath.Join("testdata", "llm-answers.yaml"))
	s, rev := liveObjects(t, c)
	if len(s.Status.Journal) != 5 {
		t.Fatalf("the runner journals like the controller: want 5 answers in status.journal, got %d", len(s.Status.Journal))
	}

	t.Run("journal", func(t *testing.T) {
		l := fetch(t, s.DeepCopy(), rev.DeepCopy())
		rc, notes, r := recordAndRun(t, l)
		if len(notes) > 0 || r.Failed() {
			t.Fatalf("notes %q: %s", notes, r.Error())
		}
		var kinds []string
		for _, st := range rc.Steps {
			for _, a := range st.Answers {
				if a.InputHash == "" {
					t.Errorf("a recorded answer has no input hash: %+v", a)
				}
				kinds = append(kinds, string(a.Kind))
			}
		}
		if got := strings.Join(kinds, " "); got != "ClassifyIntent RunPathway ClassifyIntent RunPathway Decide" {
			t.Fatalf("recorded answers: %s", got)
		}
		rep, err := Replay(l)
		if err != nil || rep.Step != 0 || rep.Incomplete != nil {
			t.Fatalf("replay: %v %d %s %v", err, rep.Step, rep.Detail, rep.Incomplete)
		}
	})

	t.Run("a question the Session never asked", func(t *testing.T) {
		changed := s.DeepCopy()
		changed.Status.Journal[3].InputHash = strings.Repeat("0", 64) // the second RunPathway
		rep, err := Replay(fetch(t, changed, rev.DeepCopy()))
		if err != nil {
			t.Fatal(err)
		}
		want := "today's engine calls an LLM agent (RunPathway of pathway help by agent writer) with a question the Session never asked"
		if rep.Step != 3 || !strings.HasPrefix(rep.Detail, want) {
			t.Fatalf("step %d: %s", rep.Step, rep.Detail)
		}
	})

	t.Run("no journal", func(t *testing.T) {
		old := s.DeepCopy()
		old.Status.Journal, old.Status.JournalDropped = nil, 0
		l := fetch(t, old, rev.DeepCopy())
		_, notes, r := recordAndRun(t, l)
		if len(notes) != 1 || !strings.Contains(notes[0], `step 2 calls an LLM agent (ClassifyIntent of "My order arrived broken." by agent classifier) whose answer the Session no longer holds`) {
			t.Fatalf("notes: %q", notes)
		}
		var missing *MissingAnswerError
		if !errors.As(r.Steps[1].Err, &missing) {
			t.Fatalf("the recorded test must miss an answer at step 2: %s", r.Error())
		}
		rep, err := Replay(l)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Step != 0 || rep.Incomplete == nil {
			t.Fatalf("replay: step %d %s, incomplete %v", rep.Step, rep.Detail, rep.Incomplete)
		}
	})

	t.Run("dropped answers", func(t *testing.T) {
		old := s.DeepCopy()
		old.Status.Journal, old.Status.JournalDropped = old.Status.Journal[2:], 2
		_, notes, _ := recordAndRun(t, fetch(t, old, rev.DeepCopy()))
		if len(notes) != 2 || !strings.Contains(notes[0], "step 2 calls an LLM agent (ClassifyIntent") || !strings.Contains(notes[1], "status.journal dropped the Session's 2 oldest agent answers") {
			t.Fatalf("notes: %q", notes)
		}
	})

	t.Run("the journaled answer is used", func(t *testing.T) {
		// The Session as the controller left it right after journaling the classifier's
		// first answer (status.pendingEffect), before the next step applied it.
		log := &answerLog{script: &script{step: 1, answers: c.Steps[0].Answers[:1]}, uid: string(s.UID)}
		snap, _, err := Compile(c.Journey, c.Data)
		if err != nil {
			t.Fatal(err)
		}
		sess := newSession(snap, s.Name, string(s.UID), DefaultStart, flowv1.SessionSpec{JourneyRef: s.Spec.JourneyRef})
		if _, err := sess.settle(log); err != nil {
			t.Fatal(err)
		}
		sess.spec.Messages = s.Spec.Messages[:1]
		// One reconcile: the step asks, the controller journals.
		status, eff := engine.Step(snap, engine.Input{Spec: &sess.spec, Status: sess.st, Now: sess.now, SessionName: s.Name, SessionUID: string(s.UID), CreationTime: DefaultStart})
		r, err := log.answer(eff)
		if err != nil {
			t.Fatal(err)
		}
		status.PendingEffect = eff.Record(string(s.UID), status.Step, r.resp, r.err)
		mid := s.DeepCopy()
		mid.Spec = sess.spec
		mid.Status = *status
		mid.Status.Phase = flowv1.PhaseRunning

		l := fetch(t, mid, rev.DeepCopy())
		rc, notes, _ := recordAndRun(t, l)
		if got := rc.Steps[1].Answers; len(got) != 1 || got[0].Kind != flowv1.EffectClassifyIntent || got[0].InputHash != eff.InputHash {
			t.Fatalf("the journaled answer is not recorded: %+v", got)
		}
		if len(notes) != 2 || !strings.Contains(notes[0], "has not settled") || !strings.Contains(notes[1], "step 2 calls an LLM agent (RunPathway of pathway help by agent writer)") {
			t.Fatalf("notes: %q", notes)
		}
		rep, err := Replay(l)
		if err != nil {
			t.Fatal(err)
		}
		var missing *MissingAnswerError
		if !errors.As(rep.Incomplete, &missing) || missing.Kind != flowv1.EffectRunPathway {
			t.Fatalf("the replay must get past the journaled classification and stop at the pathway run: %v", rep.Incomplete)
		}
	})
}

// TestSuspendAndCancel: suspend and cancel steps, and a cancelled Session recorded and
// replayed.
func TestSuspendAndCancel(t *testing.T) {
	c := sampleTest(t, "review-loop.yaml")
	yes, no := true, false
	c.Steps = append(c.Steps[:2],
		Step{Name: "pause", Suspend: &yes},
		Step{Name: "an outcome while suspended", Outcome: &OutcomeInput{ResultType: flowv1.ResultSuccess},
			Expect: &Expect{Pathway: "generate", Transitions: []TransitionMatch{}, Fields: map[string]any{"processedOutcomes": 1.0}}},
		Step{Name: "resume", Suspend: &no, Expect: &Expect{Pathway: "review", Transition: &TransitionMatch{Name: "onSuccess", To: "review"}}},
		Step{Name: "stop", Cancel: true, Expect: &Expect{Phase: flowv1.PhaseCancelled, Pathway: "review"}},
	)
	s, rev := liveObjects(t, c)
	l := fetch(t, s, rev)
	if _, notes, r := recordAndRun(t, l); len(notes) > 0 || r.Failed() {
		t.Fatalf("recorded: %q %s", notes, r.Error())
	}
	rep, err := Replay(l)
	if err != nil || rep.Step != 0 || rep.Incomplete != nil {
		t.Fatalf("replay: %v %d %s %v", err, rep.Step, rep.Detail, rep.Incomplete)
	}
}
