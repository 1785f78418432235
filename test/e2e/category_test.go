package e2e

import (
	"strings"
	"testing"
)

// categoryIsNotAKindPlural: the three kinds share the category journeyops, which is not
// the plural of any of them: kubectl resolves `journeys` to the Journey kind alone, so
// it takes a name, a watch and --all as for any single kind. It runs in a namespace
// that holds the samples, and deletes its Journeys.
func categoryIsNotAKindPlural(t *testing.T, ns string) {
	all := kubectl(t, "-n", ns, "get", "journeyops", "-o", "name")
	for _, want := range []string{"journey.flow.journey.dev/review-loop", "pathway.flow.journey.dev/rl-plan", "session.flow.journey.dev/pl-half-marathon"} {
		if !strings.Contains(all, want+"\n") {
			t.Errorf("kubectl get journeyops does not list %s:\n%s", want, all)
		}
	}

	row := columns(t, kubectl(t, "-n", ns, "get", "journeys", "review-loop"), "review-loop")
	if row[0] != "review-loop" {
		t.Errorf("kubectl get journeys review-loop: row %q", row)
	}
	mustMatch(t, kubectl(t, "-n", ns, "describe", "journeys", "review-loop"), `(?m)^Kind:\s+Journey$`)
	// A watch that the request timeout ends: it must start (a category would refuse
	// "you must specify only one resource") and print the Journey.
	out, _ := cluster.Kubectl("-n", ns, "get", "journeys", "review-loop", "-w", "--request-timeout=2s")
	if strings.Contains(out, "only one resource") || !strings.Contains(out, "review-loop") {
		t.Errorf("kubectl get journeys review-loop -w:\n%s", out)
	}

	pathways := kubectl(t, "-n", ns, "get", "pathways", "-o", "name")
	sessions := kubectl(t, "-n", ns, "get", "sessions", "-o", "name")
	kubectl(t, "-n", ns, "delete", "jny", "--all", "--wait=true")
	if got := kubectl(t, "-n", ns, "get", "journeys", "-o", "name"); got != "" {
		t.Errorf("Journeys left after delete jny --all:\n%s", got)
	}
	if got := kubectl(t, "-n", ns, "get", "pathways", "-o", "name"); got != pathways || got == "" {
		t.Errorf("delete jny --all changed the Pathways:\nbefore:\n%s\nafter:\n%s", pathways, got)
	}
	if got := kubectl(t, "-n", ns, "get", "sessions", "-o", "name"); got != sessions || got == "" {
		t.Errorf("delete jny --all changed the Sessions:\nbefore:\n%s\nafter:\n%s", sessions, got)
	}
}
