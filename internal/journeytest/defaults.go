package journeytest

import (
	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// defaultedFields lists the fields the CRDs default (their +kubebuilder:default
// markers), which defaultJourney and defaultPathway apply the way the API server does.
// A test compares this list with config/crd/bases, so a new default cannot be missed.
var defaultedFields = []string{
	"journeys: spec.errorRecovery",
	"journeys: spec.agents[].provider",
	"journeys: spec.transitions[].from",
	"journeys: spec.tools[].approval",
	"journeys: spec.tools[].cache",
	"pathways: spec.pipeline",
	"pathways: spec.executor",
	"pathways: spec.runOn",
	"pathways: spec.signature.inputs[].type",
	"pathways: spec.signature.outputs[].type",
	"pathways: spec.returnBehavior.type",
}

// defaultJourney applies the CRD defaults of a Journey spec.
func defaultJourney(j *flowv1.JourneySpec) {
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

// defaultPathway applies the CRD defaults of a Pathway spec.
func defaultPathway(p *flowv1.PathwaySpec) {
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
