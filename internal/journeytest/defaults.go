package journeytest

import (
	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/revision"
)

// defaultedFields lists the fields the CRDs default (their +kubebuilder:default
// markers), which defaultJourney and defaultPathway (internal/revision) apply the way
// the API server does.
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
func defaultJourney(j *flowv1.JourneySpec) { revision.DefaultJourney(j) }

// defaultPathway applies the CRD defaults of a Pathway spec.
func defaultPathway(p *flowv1.PathwaySpec) { revision.DefaultPathway(p) }
