// Package e2e drives the operator the way a person does: real kubectl and the
// kubectl-journey plugin against a local control plane running the manager.
package e2e

import (
	"context"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/localcluster"
)

// cluster is the control plane and manager every test shares; the tests run in parallel
// with one another, each in a namespace of its own.
var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	localcluster.Main(m, "journey-e2e-", func(c *localcluster.Cluster) { cluster = c })
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := cluster.Kubectl(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// journey runs the plugin through kubectl; kubectl wants plugin flags after the name.
func journey(t *testing.T, ns string, args ...string) string {
	t.Helper()
	return kubectl(t, append(append([]string{"journey"}, args...), "-n", ns)...)
}

// namespace creates namespace name, applies the samples into it and waits until their
// Journeys are Ready.
func namespace(t *testing.T, name string) {
	t.Helper()
	kubectl(t, "create", "namespace", name)
	// The samples name no namespace: -n puts them where the user says.
	kubectl(t, "apply", "-k", "config/samples", "-n", name)
	kubectl(t, "-n", name, "wait", "--for=condition=Ready", "--timeout=30s",
		"journey/healthcare-referral", "journey/review-loop", "journey/planning", "journey/delivery-pipeline")
}

func repoPath(t *testing.T, rel string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(wd, "/test/e2e") + "/" + rel
}

// columns returns the fields of the row of name in kubectl get output.
func columns(t *testing.T, out, name string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == name || strings.HasSuffix(f[0], "/"+name)) {
			return f
		}
	}
	t.Fatalf("no row %s in:\n%s", name, out)
	return nil
}

// create writes manifest to a file and creates it in namespace.
func create(t *testing.T, ns, manifest string) {
	t.Helper()
	path := t.TempDir() + "/manifest.yaml"
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "-n", ns, "create", "-f", path)
}

// waitPhase waits until Session session is in phase (see waitSession).
func waitPhase(t *testing.T, ns, session, phase string) {
	t.Helper()
	waitSession(t, ns, session, "phase "+phase, func(s *flowv1.Session) bool { return string(s.Status.Phase) == phase })
}

// watcher watches the cluster as the admin.
var watcher = sync.OnceValues(func() (client.WithWatch, error) {
	return client.NewWithWatch(cluster.Env.Config, client.Options{Scheme: cluster.Env.Client.Scheme()})
})

// waitSession watches Session name in ns, as kubectl wait does, until ok says it is as
// described by what, for up to 30 seconds. The tests wait so between the commands
// they run: kubectl wait itself is tested in TestKubectlWaitForConditions.
func waitSession(t *testing.T, ns, name, what string, ok func(*flowv1.Session) bool) {
	t.Helper()
	w, err := watcher()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var last *flowv1.Session
	for ctx.Err() == nil {
		// Without a resourceVersion, the watch starts with the Session as it is.
		events, err := w.Watch(ctx, &flowv1.SessionList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
		if err != nil {
			t.Fatalf("watching session %s/%s: %v", ns, name, err)
		}
		for ev := range events.ResultChan() {
			if s, isSession := ev.Object.(*flowv1.Session); isSession {
				if last = s; ok(s) {
					events.Stop()
					return
				}
			}
		}
		events.Stop()
	}
	if last == nil {
		t.Fatalf("session %s/%s: not found in 30s (waiting for %s)", ns, name, what)
	}
	t.Fatalf("session %s/%s: not %s after 30s: phase %s, pathway %s, iteration %d, conditions %+v",
		ns, name, what, last.Status.Phase, last.Status.CurrentPathway, last.Status.Iteration, last.Status.Conditions)
}

func mustMatch(t *testing.T, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(out) {
			t.Errorf("output does not match %q:\n%s", p, out)
		}
	}
}

// committedGraphsMatchThePlugin: the journey pictures committed under docs/graphs
// (Mermaid and SVG) are what the plugin draws today of the samples in namespace ns.
func committedGraphsMatchThePlugin(t *testing.T, ns string) {
	for _, j := range []string{"healthcare-referral", "review-loop", "planning", "delivery-pipeline"} {
		want, err := os.ReadFile(repoPath(t, "docs/graphs/"+j+".mmd"))
		if err != nil {
			t.Fatalf("%v (regenerate with: make graphs)", err)
		}
		got := journey(t, ns, "graph", j, "--format", "mermaid")
		if got != string(want) {
			t.Errorf("docs/graphs/%s.mmd is stale: run make graphs\n--- plugin ---\n%s", j, got)
		}
		wantSVG, err := os.ReadFile(repoPath(t, "docs/graphs/"+j+".svg"))
		if err != nil {
			t.Fatalf("%v (regenerate with: make graphs)", err)
		}
		if got := journey(t, ns, "graph", j, "--format", "svg"); got != string(wantSVG) {
			t.Errorf("docs/graphs/%s.svg is stale: run make graphs", j)
		}
	}
}
