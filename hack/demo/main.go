// Command demo runs the sample journeys on a local control plane (kube-apiserver and
// etcd built from source) with the builtin agent, driving them with real kubectl and
// the kubectl-journey plugin.
//
//	make demo              # tell the story, then shut everything down
//	DEMO_KEEP=1 make demo  # keep the control plane and the clinic MCP server up, serve
//	                       # the web console, print their URLs and the KUBECONFIG line
//
// The manager runs with its admission webhooks, served with the certificate it
// provisions itself (internal/localcluster), so the demo refuses what a cluster refuses.
// The stories are internal/demo's: the docs test tells them too and checks them.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/journeyops/journey-operator/internal/demo"
	"github.com/journeyops/journey-operator/internal/localcluster"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
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
	// The webhook server's own errors (a handshake cut short at shutdown) too.
	log.SetOutput(logFile)

	demo.Say("Starting a local control plane (kube-apiserver and etcd built from source) and the manager")
	c, err := localcluster.Start(dir, true)
	if err != nil {
		return err
	}
	defer func() {
		demo.Say("Stopping the manager and the control plane")
		_ = c.Stop()
	}()
	fmt.Println("Manager logs: .demo/manager.log")

	// The clinic MCP server of the tools story, at the address docs/tools.md names
	// when it is free.
	cl, err := clinic.Listen(clinic.Address, true)
	if err != nil {
		return err
	}
	defer cl.Close()

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := demo.TellStories(ctx, c, cl, os.Stdout); err != nil {
		return err
	}
	fmt.Printf("\nDemo finished in %s.\n", time.Since(start).Round(time.Second))

	if os.Getenv("DEMO_KEEP") != "" {
		url, err := dashboard(ctx, c)
		if err != nil {
			return err
		}
		gw, err := c.ServeA2A(localcluster.GatewayAddress, true)
		if err != nil {
			return err
		}
		defer gw.Close()
		fmt.Printf("\nThe control plane stays up.\n\nWeb console (kubectl journey dashboard): %s\nClinic MCP server (docs/tools.md): %s\nA2A agent card of healthcare-referral (docs/a2a.md): %s/a2a/default/healthcare-referral/.well-known/agent-card.json\n\nIn another shell:\n\n  export KUBECONFIG=%s\n  export PATH=%s:$PATH   # for kubectl journey\n  kubectl get journeys,pathways,sessions\n\nPress Ctrl-C to stop.\n",
			url, cl.URL, gw.URL, c.Kubeconfig, filepath.Join(c.Dir, "bin"))
		<-ctx.Done()
	}
	return nil
}

// dashboard runs `kubectl journey dashboard` against the demo cluster until ctx ends
// and returns the URL it prints.
func dashboard(ctx context.Context, c *localcluster.Cluster) (string, error) {
	cmd := exec.CommandContext(ctx, "kubectl", "journey", "dashboard", "--port", "0")
	cmd.Env = c.Environ()
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting kubectl journey dashboard: %w", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("kubectl journey dashboard printed no URL: %w", err)
	}
	go func() { _, _ = io.Copy(io.Discard, out); _ = cmd.Wait() }()
	fields := strings.Fields(strings.TrimPrefix(line, "Journey console at "))
	if len(fields) == 0 || !strings.HasPrefix(fields[0], "http://") {
		return "", fmt.Errorf("kubectl journey dashboard printed %q", line)
	}
	return fields[0], nil
}
