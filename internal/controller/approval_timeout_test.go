package controller

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// reviewJourney: draft runs on entry and its decision (a rule at confidence 0.7, in
// the approval band) waits for an approval that times out after 2s with on; a
// rejection goes to redo, which waits for a message.
func reviewJourney(t *testing.T, ns string, on flowv1.ApprovalTimeoutAction) {
	t.Helper()
	draft := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "draft"}, Spec: flowv1.PathwaySpec{
		RunOn:   flowv1.RunOnEntry,
		Builtin: &flowv1.BuiltinPathway{Reply: "drafted"},
		Transitions: &flowv1.OutcomeTransitions{OnSuccess: &flowv1.OutcomeTransition{Decision: &flowv1.Decision{
			AllowedDestinations: []flowv1.Name{"publish", "redo"},
			Rules:               []flowv1.DecisionRule{{When: "true", To: "publish", Confidence: "0.7"}},
			OnRejected:          "redo",
			Approval:            &flowv1.ApprovalTimeout{Timeout: metav1.Duration{Duration: 2 * time.Second}, OnTimeout: on},
		}}},
	}}
	publish := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "publish"}, Spec: flowv1.PathwaySpec{RunOn: flowv1.RunOnEntry}}
	redo := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redo"}, Spec: flowv1.PathwaySpec{
		Builtin: &flowv1.BuiltinPathway{Complete: "false"},
	}}
	create(t, draft, publish, redo, journeyOf(ns, "review", draft, publish, redo))
	waitJourneyReady(t, ns, "review")
}

// eventReasons are the reasons of the Events about object name in ns.
func eventReasons(t *testing.T, ns, name string) map[string]bool {
	t.Helper()
	var evs corev1.EventList
	if err := k8sClient.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == name {
			out[e.Reason] = true
		}
	}
	return out
}

// A decision waiting for approval times out at its deadline with no edit and no
// restart: the reconcile that leaves it waiting is requeued at the approval's
// deadline.
func TestDecisionApprovalTimesOut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		on    flowv1.ApprovalTimeoutAction
		check func(s *flowv1.Session) error
	}{
		{flowv1.ApprovalTimeoutReject, func(s *flowv1.Session) error {
			d := s.Status.LastDecision
			if s.Status.CurrentPathway != "redo" || d.State != flowv1.DecisionRejected || d.Source != flowv1.SourceTimeout {
				return fmt.Errorf("in %s, decision %+v", s.Status.CurrentPathway, d)
			}
			if d.Reasoning != "rejected by the system: no approval within 2s" {
				return fmt.Errorf("reasoning %q", d.Reasoning)
			}
			return nil
		}},
		{flowv1.ApprovalTimeoutEscalate, func(s *flowv1.Session) error {
			d := s.Status.LastDecision
			if s.Status.Phase != flowv1.PhaseEscalated || d.State != flowv1.DecisionEscalated || d.Source != flowv1.SourceTimeout {
				return fmt.Errorf("phase %s, decision %+v", s.Status.Phase, d)
			}
			return nil
		}},
	} {
		t.Run(string(tc.on), func(t *testing.T) {
			ns := newNamespace(t)
			startManager(t, ns, Options{})
			reviewJourney(t, ns, tc.on)
			create(t, sessionOf(ns, "doc", "review"))
			var waiting *flowv1.Session
			eventually(t, 30*time.Second, func() error {
				waiting = get(t, ns, "doc", &flowv1.Session{})
				if waiting.Status.Phase != flowv1.PhaseAwaitingApproval || waiting.Status.LastDecision.WaitingSince == nil {
					return fmt.Errorf("phase %s", waiting.Status.Phase)
				}
				return nil
			})
			var got *flowv1.Session
			eventually(t, 30*time.Second, func() error {
				got = get(t, ns, "doc", &flowv1.Session{})
				return tc.check(got)
			})
			if got.Generation != waiting.Generation {
				t.Errorf("the Session was edited: generation %d, then %d", waiting.Generation, got.Generation)
			}
			if waited := got.Status.LastActivityTime.Sub(waiting.Status.LastDecision.WaitingSince.Time); waited < time.Second {
				t.Errorf("timed out %s after it began to wait; the timeout is 2s", waited)
			}
			eventually(t, 10*time.Second, func() error {
				if r := eventReasons(t, ns, "doc"); !r[flowv1.ReasonApprovalTimeout] {
					return fmt.Errorf("no %s event: %v", flowv1.ReasonApprovalTimeout, r)
				}
				return nil
			})
		})
	}
}

// A tool call waiting for approval times out and is rejected: the server never
// receives it.
func TestToolApprovalTimesOut(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	c := clinic.New()
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	startManager(t, ns, Options{})
	p, j := testenv.ClinicBooking(ns, srv.URL)
	j.Spec.Tools[1].Approval = flowv1.ToolApprovalAlways
	j.Spec.Tools[1].ApprovalTimeout = &flowv1.ApprovalTimeout{Timeout: metav1.Duration{Duration: 2 * time.Second}, OnTimeout: flowv1.ApprovalTimeoutReject}
	create(t, p, j)
	waitJourneyReady(t, ns, "clinic")
	create(t, sessionOf(ns, "s1", "clinic"))
	eventually(t, 30*time.Second, func() error {
		s := get(t, ns, "s1", &flowv1.Session{})
		if s.Status.Phase != flowv1.PhaseAwaitingApproval {
			return fmt.Errorf("phase %s", s.Status.Phase)
		}
		return nil
	})
	eventually(t, 30*time.Second, func() error {
		s := get(t, ns, "s1", &flowv1.Session{})
		lt := s.Status.LastTurn
		if lt == nil || len(lt.ToolCalls) != 2 || lt.ToolCalls[1].State != flowv1.ToolCallRejected {
			return fmt.Errorf("phase %s, last turn %+v", s.Status.Phase, lt)
		}
		if lt.ToolCalls[1].Error != "rejected by the system: no approval within 2s" || s.Status.LastDecision.Source != flowv1.SourceTimeout {
			return fmt.Errorf("tool call %+v, decision %+v", lt.ToolCalls[1], s.Status.LastDecision)
		}
		return nil
	})
	if n := c.Calls("book_slot"); n != 0 {
		t.Fatalf("book_slot reached the server %d times after its approval timed out", n)
	}
	if c.Calls("find_doctors") != 1 {
		t.Errorf("find_doctors called %d times", c.Calls("find_doctors"))
	}
}
