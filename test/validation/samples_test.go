package validation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/expr"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// sampleFiles returns the sample manifests of config/samples, kustomization excluded.
func sampleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.SamplesDir(), "*.yaml"))
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
	return testenv.Manifests(t, file)
}

// TestSamplesAccepted creates every object of every sample on the API server, with
// strict field validation so that a misspelt field is an error instead of being pruned.
func TestSamplesAccepted(t *testing.T) {
	ctx := context.Background()
	for _, file := range sampleFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			for _, obj := range readObjects(t, file) {
				if obj.GetNamespace() != "" {
					t.Errorf("%s %s: namespace %q; samples name none so that kubectl apply -n chooses it", obj.GetKind(), obj.GetName(), obj.GetNamespace())
				}
				obj.SetNamespace(samplesNamespace)
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
	objs := readObjects(t, filepath.Join(testenv.SamplesDir(), "kustomization.yaml"))
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
	for _, obj := range readObjects(t, filepath.Join(testenv.SamplesDir(), name)) {
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

// The stories below run each sample's Session through the engine's pure step function
// with the builtin provider, the way the Session controller does, and pin the turns
// that the sample files document.

// play steps the sample's Session until a step changes nothing and returns one line per
// changing step: "<trigger> <pathway>[ via <transition>] -> <pathway now>/<iteration> <phase>".
// approve, when set, is called on AwaitingApproval and may append approvals.
type play struct {
	t       *testing.T
	snap    *engine.Snapshot
	spec    flowv1.SessionSpec
	st      *flowv1.SessionStatus
	now     time.Time
	lines   []string
	replies []string
}

func newPlay(t *testing.T, file string) *play {
	t.Helper()
	return newPlayWith(t, file, nil)
}

// newPlayWith is newPlay with a change to the sample before it runs.
func newPlayWith(t *testing.T, file string, change func(*sample)) *play {
	t.Helper()
	s := loadSample(t, file)
	if change != nil {
		change(&s)
	}
	pathways := map[string]*flowv1.PathwaySpec{}
	for n, p := range s.pathways {
		pathways[n] = &p
	}
	snap, err := engine.NewSnapshot("rev-1", &s.journey.Spec, pathways)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return &play{t: t, snap: snap, spec: s.session.Spec, st: &flowv1.SessionStatus{}, now: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
}

func (p *play) settle() {
	p.t.Helper()
	for range 100 {
		st, eff := engine.Step(p.snap, engine.Input{
			Spec: &p.spec, Status: p.st, Now: p.now, SessionName: "sample", SessionUID: "uid-1", CreationTime: p.now,
		})
		if eff != nil {
			p.t.Fatalf("step asked for a remote %s effect; the samples run offline", eff.Kind)
		}
		if equality.Semantic.DeepEqual(st, p.st) {
			return
		}
		p.st = st
		p.now = p.now.Add(time.Second)
		line, reply := "", ""
		if lt := st.LastTurn; lt != nil {
			line = string(lt.Trigger) + " " + lt.Pathway
			if lt.Transition != "" {
				line += " via " + lt.Transition
			}
			reply = lt.AssistantText
		}
		p.lines = append(p.lines, fmt.Sprintf("%s -> %s/%d %s", line, st.CurrentPathway, st.Iteration, st.Phase))
		p.replies = append(p.replies, reply)
	}
	p.t.Fatalf("the session did not settle in 100 steps")
}

func (p *play) expect(want ...string) {
	p.t.Helper()
	for i, r := range p.replies {
		p.t.Logf("%s: %s", p.lines[i], r)
	}
	if !slices.Equal(p.lines, want) {
		p.t.Fatalf("steps:\n  %s\nwant:\n  %s", strings.Join(p.lines, "\n  "), strings.Join(want, "\n  "))
	}
}

func (p *play) context() map[string]any {
	p.t.Helper()
	m := map[string]any{}
	if p.st.Context != nil {
		if err := json.Unmarshal(p.st.Context.Raw, &m); err != nil {
			p.t.Fatal(err)
		}
	}
	return m
}

func TestHealthcareReferralStory(t *testing.T) {
	p := newPlay(t, "healthcare-referral.yaml")
	p.settle()
	p.expect(
		"Message intake -> booking/1 Running",
		"Message faq via faq-detour -> booking/1 Running",
		"Message booking -> booking/1 Running",
		"Message booking via reject-doctor -> booking/1 Running",
		"Message booking -> confirmation/1 Running",
		// The confirmation runs on entry as the rest of the booking message's turn.
		"Message confirmation -> confirmation/1 Completed",
	)
	assertContains(t, p.replies[1], "$40 copay")
	assertContains(t, p.replies[2], "I recommend Dr. Smith")
	assertContains(t, p.replies[3], "I recommend Dr. Johnson")
	assertContains(t, p.replies[5], "You're booked with Dr. Johnson on Tuesday 2pm")
	assertContains(t, p.replies[5], "HC-TUESDAY-2PM")
	rejected, _ := p.context()["rejected_doctors"].([]any)
	if len(rejected) != 1 || rejected[0].(map[string]any)["name"] != "Dr. Smith" {
		t.Fatalf("rejected_doctors = %v, want [Dr. Smith]", p.context()["rejected_doctors"])
	}
}

func TestHealthcareReferralEscalation(t *testing.T) {
	p := newPlay(t, "healthcare-referral.yaml")
	p.spec.Messages = []flowv1.Message{
		{ID: "m1", Text: "Hi, I need to book an appointment with a cardiologist. Here's my referral."},
		{ID: "m2", Text: "I'm not sure about this."},
		{ID: "m3", Text: "Let me think about it."},
		{ID: "m4", Text: "Maybe later."},
		{ID: "m5", Text: "Show me the doctors."},
	}
	p.settle()
	p.expect(
		"Message intake -> booking/1 Running",
		"Message persuasion via hesitation -> booking/1 Running",
		"Message persuasion via hesitation -> booking/1 Running",
		"Message persuasion via hesitation -> booking/1 Running",
		"Message escalation via escalate -> escalation/1 Completed",
	)
}

func TestReviewLoopStory(t *testing.T) {
	p := newPlay(t, "review-loop.yaml")
	p.settle()
	p.expect(
		"Outcome plan -> generate/1 Running",
		"Outcome generate -> review/1 Running",
		"Outcome review -> revise/2 Running",
		"Outcome revise -> review/2 Running",
		"Outcome review -> review/2 Completed",
	)
}

func TestReviewLoopWaitsForOutcomes(t *testing.T) {
	p := newPlay(t, "review-loop.yaml")
	p.spec.Outcomes = p.spec.Outcomes[:1]
	p.settle()
	p.expect("Outcome plan -> generate/1 WaitingForInput")
	// Nothing to do until generate's outcome arrives: no further step changes anything.
	p.settle()
	if len(p.lines) != 1 {
		t.Fatalf("a blocked session changed: %v", p.lines)
	}
}

func TestPlanningStory(t *testing.T) {
	p := newPlay(t, "planning.yaml")
	p.settle()
	if p.st.Phase != flowv1.PhaseAwaitingApproval || p.st.LastDecision == nil || p.st.LastDecision.To != "publish-plan" {
		t.Fatalf("want AwaitingApproval for publish-plan, got %s with %+v", p.st.Phase, p.st.LastDecision)
	}
	p.spec.Approvals = append(p.spec.Approvals, flowv1.Approval{DecisionID: p.st.LastDecision.ID, Approve: ptr.To(true), By: "alice"})
	p.settle()
	p.expect(
		"Entry collect-context -> draft-outline/1 Running",
		"Entry draft-outline -> validate-outline/1 Running",
		"Entry validate-outline -> validate-outline/1 Running",
		"Entry validate-outline -> draft-roadmap/1 Running",
		"Entry draft-roadmap -> validate-roadmap/1 Running",
		"Entry validate-roadmap -> draft-schedule/1 Running",
		"Entry draft-schedule -> validate-schedule/1 Running",
		"Entry validate-schedule -> seek-approval/1 Running",
		"Entry seek-approval -> seek-approval/1 AwaitingApproval",
		"Approval seek-approval via onSuccess -> publish-plan/1 Running",
		"Entry publish-plan -> publish-plan/1 Completed",
	)
	assertContains(t, p.replies[2], "no taper before race week")
	assertContains(t, p.replies[4], "Base building -> Long runs -> Taper -> Race week")
	if got := p.context()["planning_status"]; got != "complete" {
		t.Fatalf("planning_status %v, want complete", got)
	}
}

func TestDeliveryPipelineStory(t *testing.T) {
	p := newPlay(t, "delivery-pipeline.yaml")
	p.settle()
	p.expect(
		"Entry plan -> implement/1 Running",
		"Entry implement -> test/1 Running",
		"Entry test -> fix-minor/1 Running",
		"Entry fix-minor -> test/2 Running",
		"Entry test -> staging/2 Running",
		"Entry staging -> integration/2 Running",
		"Entry integration -> integration/2 Running",
		"Entry integration -> deploy/2 Running",
		"Entry deploy -> deploy/2 Completed",
	)
	assertContains(t, p.replies[2], "failing: discount_rounding, receipt_locale, receipt_alignment")
	assertContains(t, p.replies[6], "2 of 3 services healthy")
}

// TestDeliveryPipelineQualityGateApproval: with more failing tests than the rules
// cover, the quality-gate agent answers with confidence 0.75, between requireApproval
// and autoAdvance, so the Session waits for a person, who sends it to fix-critical.
func TestDeliveryPipelineQualityGateApproval(t *testing.T) {
	p := newPlayWith(t, "delivery-pipeline.yaml", func(s *sample) {
		test := s.pathways["test"]
		b := test.Builtin.DeepCopy()
		b.Outputs[0].Expression = "['t1', 't2', 't3', 't4', 't5', 't6']"
		test.Builtin = b
		s.pathways["test"] = test
	})
	p.settle()
	p.expect(
		"Entry plan -> implement/1 Running",
		"Entry implement -> test/1 Running",
		"Entry test -> test/1 AwaitingApproval",
	)
	d := p.st.LastDecision
	if d == nil || d.To != "staging" || d.Confidence != "0.75" || d.Agent != "quality-gate" {
		t.Fatalf("decision %+v, want quality-gate's staging at 0.75", d)
	}
	p.spec.Approvals = append(p.spec.Approvals, flowv1.Approval{DecisionID: d.ID, Approve: ptr.To(true), Destination: "fix-critical", By: "alice"})
	p.settle()
	if got := p.lines[3]; got != "Approval test via onSuccess -> fix-critical/1 Running" {
		t.Fatalf("after the approval: %s", got)
	}
}

func assertContains(t *testing.T, text, part string) {
	t.Helper()
	if !strings.Contains(text, part) {
		t.Fatalf("%q does not contain %q", text, part)
	}
}
