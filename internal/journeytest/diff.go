package journeytest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/revision/revdata"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// DiffRevision is a journey revision that recordings are replayed on: a revision
// stored in the cluster (Name and Data, read from its ControllerRevision), or
// Journey and Pathway manifests (Manifests, resolved for the journey of each
// recording, as a test's manifests are).
type DiffRevision struct {
	// Label names the revision in reports: the revision name or the manifests' path.
	Label string
	// Journey is the journey the stored revision belongs to ("" for manifests).
	Journey string
	// Data is a stored revision's data.
	Data *RevisionData
	// Manifests are manifest files to resolve the recording's journey from.
	Manifests []string
}

// ManifestRevision is the revision the Journey and Pathway manifests under path (a
// file, or a directory's *.yaml files) resolve to.
func ManifestRevision(path string) (*DiffRevision, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if fi.IsDir() {
		files = nil
		for _, pattern := range []string{"*.yaml", "*.yml"} {
			m, err := filepath.Glob(filepath.Join(path, pattern))
			if err != nil {
				return nil, err
			}
			files = append(files, m...)
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s holds no *.yaml manifests", path)
		}
		slices.Sort(files)
	}
	abs := make([]string, len(files))
	for i, f := range files {
		if abs[i], err = filepath.Abs(f); err != nil {
			return nil, err
		}
	}
	return &DiffRevision{Label: path, Manifests: abs}, nil
}

// StoredRevision is the revision name of journey, from its stored data raw (a
// ControllerRevision's).
func StoredRevision(journey, name string, raw []byte) (*DiffRevision, error) {
	data, err := revdata.Decode(name, raw)
	if err != nil {
		return nil, err
	}
	return &DiffRevision{Label: name, Journey: journey, Data: data}, nil
}

// on returns a copy of the recording c that runs on revision r, or why it cannot.
func (r *DiffRevision) on(c *Case) (*Case, error) {
	cc := *c
	cc.Revision = "" // the recording runs on r, whatever it was recorded on
	cc.Path = ""
	if r.Data != nil {
		if r.Journey != "" && c.Journey != "" && r.Journey != c.Journey {
			return nil, fmt.Errorf("revision %s is of journey %s, the recording is of journey %s", r.Label, r.Journey, c.Journey)
		}
		d := *r.Data
		cc.Data = &d
		return &cc, nil
	}
	cc.Manifests = make([]Manifest, len(r.Manifests))
	for i, m := range r.Manifests {
		cc.Manifests[i] = Manifest{Path: m}
	}
	if err := cc.Resolve(); err != nil {
		return nil, fmt.Errorf("%s: %w", r.Label, err)
	}
	return &cc, nil
}

// SessionDiff is what replaying one recording on two revisions shows.
type SessionDiff struct {
	// Session names the recorded Session (the test's name when it names none), Path
	// the recording.
	Session, Path string
	// Err is set when the recording could not be replayed on one of the revisions.
	Err error
	// Step is the first step (from 1) where the two replays differ, 0 when they do
	// not; Input describes that step's input and Why what differs.
	Step  int
	Input string
	Why   string
	// From and To are the replays.
	From, To *Result
}

// Changed reports whether the Session would behave otherwise on the second revision.
func (d *SessionDiff) Changed() bool { return d.Step > 0 }

// DiffReport is the outcome of replaying a directory of recordings on two revisions.
type DiffReport struct {
	From, To string
	Sessions []SessionDiff
}

// Changed returns the Sessions that would behave otherwise.
func (r *DiffReport) Changed() []SessionDiff {
	var out []SessionDiff
	for _, d := range r.Sessions {
		if d.Changed() {
			out = append(out, d)
		}
	}
	return out
}

// Errors returns the recordings that could not be replayed.
func (r *DiffReport) Errors() []SessionDiff {
	var out []SessionDiff
	for _, d := range r.Sessions {
		if d.Err != nil {
			out = append(out, d)
		}
	}
	return out
}

// Diff replays each recording (a journey test, as kubectl journey record writes one)
// on revision from and on revision to, with the recording's answers and tool results
// only (no agent or tool server is called), and compares the two step by step: the
// decisions made (destination, band and confidence), the transitions taken, the
// replies, and where each step leaves the Session. A question one
// revision asks that the recording holds no answer to is a difference too: on that
// revision a model would be asked something the Session was never asked.
func Diff(paths []string, from, to *DiffRevision) *DiffReport {
	rep := &DiffReport{From: from.Label, To: to.Label}
	for _, p := range paths {
		rep.Sessions = append(rep.Sessions, diffOne(p, from, to))
	}
	return rep
}

func diffOne(path string, from, to *DiffRevision) SessionDiff {
	d := SessionDiff{Session: path, Path: path}
	c, err := Load(path)
	if err != nil {
		d.Err = err
		return d
	}
	d.Session = c.Session.Name
	if d.Session == "" {
		d.Session = c.Name
	}
	run := func(r *DiffRevision) (*Result, error) {
		cc, err := r.on(c)
		if err != nil {
			return nil, err
		}
		res := Run(cc)
		if res.Err != nil {
			return nil, fmt.Errorf("on %s: %w", r.Label, res.Err)
		}
		return res, nil
	}
	if d.From, err = run(from); err != nil {
		d.Err = err
		return d
	}
	if d.To, err = run(to); err != nil {
		d.Err = err
		return d
	}
	for i := range d.From.Steps {
		a, b := &d.From.Steps[i], &d.To.Steps[i]
		if why := stepDifference(a, b); why != "" {
			d.Step, d.Input, d.Why = a.Index, a.Input, why
			if a.Name != "" {
				d.Input = a.Name + ": " + a.Input
			}
			break
		}
	}
	return d
}

// stepDifference says how step b (on the second revision) differs from step a (on the
// first), or "".
func stepDifference(a, b *StepResult) string {
	if a.Skipped || b.Skipped {
		return "" // an earlier step already differed or stopped both
	}
	if ea, eb := stepError(a), stepError(b); ea != eb {
		return fmt.Sprintf("%s; %s", describeRun("from", ea), describeRun("to", eb))
	}
	for i := 0; i < max(len(a.Decisions), len(b.Decisions)); i++ {
		switch {
		case i >= len(a.Decisions):
			return fmt.Sprintf("decision: to decides %s, from makes no further decision", describeDecision(b.Decisions[i]))
		case i >= len(b.Decisions):
			return fmt.Sprintf("decision: from decides %s, to makes no further decision", describeDecision(a.Decisions[i]))
		case describeDecision(a.Decisions[i]) != describeDecision(b.Decisions[i]):
			return fmt.Sprintf("decision: from decides %s, to decides %s", describeDecision(a.Decisions[i]), describeDecision(b.Decisions[i]))
		}
	}
	for i := 0; i < max(len(a.History), len(b.History)); i++ {
		switch {
		case i >= len(a.History):
			return fmt.Sprintf("path: to takes %s, from takes no further transition", describeEntry(b.History[i]))
		case i >= len(b.History):
			return fmt.Sprintf("path: from takes %s, to takes no further transition", describeEntry(a.History[i]))
		case !sameEntry(a.History[i], b.History[i]):
			return fmt.Sprintf("path: from takes %s, to takes %s", describeFull(a.History[i]), describeFull(b.History[i]))
		}
	}
	if !slices.Equal(a.Replies, b.Replies) {
		return fmt.Sprintf("reply: from replies %q, to replies %q", truncate.Line(strings.Join(a.Replies, "\n"), 120), truncate.Line(strings.Join(b.Replies, "\n"), 120))
	}
	if a.Status != nil && b.Status != nil {
		if a.Status.Phase != b.Status.Phase || a.Status.CurrentPathway != b.Status.CurrentPathway {
			return fmt.Sprintf("state: from leaves the Session in %s/%s, to in %s/%s",
				orDash(a.Status.CurrentPathway), orDash(string(a.Status.Phase)), orDash(b.Status.CurrentPathway), orDash(string(b.Status.Phase)))
		}
	}
	return ""
}

// stepError is the error a replayed step stopped on, "" for none.
func stepError(s *StepResult) string {
	if s.Err == nil {
		return ""
	}
	var missing *MissingAnswerError
	if errors.As(s.Err, &missing) {
		return fmt.Sprintf("asks %s, which the recording holds no answer to", missing.Effect)
	}
	return s.Err.Error()
}

func describeRun(which, err string) string {
	if err == "" {
		return which + " runs the step"
	}
	return which + " " + err
}

// describeDecision is "pathway.transition → destination (state, confidence c)".
func describeDecision(d flowv1.DecisionRecord) string {
	s := fmt.Sprintf("%s.%s→%s (%s", orDash(d.From), orDash(d.Transition), orDash(d.To), orDash(string(d.State)))
	if d.Confidence != "" {
		s += ", confidence " + string(d.Confidence)
	}
	return s + ")"
}

// Print writes one line per Session that changes, with its first divergent step, then
// the recordings that could not be replayed and a summary.
//
//	SESSION  STEP  INPUT  WHAT CHANGES
func (r *DiffReport) Print(w io.Writer) {
	changed := r.Changed()
	if len(changed) > 0 {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tSTEP\tINPUT\tWHAT CHANGES")
		for _, d := range changed {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", d.Session, d.Step, truncate.Line(d.Input, 48), d.Why)
		}
		tw.Flush()
	}
	for _, d := range r.Errors() {
		fmt.Fprintf(w, "Not replayed: %s (%s): %v\n", d.Session, d.Path, d.Err)
	}
	fmt.Fprintf(w, "%d of %d recorded Sessions change from %s to %s", len(changed), len(r.Sessions), r.From, r.To)
	if n := len(r.Errors()); n > 0 {
		fmt.Fprintf(w, "; %d could not be replayed", n)
	}
	fmt.Fprintln(w)
}
