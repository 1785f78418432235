package plugin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	ctrl "sigs.k8s.io/controller-runtime"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/webhook"
)

// The lifecycle and revision commands are tested against a control plane of their own
// that runs what a cluster runs: the admission webhooks of config/webhook and the
// controllers with the builtin agent. The plugin acts as alice. Each test works in a
// namespace of its own, so they share the control plane and run in parallel.
var (
	liveOnce       sync.Once
	liveErr        error
	liveEnv        *testenv.Environment
	liveKubeconfig string
)

func stopLive() {
	if liveEnv != nil {
		if err := liveEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the lifecycle control plane:", err)
		}
	}
	if liveKubeconfig != "" {
		_ = os.RemoveAll(filepath.Dir(liveKubeconfig))
	}
}

func liveCluster(t *testing.T) *testenv.Environment {
	t.Helper()
	liveOnce.Do(func() {
		if liveEnv, liveErr = testenv.Start(testenv.WithWebhooks()); liveErr != nil {
			return
		}
		var mgr *testenv.Manager
		mgr, liveErr = liveEnv.RunManager(testenv.ManagerOptions{Webhooks: true, Setup: func(mgr ctrl.Manager) error {
			if err := controller.Setup(mgr, controller.Options{}); err != nil {
				return err
			}
			return webhook.SetupWebhooks(mgr, webhook.Options{Checks: controller.AdmissionChecks()})
		}})
		if liveErr != nil {
			return
		}
		if liveErr = mgr.WaitForWebhooks(20 * time.Second); liveErr != nil {
			return
		}
		dir, err := os.MkdirTemp("", "kubectl-journey-lifecycle-")
		if err != nil {
			liveErr = err
			return
		}
		liveKubeconfig, liveErr = liveEnv.WriteKubeconfig(dir, testenv.Admin("alice"))
	})
	if liveErr != nil {
		t.Fatalf("control plane with webhooks and controllers: %v", liveErr)
	}
	return liveEnv
}

// live runs `kubectl journey args... -n ns` as alice on the live cluster.
func live(ctx context.Context, ns string, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	o.PollInterval = 50 * time.Millisecond
	cmd := NewCommandWithOptions(o)
	cmd.SetArgs(append(args, "--kubeconfig", liveKubeconfig, "-n", ns))
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// chatJourney creates, in ns, the journey "chat" (one pathway that answers every
// message and never completes) with maxTurns, when not 0, and a Session of it with
// msgs. It waits until the Session has settled.
func chatJourney(t *testing.T, env *testenv.Environment, ns, session string, maxTurns int32, msgs ...string) {
	t.Helper()
	p := &flowv1alpha1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"}, Spec: flowv1alpha1.PathwaySpec{
		Builtin: &flowv1alpha1.BuiltinPathway{Reply: "noted", Complete: "false"},
	}}
	j := &flowv1alpha1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"}, Spec: flowv1alpha1.JourneySpec{
		EntryPathway: "chat",
		Pathways:     []flowv1alpha1.PathwayEntry{{Name: "chat", PathwayRef: "chat"}},
		Limits:       flowv1alpha1.Limits{MaxTurns: maxTurns},
	}}
	env.Create(t, p, j)
	testenv.Eventually(t, 30*time.Second, func() error {
		if j := testenv.Get(t, env, ns, "chat", &flowv1alpha1.Journey{}); j.Status.ReadyRevision == "" {
			return fmt.Errorf("journey chat is not ready: %v", j.Status.Issues)
		}
		return nil
	})
	chatSession(t, env, ns, session, msgs...)
}

func chatSession(t *testing.T, env *testenv.Environment, ns, name string, msgs ...string) {
	t.Helper()
	s := &flowv1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: flowv1alpha1.SessionSpec{JourneyRef: flowv1alpha1.JourneyReference{Name: "chat"}}}
	for i, m := range msgs {
		s.Spec.Messages = append(s.Spec.Messages, flowv1alpha1.Message{ID: fmt.Sprintf("m-%d", i+1), Text: m})
	}
	env.Create(t, s)
	waitLive(t, env, ns, name, "to settle", func(s *flowv1alpha1.Session) bool { return settled(s, s.Generation) })
}

// waitLive waits until the Session satisfies ok and returns it.
func waitLive(t *testing.T, env *testenv.Environment, ns, name, what string, ok func(*flowv1alpha1.Session) bool) *flowv1alpha1.Session {
	t.Helper()
	var s *flowv1alpha1.Session
	testenv.Eventually(t, 30*time.Second, func() error {
		s = testenv.Get(t, env, ns, name, &flowv1alpha1.Session{})
		if !ok(s) {
			return fmt.Errorf("session %s/%s %s: %s", ns, name, what, stateSummary(s))
		}
		return nil
	})
	return s
}

func TestCancelCommand(t *testing.T) {
	t.Parallel()
	env := liveCluster(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	chatJourney(t, env, ns, "quit", 0, "hello")

	out, _, err := live(ctx, ns, "cancel", "quit", "--dry-run=client")
	if err != nil || out != "session/quit cancelled (dry run)\n" {
		t.Fatalf("cancel --dry-run=client: %q, %v", out, err)
	}
	out, _, err = live(ctx, ns, "cancel", "quit", "--dry-run=server", "--reason", "test")
	if err != nil || out != "session/quit cancelled (server dry run)\n" {
		t.Fatalf("cancel --dry-run=server: %q, %v", out, err)
	}
	if s := testenv.Get(t, env, ns, "quit", &flowv1alpha1.Session{}); s.Spec.Cancel || s.Annotations[AnnotationCancelReason] != "" {
		t.Fatalf("a dry run changed the Session: cancel %v, annotations %v", s.Spec.Cancel, s.Annotations)
	}

	out, _, err = live(ctx, ns, "cancel", "quit", "--reason", "duplicate", "--wait", "--timeout", "30s")
	if err != nil {
		t.Fatal(err)
	}
	if want := "session/quit cancelled\nPhase:      Cancelled\n"; out != want {
		t.Errorf("cancel --wait printed %q; want %q", out, want)
	}
	s := testenv.Get(t, env, ns, "quit", &flowv1alpha1.Session{})
	if !s.Spec.Cancel || s.Status.Phase != flowv1alpha1.PhaseCancelled || s.Annotations[AnnotationCancelReason] != "duplicate" {
		t.Errorf("cancel %v, phase %s, annotations %v", s.Spec.Cancel, s.Status.Phase, s.Annotations)
	}
	// Again: nothing to do, and it says so.
	if out, _, err := live(ctx, ns, "cancel", "quit"); err != nil || out != "session/quit already cancelled\n" {
		t.Errorf("cancelling twice: %q, %v", out, err)
	}
	for _, verb := range []string{"suspend", "unsuspend"} {
		_, _, err := live(ctx, ns, verb, "quit")
		if want := "session/quit is Cancelled: it has ended, there is nothing to " + verb; err == nil || err.Error() != want {
			t.Errorf("%s of a cancelled Session: %v; want %q", verb, err, want)
		}
	}
	if _, _, err := live(ctx, ns, "limits", "quit", "--max-turns", "10"); err == nil || !strings.Contains(err.Error(), "is Cancelled: it has ended") {
		t.Errorf("limits of a cancelled Session: %v", err)
	}

	// A Session that completed cannot be cancelled.
	done := &flowv1alpha1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "once"}, Spec: flowv1alpha1.PathwaySpec{
		RunOn: flowv1alpha1.RunOnEntry, Builtin: &flowv1alpha1.BuiltinPathway{Reply: "done"}}}
	env.Create(t, done, &flowv1alpha1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "once"}, Spec: flowv1alpha1.JourneySpec{
		EntryPathway: "once", Pathways: []flowv1alpha1.PathwayEntry{{Name: "once", PathwayRef: "once"}}}},
		&flowv1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "finished"},
			Spec: flowv1alpha1.SessionSpec{JourneyRef: flowv1alpha1.JourneyReference{Name: "once"}}})
	waitLive(t, env, ns, "finished", "to complete", func(s *flowv1alpha1.Session) bool { return s.Status.Phase == flowv1alpha1.PhaseCompleted })
	if _, _, err := live(ctx, ns, "cancel", "finished"); err == nil || err.Error() != "session/finished is Completed: it has ended, there is nothing to cancel" {
		t.Errorf("cancelling a completed Session: %v", err)
	}

	if _, _, err := live(ctx, ns, "cancel", "nosuch"); err == nil || err.Error() != fmt.Sprintf("session %q not found in namespace %q", "nosuch", ns) {
		t.Errorf("cancelling an unknown Session: %v", err)
	}
	if _, _, err := live(ctx, ns, "cancel", "quit", "--wait", "--dry-run=server"); err == nil || !strings.Contains(err.Error(), "--wait cannot be used with --dry-run") {
		t.Errorf("--wait with --dry-run: %v", err)
	}
	if _, _, err := live(ctx, ns, "cancel", "quit", "--dry-run=maybe"); err == nil || !strings.Contains(err.Error(), `must be "none", "server", or "client"`) {
		t.Errorf("--dry-run=maybe: %v", err)
	}
}

func TestSuspendAndUnsuspendCommands(t *testing.T) {
	t.Parallel()
	env := liveCluster(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	chatJourney(t, env, ns, "paused", 0, "hello")

	out, _, err := live(ctx, ns, "suspend", "paused", "--dry-run=server")
	if err != nil || out != "session/paused suspended (server dry run)\n" {
		t.Fatalf("suspend --dry-run=server: %q, %v", out, err)
	}
	if s := testenv.Get(t, env, ns, "paused", &flowv1alpha1.Session{}); s.Spec.Suspend {
		t.Fatal("a server dry run suspended the Session")
	}
	out, _, err = live(ctx, ns, "suspend", "paused", "--reason", "waiting for the clinic", "--wait", "--timeout", "30s")
	if err != nil {
		t.Fatal(err)
	}
	want := "session/paused suspended\n" +
		"Phase:      WaitingForInput\n" +
		"Pathway:    chat\n" +
		"Suspended:  yes: no step runs until 'kubectl journey unsuspend paused'\n"
	if out != want {
		t.Errorf("suspend --wait printed:\n%s\nwant:\n%s", out, want)
	}
	s := testenv.Get(t, env, ns, "paused", &flowv1alpha1.Session{})
	if !s.Spec.Suspend || !suspended(s) || s.Annotations[AnnotationSuspendReason] != "waiting for the clinic" {
		t.Fatalf("suspend %v, Ready %+v, annotations %v", s.Spec.Suspend,
			apimeta.FindStatusCondition(s.Status.Conditions, flowv1alpha1.ConditionReady), s.Annotations)
	}
	if out, _, err := live(ctx, ns, "suspend", "paused"); err != nil || out != "session/paused already suspended\n" {
		t.Errorf("suspending twice: %q, %v", out, err)
	}

	// A message sent meanwhile waits; the controller has seen it and run nothing.
	if _, _, err := live(ctx, ns, "say", "paused", "are you there?"); err != nil {
		t.Fatal(err)
	}
	s = waitLive(t, env, ns, "paused", "to see the message", func(s *flowv1alpha1.Session) bool { return observed(s, s.Generation) })
	if s.Status.ProcessedMessages != 1 || !suspended(s) {
		t.Fatalf("a suspended Session processed %d messages (Ready %+v)", s.Status.ProcessedMessages,
			apimeta.FindStatusCondition(s.Status.Conditions, flowv1alpha1.ConditionReady))
	}

	out, _, err = live(ctx, ns, "unsuspend", "paused", "--wait", "--timeout", "30s")
	if err != nil {
		t.Fatal(err)
	}
	if want := "session/paused unsuspended\nPhase:      WaitingForInput\nPathway:    chat\n"; out != want {
		t.Errorf("unsuspend --wait printed:\n%s\nwant:\n%s", out, want)
	}
	if s := testenv.Get(t, env, ns, "paused", &flowv1alpha1.Session{}); s.Spec.Suspend || s.Status.ProcessedMessages != 2 {
		t.Errorf("after unsuspend: suspend %v, %d messages processed; want 2", s.Spec.Suspend, s.Status.ProcessedMessages)
	}
	if out, _, err := live(ctx, ns, "unsuspend", "paused"); err != nil || out != "session/paused is not suspended\n" {
		t.Errorf("unsuspending a running Session: %q, %v", out, err)
	}
}

func TestLimitsCommand(t *testing.T) {
	t.Parallel()
	env := liveCluster(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	// maxTurns 2: the third message stalls the Session.
	chatJourney(t, env, ns, "chatty", 2, "one", "two", "three")
	s := testenv.Get(t, env, ns, "chatty", &flowv1alpha1.Session{})
	if c := stalled(s); c == nil || c.Reason != flowv1alpha1.ReasonTurnLimit || s.Status.Turns != 2 {
		t.Fatalf("the Session is not stalled by maxTurns after 2 turns: %s, %d turns", stateSummary(s), s.Status.Turns)
	}

	for _, tc := range []struct{ args, want string }{
		{"", "limits takes at least one of --max-turns"},
		{"--max-turns 0", "--max-turns must be between 1 and 100000, got 0"},
		{"--max-cost-usd 1e3", `--max-cost-usd "1e3" must be a non-negative decimal`},
		{"--max-tokens -5", "--max-tokens must be 1 or more, got -5"},
	} {
		args := append([]string{"limits", "chatty"}, strings.Fields(tc.args)...)
		if _, _, err := live(ctx, ns, args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("limits %s: %v; want %q", tc.args, err, tc.want)
		}
	}

	// Below what was used: the webhook refuses, in a server dry run too, and says why.
	for _, dry := range []string{"--dry-run=none", "--dry-run=server"} {
		_, _, err := live(ctx, ns, "limits", "chatty", "--max-turns", "1", dry)
		if err == nil || !strings.Contains(err.Error(), `Session "chatty" has used 2 turns: spec.limits.maxTurns 1 is below that`) {
			t.Errorf("limits below what was used (%s): %v", dry, err)
		}
	}
	out, _, err := live(ctx, ns, "limits", "chatty", "--max-turns", "10", "--dry-run=server")
	if err != nil || out != "session/chatty limits set: maxTurns=10 (server dry run)\n" {
		t.Fatalf("limits --dry-run=server: %q, %v", out, err)
	}
	if s := testenv.Get(t, env, ns, "chatty", &flowv1alpha1.Session{}); s.Spec.Limits != nil {
		t.Fatalf("a dry run set limits %+v", s.Spec.Limits)
	}

	out, _, err = live(ctx, ns, "limits", "chatty", "--max-turns", "10", "--max-cost-usd", "2.50", "--reason", "long intake", "--wait", "--timeout", "30s")
	if err != nil {
		t.Fatal(err)
	}
	want := "session/chatty limits set: maxTurns=10, budget.maxCostUSD=2.50\nPhase:      WaitingForInput\nPathway:    chat\n"
	if out != want {
		t.Errorf("limits --wait printed:\n%s\nwant:\n%s", out, want)
	}
	s = testenv.Get(t, env, ns, "chatty", &flowv1alpha1.Session{})
	if s.Status.ProcessedMessages != 3 || stalled(s) != nil || s.Annotations[AnnotationLimitsReason] != "long intake" {
		t.Errorf("after raising maxTurns: %s, %d processed, annotations %v", stateSummary(s), s.Status.ProcessedMessages, s.Annotations)
	}
	// Fields not given keep their value; the same values again change nothing.
	if out, _, err := live(ctx, ns, "limits", "chatty", "--max-tokens", "5000"); err != nil || out != "session/chatty limits set: budget.maxTokens=5000\n" {
		t.Errorf("limits --max-tokens: %q, %v", out, err)
	}
	l := testenv.Get(t, env, ns, "chatty", &flowv1alpha1.Session{}).Spec.Limits
	if l == nil || l.MaxTurns != 10 || l.Budget == nil || l.Budget.MaxCostUSD != "2.50" || l.Budget.MaxTokens != 5000 {
		t.Errorf("limits %+v; want maxTurns 10, maxCostUSD 2.50, maxTokens 5000", l)
	}
	if out, _, err := live(ctx, ns, "limits", "chatty", "--max-turns", "10", "--max-cost-usd", "2.5"); err != nil || out != "session/chatty limits unchanged\n" {
		t.Errorf("the same limits again: %q, %v", out, err)
	}

	// A raise that does not lift the cap: the Session stalls again, and --wait fails.
	for _, m := range []string{"four", "five", "six", "seven", "eight", "nine", "ten", "eleven"} {
		if _, _, err := live(ctx, ns, "say", "chatty", m); err != nil {
			t.Fatal(err)
		}
	}
	waitLive(t, env, ns, "chatty", "to stall at 10 turns", func(s *flowv1alpha1.Session) bool { return stalled(s) != nil })
	out, _, err = live(ctx, ns, "limits", "chatty", "--max-turns", "10", "--max-tokens", "6000", "--wait", "--timeout", "30s")
	if err == nil || !strings.Contains(err.Error(), "session/chatty is stalled (TurnLimit)") || !strings.Contains(out, "Stalled:    TurnLimit: ") {
		t.Errorf("a raise that leaves the Session stalled: %v\n%s", err, out)
	}
}

// resume and its --wait against the real controller and webhooks: an applied
// intervention prints the history entry it made; one the webhook refuses fails with
// its message.
func TestInterventionsOnTheRealController(t *testing.T) {
	t.Parallel()
	env := liveCluster(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	chatJourney(t, env, ns, "capped", 1, "one", "two")
	if s := testenv.Get(t, env, ns, "capped", &flowv1alpha1.Session{}); stalled(s) == nil {
		t.Fatalf("the Session is not stalled by maxTurns: %s", stateSummary(s))
	}

	out, _, err := live(ctx, ns, "resume", "capped", "--max-turns", "5", "--reason", "two turns are fine", "--wait", "--timeout", "30s")
	if err != nil {
		t.Fatalf("resume --wait: %v\n%s", err, out)
	}
	t.Logf("resume --wait:\n%s", out)
	if !strings.HasPrefix(out, "intervention i-1 (Resume) sent to session/capped\nTransition: ") ||
		!strings.Contains(out, "by Human") || !strings.HasSuffix(out, "Phase:      WaitingForInput\nPathway:    chat\n") {
		t.Errorf("resume --wait printed:\n%s", out)
	}
	s := testenv.Get(t, env, ns, "capped", &flowv1alpha1.Session{})
	if s.Status.ProcessedMessages != 2 || stalled(s) != nil || s.Status.ProcessedInterventions != 1 {
		t.Errorf("after resume: %s, %d messages and %d interventions processed", stateSummary(s), s.Status.ProcessedMessages, s.Status.ProcessedInterventions)
	}

	// Nothing blocks it now: the admission webhook refuses a Resume, in a server dry run
	// too, and the command fails with its message; nothing is stored.
	for _, dry := range []string{"--dry-run=server", "--dry-run=none"} {
		out, _, err = live(ctx, ns, "resume", "capped", dry)
		if err == nil || !strings.Contains(err.Error(), "denied the request") ||
			!strings.Contains(err.Error(), "nothing stops session/capped (phase WaitingForInput)") || out != "" {
			t.Errorf("a Resume with nothing to resume (%s): %v\n%s", dry, err, out)
		}
	}
	if s := testenv.Get(t, env, ns, "capped", &flowv1alpha1.Session{}); s.Spec.InterventionCount() != 1 {
		t.Errorf("a refused Resume was stored: %+v", s.Spec.Interventions)
	}
}
