package deploy

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// syncBuffer is the manager's output, written by the process and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// saKubeconfig writes a kubeconfig that acts as the install's ServiceAccount (an admin
// impersonating it), so the manager has exactly the chart's RBAC.
func saKubeconfig(t *testing.T, env *testenv.Environment, in install) string {
	t.Helper()
	admin, err := env.AddUser(envtest.User{Name: "deploy-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range kc.AuthInfos {
		a.Impersonate = "system:serviceaccount:" + in.ns + ":" + in.sa
		a.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + in.ns, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// managerArgs are the arguments the install's Deployment gives the manager, then the
// ones a manager outside a pod needs: no leader election (no pod namespace to hold
// the Lease in), no metrics, probe or webhook servers (no ports or certificates here).
func managerArgs(t *testing.T, in install) []string {
	t.Helper()
	args := expandedArgs(t, in.r.ofKind("Deployment")[0])
	return append(args, "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0", "--enable-webhooks=false")
}

// buildManager builds cmd/manager, or reuses the binary another test package of the
// run built (testenv.Binary).
func buildManager(t *testing.T) string {
	t.Helper()
	bin, err := testenv.Binary("./cmd/manager")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startManager runs the manager binary until the test ends, and returns its output.
func startManager(ctx context.Context, t *testing.T, bin string, args []string) *syncBuffer {
	t.Helper()
	mctx, cancel := context.WithCancel(ctx)
	out := &syncBuffer{}
	cmd := exec.CommandContext(mctx, bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("manager output:\n%s", out.String())
		}
	})
	return out
}

// runScopedManager runs cmd/manager with the scoped install's arguments
// and RBAC, and checks that it runs a Session in a watched namespace and leaves one
// outside alone. Were its cache cluster-wide, it could not list anything (its Roles
// are namespaced) and would step nothing.
func runScopedManager(ctx context.Context, t *testing.T, env *testenv.Environment, c client.Client, in install, bin string) {
	args := append(managerArgs(t, in), "--kubeconfig="+saKubeconfig(t, env, in))
	if !strings.Contains(strings.Join(args, " "), "--watch-namespaces=team-a,team-b") {
		t.Fatalf("the scoped install runs the manager with %v", args)
	}

	for _, ns := range []string{"outside", "team-a"} { // outside first: it had every chance
		createJourney(ctx, t, c, ns)
	}

	out := startManager(ctx, t, bin, args)

	var s flowv1.Session
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "one"}, &s); err != nil {
			return false, err
		}
		return s.Status.Phase == flowv1.PhaseCompleted, nil
	})
	if err != nil {
		t.Fatalf("the Session in watched namespace team-a did not complete: %v (phase %q)", err, s.Status.Phase)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "outside", Name: "one"}, &s); err != nil {
		t.Fatal(err)
	}
	if s.Status.Phase != "" || s.Status.Step != 0 || s.Status.JourneyRevision != "" {
		t.Errorf("the manager stepped a Session outside its namespaces: %+v", s.Status)
	}
	var j flowv1.Journey
	if err := c.Get(ctx, client.ObjectKey{Namespace: "outside", Name: "one"}, &j); err != nil {
		t.Fatal(err)
	}
	if len(j.Status.Conditions) != 0 {
		t.Errorf("the manager reconciled a Journey outside its namespaces: %+v", j.Status.Conditions)
	}
	if strings.Contains(out.String(), "forbidden") {
		t.Errorf("the manager was refused a request:\n%s", out.String())
	}
}

// createJourney creates a one-pathway Journey whose Session completes on the outcome it
// carries, with no agent call.
func createJourney(ctx context.Context, t *testing.T, c client.Client, ns string) {
	t.Helper()
	objs := []client.Object{
		&flowv1.Pathway{
			ObjectMeta: metav1.ObjectMeta{Name: "only", Namespace: ns},
			Spec: flowv1.PathwaySpec{
				Signature:   flowv1.Signature{Instructions: "Do the one thing."},
				Executor:    flowv1.ExecutorExternal,
				Transitions: &flowv1.OutcomeTransitions{OnSuccess: &flowv1.OutcomeTransition{Action: flowv1.ActionClose}},
			},
		},
		&flowv1.Journey{
			ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: ns},
			Spec: flowv1.JourneySpec{
				EntryPathway: "only",
				Pathways:     []flowv1.PathwayEntry{{Name: "only", PathwayRef: "only"}},
			},
		},
		&flowv1.Session{
			ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: ns},
			Spec: flowv1.SessionSpec{
				JourneyRef: flowv1.JourneyReference{Name: "one"},
				Outcomes:   []flowv1.ExternalOutcome{{Pathway: "only", Iteration: 1, ResultType: flowv1.ResultSuccess}},
			},
		},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s/%s: %v", o, ns, o.GetName(), err)
		}
	}
}
