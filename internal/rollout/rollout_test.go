package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func spec(auto bool, a *flowv1.RolloutAnalysis) *flowv1.Rollout {
	hour := &metav1.Duration{Duration: time.Hour}
	return &flowv1.Rollout{Canary: flowv1.CanaryStrategy{Steps: []flowv1.CanaryStep{{Weight: 20, Pause: hour}, {Weight: 50, Pause: hour}}},
		Analysis: a, AutoPromote: auto}
}

// One transition per step, from the first valid revision to a promotion gated by the
// analysis; a step that changes nothing leaves the status as it was.
func TestStepToPromotion(t *testing.T) {
	a := &flowv1.RolloutAnalysis{MinSessions: 2, SuccessCondition: "canary.completed >= stable.completed * 0.5"}
	sp := spec(true, a)
	st := &flowv1.JourneyStatus{ReadyRevision: "r1"}
	Step(st, Input{Spec: sp, Now: t0})
	if st.StableRevision != "r1" || st.CanaryRevision != "" {
		t.Fatalf("first revision: %+v", st)
	}
	st.ReadyRevision = "r2"
	res := Step(st, Input{Spec: sp, Now: t0})
	if st.CanaryRevision != "r2" || st.Rollout.Weight != 20 || res.RequeueAfter != time.Hour || len(res.Events) != 1 || res.Events[0].Reason != flowv1.ReasonCanaryStarted {
		t.Fatalf("canary start: %+v %+v", st.Rollout, res)
	}
	before := st.DeepCopy()
	if res := Step(st, Input{Spec: sp, Now: t0.Add(30 * time.Minute)}); res.RequeueAfter != 30*time.Minute || len(res.Events) != 0 {
		t.Fatalf("mid-pause: %+v", res)
	}
	if st.Rollout.Step != before.Rollout.Step || st.Rollout.Phase != before.Rollout.Phase {
		t.Fatalf("mid-pause changed the rollout: %+v", st.Rollout)
	}
	Step(st, Input{Spec: sp, Now: t0.Add(time.Hour)})
	if st.Rollout.Step != 1 || st.Rollout.Weight != 50 {
		t.Fatalf("second step: %+v", st.Rollout)
	}
	few := flowv1.RolloutCounts{Canary: flowv1.RevisionCounts{Finished: 1, Completed: 1}, Stable: flowv1.RevisionCounts{Finished: 4, Completed: 4}}
	Step(st, Input{Spec: sp, Now: t0.Add(2 * time.Hour), Counts: few})
	if st.Rollout.Phase != flowv1.RolloutPaused || !strings.Contains(st.Rollout.Message, "waiting for 2 finished canary Sessions before promoting (1 so far)") {
		t.Fatalf("too few Sessions: %+v", st.Rollout)
	}
	worse := flowv1.RolloutCounts{Canary: flowv1.RevisionCounts{Finished: 3, Completed: 1}, Stable: flowv1.RevisionCounts{Finished: 4, Completed: 4}}
	Step(st, Input{Spec: sp, Now: t0.Add(2 * time.Hour), Counts: worse})
	if st.Rollout.Phase != flowv1.RolloutPaused || !strings.Contains(st.Rollout.Message, "does not hold yet") {
		t.Fatalf("successCondition false: %+v", st.Rollout)
	}
	good := flowv1.RolloutCounts{Canary: flowv1.RevisionCounts{Finished: 3, Completed: 3}, Stable: flowv1.RevisionCounts{Finished: 4, Completed: 4}}
	res = Step(st, Input{Spec: sp, Now: t0.Add(2 * time.Hour), Counts: good})
	if st.StableRevision != "r2" || st.CanaryRevision != "" || st.Rollout.Phase != flowv1.RolloutPromoted || len(res.Events) != 1 || res.Events[0].Reason != flowv1.ReasonPromoted {
		t.Fatalf("promotion: %+v %+v", st, res)
	}
	if st.Rollout.StableRevision != "r1" || st.Rollout.Counts != good {
		t.Errorf("after the promotion the counts are of %q (%+v); want those of r1, the revision r2 was compared with", st.Rollout.StableRevision, st.Rollout.Counts)
	}
}

// The failure condition aborts once minSessions finished; an aborted canary stays
// aborted until a newer revision, or a promote request about it.
func TestStepAbort(t *testing.T) {
	sp := spec(false, &flowv1.RolloutAnalysis{MinSessions: 3, FailureCondition: "canary.failed / canary.finished > 0.5"})
	st := &flowv1.JourneyStatus{ReadyRevision: "r2", StableRevision: "r1"}
	Step(st, Input{Spec: sp, Now: t0})
	failing := flowv1.RolloutCounts{Canary: flowv1.RevisionCounts{Finished: 2, Failed: 2}}
	Step(st, Input{Spec: sp, Now: t0, Counts: failing})
	if st.CanaryRevision != "r2" {
		t.Fatalf("aborted before minSessions: %+v", st.Rollout)
	}
	failing.Canary.Finished, failing.Canary.Failed = 3, 3
	res := Step(st, Input{Spec: sp, Now: t0, Counts: failing})
	if st.CanaryRevision != "" || st.StableRevision != "r1" || st.Rollout.Phase != flowv1.RolloutAborted || len(res.Events) != 1 || !res.Events[0].Warning {
		t.Fatalf("abort: %+v %+v", st.Rollout, res)
	}
	if st.RevisionFor("any") != "r1" {
		t.Errorf("after the abort new Sessions start on %s", st.RevisionFor("any"))
	}
	Step(st, Input{Spec: sp, Now: t0.Add(time.Minute)})
	if st.CanaryRevision != "" || st.Rollout.Phase != flowv1.RolloutAborted {
		t.Fatalf("an aborted canary started again: %+v", st.Rollout)
	}
	Step(st, Input{Spec: sp, Now: t0.Add(time.Minute), Promote: "r2"})
	if st.StableRevision != "r2" || st.Rollout.Phase != flowv1.RolloutPromoted {
		t.Fatalf("promote of the aborted canary: %+v", st.Rollout)
	}
}
