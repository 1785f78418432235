package controller

import (
	"fmt"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
)

// A Session left waiting for input stops at its idle deadline with no edit and no
// restart: the reconcile that leaves it waiting is requeued at limits.idleTimeout after
// its last activity, the earliest of its deadlines.
func TestSessionIdleTimesOut(t *testing.T) {
	t.Parallel()
	ns, waiting := waitingHealthcare(t, func(l *flowv1.Limits) {
		l.IdleTimeout = &metav1.Duration{Duration: 2 * time.Second}
	})

	if waiting.Status.LastActivityTime == nil {
		t.Fatal("no lastActivityTime on a Session that took a message in")
	}
	got := settled(t, ns, waiting.Name, func(s *flowv1.Session) error {
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
