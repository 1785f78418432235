// Command demo runs the sample journeys on a local control plane (kube-apiserver and
// etcd built from source) with the builtin agent, driving them with real kubectl.
//
//	make demo              # tell the story, then shut everything down
//	DEMO_KEEP=1 make demo  # keep the control plane up and print the KUBECONFIG line
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	start := time.Now()
	root := testenv.RepoRoot()
	dir := filepath.Join(root, ".demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "manager.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))

	say("Starting a local control plane (kube-apiserver and etcd built from source)")
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		say("Stopping the control plane")
		_ = env.Stop()
	}()

	kubeconfig, err := writeKubeconfig(env.Environment, dir)
	if err != nil {
		return err
	}
	k := kubectl{kubeconfig: kubeconfig, dir: root}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(flowv1.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	if err := controller.Setup(mgr, controller.Options{}); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	say("Manager running (logs in .demo/manager.log)")

	if err := tellStories(ctx, k, root); err != nil {
		return err
	}
	fmt.Printf("\nDemo finished in %s.\n", time.Since(start).Round(time.Second))

	if os.Getenv("DEMO_KEEP") != "" {
		fmt.Printf("\nThe control plane stays up. In another shell:\n\n  export KUBECONFIG=%s\n  kubectl get journeys,pathways,sessions\n\nPress Ctrl-C to stop.\n", kubeconfig)
		<-ctx.Done()
	}
	cancel()
	return <-mgrDone
}

// writeKubeconfig writes a kubeconfig for an admin user of the control plane.
func writeKubeconfig(env *envtest.Environment, dir string) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "demo-admin", Groups: []string{"system:masters"}}, nil)
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

func say(format string, args ...any) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

// kubectl runs the real kubectl against the demo control plane.
type kubectl struct{ kubeconfig, dir string }

func (k kubectl) output(args ...string) (string, error) {
	cmd := exec.Command("kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+k.kubeconfig)
	cmd.Dir = k.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// show prints the command and its output, as a person would see it.
func (k kubectl) show(args ...string) error {
	fmt.Printf("$ kubectl %s\n", strings.Join(args, " "))
	out, err := k.output(args...)
	fmt.Print(out)
	return err
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }
