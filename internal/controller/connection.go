package controller

import (
	"context"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// connected returns spec, pinned in the Session's revision, with its connection
// settings taken from the agent of the same name and provider in the Journey's current
// spec: baseURL, apiKeySecretRef, timeout and maxRetries say how to reach the model,
// not how it behaves, so fixing a wrong endpoint or key resumes the Sessions it
// stalled. Everything that decides behaviour (model, instructions, temperature,
// response format, token cap, pricing) stays pinned. When the Journey or the agent is
// gone, or the provider changed, the pinned spec is used as it is.
func (r *SessionReconciler) connected(ctx context.Context, namespace, journey string, spec flowv1.AgentSpec) flowv1.AgentSpec {
	var j flowv1.Journey
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: journey}, &j); err != nil {
		return spec
	}
	for i := range j.Spec.Agents {
		live := &j.Spec.Agents[i]
		if live.Name != spec.Name || live.Provider != spec.Provider {
			continue
		}
		spec.BaseURL = live.BaseURL
		spec.APIKeySecretRef = live.APIKeySecretRef.DeepCopy()
		spec.Timeout = live.Timeout.DeepCopy()
		spec.MaxRetries = nil
		if live.MaxRetries != nil {
			n := *live.MaxRetries
			spec.MaxRetries = &n
		}
		return spec
	}
	return spec
}

// stalledByAgent reports whether s is Stalled by a terminal agent error, which a change
// to its Journey's connection settings may resolve.
func stalledByAgent(s *flowv1.Session) bool {
	c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == flowv1.ReasonAgentTerminalError
}
