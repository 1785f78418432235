package journeytest

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

func samplesDir() string { return testenv.SamplesDir() }

func testsDir() string { return filepath.Join(samplesDir(), "tests") }

func load(t *testing.T, path string) *Case {
	t.Helper()
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sampleTest(t *testing.T, name string) *Case {
	t.Helper()
	return load(t, filepath.Join(testsDir(), name))
}

// TestSampleJourneyTests runs every journey test of config/samples/tests: the stories
// the sample files tell, one test per sample.
func TestSampleJourneyTests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testsDir(), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	samples, err := filepath.Glob(filepath.Join(samplesDir(), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		if base := filepath.Base(s); base != "kustomization.yaml" && !slices.Contains(files, filepath.Join(testsDir(), base)) {
			t.Errorf("sample %s has no journey test %s", base, filepath.Join("config/samples/tests", base))
		}
	}
	if len(files) < 4 {
		t.Fatalf("want a journey test per sample, found %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := Run(load(t, f))
			var out bytes.Buffer
			PrintResult(&out, r)
			t.Log("\n" + out.String())
			if r.Failed() {
				t.Fatal(r.Error())
			}
			if len(r.Steps) == 0 || r.Status == nil {
				t.Fatal("the test ran no step")
			}
		})
	}
}

// TestSampleTestsAreNotApplied keeps the journey tests out of kubectl apply -k config/samples.
func TestSampleTestsAreNotApplied(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(samplesDir(), "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("tests")) {
		t.Fatalf("config/samples/kustomization.yaml must not list the journey tests:\n%s", raw)
	}
}

// failing are the deliberately failing tests of config/samples/tests/failing and the
// report each must produce.
var failing = map[string]struct {
	step     int      // the step (from 1) that fails
	want     []string // in Result.Error()
	skipped  []int    // steps that must not run
	errIsSet bool     // the step could not run (rather than an expectation failing)
}{
	"wrong-doctor.yaml": {
		step: 3,
		want: []string{
			`wrong-doctor: step 3 "reject Dr. Smith" (message m3 "I don't want Dr. Smith.`,
			`reply: want it to contain "I recommend Dr. Smith", got "I recommend Dr. Johnson,`,
			`context.selected_doctor.name: want "Dr. Smith", got "Dr. Johnson"`,
		},
	},
	"missing-llm-answer.yaml": {
		step:     1,
		errIsSet: true,
		skipped:  []int{2},
		want: []string{
			`step 1 "an unclear question" (message m1 "Where is my parcel?")`,
			`the engine called an LLM agent (ClassifyIntent of "Where is my parcel?" by agent classifier)`,
			`add one under steps[0].answers`,
		},
	},
}

// TestFailingJourneyTests checks that the deliberately failing tests fail, and that the
// runner names the failing step and expectation.
func TestFailingJourneyTests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testsDir(), "failing", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(failing) {
		t.Errorf("config/samples/tests/failing has %d tests, this test documents %d: %v", len(files), len(failing), files)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			want, ok := failing[name]
			if !ok {
				t.Fatalf("%s is not documented in this test", name)
			}
			r := Run(load(t, f))
			if !r.Failed() {
				t.Fatal("the test passed; it must fail")
			}
			msg := r.Error()
			for _, w := range want.want {
				if !strings.Contains(msg, w) {
					t.Errorf("the report lacks %q:\n%s", w, msg)
				}
			}
			for i, s := range r.Steps {
				switch {
				case s.Index == want.step:
					if want.errIsSet != (s.Err != nil) {
						t.Errorf("step %d: Err = %v, want set: %v", s.Index, s.Err, want.errIsSet)
					}
				case slices.Contains(want.skipped, s.Index):
					if !s.Skipped {
						t.Errorf("step %d ran; it must be skipped after the failure", s.Index)
					}
				case s.Failed():
					t.Errorf("step %d failed too: %v %v", i+1, s.Failures, s.Err)
				}
			}
		})
	}
}

// TestChangedJourneyFailsItsTest changes a sample journey in memory: its test must fail
// and name the step and the expectation that no longer hold.
func TestChangedJourneyFailsItsTest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		test   string
		change func(t *testing.T, c *Case)
		want   []string
	}{{
		name: "integration succeeds into rollback instead of deploy",
		test: "delivery-pipeline.yaml",
		change: func(t *testing.T, c *Case) {
			c.Pathway("integration").Transitions.OnSuccess.To = "rollback"
		},
		want: []string{
			`step 1 "the pipeline runs on its own" (no input): transitions: want [`,
			`{name=onSuccess from=integration to=deploy}, {from=deploy action=Close}], got [onSuccess plan→implement,`,
			`onSuccess integration→rollback, next rollback→(Close)]`,
			`step 1 "the pipeline runs on its own" (no input): pathway: want deploy, got rollback`,
		},
	}, {
		name: "booking's next is persuasion",
		test: "healthcare-referral.yaml",
		change: func(t *testing.T, c *Case) {
			// booking's next is confirmation; send it elsewhere, keeping confirmation
			// reachable (a failing persuasion confirms) so the journey stays valid.
			c.Pathway("booking").Next = "persuasion"
			c.Pathway("persuasion").Transitions = &flowv1.OutcomeTransitions{OnFailure: &flowv1.OutcomeTransition{To: "confirmation"}}
		},
		want: []string{
			`step 5 "book Dr. Johnson" (message m5 "Dr. Johnson looks great. Book the Tuesday 2pm s…")`,
			`transitions: want [{name=next from=booking to=confirmation}, {action=Close}], got [next booking→persuasion]`,
			`pathway: want confirmation, got persuasion`,
			`phase: want Completed, got WaitingForInput`,
		},
	}, {
		name: "reject-doctor leads to persuasion",
		test: "healthcare-referral.yaml",
		change: func(t *testing.T, c *Case) {
			for i := range c.Data.Journey.Transitions {
				if c.Data.Journey.Transitions[i].Name == "reject-doctor" {
					c.Data.Journey.Transitions[i].To = "persuasion"
				}
			}
		},
		want: []string{
			`step 4 "reject Dr. Smith" (message m4 "I don't want Dr. Smith. Can you show me another…"): transition: want {name=reject-doctor from=booking to=booking}, got [reject-doctor booking→persuasion, next persuasion→booking]`,
			`step 4 "reject Dr. Smith" (message m4 "I don't want Dr. Smith. Can you show me another…"): reply: want it to contain "I recommend Dr. Johnson"`,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := sampleTest(t, tc.test)
			if r := Run(c); r.Failed() {
				t.Fatalf("before the change: %s", r.Error())
			}
			c = sampleTest(t, tc.test)
			tc.change(t, c)
			r := Run(c)
			if !r.Failed() {
				t.Fatal("the test still passes after the journey changed")
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Error(), w) {
					t.Errorf("the report lacks %q:\n%s", w, strings.Join(r.Problems(), "\n"))
				}
			}
		})
	}
}

// TestInvalidJourneyChange: a change that leaves a pathway unreachable fails the test
// before its first step, with the controller's validation message.
func TestInvalidJourneyChange(t *testing.T) {
	c := sampleTest(t, "healthcare-referral.yaml")
	c.Pathway("booking").Next = "escalation"
	r := Run(c)
	var inv interface{ Error() string }
	if r.Err == nil {
		t.Fatal("want the journey to be invalid")
	}
	inv = r.Err
	if !strings.Contains(inv.Error(), "pathway confirmation is unreachable from the entry pathway intake") {
		t.Fatalf("got %v", r.Err)
	}
}

// TestDeterministic: the same test gives the same statuses, step by step.
func TestDeterministic(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testsDir(), "*.yaml"))
	for _, f := range files {
		a, b := Run(load(t, f)), Run(load(t, f))
		if len(a.Steps) != len(b.Steps) {
			t.Fatalf("%s: %d steps, then %d", f, len(a.Steps), len(b.Steps))
		}
		for i := range a.Steps {
			if !equality.Semantic.DeepEqual(a.Steps[i].Status, b.Steps[i].Status) {
				t.Fatalf("%s: step %d differs between two runs", f, i+1)
			}
		}
	}
}

func TestLLMAnswers(t *testing.T) {
	path := filepath.Join("testdata", "llm-answers.yaml")
	t.Run("recorded answers", func(t *testing.T) {
		r := Run(load(t, path))
		if r.Failed() {
			t.Fatal(r.Error())
		}
		if got := r.Steps[1].Effects; len(got) != 3 || !strings.HasPrefix(got[2], "Decide on help.onSuccess by agent judge") {
			t.Fatalf("effects of step 2: %q", got)
		}
		// The answers were journaled like the controller journals them.
		if r.Status.Usage.PromptTokens != 120 {
			t.Fatalf("usage %+v", r.Status.Usage)
		}
	})
	t.Run("missing answer", func(t *testing.T) {
		c := load(t, path)
		c.Steps[1].Answers = c.Steps[1].Answers[:2]
		r := Run(c)
		var missing *MissingAnswerError
		if !errors.As(r.Steps[1].Err, &missing) {
			t.Fatalf("want a missing answer, got %v", r.Error())
		}
		for _, w := range []string{`step 2 "solved"`, "Decide on help.onSuccess by agent judge", "its 2 answers are used up", "steps[1].answers", "{kind: Decide, answer: {destination: ..."} {
			if !strings.Contains(r.Error(), w) {
				t.Errorf("the report lacks %q: %s", w, r.Error())
			}
		}
	})
	t.Run("unused answer", func(t *testing.T) {
		c := load(t, path)
		c.Steps[0].Answers = append(c.Steps[0].Answers, c.Steps[1].Answers[2])
		r := Run(c)
		if !strings.Contains(r.Error(), `step 1 "a broken order" (message m1 "My order arrived broken."): answers[2] (Decide) was not used`) {
			t.Fatalf("got %s", r.Error())
		}
	})
	t.Run("answer of another kind", func(t *testing.T) {
		c := load(t, path)
		c.Steps[0].Answers = c.Steps[0].Answers[1:]
		r := Run(c)
		if r.Steps[0].Err == nil || !strings.Contains(r.Error(), "the engine called an LLM agent (ClassifyIntent of \"My order arrived broken.\" by agent classifier) but answers[0] is a RunPathway answer") {
			t.Fatalf("got %s", r.Error())
		}
	})
	t.Run("answer for another agent", func(t *testing.T) {
		c := load(t, path)
		c.Steps[1].Answers[2].Agent = "writer"
		r := Run(c)
		if !strings.Contains(r.Error(), "but answers[2] is for agent writer") {
			t.Fatalf("got %s", r.Error())
		}
	})
	t.Run("medium confidence waits for an approval", func(t *testing.T) {
		c := load(t, path)
		c.Steps[1].Answers[2].Answer = json.RawMessage(`{"destination":"done","confidence":0.6}`)
		c.Steps[1].Expect = &Expect{Phase: flowv1.PhaseAwaitingApproval, Pathway: "help", Confidence: &ConfidenceRange{Min: "0.6", Max: "0.6"}}
		yes := true
		c.Steps = append(c.Steps, Step{Name: "approve", Approval: &ApprovalInput{Approve: &yes, By: "alice"},
			Expect: &Expect{Phase: flowv1.PhaseCompleted, Pathway: "done", Transition: &TransitionMatch{Source: flowv1.SourceApproval, To: "done"}}})
		if r := Run(c); r.Failed() {
			t.Fatal(r.Error())
		}
	})
	t.Run("invalid answer is an unclear decision", func(t *testing.T) {
		c := load(t, path)
		c.Steps[1].Answers[2] = Answer{Kind: flowv1.EffectDecide, Error: &AnswerError{Message: "the answer is not JSON"}}
		c.Steps[1].Expect = &Expect{Pathway: "help", Transitions: []TransitionMatch{}}
		r := Run(c)
		if r.Failed() {
			t.Fatal(r.Error())
		}
		if r.Status.Phase == flowv1.PhaseCompleted {
			t.Fatalf("an unclear decision completed the journey")
		}
	})
	t.Run("terminal error stalls the Session", func(t *testing.T) {
		c := load(t, path)
		c.Steps[0].Answers[1] = Answer{Kind: flowv1.EffectRunPathway, Error: &AnswerError{Class: "Terminal", Kind: flowv1.FailureValidation, Message: "401 invalid API key"}}
		c.Steps[0].Expect = &Expect{Stalled: flowv1.ReasonAgentTerminalError}
		c.Steps = c.Steps[:1]
		if r := Run(c); r.Failed() {
			t.Fatal(r.Error())
		}
	})
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown field", "manifests: [a.yaml]\nsteps: [{mesage: hi}]", `unknown field "mesage"`},
		{"two inputs", "manifests: [a.yaml]\nsteps: [{message: hi, approval: {approve: true}}]", "at most one of message, outcome, approval, suspend and cancel"},
		{"no steps", "manifests: [a.yaml]", "at least one step"},
		{"approval without approve", "manifests: [a.yaml]\nsteps: [{approval: {}}]", "approval.approve: say true or false"},
		{"bad answer", "manifests: [a.yaml]\nsteps: [{message: hi, answers: [{kind: Decide, answer: {destination: x, confidence: high}}]}]", "steps[0].answers[0].answer: a Decide answer"},
		{"bad kind", "manifests: [a.yaml]\nsteps: [{message: hi, answers: [{kind: Ask, answer: {}}]}]", `"Ask" is not ClassifyIntent, RunPathway, Decide or CallTool`},
		{"bad path", "manifests: [a.yaml]\nsteps: [{message: hi, expect: {fields: {'context..x': 1}}}]", "empty name"},
		{"bad result", "manifests: [a.yaml]\nsteps: [{outcome: {resultType: ok}}]", `"ok" is not success`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestManifestErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("j.yaml", `apiVersion: flow.journey.dev/v1alpha1
kind: Journey
metadata: {name: j}
spec:
  entryPathway: a
  pathways: [{name: a, pathwayRef: pa}]
  entryPathwy: a
`)
	p := write("t.yaml", "manifests: [j.yaml]\nsteps: [{message: hi}]\n")
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), `j.yaml: document 1: Journey: json: unknown field "entryPathwy"`) {
		t.Fatalf("got %v", err)
	}
	write("j.yaml", `apiVersion: flow.journey.dev/v1alpha1
kind: Journey
metadata: {name: j}
spec:
  entryPathway: a
  pathways: [{name: a, pathwayRef: pa}]
`)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), `pathway "a": Pathway "pa" is not in the manifests`) {
		t.Fatalf("got %v", err)
	}
}

func TestPaths(t *testing.T) {
	doc := toJSONValue(map[string]any{"context": map[string]any{"a b": []any{map[string]any{"name": "x"}}, "n": 3}})
	for _, tc := range []struct {
		path string
		want any
		ok   bool
	}{
		{`context["a b"][0].name`, "x", true},
		{`context['a b'][0].name`, "x", true},
		{`context.n`, 3.0, true},
		{`context.n[0]`, nil, false},
		{`context["a b"][1]`, nil, false},
		{`context.missing`, nil, false},
	} {
		p, err := parsePath(tc.path)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		got, ok := p.lookup(doc)
		if ok != tc.ok || !equalJSON(got, tc.want) {
			t.Errorf("%s: got %v %v", tc.path, got, ok)
		}
	}
	p, _ := parsePath(`context["a b"][0].name`)
	if p.String() != `context["a b"][0].name` {
		t.Errorf("String: %s", p)
	}
}

func TestJUnit(t *testing.T) {
	results := RunFiles([]string{
		filepath.Join(testsDir(), "review-loop.yaml"),
		filepath.Join(testsDir(), "failing", "wrong-doctor.yaml"),
		filepath.Join(testsDir(), "failing", "missing-llm-answer.yaml"),
		filepath.Join(testsDir(), "no-such-test.yaml"),
	})
	var out bytes.Buffer
	if err := WriteJUnit(&out, results); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(doc.Suites) != 4 || doc.Tests != 7+3+2 || doc.Failures != 1 || doc.Errors != 2 || doc.Skipped != 1 {
		t.Fatalf("tests %d failures %d errors %d skipped %d suites %d:\n%s", doc.Tests, doc.Failures, doc.Errors, doc.Skipped, len(doc.Suites), out.String())
	}
	wd := doc.Suites[1]
	if wd.Name != "wrong-doctor" || wd.Failures != 1 || wd.Cases[2].Failure == nil ||
		!strings.Contains(wd.Cases[2].Failure.Text, `step 3 "reject Dr. Smith"`) ||
		!strings.Contains(wd.Cases[2].Failure.Text, `context.selected_doctor.name: want "Dr. Smith", got "Dr. Johnson"`) {
		t.Fatalf("wrong-doctor suite: %+v", wd)
	}
	if doc.Suites[3].Error == nil || !strings.Contains(doc.Suites[3].Error.Message, "no-such-test.yaml") {
		t.Fatalf("a missing file is an error: %+v", doc.Suites[3])
	}
	var summary bytes.Buffer
	if n := PrintSummary(&summary, results); n != 3 || !strings.Contains(summary.String(), "FAIL: 3 of 4 journey tests failed") {
		t.Fatalf("summary (%d):\n%s", n, summary.String())
	}
}

// TestMarshalRoundTrip: a case written by Marshal reads back the same.
func TestMarshalRoundTrip(t *testing.T) {
	for _, name := range []string{"healthcare-referral.yaml", "planning.yaml"} {
		c := sampleTest(t, name)
		out, err := Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		back.Path = c.Path
		if err := back.Resolve(); err != nil {
			t.Fatal(err)
		}
		if r := Run(back); r.Failed() {
			t.Fatalf("%s after a round trip: %s\n%s", name, r.Error(), out)
		}
	}
}

func TestBuiltinToolsNeedNoAnswers(t *testing.T) {
	c := load(t, filepath.Join("testdata", "builtin-tools.yaml"))
	r := Run(c)
	if r.Failed() {
		t.Fatalf("%s\nlast turn: %+v", r.Error(), r.Status.LastTurn)
	}
	if got := r.Steps[0].Effects; len(got) != 2 || got[0] != "CallTool of tool copay" || got[1] != "CallTool of tool discount" {
		t.Fatalf("effects %q", got)
	}
	// The expectations are checked: a wrong one fails.
	c = load(t, filepath.Join("testdata", "builtin-tools.yaml"))
	c.Steps[0].Message.Text = "A general visit?"
	if r := Run(c); !r.Failed() || !strings.Contains(r.Error(), "Copay 20 USD") {
		t.Fatalf("a changed answer passed: %s", r.Error())
	}
}

func TestScriptedToolResults(t *testing.T) {
	path := filepath.Join("testdata", "server-tools.yaml")
	t.Run("scripted results reach outputs and reply", func(t *testing.T) {
		r := Run(load(t, path))
		if r.Failed() {
			t.Fatalf("%s\nlast turn: %+v", r.Error(), r.Status.LastTurn)
		}
		if got := r.Steps[0].Effects; len(got) != 2 || got[0] != "CallTool of tool find_doctors" || got[1] != "CallTool of tool book_slot" {
			t.Fatalf("effects %q", got)
		}
	})
	t.Run("a result that does not match the expectations fails", func(t *testing.T) {
		c := load(t, path)
		c.Tools[2].Result = json.RawMessage(`{"booking_id":"b-9","slot":"2026-12-01T09:00"}`)
		r := Run(c)
		for _, w := range []string{`reply: want it to contain "Booked b-1 with Dr. Lee.", got "Booked b-9 with Dr. Lee."`, `context.booking.booking_id: want "b-1", got "b-9"`} {
			if !strings.Contains(r.Error(), w) {
				t.Errorf("the report lacks %q: %s", w, r.Error())
			}
		}
	})
	t.Run("args select the result", func(t *testing.T) {
		c := load(t, path)
		c.Steps[0].Message.Text = "A general check-up."
		c.Steps[0].Expect = &Expect{Fields: map[string]any{
			"lastTurn.toolCalls[1].state": "Failed", "lastTurn.toolCalls[1].error": "the slot is no longer free",
		}}
		r := Run(c)
		if r.Failed() {
			t.Fatal(r.Error())
		}
	})
	t.Run("a step's tools come first", func(t *testing.T) {
		c := load(t, path)
		c.Steps[0].Tools = []ToolResult{{Tool: "book_slot", Result: json.RawMessage(`{"booking_id":"b-2"}`)}}
		if r := Run(c); !strings.Contains(r.Error(), `got "Booked b-2 with Dr. Lee."`) {
			t.Fatalf("got %s", r.Error())
		}
	})
	t.Run("a call without a result stops the step", func(t *testing.T) {
		c := load(t, path)
		c.Tools = c.Tools[:1]
		r := Run(c)
		var missing *MissingToolResultError
		if !errors.As(r.Steps[0].Err, &missing) || missing.Tool != "book_slot" {
			t.Fatalf("want a missing tool result, got %v", r.Error())
		}
		for _, w := range []string{`tool book_slot with arguments {"doctor_id":"dr-lee","slot":"2026-12-01T09:00"}`, "under tools (or steps[0].tools)"} {
			if !strings.Contains(r.Error(), w) {
				t.Errorf("the report lacks %q: %s", w, r.Error())
			}
		}
	})
	t.Run("a recorded CallTool answer is used first", func(t *testing.T) {
		c := load(t, path)
		c.Steps[0].Answers = []Answer{{Kind: flowv1.EffectCallTool, Answer: json.RawMessage(`{"result":{"doctors":[{"id":"dr-lee","name":"Dr. Who","slots":["x"]}]}}`)}}
		c.Steps[0].Expect = &Expect{Reply: &TextMatch{Contains: []string{"with Dr. Who."}}}
		c.Tools[2].Args = nil
		if r := Run(c); r.Failed() {
			t.Fatal(r.Error())
		}
	})
}

func TestToolResultFormat(t *testing.T) {
	for src, want := range map[string]string{
		"tools: [{tool: a}]":                      "tools[0]: give exactly one of result and error",
		"tools: [{result: 1}]":                    "tools[0].tool: name the tool",
		"tools: [{tool: a, result: 1, error: x}]": "tools[0]: give exactly one of result and error",
		"tools: [{tool: a, results: 1}]":          `unknown field "results"`,
	} {
		_, err := Parse([]byte(src + "\nmanifests: [x.yaml]\nsteps: [{message: hi}]\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", src, err, want)
		}
	}
	if _, err := Parse([]byte("manifests: [x.yaml]\nsteps: [{message: hi, tools: [{tool: a}]}]\n")); err == nil || !strings.Contains(err.Error(), "steps[0].tools[0]") {
		t.Errorf("step tools: %v", err)
	}
}
