// Package localcluster runs the operator on a local control plane: kube-apiserver and
// etcd built from source (internal/testenv), the controllers in-process, and a
// kubeconfig so that kubectl and the kubectl-journey plugin can talk to it. The demo
// and the e2e tests use it.
package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
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

	cancel  context.CancelFunc
	mgrDone chan error
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
	if c.Kubeconfig, err = writeKubeconfig(env.Environment, dir); err != nil {
		_ = env.Stop()
		return nil, err
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(flowv1.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err == nil {
		err = controller.Setup(mgr, controller.Options{})
	}
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.mgrDone = cancel, make(chan error, 1)
	go func() { c.mgrDone <- mgr.Start(ctx) }()
	return c, nil
}

// Stop stops the manager and the control plane.
func (c *Cluster) Stop() error {
	c.cancel()
	err := <-c.mgrDone
	if serr := c.Env.Stop(); err == nil {
		err = serr
	}
	return err
}

// Kubectl runs the real kubectl against the cluster, from the repository root, with the
// plugin directory first on PATH.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	cmd := exec.Command("kubectl", args...)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+c.Kubeconfig,
		"PATH="+filepath.Join(c.Dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// writeKubeconfig writes a kubeconfig for an admin user of the control plane.
func writeKubeconfig(env *envtest.Environment, dir string) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	raw, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, raw, 0o600)
}
