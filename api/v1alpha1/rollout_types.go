package v1alpha1

import (
	"hash/fnv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Rollout is how a new valid revision of a Journey replaces the one that serves:
// first as a canary that a share of new Sessions start on, step by step, while the
// finished Sessions of both revisions are compared.
type Rollout struct {
	// canary lists the steps of the canary.
	// +required
	Canary CanaryStrategy `json:"canary"`
	// analysis compares the canary's Sessions with the stable revision's, to
	// abort a canary that does worse and to hold the promotion until it is
	// shown good.
	// +optional
	Analysis *RolloutAnalysis `json:"analysis,omitempty"`
	// autoPromote makes the canary the stable revision once its last step's pause
	// has passed (and the analysis's successCondition holds, when set). Without it
	// the canary waits at its last step for kubectl journey rollout promote.
	// +optional
	AutoPromote bool `json:"autoPromote,omitempty"`
}

// CanaryStrategy is the steps a canary goes through.
type CanaryStrategy struct {
	// steps are taken in order: each sends weight percent of new Sessions to the
	// canary revision for pause, then the next step starts.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	Steps []CanaryStep `json:"steps"`
}

// CanaryStep is a share of new Sessions and how long it holds.
type CanaryStep struct {
	// weight is the percentage of new Sessions that start on the canary revision
	// during this step, chosen by a hash of each Session's UID.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`
	// pause is how long the step holds before the next one starts. Unset, the step
	// holds until kubectl journey rollout promote (or an abort).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="pause must be a duration such as 30m or 1h"
	Pause *metav1.Duration `json:"pause,omitempty"`
}

// RolloutAnalysis decides a canary from the Sessions of both revisions.
type RolloutAnalysis struct {
	// window bounds the Sessions counted to those created within it (and since
	// the canary started). Unset, every Session since the canary started counts.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="window must be a positive duration such as 1h"
	Window *metav1.Duration `json:"window,omitempty"`
	// minSessions is how many of the canary's Sessions must have finished before
	// a condition is evaluated.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	MinSessions int32 `json:"minSessions,omitempty"`
	// successCondition must hold for the canary to be promoted automatically. A
	// CEL expression over canary and stable, each with the counts of its
	// revision's Sessions as numbers: started, completed, failed, escalated,
	// finished (completed, failed or cancelled), turns and costUSD; for example
	// "canary.completed / canary.finished >= stable.completed / stable.finished".
	// +optional
	SuccessCondition Expression `json:"successCondition,omitempty"`
	// failureCondition aborts the canary when it holds (new Sessions go back to
	// the stable revision), over the same variables, for example
	// "canary.failed / canary.finished > stable.failed / stable.finished + 0.1".
	// +optional
	FailureCondition Expression `json:"failureCondition,omitempty"`
}

// RolloutPhase is where a canary is.
// +kubebuilder:validation:Enum=Progressing;Paused;Promoted;Aborted
type RolloutPhase string

const (
	// RolloutProgressing: the canary takes its steps.
	RolloutProgressing RolloutPhase = "Progressing"
	// RolloutPaused: the canary holds at a step until kubectl journey rollout
	// promote (a step without pause, or the last step without autoPromote), or until
	// the analysis has what it needs.
	RolloutPaused RolloutPhase = "Paused"
	// RolloutPromoted: the canary became the stable revision.
	RolloutPromoted RolloutPhase = "Promoted"
	// RolloutAborted: the canary was aborted; new Sessions start on the stable
	// revision. Its running Sessions stay on it, unless spec.upgradePolicy is
	// ReplayCompatible: then those whose journal replays the same on the
	// stable revision move back to it.
	RolloutAborted RolloutPhase = "Aborted"
)

// RolloutStatus is the state of the latest canary.
type RolloutStatus struct {
	// revision is the canary revision this status is about (it stays set once
	// the canary was promoted or aborted).
	// +optional
	Revision string `json:"revision,omitempty"`
	// stableRevision is the stable revision the canary is compared with, the
	// one counts.stable counts (it stays set once the canary was promoted).
	// +optional
	StableRevision string `json:"stableRevision,omitempty"`
	// phase is Progressing, Paused, Promoted or Aborted.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`
	// step is the index of the current canary step, from 0.
	// +optional
	Step int32 `json:"step,omitempty"`
	// weight is the percentage of new Sessions that start on the canary now.
	// +optional
	Weight int32 `json:"weight,omitempty"`
	// startTime is when the canary started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// stepStartTime is when the current step started.
	// +optional
	StepStartTime *metav1.Time `json:"stepStartTime,omitempty"`
	// counts are the Sessions of each revision the analysis counts.
	// +optional
	Counts RolloutCounts `json:"counts,omitzero"`
	// message says why the canary was promoted or aborted, or what it waits for.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
}

// RolloutCounts are the counted Sessions of the stable and canary revisions.
type RolloutCounts struct {
	// stable counts the stable revision's Sessions.
	// +optional
	Stable RevisionCounts `json:"stable,omitzero"`
	// canary counts the canary revision's Sessions.
	// +optional
	Canary RevisionCounts `json:"canary,omitzero"`
}

// RevisionCounts are what a revision's Sessions did.
type RevisionCounts struct {
	// started is how many Sessions started on the revision.
	// +optional
	Started int64 `json:"started,omitempty"`
	// completed is how many of them are Completed.
	// +optional
	Completed int64 `json:"completed,omitempty"`
	// failed is how many of them Failed.
	// +optional
	Failed int64 `json:"failed,omitempty"`
	// escalated is how many of them are Escalated (waiting on a person).
	// +optional
	Escalated int64 `json:"escalated,omitempty"`
	// finished is how many of them ended: Completed, Failed or Cancelled.
	// +optional
	Finished int64 `json:"finished,omitempty"`
	// turns is the turns they ran, summed.
	// +optional
	Turns int64 `json:"turns,omitempty"`
	// costUSD is what they cost, summed, in US dollars.
	// +optional
	CostUSD string `json:"costUSD,omitempty"`
}

// Annotations that kubectl journey rollout promote and abort set on a Journey. The
// value is the canary revision the request is about: a request about another
// revision than the current canary does nothing.
const (
	AnnotationRolloutPromote = "flow.journey.dev/rollout-promote"
	AnnotationRolloutAbort   = "flow.journey.dev/rollout-abort"
)

// RevisionFor returns the revision a new Session with the given UID starts on: during
// a canary, the canary revision for the share of UIDs its weight says (by an FNV-1a
// hash of the UID, so the choice is the same at every reconcile and on every
// replica), the stable revision for the others; after a rollout, the stable
// revision; without one, readyRevision.
func (s *JourneyStatus) RevisionFor(uid types.UID) string {
	if s.CanaryRevision != "" && s.StableRevision != "" && s.Rollout != nil {
		if CanaryBucket(uid) < s.Rollout.Weight {
			return s.CanaryRevision
		}
		return s.StableRevision
	}
	if s.StableRevision != "" {
		return s.StableRevision
	}
	return s.ReadyRevision
}

// UpgradeTarget returns the revision the Journey's spec.upgradePolicy moves a
// running Session on revision rev to, "" when it stays where it is. Under
// ReplayCompatible it is the revision that serves new Sessions (the stable
// revision under a rollout, else readyRevision), except for the Sessions of a
// running canary, which stay on it; under Pinned, none. Whether the Session may
// move is a replay's to say.
func (j *Journey) UpgradeTarget(rev string) string {
	st := &j.Status
	if j.Spec.UpgradePolicy != UpgradeReplayCompatible || rev == "" || rev == st.CanaryRevision {
		return ""
	}
	to := st.StableRevision
	if to == "" {
		to = st.ReadyRevision
	}
	if to == rev {
		return ""
	}
	return to
}

// CanaryBucket is the UID's bucket, 0 to 99: a Session starts on the canary when its
// bucket is below the canary's weight.
func CanaryBucket(uid types.UID) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid))
	return int32(h.Sum32() % 100)
}
