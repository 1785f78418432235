package controller

import (
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// emitTrimmed records an Event when a step first drops transcript entries: the
// TranscriptTrimmed condition turns True. Later drops keep it True and emit nothing,
// so a long conversation costs one Event, not one per turn.
func (r *SessionReconciler) emitTrimmed(s *flowv1.Session, old, status *flowv1.SessionStatus) {
	if apimeta.IsStatusConditionTrue(old.Conditions, flowv1.ConditionTranscriptTrimmed) {
		return
	}
	c := apimeta.FindStatusCondition(status.Conditions, flowv1.ConditionTranscriptTrimmed)
	if c == nil || c.Status != metav1.ConditionTrue {
		return
	}
	r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, flowv1.ConditionTranscriptTrimmed, "Step", "%s", c.Message)
}
