package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Which revision a new Session starts on is a hash of its UID, which the API server
// chooses: at 50% the story starts at least MinCanarySessions Sessions and more, up
// to maxCanarySessions, until each revision has one.
const (
	MinCanarySessions = 4
	maxCanarySessions = 12
)

// rolloutStory changes the reply of a journey with spec.rollout: the new revision
// becomes the canary, the next Sessions split between it and the stable revision,
// and kubectl journey rollout promote makes it the stable one.
func rolloutStory(ctx context.Context, k kubectl) error {
	k.say("Rolling out a change: a canary revision serves half of the new Sessions until it is promoted")
	j, err := startCanary(ctx, k)
	if err != nil {
		return err
	}
	canary := j.Status.CanaryRevision
	if err := splitSessions(ctx, k, j.Status.StableRevision, canary); err != nil {
		return err
	}
	fmt.Fprintln(k.out)
	if err := k.show("journey", "rollout", "promote", "clinic-welcome"); err != nil {
		return err
	}
	if j, err = k.waitRollout(ctx, "clinic-welcome", flowv1alpha1.RolloutPromoted); err != nil {
		return err
	}
	if err := k.show("journey", "rollout", "status", "clinic-welcome"); err != nil {
		return err
	}
	if j.Status.StableRevision != canary {
		return fmt.Errorf("after the promotion the stable revision is %s, want the canary %s", j.Status.StableRevision, canary)
	}
	return k.show("get", "journey", "clinic-welcome")
}

// startCanary applies the journey, changes its reply and returns the Journey once
// the changed revision holds as the canary.
func startCanary(ctx context.Context, k kubectl) (*flowv1alpha1.Journey, error) {
	path := filepath.Join(k.c.Dir, "clinic-welcome.yaml")
	manifest, err := manifest("clinic-welcome.yaml")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		return nil, err
	}
	if err := k.show("apply", "-f", path); err != nil {
		return nil, err
	}
	if _, err := k.waitJourney(ctx, "clinic-welcome", flowv1alpha1.ConditionReady); err != nil {
		return nil, err
	}
	if err := k.show("patch", "pathway", "clinic-welcome", "--type=merge", "-p",
		`{"spec":{"builtin":{"reply":"Welcome to the clinic! Ask me for a cardiologist, a free slot or your copay."}}}`); err != nil {
		return nil, err
	}
	return k.waitRollout(ctx, "clinic-welcome", flowv1alpha1.RolloutPaused)
}

// splitSessions starts Sessions until each revision has one (at least
// MinCanarySessions), shows which revision each took and its reply, and what
// kubectl journey rollout status counts once the Journey controller counted them.
func splitSessions(ctx context.Context, k kubectl, stable, canary string) error {
	names, on := []string{"get", "sessions"}, map[string]int{}
	for n := 1; n <= maxCanarySessions && (n <= MinCanarySessions || on[stable] == 0 || on[canary] == 0); n++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		name := fmt.Sprintf("welcome-%d", n)
		if err := k.create(ctx, fmt.Sprintf(`{"apiVersion":"flow.journey.dev/v1alpha1","kind":"Session",
			"metadata":{"name":%q,"namespace":"default"},"spec":{"journeyRef":{"name":"clinic-welcome"}}}`, name)); err != nil {
			return err
		}
		s, err := k.waitPhase(ctx, name, flowv1alpha1.PhaseCompleted, "")
		if err != nil {
			return err
		}
		rev := s.Status.JourneyRevision
		if rev != stable && rev != canary {
			return fmt.Errorf("session %s started on revision %q, neither the stable %s nor the canary %s", name, rev, stable, canary)
		}
		on[rev]++
		names = append(names, name)
	}
	if on[stable] == 0 || on[canary] == 0 {
		return fmt.Errorf("%d Sessions at a 50%% canary weight: %d on the stable revision, %d on the canary", len(names)-2, on[stable], on[canary])
	}
	if err := k.show(append(names, "-o", "custom-columns=NAME:.metadata.name,PHASE:.status.phase,REVISION:.status.journeyRevision,REPLY:.status.lastTurn.assistantText")...); err != nil {
		return err
	}
	// The Journey controller counts the Sessions of both revisions as they finish.
	var j flowv1alpha1.Journey
	if err := k.waitUntil(ctx, "journey", "clinic-welcome", &j, func() error {
		if j.Status.Rollout == nil {
			return fmt.Errorf("journey clinic-welcome has no status.rollout")
		}
		c := j.Status.Rollout.Counts
		if c.Stable.Completed != int64(on[stable]) || c.Canary.Completed != int64(on[canary]) {
			return fmt.Errorf("the rollout counts %d completed stable and %d completed canary Sessions, want %d and %d",
				c.Stable.Completed, c.Canary.Completed, on[stable], on[canary])
		}
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintln(k.out)
	return k.show("journey", "rollout", "status", "clinic-welcome")
}
