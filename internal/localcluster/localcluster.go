// Package localcluster runs the operator on a local control plane: kube-apiserver and
// etcd built from source (internal/testenv), the manager in-process with its
// controllers and its admission webhooks, and a kubeconfig so that kubectl and the
// kubectl-journey plugin can talk to it. The demo, the e2e tests and the docs test use
// it.
//
// The webhooks are served as config/self-cert serves them: the manager provisions its
// serving certificate (internal/servingcert) into a Secret, injects the CA into the
// webhook configurations of config/webhook, and serves once the certificate is in its
// certificate directory. Start plays the kubelet's one part, copying the Secret into
// that directory. The API server calls the webhook server at https://localhost.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/servingcert"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/webhook"
)

// Where the manager keeps its webhook serving certificate, as config/self-cert names
// them (without kustomize's name prefix).
const (
	CertNamespace = "journey-operator-system"
	CertSecret    = "webhook-server-cert"
)

// webhookTimeout bounds the wait for the certificate and the webhook server.
const webhookTimeout = 60 * time.Second

// Cluster is a running control plane with the operator.
type Cluster struct {
	Env *testenv.Environment
	// Kubeconfig is the path of an admin kubeconfig.
	Kubeconfig string
	// Dir holds the kubeconfig and the plugin binary (bin/).
	Dir string
}

// Start starts the control plane and the manager with its webhooks, and returns once
// the webhooks serve. dir receives the kubeconfig and the webhook's certificate
// directory; when plugin is true dir/bin holds the kubectl-journey plugin built from
// this checkout.
func Start(dir string, plugin bool) (*Cluster, error) {
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return nil, err
	}
	if plugin {
		// Built once for the test packages and the demo of a checkout (testenv.Binary),
		// linked into dir/bin.
		bin, err := testenv.Binary("./cmd/kubectl-journey")
		if err != nil {
			return nil, fmt.Errorf("building kubectl-journey: %w", err)
		}
		link := filepath.Join(dir, "bin", "kubectl-journey")
		_ = os.Remove(link)
		if err := os.Symlink(bin, link); err != nil {
			return nil, err
		}
	}
	env, err := testenv.Start(testenv.WithWebhooks(), func(e *envtest.Environment) {
		// The API server calls https://localhost:<port>: a name the certificate holds.
		e.WebhookInstallOptions.LocalServingHostExternalName = "localhost"
	})
	if err != nil {
		return nil, err
	}
	c := &Cluster{Env: env, Dir: dir}
	if c.Kubeconfig, err = env.WriteKubeconfig(dir, testenv.Admin("admin")); err == nil {
		err = c.runManager()
	}
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return c, nil
}

// runManager runs the manager with the controllers and the webhooks, the webhooks'
// certificate provisioned by the manager, and waits until they serve.
func (c *Cluster) runManager() error {
	ctx := context.Background()
	secret := types.NamespacedName{Namespace: CertNamespace, Name: CertSecret}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: CertNamespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: CertNamespace, Name: CertSecret}},
	} {
		if err := c.Env.Client.Create(ctx, o); err != nil {
			return err
		}
	}
	certDir := filepath.Join(c.Dir, "webhook-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	certs, err := servingcert.New(servingcert.Options{
		Secret:            secret,
		DNSName:           "localhost",
		CertDir:           certDir,
		MutatingWebhook:   "mutating-webhook-configuration",
		ValidatingWebhook: "validating-webhook-configuration",
	})
	if err != nil {
		return err
	}
	mgr, err := c.Env.RunManager(testenv.ManagerOptions{
		Webhooks: true,
		WebhookServer: func(o crwebhook.Options) crwebhook.Server {
			o.CertDir = certDir
			return certs.Server(crwebhook.NewServer(o))
		},
		Setup: func(mgr ctrl.Manager) error {
			if err := controller.Setup(mgr, controller.Options{}); err != nil {
				return err
			}
			if err := webhook.SetupWebhooks(mgr, webhook.Options{Checks: controller.AdmissionChecks()}); err != nil {
				return err
			}
			return certs.Add(mgr)
		},
	})
	if err != nil {
		return err
	}
	if err := mount(ctx, c.Env, secret, certDir); err != nil {
		return err
	}
	return mgr.WaitForWebhooks(webhookTimeout)
}

// mount waits until the manager wrote the certificate into the Secret and copies it
// into certDir, as the kubelet does with the Secret mounted into the manager's pod.
func mount(ctx context.Context, env *testenv.Environment, secret types.NamespacedName, certDir string) error {
	var s corev1.Secret
	err := testenv.Poll(webhookTimeout, func() error {
		if err := env.Client.Get(ctx, secret, &s); err != nil {
			return err
		}
		if len(s.Data["tls.crt"]) == 0 || len(s.Data["tls.key"]) == 0 {
			return errors.New("the manager has not provisioned the webhook certificate yet")
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(certDir, k), s.Data[k], 0o600); err != nil {
			return err
		}
	}
	return nil
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
