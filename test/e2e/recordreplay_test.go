package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// record runs kubectl journey record for session and writes the recording (standard
// output only) to a file; it returns the file, the notes on standard error and the
// command's error.
func record(t *testing.T, ns, session string) (string, string, error) {
	t.Helper()
	cmd := exec.Command("kubectl", "journey", "record", session, "-n", ns)
	cmd.Env = cluster.Environ()
	cmd.Dir = testenv.RepoRoot()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	file := filepath.Join(t.TempDir(), session+".yaml")
	if werr := os.WriteFile(file, out.Bytes(), 0o644); werr != nil {
		t.Fatal(werr)
	}
	return file, errOut.String(), err
}

const noDivergence = "No divergence: today's engine reproduces the transitions and the final status of session "

// TestRecordTestReplaySayDriven: a conversation of six messages sent with kubectl
// journey say (which drops the processed ones from spec.messages) is recorded, the
// recording passes kubectl journey test, and kubectl journey replay finds no divergence.
func TestRecordTestReplaySayDriven(t *testing.T) {
	t.Parallel()
	ns := samples(t)
	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: patient-12345}
spec:
  journeyRef: {name: healthcare-referral}
  initialContext: {insurance_id: INS-123456, referral_source: primary_care}
`)
	for _, text := range sixMessages {
		journey(t, ns, "say", "patient-12345", text, "--wait")
	}
	waitPhase(t, ns, "patient-12345", "Completed")
	if got := kubectl(t, "-n", ns, "get", "session", "patient-12345", "-o", "jsonpath={.spec.messagesDropped}"); got != "5" {
		t.Fatalf("spec.messagesDropped is %q, want 5: say drops the processed messages", got)
	}
	file, notes, err := record(t, ns, "patient-12345")
	if err != nil || notes != "" {
		t.Fatalf("record: %v\n%s", err, notes)
	}
	raw, _ := os.ReadFile(file)
	for _, text := range sixMessages {
		if !strings.Contains(string(raw), text) {
			t.Errorf("the recording does not send %q:\n%s", text, raw)
		}
	}
	mustMatch(t, kubectl(t, "journey", "test", file), `(?m)^ok\b|passed`)
	mustMatch(t, journey(t, ns, "replay", "patient-12345"), noDivergence+"patient-12345")
}

var sixMessages = []string{
	"Hi, I need to book an appointment with a cardiologist. Here's my referral.",
	"Wait, what is the copay for specialist visits?",
	"Thanks! Now show me the available doctors.",
	"I don't want Dr. Smith. Can you show me another option?",
	"I'm not sure, let me think about it.",
	"Dr. Johnson looks great. Book the Tuesday 2pm slot.",
}

// TestTestAndReplayAgreeOnTheDemo: the Sessions of the demo (the samples' own, a
// conversation sent with say, a review loop driven by outcomes, a booking through the
// clinic MCP server approved by a person: say, outcome and approve drop what was
// processed from the spec) are each recorded and replayed: every one records, its
// recording passes kubectl journey test, and replay finds no divergence.
func TestTestAndReplayAgreeOnTheDemo(t *testing.T) {
	t.Parallel()
	ns := "e2e-demo"
	namespace(t, ns)
	waitPhase(t, ns, "pl-half-marathon", "AwaitingApproval")
	journey(t, ns, "approve", "pl-half-marathon", "--reason", "looks right")

	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: patient-12345}
spec:
  journeyRef: {name: healthcare-referral}
  initialContext: {insurance_id: INS-123456, referral_source: primary_care}
`)
	for _, text := range sixMessages[:4] {
		journey(t, ns, "say", "patient-12345", text, "--wait")
	}
	journey(t, ns, "say", "patient-12345", sixMessages[5], "--wait")

	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: review-42}
spec:
  journeyRef: {name: review-loop}
  initialContext: {entity: Invoice}
`)
	for _, o := range [][]string{
		{"plan", "1", "success"}, {"generate", "1", "success"}, {"review", "1", "failure"}, {"revise", "2", "success"}, {"review", "2", "success"},
	} {
		kubectl(t, "-n", ns, "wait", "session/review-42", "--timeout=30s", "--for=jsonpath={.status.currentPathway}="+o[0])
		waitPhase(t, ns, "review-42", "WaitingForInput")
		journey(t, ns, "outcome", "review-42", "--pathway", o[0], "--iteration", o[1], "--result", o[2])
	}
	waitPhase(t, ns, "review-42", "Completed")

	cl, err := clinic.Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	manifest, err := os.ReadFile(repoPath(t, "hack/demo/clinic-booking.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := strings.ReplaceAll(string(manifest), "CLINIC_URL", cl.URL)
	m = strings.ReplaceAll(m, "  namespace: default\n", "")
	create(t, ns, m)
	kubectl(t, "-n", ns, "wait", "--for=condition=ToolsAvailable", "--timeout=30s", "journey/clinic-booking")
	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: clinic-ada}
spec:
  journeyRef: {name: clinic-booking}
  initialContext: {specialty: cardiology, patient: Ada}
`)
	waitPhase(t, ns, "clinic-ada", "AwaitingApproval")
	journey(t, ns, "approve", "clinic-ada", "--reason", "patient confirmed by phone")
	waitPhase(t, ns, "clinic-ada", "Completed")
	cl.Close() // record, test and replay call no server

	var sessions []string
	for _, name := range strings.Fields(kubectl(t, "-n", ns, "get", "sessions", "-o", "name")) {
		sessions = append(sessions, strings.TrimPrefix(name, "session.flow.journey.dev/"))
	}
	if len(sessions) < 7 {
		t.Fatalf("sessions %q: want the samples' and the demo's", sessions)
	}
	for _, s := range sessions {
		t.Run(s, func(t *testing.T) {
			t.Parallel() // each Session's record, test and replay are its own
			replay, replayErr := cluster.Kubectl("journey", "replay", s, "-n", ns)
			file, notes, recErr := record(t, ns, s)
			if recErr != nil {
				t.Fatalf("record refuses: %s\nreplay says:\n%s", notes, replay)
			}
			test, testErr := cluster.Kubectl("journey", "test", file)
			if (testErr == nil) != (replayErr == nil && strings.Contains(replay, noDivergence+s)) {
				raw, _ := os.ReadFile(file)
				t.Fatalf("test and replay disagree:\ntest: %v\n%s\nreplay: %v\n%s\nrecording:\n%s", testErr, test, replayErr, replay, raw)
			}
			if testErr != nil {
				t.Errorf("session %s: the recording fails and replay diverges:\n%s\n%s", s, test, replay)
			}
		})
	}
}
