package plugin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/audit"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/webhook"
)

// TestForgetArgumentErrors: forget refuses, before it reads the cluster, a command
// that does not say exactly which Sessions it erases, and says what to do.
func TestForgetArgumentErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "name the Sessions to forget, or select them with -l/--selector"},
		{[]string{"-l", ""}, "pass --all for that"},
		{[]string{"-l", " "}, "pass --all for that"},
		{[]string{"s1", "-l", "patient=p1"}, "give Session names or -l/--selector, not both"},
		{[]string{"s1", "--all"}, "--all erases every Session of the namespace: give it without Session names or -l/--selector"},
		{[]string{"-l", "patient=p1", "--all"}, "give it without Session names or -l/--selector"},
		{[]string{"-l", "patient==="}, `--selector "patient==="`},
		{[]string{"s1", "--wait", "--dry-run=server"}, "--wait cannot be used with --dry-run"},
	} {
		var out, errOut bytes.Buffer
		o := NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		o.NewClient = func() (client.WithWatch, error) {
			t.Fatalf("forget %v read the cluster before refusing its arguments", tc.args)
			return nil, nil
		}
		cmd := NewCommandWithOptions(o)
		cmd.SetArgs(append([]string{"forget"}, tc.args...))
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("forget %q: error %v; want one saying %q", tc.args, err, tc.want)
		}
	}
}

// TestForgetErasesSessionsWithOneErasureRecord runs forget against a manager with an
// audit sink to a file and the admission webhooks: a server dry run deletes nothing;
// forget -l patient=p1 deletes exactly the two Sessions of p1, and the sink then holds
// one erasure record naming them and alice (stamped by the webhook), and no archive
// of them; an erasure request that names someone else as who asked is refused.
func TestForgetErasesSessionsWithOneErasureRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	t.Parallel()
	env, kubeconfig, path := auditedCluster(t)
	ns := env.Namespace(t)
	forget := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		o := NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		o.PollInterval = 50 * time.Millisecond
		cmd := NewCommandWithOptions(o)
		cmd.SetArgs(append(append([]string{"forget"}, args...), "--kubeconfig", kubeconfig, "-n", ns))
		err := cmd.ExecuteContext(context.Background())
		return out.String() + errOut.String(), err
	}

	chatJourney(t, env, ns, "other", 0, "hello")
	sessions := map[string]string{"p1-a": "p1", "p1-b": "p1", "p2-a": "p2"}
	for name, patient := range sessions {
		s := &flowv1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"patient": patient}},
			Spec: flowv1alpha1.SessionSpec{JourneyRef: flowv1alpha1.JourneyReference{Name: "chat"},
				Messages: []flowv1alpha1.Message{{ID: "m-1", Text: "my insurance is INS-123456"}}}}
		env.Create(t, s)
	}
	uids := map[string]types.UID{}
	testenv.Eventually(t, 30*time.Second, func() error {
		for name := range sessions {
			s := testenv.Get(t, env, ns, name, &flowv1alpha1.Session{})
			if s.Status.Audit == nil {
				return fmt.Errorf("session %s has no acknowledged audit records yet", name)
			}
			uids[name] = s.UID
		}
		return nil
	})
	exists := func(name string) bool {
		err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &flowv1alpha1.Session{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	// Not confirmed: nothing is deleted.
	if out, err := forget("-l", "patient=p1"); err == nil || !strings.Contains(err.Error(), "not confirmed") {
		t.Fatalf("forget without an answer: %v\n%s", err, out)
	}
	// A server dry run goes through the webhooks and deletes nothing.
	out, err := forget("-l", "patient=p1", "--dry-run=server")
	if err != nil {
		t.Fatalf("forget --dry-run=server: %v\n%s", err, out)
	}
	for _, want := range []string{"session/p1-a\t(uid " + string(uids["p1-a"]) + ")", "session/p1-a forgotten (server dry run)", "session/p1-b forgotten (server dry run)"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}
	for name := range sessions {
		s := testenv.Get(t, env, ns, name, &flowv1alpha1.Session{})
		if s.ForgetRequest() != "" || len(s.Finalizers) > 0 || !s.DeletionTimestamp.IsZero() {
			t.Errorf("after a server dry run session %s is marked %v, finalizers %v, deleting %v", name, s.Annotations, s.Finalizers, s.DeletionTimestamp)
		}
	}

	out, err = forget("-l", "patient=p1", "--reason", "erasure request #42 (INS-123456)", "--yes", "--wait")
	if err != nil {
		t.Fatalf("forget: %v\n%s", err, out)
	}
	if !strings.Contains(out, "2 Sessions deleted") {
		t.Errorf("forget --wait output:\n%s", out)
	}
	if exists("p1-a") || exists("p1-b") || !exists("p2-a") {
		t.Errorf("after forget -l patient=p1: p1-a %v, p1-b %v, p2-a %v; want only p2-a left", exists("p1-a"), exists("p1-b"), exists("p2-a"))
	}

	var erasures []audit.Record
	for _, r := range readAuditFile(t, path) {
		switch {
		case r.Kind == audit.KindErasure:
			erasures = append(erasures, r)
		case r.Kind == audit.KindArchive && (r.Session.UID == string(uids["p1-a"]) || r.Session.UID == string(uids["p1-b"])):
			t.Errorf("archive record %s of a forgotten Session", r.ID)
		}
	}
	if len(erasures) != 1 {
		t.Fatalf("%d erasure records; want 1: %+v", len(erasures), erasures)
	}
	e := erasures[0]
	want := []audit.SessionRef{{Namespace: ns, Name: "p1-a", UID: string(uids["p1-a"])}, {Namespace: ns, Name: "p1-b", UID: string(uids["p1-b"])}}
	if e.Actor != "alice" || e.Erasure == nil || !slices.Equal(e.Erasure.Sessions, want) || e.Session.Namespace != ns ||
		e.Erasure.Reason != "erasure request #42 (INS-123456)" || !strings.HasPrefix(e.Erasure.Request, "forget-") ||
		e.ID != "erasure/"+e.Erasure.Request+"/"+string(min(uids["p1-a"], uids["p1-b"])) || e.Schema != audit.Schema || e.Time.IsZero() {
		t.Errorf("erasure record %+v %+v; want one by alice naming %v with the reason", e, e.Erasure, want)
	}

	// Who asked is the webhook's to stamp: a forged name is refused, an empty one stamped.
	mallory, err := env.UserClient(testenv.Admin("mallory"))
	if err != nil {
		t.Fatal(err)
	}
	mark := func(by string) error {
		s := testenv.Get(t, env, ns, "p2-a", &flowv1alpha1.Session{})
		before := s.DeepCopy()
		s.Annotations = map[string]string{flowv1alpha1.AnnotationForget: "forged"}
		if by != "" {
			s.Annotations[flowv1alpha1.AnnotationForgetBy] = by
		}
		return mallory.Patch(context.Background(), s, client.MergeFrom(before), client.DryRunAll)
	}
	if err := mark("alice"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `forget-by is "alice" but the request was made by "mallory"`) {
		t.Errorf("mallory marking p2-a as asked by alice: %v; want it refused as forged", err)
	}
	s := testenv.Get(t, env, ns, "p2-a", &flowv1alpha1.Session{})
	before := s.DeepCopy()
	s.Annotations = map[string]string{flowv1alpha1.AnnotationForget: "r"}
	if err := mallory.Patch(context.Background(), s, client.MergeFrom(before), client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if by := s.Annotations[flowv1alpha1.AnnotationForgetBy]; by != "mallory" {
		t.Errorf("forget-by stamped %q; want mallory", by)
	}
}

// readAuditFile is every record of the JSON lines file at path.
func readAuditFile(t *testing.T, path string) []audit.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []audit.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// The audit tests share a control plane with the admission webhooks and a manager
// that writes its audit records to a JSON lines file. Each test works in a namespace of
// its own and reads the records of its own Sessions; only
// TestForgetErasesSessionsWithOneErasureRecord erases Sessions.
var (
	auditOnce       sync.Once
	auditErr        error
	auditEnv        *testenv.Environment
	auditKubeconfig string
	auditPath       string
	auditDir        string
	auditSink       *audit.JSONLines
)

// stopAudited stops the audit tests' control plane and removes its files.
func stopAudited() {
	if auditEnv != nil {
		if err := auditEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the audit control plane:", err)
		}
	}
	if auditSink != nil {
		_ = auditSink.Close()
	}
	if auditDir != "" {
		_ = os.RemoveAll(auditDir)
	}
}

// auditedCluster starts, on first use, a control plane with the admission webhooks and
// a manager that writes its audit records to a JSON lines file; it returns the kubeconfig
// of alice and the file's path.
func auditedCluster(t *testing.T) (*testenv.Environment, string, string) {
	t.Helper()
	auditOnce.Do(func() {
		if auditDir, auditErr = os.MkdirTemp("", "kubectl-journey-audit-"); auditErr != nil {
			return
		}
		auditPath = filepath.Join(auditDir, "audit.jsonl")
		if auditSink, auditErr = audit.OpenJSONLines(auditPath); auditErr != nil {
			return
		}
		sink := auditSink
		if auditEnv, auditErr = testenv.Start(testenv.WithWebhooks()); auditErr != nil {
			return
		}
		// The manager stops with the control plane, before the sink is closed.
		var mgr *testenv.Manager
		mgr, auditErr = auditEnv.RunManager(testenv.ManagerOptions{Webhooks: true, Setup: func(mgr ctrl.Manager) error {
			if err := controller.Setup(mgr, controller.Options{Audit: &audit.Trail{Sink: sink}}); err != nil {
				return err
			}
			return webhook.SetupWebhooks(mgr, webhook.Options{Checks: controller.AdmissionChecks()})
		}})
		if auditErr != nil {
			return
		}
		if auditErr = mgr.WaitForWebhooks(20 * time.Second); auditErr != nil {
			return
		}
		auditKubeconfig, auditErr = auditEnv.WriteKubeconfig(auditDir, testenv.Admin("alice"))
	})
	if auditErr != nil {
		t.Fatalf("control plane with webhooks and an audited manager: %v", auditErr)
	}
	return auditEnv, auditKubeconfig, auditPath
}

// TestAuditTrailOfAnIntervention: a Session stopped by its turn cap and resumed with
// kubectl journey resume gets, in the status write that took the Resume in, the
// Intervention record first, its actor alice as the webhook stamped her, then the
// records of what the Resume led to.
func TestAuditTrailOfAnIntervention(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	t.Parallel()
	env, kubeconfig, path := auditedCluster(t)
	ns := env.Namespace(t)
	chatJourney(t, env, ns, "capped", 1, "one", "two")
	if s := testenv.Get(t, env, ns, "capped", &flowv1alpha1.Session{}); stalled(s) == nil || stalled(s).Reason != flowv1alpha1.ReasonTurnLimit {
		t.Fatalf("session capped is not stalled by maxTurns: %s", stateSummary(s))
	}
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	o.PollInterval = 50 * time.Millisecond
	cmd := NewCommandWithOptions(o)
	cmd.SetArgs([]string{"resume", "capped", "--max-turns", "5", "--reason", "false alarm", "--wait", "--timeout", "30s", "--kubeconfig", kubeconfig, "-n", ns})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("resume: %v\n%s%s", err, out.String(), errOut.String())
	}
	s := testenv.Get(t, env, ns, "capped", &flowv1alpha1.Session{})
	var at int
	testenv.Eventually(t, 30*time.Second, func() error {
		recs := readAuditFile(t, path)
		at = slices.IndexFunc(recs, func(r audit.Record) bool { return r.Kind == audit.KindIntervention && r.Session.UID == string(s.UID) })
		if at < 0 {
			return fmt.Errorf("no intervention record yet")
		}
		r := recs[at]
		if r.Actor != "alice" || r.Intervention.Action != string(flowv1alpha1.InterventionResume) || r.Intervention.Reason != "false alarm" || r.Intervention.ID != "i-1" {
			t.Fatalf("intervention record %+v %+v; want i-1, Resume by alice for \"false alarm\"", r, r.Intervention)
		}
		var same []string
		for _, x := range recs {
			if x.Session.UID == string(s.UID) && x.Step == r.Step {
				same = append(same, string(x.Kind))
			}
		}
		if len(same) < 2 || same[0] != string(audit.KindIntervention) || r.ID != fmt.Sprintf("%s/%d/0", s.UID, r.Step) {
			t.Fatalf("records of step %d: %v, the intervention's id %s; want the intervention first, with n 0, then what it led to", r.Step, same, r.ID)
		}
		return nil
	})
}
