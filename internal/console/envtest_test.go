package console_test

// The browser tests run the console the way a person does: a real kube-apiserver with
// the CRDs, the approval webhooks of config/webhook, the controllers (a manager running
// the builtin agent), `kubectl journey dashboard` run as user ann, whose RBAC allows
// team-a only, and a headless Chromium driven with chromedp.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/plugin"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/webhook"
)

// webhookNow is the approval webhook's clock: an approval stamped with it went through
// the webhook.
var webhookNow = time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)

// cluster is the control plane, the manager and the console of the tests.
type cluster struct {
	admin client.Client
	// url is the console's address, served as ann.
	url string
}

func startCluster(ctx context.Context) (*cluster, func(), error) {
	log.SetLogger(logDiscard())
	env, err := testenv.Start(testenv.WithWebhooks())
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := func() { cancel(); _ = env.Stop() }
	c := &cluster{}
	if err := c.start(ctx, env); err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}

func (c *cluster) start(ctx context.Context, env *testenv.Environment) error {
	mgr, err := env.RunManager(testenv.ManagerOptions{Webhooks: true, Setup: func(mgr ctrl.Manager) error {
		if err := controller.Setup(mgr, controller.Options{}); err != nil {
			return err
		}
		return webhook.SetupWebhooks(mgr, webhook.Options{Clock: clocktesting.NewFakePassiveClock(webhookNow), Checks: controller.AdmissionChecks()})
	}})
	if err != nil {
		return err
	}
	if err := mgr.WaitForWebhooks(20 * time.Second); err != nil {
		return err
	}
	c.admin = env.Client
	for _, ns := range []string{"team-a", "team-b"} {
		if err := c.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
		if err := c.applySample(ctx, ns); err != nil {
			return err
		}
	}
	kubeconfig, err := c.addAnn(ctx, env)
	if err != nil {
		return err
	}
	c.url, err = runDashboard(ctx, kubeconfig)
	return err
}

// applySample creates the planning journey of config/samples in ns (not its Session).
func (c *cluster) applySample(ctx context.Context, ns string) error {
	objs, err := testenv.ReadManifests(filepath.Join(testenv.SamplesDir(), "planning.yaml"))
	if err != nil {
		return err
	}
	for _, u := range objs {
		if u.GetKind() == "Session" {
			continue
		}
		u.SetNamespace(ns)
		if err := c.admin.Create(ctx, u); err != nil {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// addAnn adds user ann: a journey approver in team-a only, who may list namespaces. It
// returns the path of her kubeconfig.
func (c *cluster) addAnn(ctx context.Context, env *testenv.Environment) (string, error) {
	var role rbacv1.ClusterRole
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "journey_approver_role.yaml"))
	if err != nil {
		return "", err
	}
	if err := yaml.UnmarshalStrict(raw, &role); err != nil {
		return "", err
	}
	nsReader := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "namespace-reader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list"}},
	}}
	ann := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "ann"}}
	for _, obj := range []client.Object{
		&role, nsReader,
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ann"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}, Subjects: ann,
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "ann-namespaces"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: nsReader.Name}, Subjects: ann,
		},
	} {
		if err := c.admin.Create(ctx, obj); err != nil {
			return "", err
		}
	}
	user, err := env.AddUser(envtest.User{Name: "ann"}, nil)
	if err != nil {
		return "", err
	}
	cfg, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "console-test-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, cfg, 0o600)
}

// runDashboard runs `kubectl journey dashboard --port 0` with kubeconfig until ctx ends
// and returns the URL it prints.
func runDashboard(ctx context.Context, kubeconfig string) (string, error) {
	pr, pw := io.Pipe()
	var errOut strings.Builder
	o := plugin.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: pw, ErrOut: &errOut})
	cmd := plugin.NewCommandWithOptions(o)
	cmd.SetArgs([]string{"dashboard", "--port", "0", "--kubeconfig", kubeconfig})
	done := make(chan error, 1)
	go func() {
		err := cmd.ExecuteContext(ctx)
		done <- err
		_ = pw.CloseWithError(fmt.Errorf("dashboard ended: %w: %s", err, errOut.String()))
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		return "", err
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	const prefix = "Journey console at "
	if !strings.HasPrefix(line, prefix) || !strings.Contains(line, "acting as ann") {
		return "", fmt.Errorf("dashboard printed %q", line)
	}
	return strings.Fields(strings.TrimPrefix(line, prefix))[0], nil
}

// chromium is the path of Chromium, installed by hack/setup-chromium.sh when missing.
// It fails, never skips, when Chromium cannot be had.
func chromium() (string, error) {
	cmd := exec.Command("bash", filepath.Join(testenv.RepoRoot(), "hack", "setup-chromium.sh"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("the browser tests need Chromium, which could not be installed: %w\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// newSession creates a planning Session in ns, as the sample does.
func (c *cluster) newSession(t *testing.T, ns, name string) {
	t.Helper()
	s := &flowv1.Session{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "planning"}, InitialContext: jsonOf(t, map[string]any{
			"goal": "Run a half marathon", "deadline_weeks": 16, "weekly_hours": 5,
			"interaction_policy": map[string]any{"conversation_style": "concise", "approval_policy": "single_final"},
		})},
	}
	if err := c.admin.Create(context.Background(), s); err != nil {
		t.Fatalf("creating session %s/%s: %v", ns, name, err)
	}
}

// waitSession waits until the Session satisfies ok and returns it.
func (c *cluster) waitSession(t *testing.T, ns, name string, what string, ok func(*flowv1.Session) bool) *flowv1.Session {
	t.Helper()
	s := &flowv1.Session{}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := c.admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)
		if err == nil && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s/%s: %s did not happen within 30s (err %v, phase %q, pathway %q)", ns, name, what, err, s.Status.Phase, s.Status.CurrentPathway)
		}
	}
}
