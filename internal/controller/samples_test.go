package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// loadSample creates the Journey and Pathways of config/samples/<file> in namespace and
// returns the sample's Session, not created, with its inputs (messages, outcomes,
// approvals) removed so a test can feed them one at a time.
func loadSample(t *testing.T, ns, file string, mutate ...func(client.Object)) (*flowv1.Session, *flowv1.Session) {
	t.Helper()
	var session *flowv1.Session
	var journeyName string
	for _, u := range testenv.Manifests(t, filepath.Join(testenv.SamplesDir(), file)) {
		o, err := testenv.Typed(u)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		o.SetNamespace(ns)
		if s, ok := o.(*flowv1.Session); ok {
			session = s
			continue
		}
		if j, ok := o.(*flowv1.Journey); ok {
			journeyName = j.Name
		}
		for _, m := range mutate {
			m(o)
		}
		create(t, o)
	}
	if session == nil {
		t.Fatalf("%s has no Session", file)
	}
	waitJourneyReady(t, ns, journeyName)
	fresh := session.DeepCopy()
	fresh.Spec.Messages, fresh.Spec.Outcomes, fresh.Spec.Approvals = nil, nil, nil
	return fresh, session
}

func waitJourneyReady(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		j := get(t, ns, name, &flowv1.Journey{})
		if j.Status.ReadyRevision == "" {
			return fmt.Errorf("journey %s not ready: %v", name, j.Status.Issues)
		}
		return nil
	})
}

// settled waits until the Session has no immediate work left and done holds.
func settled(t *testing.T, ns, name string, done func(*flowv1.Session) error) *flowv1.Session {
	t.Helper()
	var s *flowv1.Session
	eventually(t, 30*time.Second, func() error {
		s = get(t, ns, name, &flowv1.Session{})
		if s.Status.Phase == flowv1.PhaseRunning || s.Status.Phase == flowv1.PhasePending || s.Status.Phase == "" {
			return fmt.Errorf("phase %q", s.Status.Phase)
		}
		return done(s)
	})
	return s
}

// send appends a message the way kubectl would: a JSON patch that adds to the list.
func send(t *testing.T, ns, name, id, text string) {
	t.Helper()
	s := get(t, ns, name, &flowv1.Session{})
	patch := client.MergeFrom(s.DeepCopy())
	s.Spec.Messages = append(s.Spec.Messages, flowv1.Message{ID: id, Text: text})
	if err := k8sClient.Patch(context.Background(), s, patch); err != nil {
		t.Fatal(err)
	}
}

func postOutcome(t *testing.T, ns, name string, o flowv1.ExternalOutcome) {
	t.Helper()
	s := get(t, ns, name, &flowv1.Session{})
	patch := client.MergeFrom(s.DeepCopy())
	s.Spec.Outcomes = append(s.Spec.Outcomes, o)
	if err := k8sClient.Patch(context.Background(), s, patch); err != nil {
		t.Fatal(err)
	}
}

func approve(t *testing.T, ns, name string, a flowv1.Approval) {
	t.Helper()
	s := get(t, ns, name, &flowv1.Session{})
	patch := client.MergeFrom(s.DeepCopy())
	s.Spec.Approvals = append(s.Spec.Approvals, a)
	if err := k8sClient.Patch(context.Background(), s, patch); err != nil {
		t.Fatal(err)
	}
}

// contextOf decodes status.context.
func contextOf(t *testing.T, s *flowv1.Session) map[string]any {
	t.Helper()
	m := map[string]any{}
	if s.Status.Context != nil {
		if err := json.Unmarshal(s.Status.Context.Raw, &m); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// path lists the history as from->to pairs.
func path(s *flowv1.Session) string {
	var p []string
	for _, h := range s.Status.History {
		p = append(p, h.From+">"+h.To)
	}
	return strings.Join(p, " ")
}

func TestSampleHealthcareReferral(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	s, _ := loadSample(t, ns, "healthcare-referral.yaml")
	create(t, s)
	name := s.Name

	type expect struct {
		pathway string
		check   func(s *flowv1.Session, ctx map[string]any) error
	}
	doctor := func(v any) string {
		m, _ := v.(map[string]any)
		n, _ := m["name"].(string)
		return n
	}
	turns := []struct {
		text string
		want expect
	}{
		{"Hi, I need to book an appointment with a cardiologist. Here's my referral.", expect{"booking", func(s *flowv1.Session, c map[string]any) error {
			if c["eligibility_status"] != "eligible" || c["insurance_id"] != "INS-123456" {
				return fmt.Errorf("context %v", c)
			}
			return nil
		}}},
		{"Wait, what is the copay for specialist visits?", expect{"booking", func(s *flowv1.Session, c map[string]any) error {
			if s.Status.LastTurn.Pathway != "faq" || len(s.Status.PathwayStack) != 0 {
				return fmt.Errorf("last turn in %q, stack %v", s.Status.LastTurn.Pathway, s.Status.PathwayStack)
			}
			if !strings.Contains(path(s), "booking>faq faq>booking") {
				return fmt.Errorf("history %s: want the detour and its return", path(s))
			}
			return nil
		}}},
		{"Thanks! Now show me the available doctors.", expect{"booking", func(s *flowv1.Session, c map[string]any) error {
			if doctor(c["selected_doctor"]) != "Dr. Smith" {
				return fmt.Errorf("selected %v", c["selected_doctor"])
			}
			return nil
		}}},
		{"I don't want Dr. Smith. Can you show me another option?", expect{"booking", func(s *flowv1.Session, c map[string]any) error {
			rejected, _ := c["rejected_doctors"].([]any)
			if len(rejected) != 1 || doctor(rejected[0]) != "Dr. Smith" || doctor(c["selected_doctor"]) != "Dr. Johnson" {
				return fmt.Errorf("rejected %v, selected %v", c["rejected_doctors"], c["selected_doctor"])
			}
			return nil
		}}},
		{"Dr. Johnson looks great. Book the Tuesday 2pm slot.", expect{"confirmation", func(s *flowv1.Session, c map[string]any) error {
			if s.Status.Phase != flowv1.PhaseCompleted || !strings.Contains(s.Status.LastTurn.AssistantText, "HC-TUESDAY-2PM") {
				return fmt.Errorf("phase %s, reply %q", s.Status.Phase, s.Status.LastTurn.AssistantText)
			}
			return nil
		}}},
	}
	for i, turn := range turns {
		id := fmt.Sprintf("m%d", i+1)
		send(t, ns, name, id, turn.text)
		got := settled(t, ns, name, func(s *flowv1.Session) error {
			if int(s.Status.ProcessedMessages) < i+1 {
				return fmt.Errorf("processed %d", s.Status.ProcessedMessages)
			}
			return nil
		})
		if got.Status.CurrentPathway != turn.want.pathway || got.Status.Iteration != 1 {
			t.Fatalf("after %s: pathway %q iteration %d, want %q iteration 1 (history %s)", id, got.Status.CurrentPathway, got.Status.Iteration, turn.want.pathway, path(got))
		}
		if got.Status.LastTurn == nil || got.Status.LastTurn.MessageID != id && got.Status.LastTurn.Trigger == flowv1.TurnMessage {
			t.Fatalf("after %s: lastTurn %+v", id, got.Status.LastTurn)
		}
		if err := turn.want.check(got, contextOf(t, got)); err != nil {
			t.Fatalf("after %s: %v", id, err)
		}
	}
}

func TestSampleReviewLoop(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	s, _ := loadSample(t, ns, "review-loop.yaml")
	create(t, s)
	settled(t, ns, s.Name, func(s *flowv1.Session) error {
		if s.Status.CurrentPathway != "plan" {
			return fmt.Errorf("pathway %q", s.Status.CurrentPathway)
		}
		return nil
	})
	steps := []struct {
		pathway   string
		iteration int32
		result    flowv1.ResultType
		wantPath  string
		wantIter  int32
		wantPhase flowv1.Phase
	}{
		{"plan", 1, flowv1.ResultSuccess, "generate", 1, flowv1.PhaseWaitingForInput},
		{"generate", 1, flowv1.ResultSuccess, "review", 1, flowv1.PhaseWaitingForInput},
		{"review", 1, flowv1.ResultFailure, "revise", 2, flowv1.PhaseWaitingForInput},
		{"revise", 2, flowv1.ResultSuccess, "review", 2, flowv1.PhaseWaitingForInput},
		{"review", 2, flowv1.ResultSuccess, "review", 2, flowv1.PhaseCompleted},
	}
	for i, step := range steps {
		postOutcome(t, ns, s.Name, flowv1.ExternalOutcome{Pathway: flowv1.Name(step.pathway), Iteration: step.iteration, ResultType: step.result})
		got := settled(t, ns, s.Name, func(s *flowv1.Session) error {
			if int(s.Status.ProcessedOutcomes) < i+1 {
				return fmt.Errorf("processed outcomes %d", s.Status.ProcessedOutcomes)
			}
			return nil
		})
		if got.Status.CurrentPathway != step.wantPath || got.Status.Iteration != step.wantIter || got.Status.Phase != step.wantPhase {
			t.Fatalf("after %s/%d %s: %s %s iteration %d, want %s %s iteration %d", step.pathway, step.iteration, step.result,
				got.Status.Phase, got.Status.CurrentPathway, got.Status.Iteration, step.wantPhase, step.wantPath, step.wantIter)
		}
	}
	got := get(t, ns, s.Name, &flowv1.Session{})
	var jumpBack bool
	for _, h := range got.Status.History {
		if h.From == "review" && h.To == "revise" {
			jumpBack = h.Action == flowv1.ActionJumpBack && h.Iteration == 2
		}
	}
	if !jumpBack {
		t.Errorf("history %+v: want review>revise as JumpBack into iteration 2", got.Status.History)
	}
}

func TestSamplePlanningWaitsForApproval(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	fresh, sample := loadSample(t, ns, "planning.yaml")
	_ = fresh
	s := sample.DeepCopy()
	s.Spec.Approvals = nil
	create(t, s)
	got := settled(t, ns, s.Name, func(s *flowv1.Session) error {
		if s.Status.Phase != flowv1.PhaseAwaitingApproval {
			return fmt.Errorf("phase %s in %s", s.Status.Phase, s.Status.CurrentPathway)
		}
		return nil
	})
	wantPath := "collect-context>draft-outline draft-outline>validate-outline validate-outline>validate-outline validate-outline>draft-roadmap " +
		"draft-roadmap>validate-roadmap validate-roadmap>draft-schedule draft-schedule>validate-schedule validate-schedule>seek-approval"
	if path(got) != wantPath {
		t.Errorf("path\n got %s\nwant %s", path(got), wantPath)
	}
	d := got.Status.LastDecision
	if d == nil || d.State != flowv1.DecisionPending || d.To != "publish-plan" || got.Status.Confidence != "0.6" {
		t.Fatalf("lastDecision %+v confidence %s: want pending publish-plan at 0.6", d, got.Status.Confidence)
	}

	// An approval naming an unknown decision is ignored, with a warning in lastTurn.
	approve(t, ns, s.Name, flowv1.Approval{DecisionID: "d-nope", Approve: ptr.To(true), By: "mallory"})
	got = settled(t, ns, s.Name, func(s *flowv1.Session) error {
		if s.Status.ProcessedApprovals < 1 {
			return fmt.Errorf("approvals processed %d", s.Status.ProcessedApprovals)
		}
		return nil
	})
	if got.Status.Phase != flowv1.PhaseAwaitingApproval || got.Status.CurrentPathway != "seek-approval" {
		t.Fatalf("an unknown decision moved the Session: %s %s", got.Status.Phase, got.Status.CurrentPathway)
	}
	if got.Status.LastTurn == nil || len(got.Status.LastTurn.Failures) == 0 {
		t.Errorf("lastTurn %+v: want a failure recording the ignored approval", got.Status.LastTurn)
	}

	approve(t, ns, s.Name, flowv1.Approval{DecisionID: d.ID, Approve: ptr.To(true), By: "alice"})
	got = settled(t, ns, s.Name, func(s *flowv1.Session) error {
		if s.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %s in %s", s.Status.Phase, s.Status.CurrentPathway)
		}
		return nil
	})
	if got.Status.CurrentPathway != "publish-plan" || got.Status.LastDecision.State != flowv1.DecisionApproved {
		t.Errorf("ended in %s with decision %+v", got.Status.CurrentPathway, got.Status.LastDecision)
	}
}

func TestSampleDeliveryPipeline(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	_, sample := loadSample(t, ns, "delivery-pipeline.yaml")
	create(t, sample)
	got := settled(t, ns, sample.Name, func(s *flowv1.Session) error {
		if s.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %s in %s", s.Status.Phase, s.Status.CurrentPathway)
		}
		return nil
	})
	wantPath := "plan>implement implement>test test>fix-minor fix-minor>test test>staging staging>integration integration>integration integration>deploy deploy>"
	if path(got) != wantPath {
		t.Errorf("path\n got %s\nwant %s", path(got), wantPath)
	}
	if got.Status.Iteration != 2 || got.Status.CurrentPathway != "deploy" {
		t.Errorf("ended in %s at iteration %d, want deploy at 2", got.Status.CurrentPathway, got.Status.Iteration)
	}
	actions := map[string]flowv1.Action{}
	for _, h := range got.Status.History {
		actions[h.From+">"+h.To] = h.Action
	}
	if actions["fix-minor>test"] != flowv1.ActionJumpBack || actions["integration>integration"] != flowv1.ActionRetry {
		t.Errorf("actions %v: want fix-minor>test JumpBack and integration>integration Retry", actions)
	}
}
