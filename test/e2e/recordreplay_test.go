package e2e

import (
	"bytes"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// record runs kubectl journey record for session and writes the recording (standard
// output only) to dir/<session>.yaml; it returns the file, the notes on standard error
// and the command's error.
func record(t *testing.T, dir, ns, session string) (string, string, error) {
	t.Helper()
	cmd := exec.Command("kubectl", "journey", "record", session, "-n", ns)
	cmd.Env = cluster.Environ()
	cmd.Dir = testenv.RepoRoot()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	file := filepath.Join(dir, session+".yaml")
	if werr := os.WriteFile(file, out.Bytes(), 0o644); werr != nil {
		t.Fatal(werr)
	}
	return file, errOut.String(), err
}

const noDivergence = "No divergence: today's engine reproduces the transitions and the final status of session "

var sixMessages = []string{
	"Hi, I need to book an appointment with a cardiologist. Here's my referral.",
	"Wait, what is the copay for specialist visits?",
	"Thanks! Now show me the available doctors.",
	"I don't want Dr. Smith. Can you show me another option?",
	"I'm not sure, let me think about it.",
	"Dr. Johnson looks great. Book the Tuesday 2pm slot.",
}

// TestSamplesAndTheDemo works, with kubectl and the plugin, in one namespace that holds
// the samples (applying them costs the API server as much as a short test, so it is
// done once). Side by side: the journey pictures committed under docs/graphs are what
// the plugin draws, and the Sessions of the demo are driven as a person drives them (a
// sample Session approved, a conversation sent with say, a review loop driven by
// outcomes, a booking through the clinic MCP server approved by a person: say, outcome
// and approve drop what was processed from the spec). Then every Session of the
// namespace, the samples' own included, is recorded and replayed: every one records,
// its recording passes kubectl journey test, and replay finds no divergence. Last, the
// kinds' category is checked, deleting the Journeys.
func TestSamplesAndTheDemo(t *testing.T) {
	t.Parallel()
	ns := "e2e-demo"
	namespace(t, ns)
	t.Run("drive", func(t *testing.T) {
		for name, drive := range map[string]func(*testing.T, string){
			"committed graphs": committedGraphsMatchThePlugin,
			"approval":         approveWithPlugin,
			"conversation":     conversationWithPlugin,
			"review loop":      reviewLoopWithPlugin,
			"clinic booking":   clinicBookingWithPlugin,
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				drive(t, ns)
			})
		}
	})
	if t.Failed() {
		return
	}

	var sessions []string
	for _, name := range strings.Fields(kubectl(t, "-n", ns, "get", "sessions", "-o", "name")) {
		sessions = append(sessions, strings.TrimPrefix(name, "session.flow.journey.dev/"))
	}
	if len(sessions) < 7 {
		t.Fatalf("sessions %q: want the samples' and the demo's", sessions)
	}
	// Each Session is replayed and recorded side by side; the recordings are tested in
	// one run of kubectl journey test on their directory, as CI runs a directory of
	// journey tests, with JUnit XML to read each one's result.
	recordings := t.TempDir()
	var mu sync.Mutex
	replays := map[string]string{} // what replay said of each Session
	replayed := map[string]bool{}  // whether replay found no divergence
	t.Run("record and replay", func(t *testing.T) {
		for _, s := range sessions {
			t.Run(s, func(t *testing.T) {
				t.Parallel() // each Session's record and replay are its own
				replay, err := recordAndReplay(t, recordings, ns, s)
				mu.Lock()
				defer mu.Unlock()
				replays[s], replayed[s] = replay, err == nil && strings.Contains(replay, noDivergence+s)
			})
		}
	})
	if t.Failed() {
		return
	}
	junit := filepath.Join(t.TempDir(), "journeys.xml")
	test, testErr := cluster.Kubectl("journey", "test", recordings, "--junit", junit)
	passed := testedRecordings(t, junit)
	for _, s := range sessions {
		file := filepath.Join(recordings, s+".yaml")
		ok, tested := passed[file]
		switch {
		case !tested:
			t.Errorf("session %s: kubectl journey test did not run its recording %s:\n%s", s, file, test)
		case ok != replayed[s]:
			raw, _ := os.ReadFile(file)
			t.Errorf("session %s: test and replay disagree: the recording passes %t, replay finds no divergence %t\ntest:\n%s\nreplay:\n%s\nrecording:\n%s",
				s, ok, replayed[s], test, replays[s], raw)
		case !ok:
			t.Errorf("session %s: the recording fails and replay diverges:\n%s\n%s", s, test, replays[s])
		}
	}
	if testErr != nil {
		t.Errorf("kubectl journey test %s: %v", recordings, testErr)
	}
	mustMatch(t, test, `(?m)^ok\b|passed`)
	if t.Failed() {
		return
	}
	// Last, as it deletes the namespace's Journeys.
	t.Run("category", func(t *testing.T) { categoryIsNotAKindPlural(t, ns) })
}

// recordAndReplay runs kubectl journey replay and record on session s, the recording
// into dir, and returns what replay said. The recording of the conversation sent with
// say (patient-12345) comes with no notes and sends each of its messages.
func recordAndReplay(t *testing.T, dir, ns, s string) (string, error) {
	replay, replayErr := cluster.Kubectl("journey", "replay", s, "-n", ns)
	file, notes, recErr := record(t, dir, ns, s)
	if recErr != nil {
		t.Fatalf("record refuses: %s\nreplay says:\n%s", notes, replay)
	}
	if s != "patient-12345" {
		return replay, replayErr
	}
	if notes != "" {
		t.Errorf("record notes:\n%s", notes)
	}
	raw, _ := os.ReadFile(file)
	for _, text := range sixMessages {
		if !strings.Contains(string(raw), text) {
			t.Errorf("the recording does not send %q:\n%s", text, raw)
		}
	}
	return replay, replayErr
}

// testedRecordings reads the JUnit XML that kubectl journey test --junit wrote: for each
// test file, whether it passed.
func testedRecordings(t *testing.T, junit string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Suites []struct {
			File     string `xml:"file,attr"`
			Failures int    `xml:"failures,attr"`
			Errors   int    `xml:"errors,attr"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v\n%s", junit, err, raw)
	}
	passed := map[string]bool{}
	for _, s := range doc.Suites {
		passed[s.File] = s.Failures == 0 && s.Errors == 0
	}
	return passed
}

// approveWithPlugin: kubectl journey approve refuses a destination outside the
// decision's allowed list and sends nothing; an approval completes the sample Session
// pl-half-marathon in the planning journey's last pathway.
func approveWithPlugin(t *testing.T, ns string) {
	// As a person waits for it (the other waits watch the Session from the test).
	kubectl(t, "-n", ns, "wait", "session/pl-half-marathon", "--timeout=30s", "--for=jsonpath={.status.phase}=AwaitingApproval")
	out, err := cluster.Kubectl("journey", "approve", "pl-half-marathon", "--to", "nowhere", "-n", ns)
	if err == nil {
		t.Fatalf("approve --to a destination outside the allowed list succeeded:\n%s", out)
	}
	mustMatch(t, out, `nowhere`, `allowed`)
	if got := kubectl(t, "-n", ns, "get", "session", "pl-half-marathon", "-o", "jsonpath={.spec.approvals}"); got != "" {
		t.Fatalf("a refused approval was sent: %s", got)
	}
	journey(t, ns, "approve", "pl-half-marathon", "--reason", "looks right")
	waitPhase(t, ns, "pl-half-marathon", "Completed")
	row := columns(t, kubectl(t, "-n", ns, "get", "sessions"), "pl-half-marathon")
	if row[3] != "publish-plan" {
		t.Errorf("row %q: want pathway publish-plan", row)
	}
}

// conversationWithPlugin: the demo's patient-12345, one message at a time with
// kubectl journey say --wait (the demo's five and a hesitation before the booking): a
// detour to the FAQ and back, a rejected doctor, a booking; say drops the processed
// messages from spec.messages; kubectl get sessions and kubectl journey history show
// where it went.
func conversationWithPlugin(t *testing.T, ns string) {
	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: patient-12345}
spec:
  journeyRef: {name: healthcare-referral}
  initialContext: {insurance_id: INS-123456, referral_source: primary_care}
`)
	say := func(text string) string {
		return journey(t, ns, "say", "patient-12345", text, "--wait")
	}
	mustMatch(t, say(sixMessages[0]), `Pathway:\s+booking`, `eligible`, `intake -> booking`)
	mustMatch(t, say(sixMessages[1]), `booking -> faq \(via faq-detour`, `faq -> booking`, `copay`)

	row := columns(t, kubectl(t, "-n", ns, "get", "sessions"), "patient-12345")
	if got := strings.Join(row[1:5], " "); got != "healthcare-referral WaitingForInput booking 1" {
		t.Errorf("kubectl get sessions row: %q, want JOURNEY PHASE PATHWAY ITERATION = healthcare-referral WaitingForInput booking 1", got)
	}

	mustMatch(t, say(sixMessages[2]), `Dr\. Smith`)
	mustMatch(t, say(sixMessages[3]), `Dr\. Johnson`, `via reject-doctor`)
	if got := kubectl(t, "-n", ns, "get", "session", "patient-12345", "-o", "jsonpath={.status.context.rejected_doctors[*].name}"); got != "Dr. Smith" {
		t.Errorf("rejected_doctors = %q, want Dr. Smith", got)
	}
	say(sixMessages[4])
	say(sixMessages[5])
	waitPhase(t, ns, "patient-12345", "Completed")
	if got := kubectl(t, "-n", ns, "get", "session", "patient-12345", "-o", "jsonpath={.spec.messagesDropped}"); got != "5" {
		t.Errorf("spec.messagesDropped is %q, want 5: say drops the processed messages", got)
	}

	wide := columns(t, kubectl(t, "-n", ns, "get", "sessions", "-o", "wide"), "patient-12345")
	if wide[2] != "Completed" || wide[3] != "confirmation" || wide[6] != "Completed" {
		t.Errorf("wide row %q: want phase Completed, pathway confirmation, reason Completed", wide)
	}
	mustMatch(t, journey(t, ns, "history", "patient-12345"),
		`(?m)^TIME\s+FROM\s+TO\s+ACTION\s+SOURCE\s+CONFIDENCE\s+REASON`,
		`booking\s+faq\s+Advance\s+Transition`,
		`faq\s+booking\s+Advance\s+Return`,
		`booking\s+confirmation\s+Advance\s+Next`)
}

// reviewLoopWithPlugin: the demo's review-42, driven by kubectl journey outcome: a
// failed review jumps back to revise in iteration 2, the next review completes it.
func reviewLoopWithPlugin(t *testing.T, ns string) {
	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: review-42}
spec:
  journeyRef: {name: review-loop}
  initialContext: {entity: Invoice}
`)
	steps := []struct{ pathway, iteration, result, wantPathway, wantIteration string }{
		{"plan", "1", "success", "generate", "1"},
		{"generate", "1", "success", "review", "1"},
		{"review", "1", "failure", "revise", "2"},
		{"revise", "2", "success", "review", "2"},
	}
	waitPhase(t, ns, "review-42", "WaitingForInput")
	for _, s := range steps {
		journey(t, ns, "outcome", "review-42", "--pathway", s.pathway, "--iteration", s.iteration, "--result", s.result, "--data", "note="+s.pathway)
		waitSession(t, ns, "review-42", "waiting in "+s.wantPathway, func(x *flowv1.Session) bool {
			return x.Status.CurrentPathway == s.wantPathway && x.Status.Phase == flowv1.PhaseWaitingForInput
		})
		row := columns(t, kubectl(t, "-n", ns, "get", "sessions"), "review-42")
		if row[3] != s.wantPathway || row[4] != s.wantIteration {
			t.Fatalf("after %s %s: row %q, want pathway %s iteration %s", s.pathway, s.result, row, s.wantPathway, s.wantIteration)
		}
	}
	// Without --iteration, the outcome is for the Session's current iteration.
	journey(t, ns, "outcome", "review-42", "--pathway", "review", "--result", "success")
	waitPhase(t, ns, "review-42", "Completed")
	mustMatch(t, journey(t, ns, "history", "review-42"), `review\s+revise\s+JumpBack\s+Outcome`)
}

// clinicBookingWithPlugin: the demo's clinic-ada books through the clinic MCP server,
// its destructive call approved by a person with kubectl journey approve.
func clinicBookingWithPlugin(t *testing.T, ns string) {
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
}
