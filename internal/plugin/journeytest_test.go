package plugin

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/journeytest"
	"github.com/journeyops/journey-operator/internal/testenv"
)

func samplesTests() string {
	return filepath.Join(testenv.RepoRoot(), "config", "samples", "tests")
}

// runJourneyCommand runs kubectl journey with args against a fake API server holding objs.
func runJourneyCommand(t *testing.T, objs []client.Object, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	c := fake.NewClientBuilder().WithScheme(Scheme).WithObjects(objs...).Build()
	o.NewClient = func() (client.WithWatch, error) { return c, nil }
	cmd := NewCommandWithOptions(o)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

// finishedSession runs a sample's journey test and returns the Session and the revision
// the controllers would have left.
func finishedSession(t *testing.T, test string) (*flowv1alpha1.Session, *appsv1.ControllerRevision) {
	t.Helper()
	c, err := journeytest.Load(filepath.Join(samplesTests(), test))
	if err != nil {
		t.Fatal(err)
	}
	r := journeytest.Run(c)
	if r.Failed() {
		t.Fatal(r.Error())
	}
	raw, err := json.Marshal(c.Data)
	if err != nil {
		t.Fatal(err)
	}
	s := &flowv1alpha1.Session{
		ObjectMeta: metav1.ObjectMeta{Name: c.Session.Name, Namespace: "default", UID: "uid-1", CreationTimestamp: metav1.NewTime(journeytest.DefaultStart)},
		Spec:       *r.Spec,
		Status:     *r.Status,
	}
	rev := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: r.Revision, Namespace: "default"}, Data: runtime.RawExtension{Raw: raw}}
	return s, rev
}

func TestTestCommand(t *testing.T) {
	junit := filepath.Join(t.TempDir(), "journeys.xml")
	out, _, err := runJourneyCommand(t, nil, "test", samplesTests(), "--junit", junit)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"STEP  INPUT", "--- PASS: healthcare-referral (5 steps, revision healthcare-referral-",
		"--- PASS: planning", "--- PASS: review-loop", "--- PASS: delivery-pipeline",
		"--- PASS: healthcare-escalation (1 steps", "--- PASS: healthcare-faq-fallback (3 steps", "ok: 6 journey tests passed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	raw, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
	}
	if err := xml.Unmarshal(raw, &doc); err != nil || doc.Tests != 5+7+2+1+1+3 || doc.Failures != 0 {
		t.Fatalf("junit (%v): %+v\n%s", err, doc, raw)
	}

	out, _, err = runJourneyCommand(t, nil, "test", filepath.Join(samplesTests(), "failing"))
	if err == nil || err.Error() != "2 of 2 journey tests failed" {
		t.Fatalf("failing tests: %v\n%s", err, out)
	}
	for _, want := range []string{
		`step 3 "reject Dr. Smith" (message m3 "I don't want Dr. Smith. Can you show me another…"): context.selected_doctor.name: want "Dr. Smith", got "Dr. Johnson"`,
		"FAIL: 2 of 2 journey tests failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	if _, _, err := runJourneyCommand(t, nil, "test"); err == nil {
		t.Fatal("test without files must fail")
	}
}

func TestRecordAndReplayCommands(t *testing.T) {
	s, rev := finishedSession(t, "healthcare-referral.yaml")

	out, errOut, err := runJourneyCommand(t, []client.Object{s, rev}, "record", s.Name)
	if err != nil || errOut != "" {
		t.Fatalf("record: %v %s", err, errOut)
	}
	if !strings.HasPrefix(out, "# Journey test recorded from session default/hc-patient-12345") || !strings.Contains(out, "revision: "+rev.Name) {
		t.Fatalf("record output:\n%s", out)
	}
	file := filepath.Join(t.TempDir(), "recorded.yaml")
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _, err := runJourneyCommand(t, nil, "test", file); err != nil {
		t.Fatalf("the recorded test fails: %v\n%s\n%s", err, got, out)
	}

	out, _, err = runJourneyCommand(t, []client.Object{s, rev}, "replay", "session/"+s.Name)
	if err != nil || !strings.Contains(out, "No divergence") {
		t.Fatalf("replay: %v\n%s", err, out)
	}

	changed := s.DeepCopy()
	for i, h := range changed.Status.History {
		if h.Transition == "faq-detour" {
			changed.Status.History[i].Transition = "hesitation"
			changed.Status.History[i].To = "persuasion"
		}
	}
	out, _, err = runJourneyCommand(t, []client.Object{changed, rev}, "replay", s.Name)
	if err == nil || err.Error() != "session hc-patient-12345 diverges at step 3" ||
		!strings.Contains(out, `First divergence at step 3 (message m2 "Wait, what is the copay for specialist visits?"): the Session took hesitation booking→persuasion`) {
		t.Fatalf("replay of a changed Session: %v\n%s", err, out)
	}

	if _, _, err := runJourneyCommand(t, []client.Object{rev}, "record", "nobody"); err == nil || !strings.Contains(err.Error(), `getting session "nobody"`) {
		t.Fatalf("record of a missing Session: %v", err)
	}
}

// `kubectl journey test` runs a journey whose tools live on an MCP server with the
// test's scripted results, and fails when a result does not give what the test expects.
func TestTestCommandScriptsToolResults(t *testing.T) {
	src := filepath.Join(testenv.RepoRoot(), "internal", "journeytest", "testdata", "server-tools.yaml")
	out, _, err := runJourneyCommand(t, nil, "test", src)
	if err != nil || !strings.Contains(out, "--- PASS: server-tools (1 steps") {
		t.Fatalf("%v\n%s", err, out)
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(t.TempDir(), "server-tools.yaml")
	if err := os.WriteFile(changed, bytes.Replace(raw, []byte("result: {booking_id: b-1,"), []byte("result: {booking_id: b-7,"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = runJourneyCommand(t, nil, "test", changed)
	if err == nil || !strings.Contains(out, "--- FAIL: server-tools") || !strings.Contains(out, `got "Booked b-7 with Dr. Lee."`) {
		t.Fatalf("a scripted result that breaks the expectations: %v\n%s", err, out)
	}
}
