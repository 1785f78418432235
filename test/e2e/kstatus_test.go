package e2e

import (
	"slices"
	"testing"
)

// kubectl wait reads the conditions a person waits for: Completed, Stalled and Ready,
// also on a finished Session that was edited afterwards.
func TestKubectlWaitForConditions(t *testing.T) {
	t.Parallel()
	ns := "e2e-wait"
	kubectl(t, "create", "namespace", ns)
	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: only}
spec:
  runOn: Entry
  builtin: {reply: done}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Journey
metadata: {name: one-step}
spec:
  entryPathway: only
  pathways: [{name: only, pathwayRef: only}]
`)
	kubectl(t, "-n", ns, "wait", "--for=condition=Ready", "--timeout=30s", "journey/one-step")
	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: quick}
spec:
  journeyRef: {name: one-step}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: called-off}
spec:
  journeyRef: {name: one-step}
  cancel: true
`)
	kubectl(t, "-n", ns, "wait", "--for=condition=Completed", "--timeout=30s", "session/quick")
	kubectl(t, "-n", ns, "wait", "--for=condition=Ready", "--timeout=30s", "session/quick")
	kubectl(t, "-n", ns, "wait", "--for=condition=Stalled", "--timeout=30s", "session/called-off")
	mustMatch(t, kubectl(t, "-n", ns, "get", "session", "called-off", "-o", "jsonpath={.status.phase} {.status.conditions[?(@.type==\"Completed\")].status}"), `^Cancelled False$`)

	// Printer columns: where it is and whether it is OK, by default. STABLE is empty
	// without spec.rollout.
	mustMatch(t, kubectl(t, "-n", ns, "get", "journeys", "one-step"),
		`(?m)^NAME\s+ENTRY\s+PATHWAYS\s+READY\s+REASON\s+REVISION\s+LATEST\s+STABLE\s+AGE$`, `(?m)^one-step\s+only\s+1\s+True\s+Valid\s+(one-step-\S+)\s+(one-step-\S+)\s+\S+$`)
	journeyColumnsDuringARollout(t, ns)
	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: held}
spec:
  journeyRef: {name: one-step}
  suspend: true
`)
	kubectl(t, "-n", ns, "wait", "--for=jsonpath={.status.conditions[?(@.type==\"Ready\")].reason}=Suspended", "--timeout=30s", "session/held")
	sessions := kubectl(t, "-n", ns, "get", "sessions")
	mustMatch(t, sessions, `(?m)^NAME\s+JOURNEY\s+PHASE\s+PATHWAY\s+ITERATION\s+CONFIDENCE\s+REASON\s+AGE$`,
		`(?m)^called-off\s+one-step\s+Cancelled\s+.*\sCancelled\s+\S+$`,
		`(?m)^held\s+one-step\s+Pending\s+Suspended\s+\S+$`)

	// An edit to a finished Session is observed: kubectl wait (which checks the
	// conditions' observedGeneration) still returns.
	kubectl(t, "-n", ns, "label", "session/quick", "edited=yes")
	kubectl(t, "-n", ns, "patch", "session/quick", "--type=merge", "-p", `{"spec":{"ttlSecondsAfterFinished":3600}}`)
	kubectl(t, "-n", ns, "wait", "--for=jsonpath={.status.observedGeneration}=2", "--timeout=30s", "session/quick")
	kubectl(t, "-n", ns, "wait", "--for=condition=Ready", "--timeout=30s", "session/quick")
	kubectl(t, "-n", ns, "wait", "--for=condition=Completed", "--timeout=30s", "session/quick")
}

// `kubectl journey say --wait` to a Session whose Journey does not exist fails at once
// and says why, instead of waiting for a reply that cannot come.
func TestSayFailsFastWhenTheSessionCannotStart(t *testing.T) {
	t.Parallel()
	ns := "e2e-misspelt"
	kubectl(t, "create", "namespace", ns)
	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: typo}
spec:
  journeyRef: {name: helthcare-referral}
`)
	out, err := cluster.Kubectl("journey", "say", "typo", "hello", "--wait", "-n", ns)
	if err == nil {
		t.Fatalf("say --wait to a Session without its Journey succeeded:\n%s", out)
	}
	mustMatch(t, out, `cannot start \(JourneyNotFound\)`, `Journey "helthcare-referral" not found in namespace "e2e-misspelt"`)
}

// While a canary runs, kubectl get journeys shows both revisions that new Sessions
// start on: REVISION (the newest valid one, the canary) and STABLE; -o wide adds
// CANARY. Once the canary is promoted, STABLE is that revision and CANARY is empty.
func journeyColumnsDuringARollout(t *testing.T, ns string) {
	t.Helper()
	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: hello}
spec:
  runOn: Entry
  builtin: {reply: Hello}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Journey
metadata: {name: hello}
spec:
  entryPathway: hello
  pathways: [{name: hello, pathwayRef: hello}]
  rollout:
    canary:
      steps: [{weight: 20}]
`)
	kubectl(t, "-n", ns, "wait", "--for=jsonpath={.status.stableRevision}", "--timeout=30s", "journey/hello")
	stable := kubectl(t, "-n", ns, "get", "journey", "hello", "-o", "jsonpath={.status.stableRevision}")
	kubectl(t, "-n", ns, "patch", "pathway", "hello", "--type=merge", "-p", `{"spec": {"builtin": {"reply": "Hello there"}}}`)
	kubectl(t, "-n", ns, "wait", "--for=jsonpath={.status.rollout.phase}=Paused", "--timeout=30s", "journey/hello")
	canary := kubectl(t, "-n", ns, "get", "journey", "hello", "-o", "jsonpath={.status.canaryRevision}")
	if canary == "" || canary == stable {
		t.Fatalf("canary %q, stable %q: want a canary beside the stable revision", canary, stable)
	}
	out := kubectl(t, "-n", ns, "get", "journeys", "hello")
	mustMatch(t, out, `(?m)^NAME\s+ENTRY\s+PATHWAYS\s+READY\s+REASON\s+REVISION\s+LATEST\s+STABLE\s+AGE$`)
	if got, want := columns(t, out, "hello")[5:8], []string{canary, canary, stable}; !slices.Equal(got, want) {
		t.Errorf("REVISION, LATEST, STABLE = %v, want %v:\n%s", got, want, out)
	}
	out = kubectl(t, "-n", ns, "get", "journeys", "hello", "-o", "wide")
	mustMatch(t, out, `(?m)^NAME\s+ENTRY\s+PATHWAYS\s+READY\s+REASON\s+REVISION\s+LATEST\s+STABLE\s+CANARY\s+AGE$`)
	if got, want := columns(t, out, "hello")[5:9], []string{canary, canary, stable, canary}; !slices.Equal(got, want) {
		t.Errorf("-o wide: REVISION, LATEST, STABLE, CANARY = %v, want %v:\n%s", got, want, out)
	}

	journey(t, ns, "rollout", "promote", "hello")
	kubectl(t, "-n", ns, "wait", "--for=jsonpath={.status.rollout.phase}=Promoted", "--timeout=30s", "journey/hello")
	out = kubectl(t, "-n", ns, "get", "journeys", "hello", "-o", "wide")
	if got, want := columns(t, out, "hello")[5:], []string{canary, canary, canary}; len(got) != 4 || !slices.Equal(got[:3], want) {
		t.Errorf("after the promotion: -o wide REVISION, LATEST, STABLE, CANARY, AGE = %v, want %v and an empty CANARY:\n%s", got, want, out)
	}
}
