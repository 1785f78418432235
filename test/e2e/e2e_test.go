// Package e2e drives the operator the way a person does: real kubectl and the
// kubectl-journey plugin against a local control plane running the manager.
package e2e

import (
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/journeyops/journey-operator/internal/localcluster"
)

// cluster is the control plane and manager every test shares; the tests run in parallel
// with one another, each in a namespace of its own or in the shared samples namespace.
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

// namespace creates a namespace and applies the samples into it.
func namespace(t *testing.T, name string) {
	t.Helper()
	if err := applySamples(name); err != nil {
		t.Fatal(err)
	}
}

// applySamples creates namespace name, applies the samples into it and waits until their
// Journeys are Ready.
func applySamples(name string) error {
	if _, err := cluster.Kubectl("create", "namespace", name); err != nil {
		return err
	}
	// The samples name no namespace: -n puts them where the user says.
	if _, err := cluster.Kubectl("apply", "-k", "config/samples", "-n", name); err != nil {
		return err
	}
	_, err := cluster.Kubectl("-n", name, "wait", "--for=condition=Ready", "--timeout=30s",
		"journey/healthcare-referral", "journey/review-loop", "journey/planning", "journey/delivery-pipeline")
	return err
}

// sharedSamples applies the samples once, into the namespace e2e-samples, for the tests
// that leave the samples' Journeys and Pathways as they are and touch only Sessions no
// other test touches (their own, each named apart, or a sample Session only they use):
// applying the samples costs the API server as much as a short test.
var sharedSamples = sync.OnceValue(func() error { return applySamples(samplesNamespace) })

const samplesNamespace = "e2e-samples"

// samples returns the shared samples namespace (see sharedSamples).
func samples(t *testing.T) string {
	t.Helper()
	if err := sharedSamples(); err != nil {
		t.Fatalf("applying the samples into %s: %v", samplesNamespace, err)
	}
	return samplesNamespace
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

func waitPhase(t *testing.T, ns, session, phase string) {
	t.Helper()
	kubectl(t, "-n", ns, "wait", "session/"+session, "--timeout=30s", "--for=jsonpath={.status.phase}="+phase)
}

func mustMatch(t *testing.T, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(out) {
			t.Errorf("output does not match %q:\n%s", p, out)
		}
	}
}

func TestConversationWithPlugin(t *testing.T) {
	t.Parallel()
	ns := samples(t)
	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: patient-1}
spec:
  journeyRef: {name: healthcare-referral}
  initialContext: {insurance_id: INS-1}
`)
	say := func(text string) string {
		return journey(t, ns, "say", "patient-1", text, "--wait")
	}
	out := say("Hi, I need to book an appointment with a cardiologist. Here's my referral.")
	mustMatch(t, out, `Pathway:\s+booking`, `eligible`, `intake -> booking`)

	out = say("Wait, what is the copay for specialist visits?")
	mustMatch(t, out, `booking -> faq \(via faq-detour`, `faq -> booking`, `copay`)

	row := columns(t, kubectl(t, "-n", ns, "get", "sessions"), "patient-1")
	if got := strings.Join(row[1:5], " "); got != "healthcare-referral WaitingForInput booking 1" {
		t.Errorf("kubectl get sessions row: %q, want JOURNEY PHASE PATHWAY ITERATION = healthcare-referral WaitingForInput booking 1", got)
	}

	mustMatch(t, say("Thanks! Now show me the available doctors."), `Dr\. Smith`)
	mustMatch(t, say("I don't want Dr. Smith. Can you show me another option?"), `Dr\. Johnson`, `via reject-doctor`)
	if got := kubectl(t, "-n", ns, "get", "session", "patient-1", "-o", "jsonpath={.status.context.rejected_doctors[*].name}"); got != "Dr. Smith" {
		t.Errorf("rejected_doctors = %q, want Dr. Smith", got)
	}
	say("Dr. Johnson looks great. Book the Tuesday 2pm slot.")
	waitPhase(t, ns, "patient-1", "Completed")

	wide := columns(t, kubectl(t, "-n", ns, "get", "sessions", "-o", "wide"), "patient-1")
	if wide[2] != "Completed" || wide[3] != "confirmation" || wide[6] != "Completed" {
		t.Errorf("wide row %q: want phase Completed, pathway confirmation, reason Completed", wide)
	}
	mustMatch(t, journey(t, ns, "history", "patient-1"),
		`(?m)^TIME\s+FROM\s+TO\s+ACTION\s+SOURCE\s+CONFIDENCE\s+REASON`,
		`booking\s+faq\s+Advance\s+Transition`,
		`faq\s+booking\s+Advance\s+Return`,
		`booking\s+confirmation\s+Advance\s+Next`)
}

func TestReviewLoopWithPlugin(t *testing.T) {
	t.Parallel()
	ns := samples(t)
	create(t, ns, `apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: review-1}
spec:
  journeyRef: {name: review-loop}
`)
	steps := []struct{ pathway, iteration, result, wantPathway, wantIteration string }{
		{"plan", "1", "success", "generate", "1"},
		{"generate", "1", "success", "review", "1"},
		{"review", "1", "failure", "revise", "2"},
		{"revise", "2", "success", "review", "2"},
	}
	waitPhase(t, ns, "review-1", "WaitingForInput")
	for _, s := range steps {
		journey(t, ns, "outcome", "review-1", "--pathway", s.pathway, "--iteration", s.iteration, "--result", s.result, "--data", "note="+s.pathway)
		kubectl(t, "-n", ns, "wait", "session/review-1", "--timeout=30s", "--for=jsonpath={.status.currentPathway}="+s.wantPathway)
		waitPhase(t, ns, "review-1", "WaitingForInput")
		row := columns(t, kubectl(t, "-n", ns, "get", "sessions"), "review-1")
		if row[3] != s.wantPathway || row[4] != s.wantIteration {
			t.Fatalf("after %s %s: row %q, want pathway %s iteration %s", s.pathway, s.result, row, s.wantPathway, s.wantIteration)
		}
	}
	journey(t, ns, "outcome", "review-1", "--pathway", "review", "--result", "success")
	waitPhase(t, ns, "review-1", "Completed")
	mustMatch(t, journey(t, ns, "history", "review-1"), `review\s+revise\s+JumpBack\s+Outcome`)
}

func TestApprovalWithPlugin(t *testing.T) {
	t.Parallel()
	ns := samples(t)
	waitPhase(t, ns, "pl-half-marathon", "AwaitingApproval")
	out, err := cluster.Kubectl("journey", "approve", "pl-half-marathon", "--to", "nowhere", "-n", ns)
	if err == nil {
		t.Fatalf("approve --to a destination outside the allowed list succeeded:\n%s", out)
	}
	mustMatch(t, out, `nowhere`, `allowed`)
	if got := kubectl(t, "-n", ns, "get", "session", "pl-half-marathon", "-o", "jsonpath={.spec.approvals}"); got != "" {
		t.Fatalf("a refused approval was sent: %s", got)
	}
	journey(t, ns, "approve", "pl-half-marathon", "--reason", "looks right")
	waitPhase(t, ns, "pl-half-marathon", "Completed")
	row := columns(t, kubectl(t, "-n", ns, "get", "sessions"), "pl-half-marathon")
	if row[3] != "publish-plan" {
		t.Errorf("row %q: want pathway publish-plan", row)
	}
}

// The journey pictures committed under docs/graphs (Mermaid and SVG) are what the plugin
// draws today.
func TestCommittedGraphsMatchThePlugin(t *testing.T) {
	t.Parallel()
	ns := samples(t)
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

var _ = time.Second
