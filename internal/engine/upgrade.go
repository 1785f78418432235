package engine

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Revisions: a Session runs on the journey revision it started on (status.journeyRevision)
// until an Upgrade intervention moves it. Whether the move is safe is found out outside
// the step, by replaying the Session's journal on the target revision with no call
// (package rebuild), and handed to the step as Input.Upgrade: the step only applies the
// verdict, so it stays pure.

// ReplayCheck is the verdict of a replay of a Session's journal on a revision: whether
// every step reproduced, and if not, the first one that did not.
type ReplayCheck struct {
	// Revision is the revision the journal was replayed on.
	Revision string
	// Reproduces says every step reproduced: the same transitions, the same questions
	// to agents and tools (so the journaled answers sufficed), the same replies and
	// the same status.
	Reproduces bool
	// Step is the Session's first step that replays differently; Field what differs
	// there (a status field, a history entry's field, an agent's question) and
	// Message how.
	Step           int64
	Field, Message string
}

// String says where the replay diverges.
func (c *ReplayCheck) String() string {
	if c.Reproduces {
		return fmt.Sprintf("every step replays the same on revision %s", c.Revision)
	}
	return fmt.Sprintf("step %d replays differently on revision %s: %s: %s", c.Step, c.Revision, c.Field, c.Message)
}

// upgrade moves the Session to iv.revision when the replay verdict the step was given
// for it reproduces, or anyway with iv.force; otherwise it stays, and UpgradeBlocked
// names the first step that diverges.
func (r *run) upgrade(iv *flowv1.Intervention) string {
	st := r.st
	from, to := st.JourneyRevision, iv.Revision
	if to == from {
		return fmt.Sprintf("the session already runs on revision %s", to)
	}
	check := r.in.Upgrade
	switch {
	case check == nil || check.Revision != to:
		return fmt.Sprintf("revision %s could not be replayed: it is not a revision of the session's journey, or it could not be read", to)
	case !check.Reproduces && !iv.Force:
		setCondition(st, flowv1.ConditionUpgradeBlocked, metav1.ConditionTrue, flowv1.ReasonReplayDiverged,
			blockedMessage(from, check, r.sessionName()), r.now)
		return "the replay diverges: " + check.String()
	}
	st.JourneyRevision = to
	what := fmt.Sprintf("upgraded from revision %s to %s", from, to)
	if check.Reproduces {
		what += " (every step replays the same)"
	} else {
		what += " (forced; " + check.String() + ")"
	}
	setCondition(st, flowv1.ConditionUpgradeBlocked, metav1.ConditionFalse, flowv1.ReasonUpgraded,
		capitalize(what), r.now)
	r.recordIntervention(iv, st.CurrentPathway, "", what)
	return ""
}

// blockedMessage is the message of UpgradeBlocked when the replay check of a move
// from revision from diverges. UpgradeBlockedOn reads the revision back.
func blockedMessage(from string, check *ReplayCheck, session string) string {
	return fmt.Sprintf("Upgrade to %s blocked: %s; the session stays on %s (kubectl journey upgrade %s --to-revision %s --force moves it anyway)",
		check.Revision, check, from, session, check.Revision)
}

// UpgradeBlockedOn returns the revision an upgrade to which is blocked
// (UpgradeBlocked True), "" when none is.
func UpgradeBlockedOn(status *flowv1.SessionStatus) string {
	c := apimeta.FindStatusCondition(status.Conditions, flowv1.ConditionUpgradeBlocked)
	if c == nil || c.Status != metav1.ConditionTrue {
		return ""
	}
	rest, ok := strings.CutPrefix(c.Message, "Upgrade to ")
	if !ok {
		return ""
	}
	rev, _, ok := strings.Cut(rest, " blocked: ")
	if !ok {
		return ""
	}
	return rev
}

// UpgradeByPolicy applies the verdict of the replay the Journey's upgradePolicy
// ReplayCompatible asked for, on the status of a Session between turns: when check
// reproduces, the Session moves to check.Revision and UpgradeBlocked (False, reason
// Upgraded) says so; otherwise it stays, and UpgradeBlocked (True, reason
// ReplayDiverged) names the first step that diverges. It reports whether the
// Session moved.
//
// It is not a step: a move changes nothing the Session does (its every step replays
// the same), so it takes no step number and no history entry, and a later replay of
// the Session (an upgrade, a fork) takes its steps as they were numbered. The
// Upgraded Event says it moved.
func UpgradeByPolicy(status *flowv1.SessionStatus, check *ReplayCheck, session string, now time.Time) bool {
	from := status.JourneyRevision
	if check == nil || check.Revision == "" || check.Revision == from {
		return false
	}
	if !check.Reproduces {
		SetCondition(status, flowv1.ConditionUpgradeBlocked, metav1.ConditionTrue, flowv1.ReasonReplayDiverged,
			blockedMessage(from, check, cmp.Or(session, "SESSION")), now)
		return false
	}
	status.JourneyRevision = check.Revision
	SetCondition(status, flowv1.ConditionUpgradeBlocked, metav1.ConditionFalse, flowv1.ReasonUpgraded,
		fmt.Sprintf("Upgraded from revision %s to %s by the journey's upgradePolicy ReplayCompatible (every step replays the same)", from, check.Revision), now)
	return true
}

// upgradeNext reports whether the next intervention to process is an Upgrade: it
// applies even while a turn is in progress (its agent may fail on the revision the
// Session runs, which is what the Upgrade is for), as the replay that checked it
// reproduced the turn so far.
func (r *run) upgradeNext() bool {
	iv, ok := r.spec.InterventionAt(max(r.st.ProcessedInterventions, r.spec.InterventionsDropped))
	return ok && iv.Action == flowv1.InterventionUpgrade
}

// sessionName is the Session's name in a hint, SESSION when unknown.
func (r *run) sessionName() string {
	if r.in.SessionName == "" {
		return "SESSION"
	}
	return r.in.SessionName
}

// Fork makes status, a fork's first status, from rebuilt: the source Session's status
// after the fork step, rebuilt from its journal. The fork runs on revision from there;
// check, when it runs on another revision than the source, is the replay of the
// source's steps on it (ForkDiverged says whether they replay the same). The fork's
// spec carries the source's messages and External outcomes up to the fork step, not
// its approvals and interventions (they were a person's acts on the source): so it
// counts none of those processed. It keeps the source's records of the interventions
// processed up to the fork step (status.interventions), as it keeps its history, so
// that a replay of the fork gives them at their steps. A fork created suspended
// (suspended: its spec.suspend) says so in this first status, with the conditions the
// step after it would set, so that step finds nothing to change and the fork stays at
// the fork step until it is resumed. It returns the fork's status; rebuilt is not
// modified.
func Fork(rebuilt *flowv1.SessionStatus, revision string, check *ReplayCheck, suspended bool, now time.Time) *flowv1.SessionStatus {
	st := rebuilt.DeepCopy()
	st.JourneyRevision = revision
	st.ProcessedApprovals, st.ProcessedInterventions = 0, 0
	st.PendingEffect, st.AgentRetry = rebuilt.PendingEffect.DeepCopy(), nil
	apimeta.RemoveStatusCondition(&st.Conditions, flowv1.ConditionUpgradeBlocked)
	if check != nil {
		if check.Reproduces {
			SetCondition(st, flowv1.ConditionForkDiverged, metav1.ConditionFalse, flowv1.ReasonReplayReproduced,
				fmt.Sprintf("The source's steps up to %d replay the same on revision %s", st.Step, revision), now)
		} else {
			SetCondition(st, flowv1.ConditionForkDiverged, metav1.ConditionTrue, flowv1.ReasonReplayDiverged,
				fmt.Sprintf("Step %d of the source replays differently on revision %s: %s: %s; the fork keeps the source's status up to step %d and runs on %s from there",
					check.Step, revision, check.Field, check.Message, st.Step, revision), now)
		}
	}
	if suspended && !st.Phase.IsTerminal() {
		// As a step of a suspended Session settles it (Step), without a step of its own.
		r := &run{st: st, now: metav1.NewTime(now), suspended: true}
		r.settle()
	}
	return st
}
