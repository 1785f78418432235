package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// kubectl runs kubectl as the control plane's admin in namespace ns with stdin, and
// returns its combined output and whether it succeeded.
func kubectl(t *testing.T, ns, stdin string, args ...string) (string, bool) {
	t.Helper()
	kubeconfig := testEnv.Kubeconfig(t, testenv.Admin("admin"))
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("kubectl %v: %v", args, err)
	}
	return out.String(), err == nil
}

// The journey care: greet, then ask, and a global transition to ask.
const greetPathway = `apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: greet}
spec:
  next: ask
  builtin: {reply: "hello"}
`

const askPathway = `apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: ask}
spec:
  builtin: {reply: "what do you need?", complete: "false"}
`

const careJourney = `apiVersion: flow.journey.dev/v1alpha1
kind: Journey
metadata: {name: care}
spec:
  entryPathway: greet
  pathways:
    - {name: greet, pathwayRef: greet}
    - {name: ask, pathwayRef: ask}
  transitions:
    - name: escalate
      to: ask
      trigger: {condition: "context.visits >= 3"}
`

// An invalid Journey or Pathway applied with kubectl is refused by the admission
// webhook with the controller's own message, naming where the problem is and, for
// CEL, pointing at it with a caret; the stored object is left as it was. A Journey
// whose Pathways do not exist yet is accepted with a warning.
func TestJourneyAndPathwayAdmission(t *testing.T) {
	t.Parallel()
	ns := testEnv.Namespace(t)
	if out, ok := kubectl(t, ns, greetPathway+"---\n"+askPathway+"---\n"+careJourney, "apply", "-f", "-"); !ok {
		t.Fatalf("applying a valid journey: %s", out)
	}

	// A typo in a Journey's CEL.
	typo := strings.Replace(careJourney, "context.visits >= 3", "context.visits >= ", 1)
	for _, dryRun := range []string{"--dry-run=server", "--dry-run=none"} {
		out, ok := kubectl(t, ns, typo, "apply", dryRun, "-f", "-")
		if ok {
			t.Fatalf("kubectl apply %s of a Journey with a CEL typo succeeded: %s", dryRun, out)
		}
		for _, want := range []string{
			`The Journey "care" is invalid: spec: Invalid value: transition escalate: condition: CEL "context.visits >= ": ERROR: <input>:1:19: Syntax error`,
			"\n | context.visits >= \n | ..................^",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply %s: output does not contain %q:\n%s", dryRun, want, out)
			}
		}
	}
	var j flowv1.Journey
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "care"}, &j); err != nil {
		t.Fatal(err)
	}
	if j.Generation != 1 || j.Spec.Transitions[0].Trigger.Condition != "context.visits >= 3" {
		t.Errorf("the refused edit was stored: generation %d, %+v", j.Generation, j.Spec.Transitions)
	}

	// A Pathway edit that leaves a Journey pointing nowhere, one whose CEL does not
	// compile, one that names an agent or a tool the Journey does not declare.
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown next", strings.Replace(greetPathway, "next: ask", "next: aks", 1),
			[]string{`spec: Invalid value: Journey "care": pathway greet: next: pathway "aks" is not one of spec.pathways`}},
		{"bad CEL", strings.Replace(askPathway, `complete: "false"`, `complete: "message =="`, 1),
			[]string{"spec: Invalid value: spec.builtin.complete: CEL \"message ==\": ERROR: <input>:1:11: Syntax error", "\n | message ==\n | ..........^"}},
		{"missing agent", strings.Replace(greetPathway, "next: ask", "next: ask\n  agents: [triage]", 1),
			[]string{`spec: Invalid value: Journey "care": pathway greet: agents: agent "triage" is not declared in spec.agents`}},
		{"unknown tool", strings.Replace(greetPathway, "next: ask", "next: ask\n  tools: [lookup]", 1),
			[]string{`spec: Invalid value: Journey "care": pathway greet: tool "lookup" is not declared in spec.tools`}},
	} {
		out, ok := kubectl(t, ns, tc.yaml, "apply", "-f", "-")
		if ok || !strings.HasPrefix(out, `The Pathway "`) {
			t.Errorf("%s: kubectl apply succeeded %v; want the Pathway refused:\n%s", tc.name, ok, out)
		}
		for _, want := range tc.want {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output does not contain %q:\n%s", tc.name, want, out)
			}
		}
	}

	// A Journey whose Pathways come later is accepted, with a warning; what is wrong
	// whatever they turn out to be is refused all the same.
	later := strings.NewReplacer("name: care", "name: later", "pathwayRef: ask", "pathwayRef: ask-later").Replace(careJourney)
	out, ok := kubectl(t, ns, later, "apply", "-f", "-")
	if !ok || !strings.Contains(out, `Warning: Journey "later": pathway "ask": Pathway "ask-later" not found in namespace "`+ns+`"; the Journey is not Ready until it exists`) {
		t.Errorf("a Journey whose Pathway comes later: succeeded %v, want accepted with a warning:\n%s", ok, out)
	}
	out, ok = kubectl(t, ns, strings.Replace(later, "context.visits >= 3", "context.visits >= ", 1), "apply", "-f", "-")
	if ok || !strings.Contains(out, `transition escalate: condition: CEL`) {
		t.Errorf("a CEL typo in a Journey whose Pathway comes later: succeeded %v, want refused:\n%s", ok, out)
	}
	// The Pathway it waits for is checked against it when it comes.
	out, ok = kubectl(t, ns, strings.Replace(strings.Replace(askPathway, "name: ask", "name: ask-later", 1), "builtin:", "next: nowhere\n  builtin:", 1), "apply", "-f", "-")
	if ok || !strings.Contains(out, `Journey "later": pathway ask: next: pathway "nowhere" is not one of spec.pathways`) {
		t.Errorf("a Pathway that breaks the Journey waiting for it: succeeded %v, want refused:\n%s", ok, out)
	}

	// Labels and deletions do not wait on the check.
	if out, ok := kubectl(t, ns, "", "label", "journey", "care", "team=care"); !ok {
		t.Errorf("labelling a Journey: %s", out)
	}
}
