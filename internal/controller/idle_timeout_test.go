package controller

import (
	"fmt"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
)

// A Session left waiting for input stops at its idle deadline with no edit and no
// restart: the reconcile that leaves it waiting is requeued at limits.idleTimeout after
// its last activity, the earliest of its deadlines.
func TestSessionIdleTimesOut(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	s, _ := loadSample(t, ns, "healthcare-referral.yaml", func(o client.Object) {
		if j, ok := o.(*flowv1.Journey); ok {
			j.Spec.Limits.IdleTimeout = &metav1.Duration{Duration: 2 * time.Second}
		}
	})
	create(t, s)
	send(t, ns, s.Name, "m1", "Hi, I need to book an appointment with a cardiologist. Here's my referral.")
	waiting := settled(t, ns, s.Name, func(s *flowv1.Session) error {
		if s.Status.Phase != flowv1.PhaseWaitingForInput || s.Status.ProcessedMessages != 1 {
			return fmt.Errorf("phase %s, processed %d", s.Status.Phase, s.Status.ProcessedMessages)
		}
		return nil
	})
	if reason, blocked := engine.Blocked(&waiting.Status); blocked {
		t.Fatalf("blocked before the deadline: %s", reason)
	}
	if waiting.Status.LastActivityTime == nil {
		t.Fatal("no lastActivityTime on a Session that took a message in")
	}
	got := settled(t, ns, s.Name, func(s *flowv1.Session) error {
		if reason, blocked := engine.Blocked(&s.Status); !blocked || reason != flowv1.ReasonIdleTimeout {
			return fmt.Errorf("not idle-timed out yet (blocked %v, %q)", blocked, reason)
		}
		return nil
	})
	if got.Generation != waiting.Generation {
		t.Errorf("the Session was edited: generation %d, then %d", waiting.Generation, got.Generation)
	}
	c := apimeta.FindStatusCondition(got.Status.Conditions, flowv1.ConditionStalled)
	// Conditions carry whole seconds: the block is at least the idle timeout after the
	// last activity, give or take that rounding.
	if waited := c.LastTransitionTime.Sub(waiting.Status.LastActivityTime.Time); waited < time.Second {
		t.Errorf("stalled %s after the last activity, idleTimeout is 2s", waited)
	}
	if got.Status.Phase.IsTerminal() {
		t.Errorf("phase %s: an idle timeout is not terminal", got.Status.Phase)
	}
}
