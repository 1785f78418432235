package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/rebuild"
	"github.com/journeyops/journey-operator/internal/step"
)

// Moving Sessions between revisions: an Upgrade intervention is checked by replaying
// the Session's journal on the target revision (package rebuild, no call), and the
// verdict is handed to the engine step that applies it; a fork's first status is
// rebuilt from its source's journal.

// snapshot returns the compiled revision name of s's journey, read live when the cache
// does not have it yet.
func (r *SessionReconciler) snapshot(ctx context.Context, s *flowv1.Session, name string) (*engine.Snapshot, error) {
	if !strings.HasPrefix(name, s.Spec.JourneyRef.Name+"-") {
		return nil, fmt.Errorf("revision %s is not a revision of journey %s", name, s.Spec.JourneyRef.Name)
	}
	snap, err := r.snapshots.Get(ctx, r.Client, s.Namespace, name)
	if apierrors.IsNotFound(err) {
		snap, err = r.snapshots.Get(ctx, r.APIReader, s.Namespace, name)
	}
	return snap, err
}

// upgradeCheck is the replay verdict for the Upgrade intervention s takes next, nil
// when its next step takes none. A revision that cannot be read gives no verdict (the
// engine refuses the Upgrade, saying so); an API error is returned.
func (r *SessionReconciler) upgradeCheck(ctx context.Context, s *flowv1.Session) (*engine.ReplayCheck, error) {
	iv, ok := s.Spec.InterventionAt(max(s.Status.ProcessedInterventions, s.Spec.InterventionsDropped))
	if !ok || iv.Action != flowv1.InterventionUpgrade || iv.Revision == s.Status.JourneyRevision {
		return nil, nil
	}
	return r.replayOn(ctx, s, iv.Revision)
}

// replayOn is the verdict of a replay of s's journal on revision to (no call is
// made): nil when to cannot be read; an API error is returned. A journal that cannot
// be replayed at all diverges at the Session's step.
func (r *SessionReconciler) replayOn(ctx context.Context, s *flowv1.Session, to string) (*engine.ReplayCheck, error) {
	snap, err := r.snapshot(ctx, s, to)
	if err != nil {
		if apierrors.IsNotFound(err) || !isAPIError(err) {
			return nil, nil
		}
		return nil, err
	}
	src, err := rebuild.SourceOf(s)
	var res *rebuild.Result
	if err == nil {
		if src.Revision, err = r.snapshot(ctx, s, s.Status.JourneyRevision); err != nil && isAPIError(err) && !apierrors.IsNotFound(err) {
			return nil, err
		}
		res, err = rebuild.Replay(snap, to, src, 0)
	}
	if err != nil {
		return &engine.ReplayCheck{Revision: to, Step: s.Status.Step, Field: "status", Message: err.Error()}, nil
	}
	return res.Check, nil
}

// policyVerdict is what the Journey's upgradePolicy did to a Session's status.
type policyVerdict struct {
	// moved says the Session moved to another revision.
	moved bool
	// blocked is the note of the Event saying its replay diverges ("" for none).
	blocked string
	// waits says the policy waits for the Session's turn (or its interventions) to
	// end before it replays the Session.
	waits bool
}

// policyUpgrade applies the Journey's upgradePolicy to s, in status (s's status, to
// be written): between turns, a Session on another revision than the one the policy
// moves it to (Journey.UpgradeTarget) is replayed there once, and moves when every
// step reproduces; otherwise UpgradeBlocked says where it diverges, and it is not
// replayed again for that revision.
func (r *SessionReconciler) policyUpgrade(ctx context.Context, s *flowv1.Session, status *flowv1.SessionStatus, now time.Time) (policyVerdict, error) {
	if status.JourneyRevision == "" {
		return policyVerdict{}, nil
	}
	var j flowv1.Journey
	if err := r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.JourneyRef.Name}, &j); err != nil {
		return policyVerdict{}, client.IgnoreNotFound(err)
	}
	to := j.UpgradeTarget(status.JourneyRevision)
	switch {
	case to == "" || engine.UpgradeBlockedOn(status) == to:
		return policyVerdict{}, nil
	case status.Turn != nil || s.InterventionsPending() || status.Phase.IsTerminal():
		return policyVerdict{waits: true}, nil
	}
	check, err := r.replayOn(ctx, s, to)
	if err != nil || check == nil {
		return policyVerdict{}, err
	}
	if engine.UpgradeByPolicy(status, check, s.Name, now) {
		return policyVerdict{moved: true}, nil
	}
	return policyVerdict{blocked: "Upgrade by the journey's upgradePolicy ReplayCompatible blocked: " + check.String()}, nil
}

// isAPIError reports whether err came from the API server (rather than from
// compiling a revision).
func isAPIError(err error) bool {
	var st apierrors.APIStatus
	return errors.As(err, &st)
}

// fork rebuilds the first status of s, a fork: its source's status after step
// forkOf.step, replayed on the source's revision from its journal (no call), moved to
// forkOf.revision (else the source's), with ForkDiverged saying whether the source's
// steps replay the same there. A source that is gone, or whose journal cannot rebuild
// the step, stalls the fork.
func (r *SessionReconciler) fork(ctx context.Context, s *flowv1.Session, now time.Time) sessionStep {
	f := s.Spec.ForkOf
	stall := func(msg string) sessionStep {
		status := s.Status.DeepCopy()
		engine.Stall(status, flowv1.ReasonForkSourceNotFound, msg, now)
		return sessionStep{status: status, stall: flowv1.ReasonForkSourceNotFound, message: msg,
			then: outcome{kind: terminal, err: errors.New(msg)}}
	}
	var src flowv1.Session
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: f.Session}, &src)
	switch {
	case apierrors.IsNotFound(err) || err == nil && string(src.UID) != f.UID:
		return stall(fmt.Sprintf("The fork's source session %s (uid %s) no longer exists", f.Session, f.UID))
	case err != nil:
		return sessionStep{then: failed(err)}
	case src.Spec.JourneyRef != s.Spec.JourneyRef:
		return stall(fmt.Sprintf("The fork's source session %s runs journey %s, not %s", f.Session, src.Spec.JourneyRef.Name, s.Spec.JourneyRef.Name))
	}
	srcRev := src.Status.JourneyRevision
	srcSnap, err := r.snapshot(ctx, s, srcRev)
	if err != nil {
		if isAPIError(err) && !apierrors.IsNotFound(err) {
			return sessionStep{then: failed(err)}
		}
		return stall(fmt.Sprintf("The fork's source revision %s cannot be read: %v", srcRev, err))
	}
	from, err := rebuild.SourceOf(&src)
	var rebuilt *rebuild.Result
	if err == nil {
		rebuilt, err = rebuild.Replay(srcSnap, srcRev, from, f.Step)
	}
	if err != nil {
		return stall("The fork cannot be rebuilt from its source: " + err.Error())
	}
	if !rebuilt.Check.Reproduces {
		return stall("The fork cannot be rebuilt from its source's journal: " + rebuilt.Check.String())
	}
	to, check := srcRev, (*engine.ReplayCheck)(nil)
	if f.Revision != "" && f.Revision != srcRev {
		to = f.Revision
		snap, err := r.snapshot(ctx, s, to)
		if err != nil {
			if isAPIError(err) && !apierrors.IsNotFound(err) {
				return sessionStep{then: failed(err)}
			}
			return stall(fmt.Sprintf("The fork's revision %s cannot be read: %v", to, err))
		}
		onto := from
		onto.Revision = srcSnap
		res, err := rebuild.Replay(snap, to, onto, f.Step)
		if err != nil {
			check = &engine.ReplayCheck{Revision: to, Step: f.Step, Field: "status", Message: err.Error()}
		} else {
			check = res.Check
		}
	}
	note := fmt.Sprintf("Forked from session %s after its step %d, rebuilt from its journal with no call; runs on revision %s", f.Session, f.Step, to)
	if check != nil && !check.Reproduces {
		note += "; " + check.String()
	}
	return sessionStep{status: engine.Fork(rebuilt.Status, to, check, s.Spec.Suspend, now), step: step.Changed, forked: note}
}
