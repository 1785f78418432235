// Command kubectl-journey is the kubectl plugin for journey-operator. Installed on PATH
// (make install-plugin), it runs as `kubectl journey`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/journeyops/journey-operator/internal/plugin"
)

func main() {
	os.Exit(run())
}

// run executes the command and returns the process's exit code, so that deferred calls
// run before the process exits.
func run() int {
	// The plugin reports through its output and errors; the client library's own logs
	// would only repeat them (and it complains after 30s when no logger is set).
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		return plugin.ExitCode(err)
	}
	return 0
}
