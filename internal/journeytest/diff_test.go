package journeytest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// editedSample writes the healthcare-referral sample with edits (old, new pairs) to a
// temporary file and returns its path.
func editedSample(t *testing.T, edits ...string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "healthcare-referral.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(edits); i += 2 {
		if !bytes.Contains(raw, []byte(edits[i])) {
			t.Fatalf("the sample does not contain %q", edits[i])
		}
		raw = bytes.Replace(raw, []byte(edits[i]), []byte(edits[i+1]), 1)
	}
	path := filepath.Join(t.TempDir(), "healthcare-referral.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func healthcareRecordings(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "tests", "healthcare-*.yaml"))
	if err != nil || len(files) != 3 {
		t.Fatalf("want the 3 healthcare sample tests, got %v (%v)", files, err)
	}
	return files
}

// Diff lists exactly the recorded Sessions an edit changes, each at its first divergent
// step: a higher escalation threshold changes the path of the Session that escalated
// (the FAQ detour is decided instead), a new confirmation text changes the reply of the one
// that booked, and the one that only asked questions is unchanged.
func TestDiffListsTheChangedSessions(t *testing.T) {
	from, err := ManifestRevision(editedSample(t))
	if err != nil {
		t.Fatal(err)
	}
	to, err := ManifestRevision(editedSample(t,
		"context.escalation_count >= 3", "context.escalation_count >= 4",
		"You're booked with", "Your appointment is with"))
	if err != nil {
		t.Fatal(err)
	}
	rep := Diff(healthcareRecordings(t), from, to)
	if errs := rep.Errors(); len(errs) > 0 {
		t.Fatalf("recordings not replayed: %+v", errs)
	}
	got := map[string]SessionDiff{}
	for _, d := range rep.Changed() {
		got[d.Session] = d
	}
	if len(got) != 2 {
		t.Fatalf("want 2 changed Sessions, got %d: %+v", len(got), rep.Changed())
	}
	esc, ok := got["hc-patient-escalation"]
	if !ok || esc.Step != 1 || esc.Why != "decision: from decides intake.escalate→escalation (Applied, confidence 1), to decides intake.faq-detour→faq (Applied, confidence 1)" {
		t.Errorf("the escalated Session: %+v", esc)
	}
	booked, ok := got["hc-patient-12345"]
	if !ok || booked.Step != 5 || !strings.HasPrefix(booked.Why, `reply: from replies "Booked: Dr. Johnson`) || !strings.Contains(booked.Why, "Your appointment is with Dr. Johnson") {
		t.Errorf("the booked Session: %+v", booked)
	}
	var out bytes.Buffer
	rep.Print(&out)
	for _, want := range []string{"SESSION", "hc-patient-12345", "2 of 3 recorded Sessions change from"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "hc-patient-insurance") {
		t.Errorf("the unchanged Session is listed:\n%s", out.String())
	}

	// A revision compared with itself changes nothing.
	if same := Diff(healthcareRecordings(t), from, from); len(same.Changed()) != 0 || len(same.Errors()) != 0 {
		t.Fatalf("a revision against itself: %+v", same.Sessions)
	}
}

// A decision that falls in another confidence band is a difference, and so is a
// question the recording holds no answer to: on that revision a model would be asked
// something the Session was never asked.
func TestDiffDecisionsAndNewQuestions(t *testing.T) {
	path := filepath.Join("testdata", "llm-answers.yaml")
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	stored := func(edit func(d *RevisionData)) *DiffRevision {
		raw, err := json.Marshal(c.Data)
		if err != nil {
			t.Fatal(err)
		}
		var d RevisionData
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		edit(&d)
		return &DiffRevision{Label: "support-desk-x", Journey: "support-desk", Data: &d}
	}
	from := stored(func(*RevisionData) {})
	stricter := stored(func(d *RevisionData) {
		d.Pathways["help"].Transitions.OnSuccess.Decision.ConfidenceThresholds.AutoAdvance = "0.95"
	})
	rep := Diff([]string{path}, from, stricter)
	if ch := rep.Changed(); len(ch) != 1 || ch[0].Step != 2 ||
		ch[0].Why != "decision: from decides help.onSuccess→done (Applied, confidence 0.92), to decides help.onSuccess→done (Pending, confidence 0.92)" {
		t.Fatalf("a stricter autoAdvance: %+v", rep.Sessions)
	}

	asks := stored(func(d *RevisionData) {
		done := d.Pathways["done"]
		done.Builtin = nil
		done.Agents = []flowv1.Name{"writer"}
	})
	rep = Diff([]string{path}, from, asks)
	if ch := rep.Changed(); len(ch) != 1 || ch[0].Step != 2 || !strings.HasPrefix(ch[0].Why, "from runs the step; to asks ") ||
		!strings.HasSuffix(ch[0].Why, "which the recording holds no answer to") {
		t.Fatalf("a pathway that asks a model: %+v", rep.Sessions)
	}

	other := &DiffRevision{Label: "other-1", Journey: "other", Data: from.Data}
	if rep := Diff([]string{path}, from, other); len(rep.Errors()) != 1 || !strings.Contains(rep.Errors()[0].Err.Error(), "revision other-1 is of journey other") {
		t.Fatalf("a revision of another journey: %+v", rep.Sessions)
	}
}
