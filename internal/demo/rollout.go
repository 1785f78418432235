package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
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
	Say("Rolling out a change: a canary revision serves half of the new Sessions until it is promoted")
	j, err := startCanary(k)
	if err != nil {
		return err
	}
	canary := j.Status.CanaryRevision
	if err := splitSessions(ctx, k, j.Status.StableRevision, canary); err != nil {
		return err
	}
	fmt.Println()
	if err := k.show("journey", "rollout", "promote", "clinic-welcome"); err != nil {
		return err
	}
	if _, err := k.output("wait", "--timeout=30s", "--for=jsonpath={.status.rollout.phase}=Promoted", "journey/clinic-welcome"); err != nil {
		return err
	}
	if err := k.show("journey", "rollout", "status", "clinic-welcome"); err != nil {
		return err
	}
	if j, err = k.journey("clinic-welcome"); err != nil {
		return err
	}
	if j.Status.StableRevision != canary {
		return fmt.Errorf("after the promotion the stable revision is %s, want the canary %s", j.Status.StableRevision, canary)
	}
	return k.show("get", "journey", "clinic-welcome")
}

// startCanary applies the journey, changes its reply and returns the Journey once
// the changed revision holds as the canary.
func startCanary(k kubectl) (*flowv1alpha1.Journey, error) {
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
	if _, err := k.output("wait", "--for=condition=Ready", "--timeout=30s", "journey/clinic-welcome"); err != nil {
		_ = k.show("get", "journey", "clinic-welcome", "-o", "jsonpath={.status}")
		return nil, err
	}
	if err := k.show("patch", "pathway", "clinic-welcome", "--type=merge", "-p",
		`{"spec":{"builtin":{"reply":"Welcome to the clinic! Ask me for a cardiologist, a free slot or your copay."}}}`); err != nil {
		return nil, err
	}
	if _, err := k.output("wait", "--timeout=30s", "--for=jsonpath={.status.rollout.phase}=Paused", "journey/clinic-welcome"); err != nil {
		_ = k.show("get", "journey", "clinic-welcome", "-o", "jsonpath={.status}")
		return nil, err
	}
	return k.journey("clinic-welcome")
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
		if err := k.create(fmt.Sprintf(`{"apiVersion":"flow.journey.dev/v1alpha1","kind":"Session",
			"metadata":{"name":%q,"namespace":"default"},"spec":{"journeyRef":{"name":"clinic-welcome"}}}`, name)); err != nil {
			return err
		}
		if _, err := k.output("wait", "session/"+name, "--timeout=30s", "--for=jsonpath={.status.phase}=Completed"); err != nil {
			return err
		}
		rev, err := k.output("get", "session", name, "-o", "jsonpath={.status.journeyRevision}")
		if err != nil {
			return err
		}
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
	if err := testenv.Poll(30*time.Second, func() error {
		j, err := k.journey("clinic-welcome")
		if err != nil {
			return err
		}
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
	fmt.Println()
	return k.show("journey", "rollout", "status", "clinic-welcome")
}

// journey reads a Journey with kubectl.
func (k kubectl) journey(name string) (*flowv1alpha1.Journey, error) {
	out, err := k.output("get", "journey", name, "-o", "json")
	if err != nil {
		return nil, err
	}
	var j flowv1alpha1.Journey
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		return nil, fmt.Errorf("reading journey %s: %w", name, err)
	}
	return &j, nil
}
