package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/journeyops/journey-operator/internal/revision"
)

// Sessions recorded with kubectl journey record, diffed between the revision they ran
// on and an edited one stored in the cluster: exactly the Sessions the edit changes are
// listed, each with its first divergent step.
func TestDiffCommandOnRecordings(t *testing.T) {
	dir := t.TempDir()
	var objs []client.Object
	var rev *appsv1.ControllerRevision
	for _, test := range []string{"healthcare-referral.yaml", "healthcare-escalation.yaml", "healthcare-faq-fallback.yaml"} {
		s, r := finishedSession(t, test)
		rev = r
		out, errOut, err := runJourneyCommand(t, []client.Object{s, r}, "record", s.Name)
		if err != nil || errOut != "" {
			t.Fatalf("record %s: %v %s", s.Name, err, errOut)
		}
		if err := os.WriteFile(filepath.Join(dir, s.Name+".yaml"), []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rev.Labels = map[string]string{revision.LabelJourney: "healthcare-referral"}
	objs = append(objs, rev)

	var data revision.Data
	if err := json.Unmarshal(rev.Data.Raw, &data); err != nil {
		t.Fatal(err)
	}
	data.Journey.Transitions[0].Trigger.Condition = "has(context.escalation_count) && context.escalation_count >= 4"
	conf := data.Pathways["confirmation"].Builtin
	conf.Reply = strings.Replace(conf.Reply, "You're booked with", "Your appointment is with", 1)
	raw, name, err := revision.Encode("healthcare-referral", &data)
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{revision.LabelJourney: "healthcare-referral"}},
		Data:       runtime.RawExtension{Raw: raw},
	})

	out, _, err := runJourneyCommand(t, objs, "diff", "--from", rev.Name, "--to", name, dir)
	if err == nil || err.Error() != "2 of 3 recorded Sessions change from "+rev.Name+" to "+name {
		t.Fatalf("diff: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "SESSION") {
		t.Fatalf("want a header, 2 Sessions and a summary:\n%s", out)
	}
	for _, want := range []string{
		"hc-patient-12345       6 ", `reply: from replies "Booked: Dr. Johnson`,
		"hc-patient-escalation  2 ", "decision: from decides intake.escalate→escalation (Applied, confidence 1), to decides intake.faq-detour→faq",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hc-patient-insurance") {
		t.Errorf("an unchanged Session is listed:\n%s", out)
	}

	if out, _, err := runJourneyCommand(t, objs, "diff", "--from", rev.Name, "--to", rev.Name, dir); err != nil || !strings.Contains(out, "0 of 3 recorded Sessions change") {
		t.Fatalf("a revision against itself: %v\n%s", err, out)
	}
	if _, _, err := runJourneyCommand(t, objs, "diff", "--from", rev.Name, "--to", "nope-123", dir); err == nil ||
		!strings.Contains(err.Error(), `--to: "nope-123" is no manifest path, and reading Journey revision "nope-123" in namespace "default"`) {
		t.Fatalf("an unknown revision: %v", err)
	}
	if _, _, err := runJourneyCommand(t, objs, "diff", dir); err == nil || !strings.Contains(err.Error(), "--from and --to are required") {
		t.Fatalf("without revisions: %v", err)
	}
}

// kubectl journey test --coverage reports what the tests leave uncovered;
// --min-coverage fails the command below it.
func TestTestCommandCoverage(t *testing.T) {
	test := filepath.Join(samplesTests(), "review-loop.yaml")
	out, _, err := runJourneyCommand(t, nil, "test", test, "--coverage")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"ok: 1 journey tests passed", "Coverage of journey review-loop", "not covered: transition onFailure revise→revise"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := runJourneyCommand(t, nil, "test", test, "--min-coverage", "60"); err != nil {
		t.Fatalf("62.5%% is above 60%%: %v", err)
	}
	if _, _, err := runJourneyCommand(t, nil, "test", test, "--min-coverage", "70"); err == nil || err.Error() != "coverage below --min-coverage 70%: review-loop 62.5%" {
		t.Fatalf("62.5%% is below 70%%: %v", err)
	}
	if _, _, err := runJourneyCommand(t, nil, "test", test, "--min-coverage", "170"); err == nil || !strings.Contains(err.Error(), "--min-coverage: 170 is not a percentage") {
		t.Fatalf("a bad --min-coverage: %v", err)
	}
}
