package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// sayWait runs `kubectl journey say SESSION TEXT --wait` and returns its output and
// exit code (through kubectl, which runs the plugin in its place).
func sayWait(t *testing.T, ns, session, text string) (string, int) {
	t.Helper()
	out, err := cluster.Kubectl("journey", "say", session, text, "--wait", "--timeout", "30s", "-n", ns)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out, 0
	case errors.As(err, &exit):
		return out, exit.ExitCode()
	}
	t.Fatal(err)
	return "", 0
}

// A runtime CEL error in a pathway under errorRecovery Graceful: say --wait prints the
// fallback reply and the failure and exits 2; kubectl get sessions shows TurnFailed in
// REASON; the next good turn answers, exits 0 and clears it.
func TestFailedTurnIsVisible(t *testing.T) {
	t.Parallel()
	ns := "e2e-turn-failed"
	kubectl(t, "create", "namespace", ns)
	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: chat}
spec:
  builtin:
    reply: "You said: {{ .message }}"
    complete: "false"
    outputs:
      - {name: size, expression: 'message == "boom" ? context.order.size : 1'}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Journey
metadata: {name: shop}
spec:
  entryPathway: chat
  errorRecovery: Graceful
  fallbackReply: Sorry, that did not work; a person has been told.
  pathways: [{name: chat, pathwayRef: chat}]
`)
	kubectl(t, "-n", ns, "wait", "--for=condition=Ready", "--timeout=30s", "journey/shop")
	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: buyer-1}
spec:
  journeyRef: {name: shop}
`)
	out, code := sayWait(t, ns, "buyer-1", "boom")
	if code != 2 {
		t.Errorf("exit code %d, want 2 (the turn failed):\n%s", code, out)
	}
	mustMatch(t, out,
		`(?m)^Reply:\s+Sorry, that did not work; a person has been told\.$`,
		`(?m)^Failure:\s+System/Validation in chat: .*no such key: order`,
		`(?m)^Phase:\s+WaitingForInput$`,
		`error: the turn of message m-1 in session/buyer-1 failed \(SystemValidation\)`)
	row := columns(t, kubectl(t, "-n", ns, "get", "sessions"), "buyer-1")
	if got := strings.Join(row[1:3], " ") + " " + row[len(row)-2]; got != "shop WaitingForInput TurnFailed" {
		t.Errorf("kubectl get sessions row %q: want JOURNEY PHASE ... REASON = shop WaitingForInput ... TurnFailed", row)
	}
	mustMatch(t, kubectl(t, "-n", ns, "get", "session", "buyer-1", "-o", `jsonpath={.status.conditions[?(@.type=="TurnFailed")].status} {.status.conditions[?(@.type=="TurnFailed")].reason}`),
		`^True SystemValidation$`)

	out, code = sayWait(t, ns, "buyer-1", "a blue one")
	if code != 0 {
		t.Errorf("exit code %d after a good turn, want 0:\n%s", code, out)
	}
	mustMatch(t, out, `(?m)^Reply:\s+You said: a blue one$`)
	if strings.Contains(out, "Failure:") {
		t.Errorf("a good turn prints a failure:\n%s", out)
	}
	row = columns(t, kubectl(t, "-n", ns, "get", "sessions"), "buyer-1")
	if reason := row[len(row)-2]; reason != "WaitingForInput" {
		t.Errorf("REASON %q after a good turn, want WaitingForInput", reason)
	}
}

// A message that passes through three pathways (the next two run on entry) prints the
// reply of each, in order, and both transitions.
func TestMultiPathwayTurnPrintsEveryReply(t *testing.T) {
	t.Parallel()
	ns := "e2e-turn-replies"
	kubectl(t, "create", "namespace", ns)
	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: greet}
spec:
  next: diagnose
  builtin: {reply: "Hi, let me look at that."}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: diagnose}
spec:
  runOn: Entry
  next: resolved
  builtin: {reply: "The printer is out of paper."}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: resolved}
spec:
  runOn: Entry
  builtin: {reply: "Add paper and it will print again.", complete: "false"}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Journey
metadata: {name: helpdesk}
spec:
  entryPathway: greet
  pathways:
    - {name: greet, pathwayRef: greet}
    - {name: diagnose, pathwayRef: diagnose}
    - {name: resolved, pathwayRef: resolved}
`)
	kubectl(t, "-n", ns, "wait", "--for=condition=Ready", "--timeout=30s", "journey/helpdesk")
	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: user-1}
spec:
  journeyRef: {name: helpdesk}
`)
	out, code := sayWait(t, ns, "user-1", "my printer is broken")
	if code != 0 {
		t.Errorf("exit code %d, want 0:\n%s", code, out)
	}
	mustMatch(t, out,
		`(?m)^Reply:\s+\[greet\] Hi, let me look at that\.\nReply:\s+\[diagnose\] The printer is out of paper\.\nReply:\s+\[resolved\] Add paper and it will print again\.$`,
		`(?m)^Pathway:\s+resolved$`,
		`(?m)^Transition:\s+greet -> diagnose \(via next`,
		`(?m)^Transition:\s+diagnose -> resolved \(via next`,
		`(?m)^Phase:\s+WaitingForInput$`)
}
