package journeytest

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// RunFiles loads and runs the test files, in order. A file that cannot be loaded is a
// failed test.
func RunFiles(paths []string) []*Result {
	out := make([]*Result, 0, len(paths))
	for _, p := range paths {
		c, err := Load(p)
		if err != nil {
			out = append(out, &Result{Name: p, Path: p, Err: err})
			continue
		}
		out = append(out, Run(c))
	}
	return out
}

// PrintResult writes a test's per-step table and its failures:
//
//	STEP  INPUT  PATHWAY  ITER  PHASE  TRANSITIONS  RESULT
func PrintResult(w io.Writer, r *Result) {
	verdict := "PASS"
	if r.Failed() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "=== %s", r.Name)
	if r.Path != "" && r.Path != r.Name {
		fmt.Fprintf(w, " (%s)", r.Path)
	}
	fmt.Fprintln(w)
	if r.Err != nil {
		fmt.Fprintf(w, "--- %s: %s: %v\n\n", verdict, r.Name, r.Err)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tINPUT\tPATHWAY\tITER\tPHASE\tTRANSITIONS\tRESULT")
	for i := range r.Steps {
		s := &r.Steps[i]
		if s.Skipped {
			fmt.Fprintf(tw, "%d\t%s\t\t\t\t\tskipped\n", s.Index, s.Input)
			continue
		}
		result := "ok"
		switch {
		case s.Err != nil:
			result = "ERROR"
		case len(s.Failures) > 0:
			result = "FAIL"
		}
		input := s.Input
		if s.Name != "" {
			input = s.Name + ": " + input
		}
		pathway, iter, phase := "-", "-", "-"
		if st := s.Status; st != nil {
			pathway, iter, phase = orDash(st.CurrentPathway), fmt.Sprint(st.Iteration), orDash(string(st.Phase))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Index, truncate.Line(input, 60), pathway, iter, phase, transitionsCell(s.History), result)
	}
	tw.Flush()
	for _, p := range r.Problems() {
		fmt.Fprintf(w, "    %s\n", p)
	}
	fmt.Fprintf(w, "--- %s: %s (%d steps, revision %s, %s)\n\n", verdict, r.Name, len(r.Steps), r.Revision, r.Duration.Round(time.Microsecond))
}

// transitionsCell names up to three transitions; more are drawn as the path taken.
func transitionsCell(h []flowv1.HistoryEntry) string {
	if len(h) == 0 {
		return "-"
	}
	if len(h) <= 3 {
		parts := make([]string, len(h))
		for i, e := range h {
			parts[i] = describeEntry(e)
		}
		return strings.Join(parts, ", ")
	}
	var b strings.Builder
	prev := ""
	for i, e := range h {
		if i == 0 || e.From != prev {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(e.From)
		}
		switch {
		case e.Action == flowv1.ActionClose || e.To == "":
			b.WriteString(" " + string(e.Action))
		case e.Action == flowv1.ActionRetry || e.Action == flowv1.ActionJumpBack:
			b.WriteString("→" + e.To + "(" + string(e.Action) + ")")
		default:
			b.WriteString("→" + e.To)
		}
		prev = e.To
	}
	return fmt.Sprintf("%d: %s", len(h), b.String())
}

// PrintSummary writes one line per failed test and the totals. It returns the number
// of failed tests.
func PrintSummary(w io.Writer, results []*Result) int {
	failed := 0
	for _, r := range results {
		if r.Failed() {
			failed++
			fmt.Fprintf(w, "FAIL %s\n", r.Error())
		}
	}
	if failed == 0 {
		fmt.Fprintf(w, "ok: %d journey tests passed\n", len(results))
	} else {
		fmt.Fprintf(w, "FAIL: %d of %d journey tests failed\n", failed, len(results))
	}
	return failed
}

// JUnit XML, as CI systems read it: a testsuite per test file, a testcase per step.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	File       string          `xml:"file,attr,omitempty"`
	Properties *junitProps     `xml:"properties,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
	Error      *junitFailure   `xml:"error,omitempty"`
	SystemOut  *junitSystemOut `xml:"system-out,omitempty"`
}

type junitProps struct {
	Props []junitProp `xml:"property"`
}

type junitProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string          `xml:"name,attr"`
	Classname string          `xml:"classname,attr"`
	Time      string          `xml:"time,attr"`
	Failure   *junitFailure   `xml:"failure,omitempty"`
	Error     *junitFailure   `xml:"error,omitempty"`
	Skipped   *struct{}       `xml:"skipped,omitempty"`
	SystemOut *junitSystemOut `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSystemOut struct {
	Text string `xml:",chardata"`
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// WriteJUnit writes the results as JUnit XML.
func WriteJUnit(w io.Writer, results []*Result) error {
	doc := junitSuites{Name: "journey tests"}
	var total time.Duration
	for _, r := range results {
		total += r.Duration
		suite := junitSuite{Name: r.Name, File: r.Path, Time: seconds(r.Duration)}
		if r.Revision != "" {
			suite.Properties = &junitProps{Props: []junitProp{{Name: "revision", Value: r.Revision}}}
		}
		if r.Err != nil {
			suite.Errors = 1
			suite.Error = &junitFailure{Message: r.Err.Error(), Type: "setup", Text: r.Err.Error()}
		}
		for i := range r.Steps {
			s := &r.Steps[i]
			name := fmt.Sprintf("step %02d: %s", s.Index, s.Input)
			if s.Name != "" {
				name = fmt.Sprintf("step %02d %s: %s", s.Index, s.Name, s.Input)
			}
			tc := junitCase{Name: name, Classname: r.Name, Time: seconds(s.Duration)}
			switch {
			case s.Skipped:
				tc.Skipped = &struct{}{}
				suite.Skipped++
			case s.Err != nil:
				tc.Error = &junitFailure{Message: s.Err.Error(), Type: "error", Text: s.Title() + ": " + s.Err.Error()}
				suite.Errors++
			case len(s.Failures) > 0:
				lines := make([]string, len(s.Failures))
				for j, f := range s.Failures {
					lines[j] = s.Title() + ": " + f
				}
				tc.Failure = &junitFailure{Message: s.Failures[0], Type: "expectation", Text: strings.Join(lines, "\n")}
				suite.Failures++
			}
			if s.Status != nil {
				tc.SystemOut = &junitSystemOut{Text: stepSummary(s)}
			}
			suite.Cases = append(suite.Cases, tc)
			suite.Tests++
		}
		doc.Tests += suite.Tests
		doc.Failures += suite.Failures
		doc.Errors += suite.Errors
		doc.Skipped += suite.Skipped
		doc.Suites = append(doc.Suites, suite)
	}
	doc.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func stepSummary(s *StepResult) string {
	st := s.Status
	var b strings.Builder
	fmt.Fprintf(&b, "pathway %s, iteration %d, phase %s", orDash(st.CurrentPathway), st.Iteration, orDash(string(st.Phase)))
	if st.Confidence != "" {
		fmt.Fprintf(&b, ", confidence %s", st.Confidence)
	}
	fmt.Fprintf(&b, "\ntransitions: %s", transitionsCell(s.History))
	for _, e := range s.Effects {
		fmt.Fprintf(&b, "\nLLM call: %s", e)
	}
	for _, r := range s.Replies {
		fmt.Fprintf(&b, "\nreply: %s", r)
	}
	return b.String()
}
