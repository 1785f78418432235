package controller

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// maxConditionMessage bounds a Journey's or Pathway's condition messages (the list of
// issues can be long; status.issues has it in full).
const maxConditionMessage = 32768

// setValidity sets the conditions of a Journey or Pathway, as kstatus reads them: Ready
// for reason; Stalled while the spec is invalid (only a person can fix it); Reconciling
// while it waits for a Pathway that does not exist yet; every condition stamped with
// generation.
func setValidity(conds *[]metav1.Condition, generation int64, ready metav1.ConditionStatus, reason, msg string) {
	if len(msg) > maxConditionMessage {
		msg = msg[:maxConditionMessage]
	}
	set := func(typ string, on bool, st metav1.ConditionStatus) {
		if !on {
			apimeta.RemoveStatusCondition(conds, typ)
			return
		}
		apimeta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: generation})
	}
	set(flowv1.ConditionReady, true, ready)
	set(flowv1.ConditionStalled, reason == flowv1.ReasonInvalid, metav1.ConditionTrue)
	set(flowv1.ConditionReconciling, reason == flowv1.ReasonPathwayNotFound, metav1.ConditionTrue)
	for i := range *conds {
		(*conds)[i].ObservedGeneration = generation
	}
}
