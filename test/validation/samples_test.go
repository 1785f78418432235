package validation

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
	"github.com/journeyops/journey-operator/internal/expr"
)

// sampleFiles returns the sample manifests of config/samples, kustomization excluded.
func sampleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(samplesDir(), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "kustomization.yaml" })
	if len(files) < 4 {
		t.Fatalf("want at least 4 sample files, found %v", files)
	}
	return files
}

func readObjects(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(data)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return objs
}

// TestSamplesAccepted creates every object of every sample on the API server, with
// strict field validation so that a misspelt field is an error instead of being pruned.
func TestSamplesAccepted(t *testing.T) {
	ctx := context.Background()
	for _, file := range sampleFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			for _, obj := range readObjects(t, file) {
				if obj.GetNamespace() != "default" {
					t.Errorf("%s %s: namespace %q, want default", obj.GetKind(), obj.GetName(), obj.GetNamespace())
				}
				if err := k.Create(ctx, obj, client.FieldValidation("Strict")); err != nil {
					t.Errorf("%s %s refused: %v", obj.GetKind(), obj.GetName(), err)
				}
			}
		})
	}
}

// TestKustomizationListsEverySample keeps config/samples/kustomization.yaml in step
// with the sample files.
func TestKustomizationListsEverySample(t *testing.T) {
	objs := readObjects(t, filepath.Join(samplesDir(), "kustomization.yaml"))
	if len(objs) != 1 {
		t.Fatalf("kustomization.yaml: want one document, got %d", len(objs))
	}
	resources, _, _ := unstructured.NestedStringSlice(objs[0].Object, "resources")
	var want []string
	for _, f := range sampleFiles(t) {
		want = append(want, filepath.Base(f))
	}
	sort.Strings(resources)
	sort.Strings(want)
	if !slices.Equal(resources, want) {
		t.Fatalf("kustomization.yaml resources %v, want %v", resources, want)
	}
}

// sample is one sample journey decoded into the API types.
type sample struct {
	journey  flowv1.Journey
	pathways map[string]flowv1.PathwaySpec // by local name
	session  flowv1.Session
}

// loadSample decodes a sample file strictly (unknown fields are errors) and resolves
// the Journey's pathways by their pathwayRef among the file's Pathways.
func loadSample(t *testing.T, name string) sample {
	t.Helper()
	var s sample
	byObject := map[string]flowv1.PathwaySpec{}
	sessions := 0
	for _, obj := range readObjects(t, filepath.Join(samplesDir(), name)) {
		var into any
		switch obj.GetKind() {
		case "Journey":
			into = &s.journey
		case "Session":
			into = &s.session
			sessions++
		case "Pathway":
			into = &flowv1.Pathway{}
		default:
			t.Fatalf("%s: unexpected kind %s", name, obj.GetKind())
		}
		data, err := json.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			t.Fatalf("%s: %s %s: %v", name, obj.GetKind(), obj.GetName(), err)
		}
		if p, ok := into.(*flowv1.Pathway); ok {
			byObject[p.Name] = p.Spec
		}
	}
	if s.journey.Name == "" || sessions != 1 {
		t.Fatalf("%s: want one Journey and one Session, got journey %q and %d sessions", name, s.journey.Name, sessions)
	}
	if s.session.Spec.JourneyRef.Name != s.journey.Name {
		t.Fatalf("%s: the Session runs %q, not the sample's Journey %q", name, s.session.Spec.JourneyRef.Name, s.journey.Name)
	}
	s.pathways = map[string]flowv1.PathwaySpec{}
	for _, e := range s.journey.Spec.Pathways {
		spec, ok := byObject[e.PathwayRef]
		if !ok {
			t.Fatalf("%s: pathway %s refers to Pathway %s, which the file lacks", name, e.Name, e.PathwayRef)
		}
		s.pathways[string(e.Name)] = spec
		delete(byObject, e.PathwayRef)
	}
	for n := range byObject {
		t.Errorf("%s: Pathway %s is not part of the Journey", name, n)
	}
	return s
}

// TestSampleReferences checks what the controllers would report on the samples:
// every destination names a pathway of the journey, every agent is declared, every CEL
// expression compiles and every reply template parses.
func TestSampleReferences(t *testing.T) {
	for _, f := range sampleFiles(t) {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			s := loadSample(t, name)
			agents := map[string]bool{}
			for _, a := range s.journey.Spec.Agents {
				agents[string(a.Name)] = true
			}
			isPathway := func(where, n string) {
				if _, ok := s.pathways[n]; !ok {
					t.Errorf("%s: %q is not a pathway of the journey", where, n)
				}
			}
			compiles := func(where, src string) {
				if _, err := expr.Compile(src); err != nil {
					t.Errorf("%s: %v", where, err)
				}
			}
			for _, tr := range s.journey.Spec.Transitions {
				if tr.Trigger.Condition != "" {
					compiles("transition "+string(tr.Name), string(tr.Trigger.Condition))
				}
			}
			for pn, p := range s.pathways {
				for _, a := range p.Agents {
					if !agents[string(a)] {
						t.Errorf("pathway %s: agent %s is not declared by the journey", pn, a)
					}
				}
				if p.Next != "" {
					isPathway(pn+" next", string(p.Next))
				}
				if b := p.Builtin; b != nil {
					for _, o := range b.Outputs {
						compiles(pn+" output "+o.Name, string(o.Expression))
					}
					for what, src := range map[string]flowv1.Expression{"outcome": b.Outcome, "complete": b.Complete} {
						if src != "" {
							compiles(pn+" "+what, string(src))
						}
					}
					if _, err := builtin.Parse(b.Reply); err != nil {
						t.Errorf("pathway %s reply: %v", pn, err)
					}
				}
				for on, ot := range outcomeTransitions(p) {
					where := pn + " " + on
					if ot.To != "" {
						isPathway(where, string(ot.To))
					}
					if d := ot.Decision; d != nil {
						if d.Agent != "" && !agents[string(d.Agent)] {
							t.Errorf("%s: agent %s is not declared by the journey", where, d.Agent)
						}
						for _, dest := range d.AllowedDestinations {
							isPathway(where, string(dest))
						}
						for _, r := range d.Rules {
							compiles(where+" rule", string(r.When))
						}
					}
				}
			}
		})
	}
}

func outcomeTransitions(p flowv1.PathwaySpec) map[string]*flowv1.OutcomeTransition {
	m := map[string]*flowv1.OutcomeTransition{}
	if t := p.Transitions; t != nil {
		for on, ot := range map[string]*flowv1.OutcomeTransition{
			"onSuccess": t.OnSuccess, "onFailure": t.OnFailure,
			"onPartialSuccess": t.OnPartialSuccess, "onUnclear": t.OnUnclear,
		} {
			if ot != nil {
				m[on] = ot
			}
		}
	}
	return m
}

// The stories below walk each sample with the builtin provider and a small reference
// reading of DESIGN.md (routing, detours, accumulate, outcome transitions, decisions
// with thresholds, JumpBack and Retry). They pin the sample's own logic (its CEL,
// templates and transitions), so that the engine's tests can rely on the stories that
// the sample files document; they are no substitute for those tests.

func TestHealthcareReferralStory(t *testing.T) {
	w := newWalk(t, loadSample(t, "healthcare-referral.yaml"))
	w.start()
	want := []struct{ transition, ran, now string }{
		{"", "intake", "booking"},
		{"faq-detour", "faq", "booking"},
		{"", "booking", "booking"},
		{"reject-doctor", "booking", "booking"},
		{"", "booking", "confirmation"},
	}
	for i, m := range w.s.session.Spec.Messages {
		turn := w.message(m.Text)
		if turn.transition != want[i].transition || turn.ran != want[i].ran || w.cur != want[i].now {
			t.Fatalf("message %s %q: transition %q ran %s now in %s; want %q, %s, %s", m.ID, m.Text,
				turn.transition, turn.ran, w.cur, want[i].transition, want[i].ran, want[i].now)
		}
		t.Logf("[%s] %s", turn.ran, turn.reply)
		switch m.ID {
		case "m3":
			assertContains(t, turn.reply, "Dr. Smith")
		case "m4":
			assertContains(t, turn.reply, "Dr. Johnson")
			rejected, _ := w.ctx["rejected_doctors"].([]any)
			if len(rejected) != 1 || rejected[0].(map[string]any)["name"] != "Dr. Smith" {
				t.Fatalf("rejected_doctors = %v, want [Dr. Smith]", w.ctx["rejected_doctors"])
			}
		}
	}
	w.assertDone("Completed")
	last := w.turns[len(w.turns)-1]
	if last.ran != "confirmation" || last.trigger != "Entry" {
		t.Fatalf("last turn %+v, want confirmation run on entry", last)
	}
	assertContains(t, last.reply, "Dr. Johnson on Tuesday 2pm")
	assertContains(t, last.reply, "HC-TUESDAY-2PM")
}

func TestHealthcareReferralEscalation(t *testing.T) {
	w := newWalk(t, loadSample(t, "healthcare-referral.yaml"))
	w.start()
	w.message("Hi, I need to book an appointment with a cardiologist. Here's my referral.")
	for range 3 {
		if turn := w.message("I'm not sure yet."); turn.transition != "hesitation" || w.cur != "booking" {
			t.Fatalf("hesitation: %+v, now in %s", turn, w.cur)
		}
	}
	turn := w.message("Show me the doctors.")
	if turn.transition != "escalate" || turn.ran != "escalation" {
		t.Fatalf("after three hesitations: %+v, want escalate", turn)
	}
	w.assertDone("Completed")
}

func TestReviewLoopStory(t *testing.T) {
	w := newWalk(t, loadSample(t, "review-loop.yaml"))
	w.start()
	for _, o := range w.s.session.Spec.Outcomes {
		w.outcome(o)
	}
	w.assertPath("plan", "generate", "review", "revise", "review")
	w.assertDone("Completed")
	if w.iteration != 2 {
		t.Fatalf("iteration %d, want 2", w.iteration)
	}
}

func TestPlanningStory(t *testing.T) {
	w := newWalk(t, loadSample(t, "planning.yaml"))
	w.start()
	w.assertPath("collect-context", "draft-outline", "validate-outline", "validate-outline",
		"draft-roadmap", "validate-roadmap", "draft-schedule", "validate-schedule", "seek-approval")
	if w.phase != "AwaitingApproval" || w.pending != "publish-plan" {
		t.Fatalf("phase %s pending %q, want AwaitingApproval for publish-plan", w.phase, w.pending)
	}
	w.approve()
	w.assertDone("Completed")
	if w.ctx["planning_status"] != "complete" {
		t.Fatalf("planning_status %v", w.ctx["planning_status"])
	}
}

func TestDeliveryPipelineStory(t *testing.T) {
	w := newWalk(t, loadSample(t, "delivery-pipeline.yaml"))
	w.start()
	w.assertPath("plan", "implement", "test", "fix-minor", "test", "staging", "integration", "integration", "deploy")
	w.assertDone("Completed")
	if w.iteration != 2 {
		t.Fatalf("iteration %d, want 2", w.iteration)
	}
}

func assertContains(t *testing.T, text, part string) {
	t.Helper()
	if !strings.Contains(text, part) {
		t.Fatalf("%q does not contain %q", text, part)
	}
}
