package engine

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// The upgradePolicy's move is not a step: a reproducing replay moves the Session
// with its step and history as they were; a diverging one keeps it where it is,
// with UpgradeBlocked naming the revision (read back by UpgradeBlockedOn), the step
// and the command that forces it.
func TestUpgradeByPolicy(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	base := func() *flowv1.SessionStatus {
		return &flowv1.SessionStatus{JourneyRevision: "chat-a", Step: 7, Phase: flowv1.PhaseWaitingForInput,
			History: []flowv1.HistoryEntry{{Step: 3, From: "a", To: "b"}}}
	}

	st := base()
	if UpgradeByPolicy(st, &ReplayCheck{Revision: "chat-b", Step: 5, Field: "journal j-5", Message: "asks another question"}, "s1", now) {
		t.Fatal("a diverging replay moved the Session")
	}
	c := apimeta.FindStatusCondition(st.Conditions, flowv1.ConditionUpgradeBlocked)
	if st.JourneyRevision != "chat-a" || c == nil || c.Status != metav1.ConditionTrue || c.Reason != flowv1.ReasonReplayDiverged ||
		!strings.Contains(c.Message, "step 5 replays differently on revision chat-b: journal j-5: asks another question") ||
		!strings.Contains(c.Message, "kubectl journey upgrade s1 --to-revision chat-b --force") {
		t.Errorf("blocked: revision %s, UpgradeBlocked %+v", st.JourneyRevision, c)
	}
	if got := UpgradeBlockedOn(st); got != "chat-b" {
		t.Errorf("UpgradeBlockedOn = %q, want chat-b", got)
	}
	again := st.DeepCopy()
	UpgradeByPolicy(again, &ReplayCheck{Revision: "chat-b", Step: 5, Field: "journal j-5", Message: "asks another question"}, "s1", now.Add(time.Hour))
	if !statusEqual(again, st) || !apimeta.FindStatusCondition(again.Conditions, flowv1.ConditionUpgradeBlocked).LastTransitionTime.Equal(&c.LastTransitionTime) {
		t.Errorf("the same verdict again changed the status:\n%+v\n%+v", again.Conditions, st.Conditions)
	}

	if !UpgradeByPolicy(st, &ReplayCheck{Revision: "chat-c", Reproduces: true}, "s1", now) {
		t.Fatal("a reproducing replay did not move the Session")
	}
	c = apimeta.FindStatusCondition(st.Conditions, flowv1.ConditionUpgradeBlocked)
	if st.JourneyRevision != "chat-c" || c.Status != metav1.ConditionFalse || c.Reason != flowv1.ReasonUpgraded ||
		!strings.Contains(c.Message, "Upgraded from revision chat-a to chat-c by the journey's upgradePolicy ReplayCompatible") {
		t.Errorf("moved: revision %s, UpgradeBlocked %+v", st.JourneyRevision, c)
	}
	if st.Step != 7 || len(st.History) != 1 {
		t.Errorf("the move took a step or a history entry: step %d, history %+v", st.Step, st.History)
	}
	if got := UpgradeBlockedOn(st); got != "" {
		t.Errorf("UpgradeBlockedOn after the move = %q", got)
	}
	if ev := Events(base(), st); len(ev) != 1 || ev[0].Reason != flowv1.ReasonUpgraded || ev[0].Message != "Moved from journey revision chat-a to chat-c" {
		t.Errorf("events %+v", ev)
	}

	for _, check := range []*ReplayCheck{nil, {Revision: "chat-a", Reproduces: true}} {
		st := base()
		if UpgradeByPolicy(st, check, "s1", now) || !statusEqual(st, base()) || st.Conditions != nil {
			t.Errorf("check %+v changed the status: %+v", check, st)
		}
	}
}

// TestForkCreatedSuspended: a fork created suspended says so in its first status, as
// the step after it would, so that step changes nothing and the fork stays at the fork
// step (one write, not a second one that only records the suspension); a fork that is
// not suspended keeps the rebuilt conditions.
func TestForkCreatedSuspended(t *testing.T) {
	waiting := newSession(t, conversation())
	waiting.say("m1", "hi")
	waiting.settle()
	// Mid-turn: the step that asks the model, its answer not yet journaled.
	running := newSession(t, remoteHealthcare())
	running.say("m1", "Hi, I need to book an appointment with a cardiologist.")
	if eff := running.step(); eff == nil {
		t.Fatal("the first message made no model call")
	}
	for name, s := range map[string]*session{"waiting for input": waiting, "mid-turn": running} {
		t.Run(name, func(t *testing.T) {
			rebuilt := s.st.DeepCopy()
			plain := Fork(rebuilt, "rev-1", nil, false, s.now)
			if !equality.Semantic.DeepEqual(plain.Conditions, rebuilt.Conditions) {
				t.Errorf("a fork that is not suspended changed the rebuilt conditions:\n%s\n%s", dump(plain.Conditions), dump(rebuilt.Conditions))
			}
			forked := Fork(rebuilt, "rev-1", nil, true, s.now)
			if !equality.Semantic.DeepEqual(rebuilt, s.st) {
				t.Fatal("Fork modified the rebuilt status")
			}
			if c := apimeta.FindStatusCondition(forked.Conditions, flowv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != flowv1.ReasonSuspended {
				t.Errorf("Ready of a fork created suspended: %+v", c)
			}
			if forked.Step != rebuilt.Step || forked.Phase != rebuilt.Phase {
				t.Errorf("the fork is at step %d in phase %s, want the rebuilt step %d in phase %s", forked.Step, forked.Phase, rebuilt.Step, rebuilt.Phase)
			}
			spec := s.spec.DeepCopy()
			spec.Suspend = true
			next, eff := Step(s.snap, Input{Spec: spec, Status: forked, Now: s.now.Add(time.Minute), SessionName: "fork", SessionUID: "uid-2", CreationTime: t0})
			if eff != nil || !equality.Semantic.DeepEqual(next, forked) {
				t.Errorf("the step after a suspended fork's first status changed it (effect %v):\n%s\nwas\n%s", eff, dump(next), dump(forked))
			}
		})
	}
}
