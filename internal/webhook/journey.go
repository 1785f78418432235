package webhook

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Paths of the webhooks that check Journeys and Pathways.
const (
	JourneyPath = "/validate-flow-journey-dev-v1alpha1-journey"
	PathwayPath = "/validate-flow-journey-dev-v1alpha1-pathway"
)

// Checks are the controllers' own checks of a Journey and a Pathway, which the
// Journey and Pathway webhooks run at admission so that they refuse what the
// controllers would report invalid, with the same messages. They are passed in (the
// controller package's AdmissionChecks) so that this package stays below the engine.
type Checks struct {
	// Journey lists the problems of a Journey spec whose Pathway specs are given by
	// local name, one line each, as the Journey's Ready condition and status.issues
	// say them; a nil or absent entry is a Pathway that does not exist (yet), and
	// only what does not depend on it is listed.
	Journey func(journey *flowv1.JourneySpec, pathways map[string]*flowv1.PathwaySpec) []string
	// Pathway lists the problems a Pathway has on its own, as its Ready condition
	// says them.
	Pathway func(pathway *flowv1.PathwaySpec) []string
}

var (
	journeyGK = schema.GroupKind{Group: flowv1.GroupVersion.Group, Kind: "Journey"}
	pathwayGK = schema.GroupKind{Group: flowv1.GroupVersion.Group, Kind: "Pathway"}
)

// Both webhooks see only creates and the updates that change the spec
// (matchConditions): labels, annotations, finalizers and deletions never wait on them,
// so a Journey already invalid (a Pathway deleted since) can still be labelled or
// deleted. They fail open (failurePolicy Ignore): while the manager is down, edits
// are taken unchecked rather than refused; the Journey controller checks every
// generation again, and an invalid one never replaces the revision that serves.
// +kubebuilder:webhook:path=/validate-flow-journey-dev-v1alpha1-journey,mutating=false,failurePolicy=ignore,sideEffects=None,groups=flow.journey.dev,resources=journeys,verbs=create;update,versions=v1alpha1,name=vjourney-v1alpha1.flow.journey.dev,admissionReviewVersions=v1,timeoutSeconds=10,patch=`{"matchConditions":[{"name":"spec-changed","expression":"request.operation == 'CREATE' || object.spec != oldObject.spec"}]}`
// +kubebuilder:webhook:path=/validate-flow-journey-dev-v1alpha1-pathway,mutating=false,failurePolicy=ignore,sideEffects=None,groups=flow.journey.dev,resources=pathways,verbs=create;update,versions=v1alpha1,name=vpathway-v1alpha1.flow.journey.dev,admissionReviewVersions=v1,timeoutSeconds=10,patch=`{"matchConditions":[{"name":"spec-changed","expression":"request.operation == 'CREATE' || object.spec != oldObject.spec"}]}`

// The Pathway webhook reads the Journeys of the Pathway's namespace.
// +kubebuilder:rbac:groups=flow.journey.dev,resources=journeys,verbs=list

// journeyValidator refuses a Journey the Journey controller would report invalid,
// as far as its namespace's Pathways show: with every referenced Pathway there,
// every problem; with some missing (created later, in the same apply or after), the
// problems that do not depend on them, and a warning naming the missing ones.
type journeyValidator struct {
	reader client.Reader
	checks Checks
}

// ValidateCreate checks a new Journey.
func (v journeyValidator) ValidateCreate(ctx context.Context, j *flowv1.Journey) (admission.Warnings, error) {
	return v.validate(ctx, j)
}

// ValidateUpdate checks a Journey whose spec changes.
func (v journeyValidator) ValidateUpdate(ctx context.Context, old, j *flowv1.Journey) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, j.Spec) {
		return nil, nil
	}
	return v.validate(ctx, j)
}

// ValidateDelete allows deletes: the webhook is not registered for them.
func (journeyValidator) ValidateDelete(context.Context, *flowv1.Journey) (admission.Warnings, error) {
	return nil, nil
}

func (v journeyValidator) validate(ctx context.Context, j *flowv1.Journey) (admission.Warnings, error) {
	r := &pathwayReads{reader: v.reader, namespace: j.Namespace}
	pathways, warnings := r.resolve(ctx, j, "", nil)
	if issues := v.checks.Journey(&j.Spec, pathways); len(issues) > 0 {
		return warnings, invalid(journeyGK, j.Name, issues)
	}
	return warnings, nil
}

// pathwayValidator refuses a Pathway that is invalid on its own, and a Pathway
// change that would make a Journey referencing it invalid: the problems the change
// adds to each such Journey, as far as the namespace's Pathways show (problems the
// Journey has anyway are its own, and do not block fixing one Pathway at a time).
type pathwayValidator struct {
	reader client.Reader
	checks Checks
}

// ValidateCreate checks a new Pathway.
func (v pathwayValidator) ValidateCreate(ctx context.Context, p *flowv1.Pathway) (admission.Warnings, error) {
	return v.validate(ctx, nil, p)
}

// ValidateUpdate checks a Pathway whose spec changes.
func (v pathwayValidator) ValidateUpdate(ctx context.Context, old, p *flowv1.Pathway) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, p.Spec) {
		return nil, nil
	}
	return v.validate(ctx, &old.Spec, p)
}

// ValidateDelete allows deletes: the webhook is not registered for them.
func (pathwayValidator) ValidateDelete(context.Context, *flowv1.Pathway) (admission.Warnings, error) {
	return nil, nil
}

func (v pathwayValidator) validate(ctx context.Context, old *flowv1.PathwaySpec, p *flowv1.Pathway) (admission.Warnings, error) {
	if issues := v.checks.Pathway(&p.Spec); len(issues) > 0 {
		return nil, invalid(pathwayGK, p.Name, issues)
	}
	var journeys flowv1.JourneyList
	if err := v.reader.List(ctx, &journeys, client.InNamespace(p.Namespace)); err != nil {
		return admission.Warnings{fmt.Sprintf("the Journeys of namespace %q could not be read, so the Pathway was not checked against them: %v", p.Namespace, err)}, nil
	}
	if old == nil {
		old = &flowv1.PathwaySpec{} // before it exists, a Pathway that does nothing
	}
	r := &pathwayReads{reader: v.reader, namespace: p.Namespace}
	var refused []string
	for i := range journeys.Items {
		j := &journeys.Items[i]
		if !references(j, p.Name) {
			continue
		}
		// A Pathway another one of the Journey lacks is the Journey's warning to give.
		after, _ := r.resolve(ctx, j, p.Name, &p.Spec)
		before, _ := r.resolve(ctx, j, p.Name, old)
		for _, issue := range subtract(v.checks.Journey(&j.Spec, after), v.checks.Journey(&j.Spec, before)) {
			refused = append(refused, fmt.Sprintf("Journey %q: %s", j.Name, issue))
		}
	}
	if len(refused) > 0 {
		return nil, invalid(pathwayGK, p.Name, refused)
	}
	return nil, nil
}

// references reports whether a Journey references the Pathway named name.
func references(j *flowv1.Journey, name string) bool {
	for _, entry := range j.Spec.Pathways {
		if entry.PathwayRef == name {
			return true
		}
	}
	return false
}

// pathwayReads reads the Pathways of a namespace for one admission request, each at
// most once.
type pathwayReads struct {
	reader    client.Reader
	namespace string
	read      map[string]*flowv1.PathwaySpec // nil: not found
}

// resolve returns the Pathway specs of j by local name, as the Journey controller
// resolves them, with spec in place of the Pathway named name (when name is set).
// A Pathway that does not exist, or could not be read, is nil; the warnings say so.
func (r *pathwayReads) resolve(ctx context.Context, j *flowv1.Journey, name string, spec *flowv1.PathwaySpec) (map[string]*flowv1.PathwaySpec, admission.Warnings) {
	if r.read == nil {
		r.read = map[string]*flowv1.PathwaySpec{}
	}
	pathways := make(map[string]*flowv1.PathwaySpec, len(j.Spec.Pathways))
	var warnings admission.Warnings
	for _, entry := range j.Spec.Pathways {
		if name != "" && entry.PathwayRef == name {
			pathways[string(entry.Name)] = spec
			continue
		}
		p, seen := r.read[entry.PathwayRef]
		if !seen {
			var obj flowv1.Pathway
			err := r.reader.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: entry.PathwayRef}, &obj)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				warnings = append(warnings, fmt.Sprintf("Journey %q: pathway %q: Pathway %q could not be read, so what depends on it was not checked: %v", j.Name, entry.Name, entry.PathwayRef, err))
			default:
				p = &obj.Spec
			}
			r.read[entry.PathwayRef] = p
		}
		if p == nil && !seen {
			warnings = append(warnings, fmt.Sprintf("Journey %q: pathway %q: Pathway %q not found in namespace %q; the Journey is not Ready until it exists", j.Name, entry.Name, entry.PathwayRef, r.namespace))
		}
		pathways[string(entry.Name)] = p
	}
	return pathways, warnings
}

// subtract returns the lines of after that before does not have (as many times as
// after has them more often), in after's order.
func subtract(after, before []string) []string {
	have := map[string]int{}
	for _, s := range before {
		have[s]++
	}
	var out []string
	for _, s := range after {
		if have[s] > 0 {
			have[s]--
			continue
		}
		out = append(out, s)
	}
	return out
}

// invalid is the refusal of an object with issues, one cause each, on spec.
func invalid(gk schema.GroupKind, name string, issues []string) error {
	errs := make(field.ErrorList, 0, len(issues))
	for _, issue := range issues {
		errs = append(errs, field.Invalid(field.NewPath("spec"), field.OmitValueType{}, issue))
	}
	return apierrors.NewInvalid(gk, name, errs)
}
