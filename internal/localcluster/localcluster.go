// Package localcluster runs the operator on a local control plane: kube-apiserver and
// etcd built from source (internal/testenv), the controllers in-process, and a
// kubeconfig so that kubectl and the kubectl-journey plugin can talk to it. The demo,
// the e2e tests and the docs test use it.
package localcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// Cluster is a running control plane with the operator.
type Cluster struct {
	Env *testenv.Environment
	// Kubeconfig is the path of an admin kubeconfig.
	Kubeconfig string
	// Dir holds the kubeconfig and the plugin binary (bin/).
	Dir string
}

// Start starts the control plane and the manager. dir receives the kubeconfig; when
// plugin is true the kubectl-journey plugin is built into dir/bin.
func Start(dir string, plugin bool) (*Cluster, error) {
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return nil, err
	}
	if plugin {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", "kubectl-journey"), "./cmd/kubectl-journey")
		build.Dir = testenv.RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building kubectl-journey: %w\n%s", err, out)
		}
	}
	env, err := testenv.Start()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Env: env, Dir: dir}
	if c.Kubeconfig, err = env.WriteKubeconfig(dir, testenv.Admin("admin")); err == nil {
		_, err = env.RunManager(testenv.ManagerOptions{
			Setup: func(mgr ctrl.Manager) error { return controller.Setup(mgr, controller.Options{}) },
		})
	}
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return c, nil
}

// Stop stops the manager and the control plane.
func (c *Cluster) Stop() error {
	return c.Env.Stop()
}

// Kubectl runs the real kubectl against the cluster, from the repository root, with the
// plugin directory first on PATH.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	cmd := exec.Command("kubectl", args...)
	cmd.Env = c.Environ()
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Environ is the environment kubectl runs in against the cluster: its kubeconfig, the
// plugin directory first on PATH, and a discovery cache of its own (kubectl keys its
// cache by server address, and another control plane may have used the same port with
// other resources).
func (c *Cluster) Environ() []string {
	return append(os.Environ(),
		"KUBECONFIG="+c.Kubeconfig,
		"KUBECACHEDIR="+filepath.Join(c.Dir, "kube-cache"),
		"PATH="+filepath.Join(c.Dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// Main is a test package's TestMain on a Cluster: it starts one with the plugin built
// in a temporary directory named after prefix, hands it to use, runs the tests, stops
// the Cluster and exits with the tests' code. A Cluster that cannot start fails the run.
func Main(m *testing.M, prefix string, use func(*Cluster)) {
	testenv.QuietLogs()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, err := Start(dir, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	use(c)
	code := m.Run()
	_ = c.Stop()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
