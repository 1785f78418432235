package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// rolloutJourney creates the Pathway "one" (runs on entry and completes the Session,
// replying reply) and the Journey "canary" with rollout, and waits until it is Ready
// with a stable revision, which it returns.
func rolloutJourney(t *testing.T, ns, reply string, rollout *flowv1.Rollout) string {
	t.Helper()
	one := entryPathway(ns, "one", "")
	one.Spec.Builtin.Reply = reply
	create(t, one)
	j := journeyOf(ns, "canary", one)
	j.Spec.Rollout = rollout
	create(t, j)
	var stable string
	eventually(t, 30*time.Second, func() error {
		j := get(t, ns, "canary", &flowv1.Journey{})
		if j.Status.StableRevision == "" || j.Status.StableRevision != j.Status.ReadyRevision {
			return fmt.Errorf("stable %q, ready %q, issues %v", j.Status.StableRevision, j.Status.ReadyRevision, j.Status.Issues)
		}
		stable = j.Status.StableRevision
		return nil
	})
	return stable
}

// editPathway changes the Pathway "one" and waits until its revision is the canary,
// which it returns.
func editPathway(t *testing.T, ns string, edit func(*flowv1.PathwaySpec)) string {
	t.Helper()
	before := get(t, ns, "canary", &flowv1.Journey{}).Status.ReadyRevision
	p := get(t, ns, "one", &flowv1.Pathway{})
	edit(&p.Spec)
	if err := k8sClient.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	var canary string
	eventually(t, 30*time.Second, func() error {
		j := get(t, ns, "canary", &flowv1.Journey{})
		if j.Status.ReadyRevision == before || j.Status.CanaryRevision != j.Status.ReadyRevision {
			return fmt.Errorf("canary %q, ready %q (was %q)", j.Status.CanaryRevision, j.Status.ReadyRevision, before)
		}
		canary = j.Status.CanaryRevision
		return nil
	})
	return canary
}

// pinned creates n Sessions named prefix-i and returns the revision each started on.
func pinned(t *testing.T, ns, prefix string, n int) map[string]*flowv1.Session {
	t.Helper()
	for i := range n {
		create(t, sessionOf(ns, fmt.Sprintf("%s-%d", prefix, i), "canary"))
	}
	out := map[string]*flowv1.Session{}
	eventually(t, 60*time.Second, func() error {
		for i := range n {
			name := fmt.Sprintf("%s-%d", prefix, i)
			s := get(t, ns, name, &flowv1.Session{})
			if s.Status.JourneyRevision == "" || !s.Status.Phase.IsTerminal() {
				return fmt.Errorf("session %s: revision %q, phase %q", name, s.Status.JourneyRevision, s.Status.Phase)
			}
			out[name] = s
		}
		return nil
	})
	return out
}

func journeyEvent(t *testing.T, ns, kind, reason, contains string) {
	t.Helper()
	eventually(t, 10*time.Second, func() error {
		var list eventsv1.EventList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Journey" && e.Type == kind && e.Reason == reason && strings.Contains(e.Note, contains) {
				return nil
			}
			seen = append(seen, e.Type+" "+e.Reason+": "+e.Note)
		}
		return fmt.Errorf("no %s %s event with %q; events %q", kind, reason, contains, seen)
	})
}

func canaryCondition(t *testing.T, ns string) *metav1.Condition {
	t.Helper()
	return apimeta.FindStatusCondition(get(t, ns, "canary", &flowv1.Journey{}).Status.Conditions, flowv1.ConditionCanary)
}

// During a canary at 25%, new Sessions start on the canary revision by a hash of their
// UID: 40 Sessions split within statistical bounds, each on the revision its UID says.
// A canary whose Sessions fail past the failureCondition is aborted automatically, the
// Canary condition and a Warning Event say why, and new Sessions start on stable.
func TestRolloutSplitsByUIDAndAbortsAFailingCanary(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	stable := rolloutJourney(t, ns, "v1", &flowv1.Rollout{
		Canary: flowv1.CanaryStrategy{Steps: []flowv1.CanaryStep{{Weight: 25}}},
		Analysis: &flowv1.RolloutAnalysis{MinSessions: 3,
			FailureCondition: "canary.failed / canary.finished > stable.failed / stable.finished + 0.5"},
	})
	canary := editPathway(t, ns, func(p *flowv1.PathwaySpec) { p.Builtin.Reply = "v2" })
	journeyEvent(t, ns, "Normal", flowv1.ReasonCanaryStarted, "Canary "+canary+" started: 25% of new Sessions start on it, the others on "+stable)

	sessions := pinned(t, ns, "split", 40)
	onCanary := 0
	for name, s := range sessions {
		want := stable
		if flowv1.CanaryBucket(s.UID) < 25 {
			want = canary
		}
		if s.Status.JourneyRevision != want {
			t.Errorf("session %s (bucket %d) started on %s, want %s", name, flowv1.CanaryBucket(s.UID), s.Status.JourneyRevision, want)
		}
		if s.Status.JourneyRevision == canary {
			onCanary++
		}
	}
	// Binomial(40, 0.25): mean 10, standard deviation 2.7; [2, 18] is three of them.
	if onCanary < 2 || onCanary > 18 {
		t.Errorf("%d of 40 Sessions on the canary, want about 10", onCanary)
	}
	j := get(t, ns, "canary", &flowv1.Journey{})
	if c := j.Status.Rollout.Counts; c.Canary.Started != int64(onCanary) || c.Canary.Completed != int64(onCanary) || c.Stable.Finished != int64(40-onCanary) {
		t.Errorf("counts %+v; want %d canary and %d stable Sessions, all completed", c, onCanary, 40-onCanary)
	}

	// A failing revision replaces the canary; its Sessions fail, and it is aborted.
	failing := editPathway(t, ns, func(p *flowv1.PathwaySpec) {
		p.Builtin.Outcome = "'failure'"
		p.Transitions = &flowv1.OutcomeTransitions{OnFailure: &flowv1.OutcomeTransition{Action: flowv1.ActionClose}}
	})
	for batch := 0; ; batch++ {
		if batch == 20 {
			t.Fatalf("the failing canary was not aborted after %d Sessions", batch*5)
		}
		pinned(t, ns, fmt.Sprintf("fail%d", batch), 5)
		j := get(t, ns, "canary", &flowv1.Journey{})
		if r := j.Status.Rollout; r != nil && r.Phase == flowv1.RolloutAborted {
			if r.Revision != failing || j.Status.CanaryRevision != "" || j.Status.StableRevision != stable || r.Counts.Canary.Failed < 3 {
				t.Fatalf("aborted rollout: %+v, stable %q, canary %q", r, j.Status.StableRevision, j.Status.CanaryRevision)
			}
			break
		}
	}
	c := canaryCondition(t, ns)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != flowv1.ReasonAborted ||
		!strings.Contains(c.Message, `failureCondition "canary.failed / canary.finished > stable.failed / stable.finished + 0.5" holds: canary {started `) {
		t.Errorf("Canary condition %+v", c)
	}
	journeyEvent(t, ns, "Warning", flowv1.ReasonAborted, "Canary "+failing+" aborted: failureCondition")
	for name, s := range pinned(t, ns, "after", 10) {
		if s.Status.JourneyRevision != stable || s.Status.Phase != flowv1.PhaseCompleted {
			t.Errorf("session %s after the abort: revision %s, phase %s; want %s and Completed", name, s.Status.JourneyRevision, s.Status.Phase, stable)
		}
	}
}

// A canary takes its steps as the (injected) clock passes their pauses, holds at the
// last one without autoPromote, and promote makes it the stable revision: new
// Sessions all start on it.
func TestRolloutStepsAndPromote(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	startManager(t, ns, Options{Clock: clk})
	hour := &metav1.Duration{Duration: time.Hour}
	stable := rolloutJourney(t, ns, "v1", &flowv1.Rollout{
		Canary: flowv1.CanaryStrategy{Steps: []flowv1.CanaryStep{{Weight: 10, Pause: hour}, {Weight: 50, Pause: hour}}},
	})
	canary := editPathway(t, ns, func(p *flowv1.PathwaySpec) { p.Builtin.Reply = "v2" })
	// poke wakes the Journey controller (an annotation change), as its requeue would.
	poke := func(v string) {
		j := get(t, ns, "canary", &flowv1.Journey{})
		patch := client.MergeFrom(j.DeepCopy())
		metav1.SetMetaDataAnnotation(&j.ObjectMeta, "test/poke", v)
		if err := k8sClient.Patch(context.Background(), j, patch); err != nil {
			t.Fatal(err)
		}
	}
	waitRollout := func(phase flowv1.RolloutPhase, step, weight int32) {
		t.Helper()
		eventually(t, 30*time.Second, func() error {
			r := get(t, ns, "canary", &flowv1.Journey{}).Status.Rollout
			if r == nil || r.Phase != phase || r.Step != step || r.Weight != weight {
				return fmt.Errorf("rollout %+v; want %s at step %d, weight %d", r, phase, step, weight)
			}
			return nil
		})
	}
	waitRollout(flowv1.RolloutProgressing, 0, 10)
	clk.Step(59 * time.Minute)
	poke("1")
	time.Sleep(time.Second) // nothing to see: the pause has not passed
	waitRollout(flowv1.RolloutProgressing, 0, 10)
	clk.Step(2 * time.Minute)
	poke("2")
	waitRollout(flowv1.RolloutProgressing, 1, 50)
	journeyEvent(t, ns, "Normal", flowv1.ReasonCanaryStep, "Canary "+canary+" at step 2 of 2: 50% of new Sessions start on it")
	clk.Step(61 * time.Minute)
	poke("3")
	waitRollout(flowv1.RolloutPaused, 1, 50)
	if c := canaryCondition(t, ns); c == nil || c.Status != metav1.ConditionTrue || c.Reason != flowv1.ReasonCanaryPaused ||
		!strings.Contains(c.Message, "the last step has passed: promote the canary with kubectl journey rollout promote") {
		t.Errorf("Canary condition %+v", c)
	}

	j := get(t, ns, "canary", &flowv1.Journey{})
	patch := client.MergeFrom(j.DeepCopy())
	metav1.SetMetaDataAnnotation(&j.ObjectMeta, flowv1.AnnotationRolloutPromote, canary)
	if err := k8sClient.Patch(context.Background(), j, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		j := get(t, ns, "canary", &flowv1.Journey{})
		if j.Status.StableRevision != canary || j.Status.CanaryRevision != "" || j.Status.Rollout.Phase != flowv1.RolloutPromoted {
			return fmt.Errorf("stable %q, canary %q, rollout %+v", j.Status.StableRevision, j.Status.CanaryRevision, j.Status.Rollout)
		}
		return nil
	})
	journeyEvent(t, ns, "Normal", flowv1.ReasonPromoted, "Canary "+canary+" promoted: promoted by kubectl journey rollout promote")
	for name, s := range pinned(t, ns, "promoted", 10) {
		if s.Status.JourneyRevision != canary {
			t.Errorf("session %s after the promotion started on %s, want %s (not %s)", name, s.Status.JourneyRevision, canary, stable)
		}
	}
}
