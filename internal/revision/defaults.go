package revision

import (
	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// DefaultJourney applies the CRD defaults of a Journey spec (its +kubebuilder:default
// markers) the way the API server does: to specs read from files, and to revision
// data before it is named.
func DefaultJourney(j *flowv1.JourneySpec) {
	if j.ErrorRecovery == "" {
		j.ErrorRecovery = flowv1.ErrorRecoveryGraceful
	}
	for i := range j.Agents {
		if j.Agents[i].Provider == "" {
			j.Agents[i].Provider = flowv1.ProviderBuiltin
		}
	}
	for i := range j.Transitions {
		if j.Transitions[i].From == "" {
			j.Transitions[i].From = "*"
		}
	}
	for i := range j.Tools {
		if j.Tools[i].Approval == "" {
			j.Tools[i].Approval = flowv1.ToolApprovalIfDestructive
		}
		if j.Tools[i].Cache == "" {
			j.Tools[i].Cache = flowv1.ToolCacheNone
		}
	}
}

// DefaultPathway applies the CRD defaults of a Pathway spec the way the API server
// does.
func DefaultPathway(p *flowv1.PathwaySpec) {
	if p.Pipeline == "" {
		p.Pipeline = flowv1.PipelineSequential
	}
	if p.Executor == "" {
		p.Executor = flowv1.ExecutorAgent
	}
	if p.RunOn == "" {
		p.RunOn = flowv1.RunOnMessage
	}
	for _, fields := range [][]flowv1.SignatureField{p.Signature.Inputs, p.Signature.Outputs} {
		for i := range fields {
			if fields[i].Type == "" {
				fields[i].Type = "string"
			}
		}
	}
	if rb := p.ReturnBehavior; rb != nil && rb.Type == "" {
		rb.Type = flowv1.ReturnToPrevious
	}
}
