package plugin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// The control plane is started by the first test that needs it, so the unit tests of
// this package run without one, and stopped by TestMain.
var (
	envOnce    sync.Once
	envErr     error
	env        *testenv.Environment
	admin      client.Client // the control plane's admin: plays the controller
	kubeconfig string        // kubeconfig of user alice, for the plugin's --kubeconfig
)

func TestMain(m *testing.M) {
	// Set once, before tests that start managers run in parallel.
	testenv.QuietLogs()
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		}
	}
	if kubeconfig != "" {
		_ = os.RemoveAll(filepath.Dir(kubeconfig))
	}
	stopLive()
	stopAudited()
	os.Exit(code)
}

func controlPlane(t *testing.T) {
	t.Helper()
	envOnce.Do(func() {
		if env, envErr = testenv.Start(); envErr != nil {
			return
		}
		admin = env.Client
		dir, err := os.MkdirTemp("", "kubectl-journey-test-")
		if err != nil {
			envErr = err
			return
		}
		kubeconfig, envErr = env.WriteKubeconfig(dir, testenv.Admin("alice"))
	})
	if envErr != nil {
		t.Fatalf("control plane: %v", envErr)
	}
}

// kubectlJourney runs `kubectl journey args...` as alice.
func kubectlJourney(ctx context.Context, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	o.PollInterval = 50 * time.Millisecond
	cmd := NewCommandWithOptions(o)
	cmd.SetArgs(append(args, "--kubeconfig", kubeconfig))
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func newSession(t *testing.T, name string, msgs ...flowv1alpha1.Message) *flowv1alpha1.Session {
	t.Helper()
	s := &flowv1alpha1.Session{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       flowv1alpha1.SessionSpec{JourneyRef: flowv1alpha1.JourneyReference{Name: "referral"}, Messages: msgs},
	}
	if err := admin.Create(context.Background(), s); err != nil {
		t.Fatalf("creating session: %v", err)
	}
	return s
}

// setStatus plays the controller: it changes the Session's status.
func setStatus(t *testing.T, name string, change func(*flowv1alpha1.SessionStatus)) {
	t.Helper()
	if err := patchStatus(name, change); err != nil {
		t.Fatal(err)
	}
}

func patchStatus(name string, change func(*flowv1alpha1.SessionStatus)) error {
	ctx := context.Background()
	s := &flowv1alpha1.Session{}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, s); err != nil {
		return err
	}
	base := s.DeepCopy()
	change(&s.Status)
	if err := admin.Status().Patch(ctx, s, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}

func getSession(t *testing.T, name string) *flowv1alpha1.Session {
	t.Helper()
	s := &flowv1alpha1.Session{}
	if err := admin.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func messageIDs(s *flowv1alpha1.Session) []string {
	var ids []string
	for _, m := range s.Spec.Messages {
		ids = append(ids, m.ID)
	}
	return ids
}

func TestSayOnCluster(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	newSession(t, "say")

	for i, text := range []string{"I need a cardiologist", "another option please"} {
		out, _, err := kubectlJourney(ctx, "say", "say", text)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("message m-%d sent to session/say\n", i+1); out != want {
			t.Errorf("output %q; want %q", out, want)
		}
	}
	if _, _, err := kubectlJourney(ctx, "say", "say", "yes, book it", "--id", "confirm"); err != nil {
		t.Fatal(err)
	}
	// The same id and text again is a no-op; the same id with other text is refused.
	if _, _, err := kubectlJourney(ctx, "say", "say", "yes, book it", "--id", "confirm"); err != nil {
		t.Fatalf("resending the same message: %v", err)
	}
	if _, _, err := kubectlJourney(ctx, "say", "say", "no", "--id", "confirm"); err == nil || !strings.Contains(err.Error(), `message id "confirm" is already used`) {
		t.Fatalf("reusing an id for other text: %v", err)
	}

	// Two senders at once: both messages land, after the earlier ones, with distinct ids.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			_, _, errs[i] = kubectlJourney(ctx, "say", "say", fmt.Sprintf("concurrent %d", i))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := getSession(t, "say")
	ids := messageIDs(s)
	if len(ids) != 5 || strings.Join(ids[:3], ",") != "m-1,m-2,confirm" {
		t.Fatalf("messages %v; want m-1, m-2, confirm and two more", ids)
	}
	if !slices.Contains(ids[3:], "m-4") || !slices.Contains(ids[3:], "m-5") {
		t.Errorf("concurrent messages got ids %v; want m-4 and m-5", ids[3:])
	}
	texts := []string{s.Spec.Messages[3].Text, s.Spec.Messages[4].Text}
	slices.Sort(texts)
	if texts[0] != "concurrent 0" || texts[1] != "concurrent 1" {
		t.Errorf("concurrent texts %v", texts)
	}

	// Many more at once, straight through SendMessage: none is lost or duplicated.
	const n = 8
	c := env.Client
	key := types.NamespacedName{Namespace: "default", Name: "say"}
	for i := range n {
		wg.Go(func() {
			if _, _, err := SendMessage(ctx, c, key, "", fmt.Sprintf("burst %d", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	ids = messageIDs(getSession(t, "say"))
	if len(ids) != 5+n {
		t.Fatalf("%d messages after a burst of %d; want %d", len(ids), n, 5+n)
	}
	for i, id := range ids[5:] {
		if want := fmt.Sprintf("m-%d", 6+i); id != want {
			t.Errorf("message %d has id %s; want %s", 6+i, id, want)
		}
	}
}

func TestSayTakenIDGetsSuffix(t *testing.T) {
	controlPlane(t)
	newSession(t, "taken", flowv1alpha1.Message{ID: "m-2", Text: "pre-seeded"})
	out, _, err := kubectlJourney(context.Background(), "say", "taken", "hello")
	if err != nil {
		t.Fatal(err)
	}
	ids := messageIDs(getSession(t, "taken"))
	if len(ids) != 2 || !strings.HasPrefix(ids[1], "m-2-") || out != "message "+ids[1]+" sent to session/taken\n" {
		t.Fatalf("ids %v, output %q", ids, out)
	}
}

func TestSayWaitPrintsReply(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	newSession(t, "wait")
	setStatus(t, "wait", func(st *flowv1alpha1.SessionStatus) {
		st.Phase, st.CurrentPathway, st.Iteration = flowv1alpha1.PhaseWaitingForInput, "intake", 1
	})

	// Play the controller: once the message is there, process it.
	go func() {
		for range 200 {
			s := &flowv1alpha1.Session{}
			if err := admin.Get(ctx, types.NamespacedName{Namespace: "default", Name: "wait"}, s); err == nil && len(s.Spec.Messages) == 1 {
				if err := patchStatus("wait", func(st *flowv1alpha1.SessionStatus) { st.Phase = flowv1alpha1.PhaseRunning }); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(100 * time.Millisecond)
				err := patchStatus("wait", func(st *flowv1alpha1.SessionStatus) {
					st.Phase, st.CurrentPathway, st.ProcessedMessages = flowv1alpha1.PhaseWaitingForInput, "faq", 1
					st.ObservedGeneration = s.Generation
					st.LastTurn = &flowv1alpha1.TurnOutcome{MessageID: "m-1", Pathway: "faq", AssistantText: "A referral is a letter from your doctor."}
					st.History = append(st.History, flowv1alpha1.HistoryEntry{
						Time: metav1.Now(), From: "intake", To: "faq", Action: flowv1alpha1.ActionAdvance,
						Source: flowv1alpha1.SourceTransition, Transition: "faq-detour", Confidence: "1", Iteration: 1, MessageID: "m-1",
					})
				})
				if err != nil {
					t.Error(err)
				}
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	out, _, err := kubectlJourney(ctx, "say", "wait", "what is a referral?", "--wait", "--timeout", "20s")
	if err != nil {
		t.Fatal(err)
	}
	want := `message m-1 sent to session/wait
Reply:      A referral is a letter from your doctor.
Pathway:    faq
Transition: intake -> faq (via faq-detour, Advance, by Transition, confidence 1)
Phase:      WaitingForInput
`
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}

	// A Session that has ended takes no more messages.
	newSession(t, "ended")
	setStatus(t, "ended", func(st *flowv1alpha1.SessionStatus) { st.Phase = flowv1alpha1.PhaseCompleted })
	if _, _, err := kubectlJourney(ctx, "say", "ended", "hello?"); err == nil || err.Error() != "session/ended is Completed and takes no more input" {
		t.Errorf("saying to a completed session: %v", err)
	}
	if _, _, err := kubectlJourney(ctx, "outcome", "ended", "--pathway", "test", "--result", "success"); err == nil || !strings.Contains(err.Error(), "takes no more input") {
		t.Errorf("outcome for a completed session: %v", err)
	}
	if n := len(getSession(t, "ended").Spec.Messages); n != 0 {
		t.Errorf("a completed session got %d messages", n)
	}

	// Nobody processes the next message: the wait times out and says where things stand.
	_, _, err = kubectlJourney(ctx, "say", "wait", "hello?", "--wait", "--timeout", "1s")
	if err == nil || !strings.Contains(err.Error(), "timed out after 1s waiting for session/wait to process message m-2: phase WaitingForInput, pathway faq, 1 of 2 messages processed") {
		t.Fatalf("timeout error: %v", err)
	}
}

func TestOutcomeOnCluster(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	newSession(t, "outcome")
	setStatus(t, "outcome", func(st *flowv1alpha1.SessionStatus) {
		st.Phase, st.CurrentPathway, st.Iteration = flowv1alpha1.PhaseWaitingForInput, "test", 2
	})
	out, errOut, err := kubectlJourney(ctx, "outcome", "outcome", "--pathway", "test", "--result", "partial_success",
		"--data", "failures=3", "--data", "flaky=true", "--data", `suites=["api","ui"]`, "--data", "owner=team-a", "--message", "3 of 120 failed")
	if err != nil {
		t.Fatal(err)
	}
	if out != "outcome partial_success for pathway test (iteration 2) sent to session/outcome\n" || errOut != "" {
		t.Errorf("output %q, warnings %q", out, errOut)
	}
	_, errOut, err = kubectlJourney(ctx, "outcome", "outcome", "--pathway", "deploy", "--result", "success", "--iteration", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, "is in pathway test, not deploy") || !strings.Contains(errOut, "is in iteration 2; an outcome for iteration 1 is ignored") {
		t.Errorf("warnings %q", errOut)
	}
	got := getSession(t, "outcome").Spec.Outcomes
	if len(got) != 2 {
		t.Fatalf("outcomes %+v", got)
	}
	o := got[0]
	if o.Pathway != "test" || o.Iteration != 2 || o.ResultType != flowv1alpha1.ResultPartialSuccess || o.Message != "3 of 120 failed" ||
		string(o.Data.Raw) != `{"failures":3,"flaky":true,"owner":"team-a","suites":["api","ui"]}` {
		t.Errorf("first outcome %+v data %s", o, o.Data.Raw)
	}
	if got[1].Pathway != "deploy" || got[1].Iteration != 1 || got[1].ResultType != flowv1alpha1.ResultSuccess || got[1].Data != nil {
		t.Errorf("second outcome %+v", got[1])
	}
}

func TestApproveOnCluster(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	newSession(t, "approve")
	if _, _, err := kubectlJourney(ctx, "approve", "approve"); err == nil || !strings.Contains(err.Error(), "has no decision waiting for approval") {
		t.Fatalf("approving with nothing pending: %v", err)
	}
	setStatus(t, "approve", func(st *flowv1alpha1.SessionStatus) {
		st.Phase = flowv1alpha1.PhaseAwaitingApproval
		st.LastDecision = &flowv1alpha1.DecisionRecord{ID: "d-7", From: "test", To: "deploy", Confidence: "0.7",
			AllowedDestinations: []string{"deploy", "rollback"}, State: flowv1alpha1.DecisionPending}
	})
	if _, _, err := kubectlJourney(ctx, "approve", "approve", "--to", "production"); err == nil || !strings.Contains(err.Error(), `destination "production" is not allowed for decision d-7; allowed destinations: deploy, rollback`) {
		t.Fatalf("approving an invalid destination: %v", err)
	}
	if a := getSession(t, "approve").Spec.Approvals; len(a) != 0 {
		t.Fatalf("a refused approval was recorded: %+v", a)
	}
	before := time.Now().Add(-time.Second)
	out, _, err := kubectlJourney(ctx, "approve", "approve", "--to", "rollback", "--reason", "error budget exhausted")
	if err != nil {
		t.Fatal(err)
	}
	if out != "decision d-7 approved on session/approve (destination rollback)\n" {
		t.Errorf("output %q", out)
	}
	a := getSession(t, "approve").Spec.Approvals
	if len(a) != 1 {
		t.Fatalf("approvals %+v", a)
	}
	if a[0].DecisionID != "d-7" || !a[0].Approves() || a[0].Destination != "rollback" || a[0].By != "alice" ||
		a[0].Reason != "error budget exhausted" || a[0].At == nil || a[0].At.Time.Before(before) {
		t.Errorf("approval %+v", a[0])
	}
	if _, _, err := kubectlJourney(ctx, "approve", "approve", "--reject"); err == nil || !strings.Contains(err.Error(), "decision d-7 already has an approval by alice") {
		t.Fatalf("answering a decision twice: %v", err)
	}
}

func TestHistoryAndWatchOnCluster(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	newSession(t, "hist")
	if _, errOut, err := kubectlJourney(ctx, "history", "hist"); err != nil || errOut != "No transitions recorded for session/hist in namespace default.\n" {
		t.Fatalf("empty history: %q, %v", errOut, err)
	}
	at := metav1.NewTime(time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC))
	setStatus(t, "hist", func(st *flowv1alpha1.SessionStatus) {
		st.Phase, st.CurrentPathway, st.Iteration, st.Confidence = flowv1alpha1.PhaseWaitingForInput, "booking", 1, "0.9"
		st.History = []flowv1alpha1.HistoryEntry{{Time: at, From: "intake", To: "booking", Action: flowv1alpha1.ActionAdvance, Source: flowv1alpha1.SourceNext, Iteration: 1}}
	})
	if _, _, err := kubectlJourney(ctx, "history", "hist", "--trace"); err == nil || !strings.Contains(err.Error(), "has no trace") {
		t.Errorf("history --trace of an untraced Session: %v", err)
	}
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	setStatus(t, "hist", func(st *flowv1alpha1.SessionStatus) {
		st.TraceContext = &flowv1alpha1.TraceContext{TraceID: traceID, SpanID: "00f067aa0ba902b7"}
	})
	if out, _, err := kubectlJourney(ctx, "history", "hist", "--trace"); err != nil || out != traceID+"\n" {
		t.Errorf("history --trace: %q, %v; want the trace id", out, err)
	}
	out, _, err := kubectlJourney(ctx, "history", "hist")
	if err != nil {
		t.Fatal(err)
	}
	want := "TIME                   FROM     TO        ACTION    SOURCE   CONFIDENCE   REASON\n" +
		"2026-11-22T09:30:00Z   intake   booking   Advance   Next     <none>       <none>\n"
	if out != want {
		t.Errorf("history:\n%s\nwant:\n%s", out, want)
	}

	// watch prints a line per change and returns when the Session completes.
	done := make(chan struct{})
	var watchOut string
	var watchErr error
	go func() {
		defer close(done)
		watchOut, _, watchErr = kubectlJourney(ctx, "watch", "hist", "--timeout", "20s")
	}()
	time.Sleep(500 * time.Millisecond)
	setStatus(t, "hist", func(st *flowv1alpha1.SessionStatus) {
		st.Phase, st.CurrentPathway = flowv1alpha1.PhaseRunning, "confirmation"
	})
	setStatus(t, "hist", func(st *flowv1alpha1.SessionStatus) {
		st.Phase = flowv1alpha1.PhaseCompleted
		st.LastTurn = &flowv1alpha1.TurnOutcome{MessageID: "m-9", AssistantText: "You are booked."}
	})
	<-done
	if watchErr != nil {
		t.Fatal(watchErr)
	}
	lines := strings.Split(strings.TrimSpace(watchOut), "\n")
	if len(lines) != 4 {
		t.Fatalf("watch printed %d lines; want a header and 3 changes:\n%s", len(lines), watchOut)
	}
	for i, want := range []string{"PHASE", "WaitingForInput   booking", "Running           confirmation", "Completed         confirmation          1          0.9         m-9: You are booked."} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("watch line %d %q lacks %q", i, lines[i], want)
		}
	}
}

func TestGraphOnCluster(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	j, pathways := sampleJourney()
	for _, e := range j.Pathways {
		obj := &flowv1alpha1.Pathway{ObjectMeta: metav1.ObjectMeta{Name: e.PathwayRef, Namespace: "default"}, Spec: pathways[string(e.Name)]}
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatalf("creating pathway %s: %v", e.PathwayRef, err)
		}
	}
	if err := admin.Create(ctx, &flowv1alpha1.Journey{ObjectMeta: metav1.ObjectMeta{Name: "referral", Namespace: "default"}, Spec: j}); err != nil {
		t.Fatalf("creating journey: %v", err)
	}
	newSession(t, "drawn")
	setStatus(t, "drawn", func(st *flowv1alpha1.SessionStatus) {
		st.Phase, st.CurrentPathway = flowv1alpha1.PhaseWaitingForInput, "booking"
	})

	want := BuildGraph(j, pathways, "booking")
	want.Name = "referral"
	out, _, err := kubectlJourney(ctx, "graph", "--session", "drawn")
	if err != nil {
		t.Fatal(err)
	}
	if out != want.DOT() {
		t.Errorf("graph --session:\n%s", lineDiff(want.DOT(), out))
	}
	out, _, err = kubectlJourney(ctx, "graph", "referral", "--format", "mermaid")
	if err != nil {
		t.Fatal(err)
	}
	want = BuildGraph(j, pathways, "")
	want.Name = "referral"
	if out != want.Mermaid() {
		t.Errorf("graph --format mermaid:\n%s", lineDiff(want.Mermaid(), out))
	}
	// Graphviz is built in: pictures need no dot binary on PATH.
	t.Setenv("PATH", t.TempDir())
	out, _, err = kubectlJourney(ctx, "graph", "referral", "--format", "svg")
	if err != nil || !strings.Contains(out, "<svg") || !strings.Contains(out, "<title>faq</title>") {
		t.Errorf("graph --format svg: %v\n%s", err, out)
	}
	out, _, err = kubectlJourney(ctx, "graph", "referral", "--format", "png")
	if err != nil || !strings.HasPrefix(out, "\x89PNG\r\n") {
		t.Errorf("graph --format png: %v; output starts %q", err, out[:min(len(out), 16)])
	}
	if _, _, err := kubectlJourney(ctx, "graph", "other", "--session", "drawn"); err == nil || !strings.Contains(err.Error(), "runs journey referral, not other") {
		t.Errorf("graph of another journey: %v", err)
	}
}

func TestWatchAllSessions(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team"}}}
	if err := admin.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"b", "a"} {
		s := &flowv1alpha1.Session{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"},
			Spec:       flowv1alpha1.SessionSpec{JourneyRef: flowv1alpha1.JourneyReference{Name: "referral"}},
		}
		if err := admin.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	var out string
	var err error
	go func() {
		defer close(done)
		out, _, err = kubectlJourney(ctx, "watch", "-n", "team", "--timeout", "2s")
	}()
	time.Sleep(700 * time.Millisecond)
	s := &flowv1alpha1.Session{}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: "team", Name: "a"}, s); err != nil {
		t.Fatal(err)
	}
	base := s.DeepCopy()
	s.Status.Phase, s.Status.CurrentPathway = flowv1alpha1.PhaseRunning, "intake"
	if err := admin.Status().Patch(ctx, s, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	<-done
	if err != nil {
		t.Fatalf("watch of a namespace: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("watch printed %d lines; want a header, a and b, and a's change:\n%s", len(lines), out)
	}
	for i, want := range []string{"SESSION                   PHASE", "  a                         <none>", "  b                         <none>", "  a                         Running           intake"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d %q lacks %q", i, lines[i], want)
		}
	}

	out, _, err = kubectlJourney(ctx, "watch", "-A", "--timeout", "1s")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "  team/a   ") || !strings.Contains(out, "  team/b   ") {
		t.Errorf("watch -A:\n%s", out)
	}
	if _, _, err := kubectlJourney(ctx, "watch", "a", "-A"); err == nil {
		t.Error("watch SESSION -A accepted")
	}
}

// An outcome for a pathway the Session's Journey does not have is refused, naming the
// pathways it has; one for a known pathway goes through.
func TestOutcomeRefusesUnknownPathway(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	j := flowv1alpha1.JourneySpec{EntryPathway: "build", Pathways: []flowv1alpha1.PathwayEntry{
		{Name: "build", PathwayRef: "ci-build"}, {Name: "deploy", PathwayRef: "ci-deploy"}}}
	if err := admin.Create(ctx, &flowv1alpha1.Journey{ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: "default"}, Spec: j}); err != nil {
		t.Fatal(err)
	}
	s := &flowv1alpha1.Session{
		ObjectMeta: metav1.ObjectMeta{Name: "ci-run", Namespace: "default"},
		Spec:       flowv1alpha1.SessionSpec{JourneyRef: flowv1alpha1.JourneyReference{Name: "ci"}},
	}
	if err := admin.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	_, _, err := kubectlJourney(ctx, "outcome", "ci-run", "--pathway", "deplyo", "--result", "success")
	if err == nil || !strings.Contains(err.Error(), `--pathway "deplyo" is not a pathway of journey "ci" (it has build, deploy)`) {
		t.Errorf("outcome for an unknown pathway: %v", err)
	}
	if got := getSession(t, "ci-run").Spec.Outcomes; len(got) != 0 {
		t.Errorf("a refused outcome was sent: %+v", got)
	}
	if _, _, err := kubectlJourney(ctx, "outcome", "ci-run", "--pathway", "deploy", "--result", "success"); err != nil {
		t.Fatal(err)
	}
	if got := getSession(t, "ci-run").Spec.Outcomes; len(got) != 1 || got[0].Attempt != 1 {
		t.Errorf("outcomes %+v", got)
	}
	if _, _, err := kubectlJourney(ctx, "outcome", "ci-run", "--pathway", "deploy", "--result", "failure"); err != nil {
		t.Fatal(err)
	}
	if got := getSession(t, "ci-run").Spec.Outcomes; len(got) != 2 || got[1].Attempt != 2 {
		t.Errorf("a second outcome for the same pathway and iteration: %+v", got)
	}
}
