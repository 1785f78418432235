package engine

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// A Session waiting for input is stopped once it has waited longer than
// limits.idleTimeout since its last activity; a message resets the wait, and a message
// that arrived in time is taken in, not timed out.
func TestIdleTimeout(t *testing.T) {
	idle := func(j *flowv1.JourneySpec) {
		j.Limits.IdleTimeout = &metav1.Duration{Duration: 30 * time.Second}
		j.Limits.SessionTimeout = &metav1.Duration{Duration: time.Hour}
	}
	t.Run("expires after the last activity", func(t *testing.T) {
		s := newSession(t, conversation(idle))
		s.say("m1", "hi")
		s.settle()
		s.expect(flowv1.PhaseWaitingForInput, "chat")
		if at := s.st.LastActivityTime; at == nil || !at.Time.Equal(t0) {
			t.Fatalf("lastActivityTime %v, want %v", at, t0)
		}
		if got := s.snap.NextDeadline(&s.spec, s.st, t0); !got.Equal(t0.Add(30 * time.Second)) {
			t.Errorf("next deadline %v, want the idle one %v", got, t0.Add(30*time.Second))
		}
		s.now = t0.Add(20 * time.Second)
		s.say("m2", "still here")
		s.settle()
		if s.stalled() != "" || s.st.ProcessedMessages != 2 {
			t.Fatalf("stalled %q, processed %d", s.stalled(), s.st.ProcessedMessages)
		}
		s.now = t0.Add(50 * time.Second) // 30s after m2: at the deadline, not past it
		s.settle()
		if s.stalled() != "" {
			t.Fatal("timed out at the deadline")
		}
		s.now = t0.Add(51 * time.Second)
		s.settle()
		if s.stalled() != flowv1.ReasonIdleTimeout || s.st.LastTurn.FinishReason != flowv1.FinishDeadline {
			t.Fatalf("stalled %q %s", s.stalled(), dump(s.st.LastTurn))
		}
		if reason, blocked := Blocked(s.st); !blocked || reason != flowv1.ReasonIdleTimeout {
			t.Errorf("Blocked = %q, %v", reason, blocked)
		}
		s.now = t0.Add(52 * time.Second)
		s.say("m3", "too late")
		s.settle()
		if s.st.ProcessedMessages != 2 {
			t.Errorf("a message was taken in after the idle timeout: processed %d", s.st.ProcessedMessages)
		}
	})
	t.Run("a waiting message is taken in", func(t *testing.T) {
		s := newSession(t, conversation(idle))
		s.say("m1", "hi")
		s.settle()
		s.say("m2", "late but here")
		if got := s.snap.NextDeadline(&s.spec, s.st, t0); !got.Equal(t0.Add(time.Hour)) {
			t.Errorf("next deadline %v with a message to take in, want the session timeout", got)
		}
		s.now = t0.Add(5 * time.Minute)
		s.settle()
		if s.stalled() != "" || s.st.ProcessedMessages != 2 {
			t.Fatalf("stalled %q, processed %d", s.stalled(), s.st.ProcessedMessages)
		}
	})
	t.Run("the session timeout comes first", func(t *testing.T) {
		s := newSession(t, conversation(func(j *flowv1.JourneySpec) {
			j.Limits.IdleTimeout = &metav1.Duration{Duration: time.Hour}
			j.Limits.SessionTimeout = &metav1.Duration{Duration: 45 * time.Second}
		}))
		s.say("m1", "hi")
		s.settle()
		if got := s.snap.NextDeadline(&s.spec, s.st, t0); !got.Equal(t0.Add(45 * time.Second)) {
			t.Errorf("next deadline %v, want the session timeout", got)
		}
		s.now = t0.Add(46 * time.Second)
		s.settle()
		if s.stalled() != flowv1.ReasonSessionTimeout {
			t.Fatalf("stalled %q", s.stalled())
		}
	})
	t.Run("none without idleTimeout", func(t *testing.T) {
		s := newSession(t, conversation())
		s.say("m1", "hi")
		s.settle()
		s.now = t0.Add(23 * time.Hour)
		s.settle()
		if s.stalled() != "" {
			t.Fatalf("stalled %q", s.stalled())
		}
		if got := s.snap.NextDeadline(&s.spec, s.st, t0); !got.Equal(t0.Add(DefaultSessionTimeout)) {
			t.Errorf("next deadline %v", got)
		}
	})
}
