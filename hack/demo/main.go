// Command demo runs the sample journeys on a local control plane (kube-apiserver and
// etcd built from source) with the builtin agent, driving them with real kubectl and
// the kubectl-journey plugin.
//
//	make demo              # tell the story, then shut everything down
//	DEMO_KEEP=1 make demo  # keep the control plane up and print the KUBECONFIG line
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/journeyops/journey-operator/internal/localcluster"
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
	dir := filepath.Join(testenv.RepoRoot(), ".demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "manager.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))

	say("Starting a local control plane (kube-apiserver and etcd built from source) and the manager")
	c, err := localcluster.Start(dir, true)
	if err != nil {
		return err
	}
	defer func() {
		say("Stopping the manager and the control plane")
		_ = c.Stop()
	}()
	fmt.Println("Manager logs: .demo/manager.log")

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := tellStories(ctx, kubectl{c}); err != nil {
		return err
	}
	fmt.Printf("\nDemo finished in %s.\n", time.Since(start).Round(time.Second))

	if os.Getenv("DEMO_KEEP") != "" {
		fmt.Printf("\nThe control plane stays up. In another shell:\n\n  export KUBECONFIG=%s\n  export PATH=%s:$PATH   # for kubectl journey\n  kubectl get journeys,pathways,sessions\n\nPress Ctrl-C to stop.\n",
			c.Kubeconfig, filepath.Join(c.Dir, "bin"))
		<-ctx.Done()
	}
	return nil
}

func say(format string, args ...any) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

// kubectl runs the real kubectl (and through it the plugin) against the demo cluster.
type kubectl struct{ c *localcluster.Cluster }

func (k kubectl) output(args ...string) (string, error) { return k.c.Kubectl(args...) }

// show prints the command and its output, as a person would see it.
func (k kubectl) show(args ...string) error {
	fmt.Printf("$ kubectl %s\n", strings.Join(quote(args), " "))
	out, err := k.output(args...)
	fmt.Print(out)
	return err
}

func quote(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " '!?") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return out
}
