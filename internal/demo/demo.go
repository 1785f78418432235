// Package demo tells the stories of `make demo` (hack/demo) on a local control plane:
// the sample journeys, one healthcare conversation, one review loop and one booking
// turn by turn with the plugin, a canary rollout and a Budget's spend, printed as a
// person would see them. The docs test tells them on its control plane and checks
// what a person reads.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/journeyops/journey-operator/internal/localcluster"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// TellStories tells the demo's stories on c, with the clinic MCP server cl, printing
// them to w.
func TellStories(ctx context.Context, c *localcluster.Cluster, cl *clinic.Listening, w io.Writer) error {
	return tellStories(ctx, kubectl{c: c, out: w}, cl)
}

// manifest reads a manifest of hack/demo: the demo's Budget and journeys, which the
// docs and the e2e tests name there.
func manifest(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "hack", "demo", name))
	return string(b), err
}

// Say prints a heading of the demo's output to standard output.
func Say(format string, args ...any) { say(os.Stdout, format, args...) }

// say prints a heading of the demo's output to w.
func say(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "\n==> "+format+"\n", args...)
}

// kubectl runs the real kubectl (and through it the plugin) against the demo cluster,
// for each command the demo shows; what it does not show (creating a Session, waiting
// for a phase) goes to the API server directly (api.go).
type kubectl struct {
	c *localcluster.Cluster
	// out receives what the demo prints.
	out io.Writer
}

// say prints a heading of the demo's output.
func (k kubectl) say(format string, args ...any) { say(k.out, format, args...) }

func (k kubectl) output(args ...string) (string, error) { return k.c.Kubectl(args...) }

// show prints the command and its output, as a person would see it.
func (k kubectl) show(args ...string) error {
	fmt.Fprintf(k.out, "$ kubectl %s\n", strings.Join(quote(args), " "))
	out, err := k.output(args...)
	fmt.Fprint(k.out, out)
	return err
}

func quote(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " '!?\"{") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return out
}
