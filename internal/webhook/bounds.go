package webhook

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// OutcomesPath serves the webhook that bounds spec.outcomes in bytes. It sees only the
// updates that add outcomes (matchConditions) and fails open (failurePolicy Ignore):
// while the manager is down outcomes are taken unchecked rather than refused, as
// messages are, and the CRD still bounds them in count.
const OutcomesPath = "/validate-flow-journey-dev-v1alpha1-session-outcomes"

// +kubebuilder:webhook:path=/validate-flow-journey-dev-v1alpha1-session-outcomes,mutating=false,failurePolicy=ignore,sideEffects=None,groups=flow.journey.dev,resources=sessions,verbs=create;update,versions=v1alpha1,name=vsessionoutcomes-v1alpha1.flow.journey.dev,admissionReviewVersions=v1,timeoutSeconds=5,patch=`{"matchConditions":[{"name":"outcomes-added","expression":"has(object.spec.outcomes) && size(object.spec.outcomes) > 0 && (request.operation == 'CREATE' || !has(oldObject.spec.outcomes) || object.spec.outcomes != oldObject.spec.outcomes)"}]}`

// outcomesValidator refuses a Session create or update whose spec.outcomes would hold
// more than flowv1.MaxOutcomesBytes.
type outcomesValidator struct{}

// ValidateCreate checks the outcomes of a new Session.
func (outcomesValidator) ValidateCreate(_ context.Context, s *flowv1.Session) (admission.Warnings, error) {
	return nil, outcomesSizeError(&flowv1.Session{}, s)
}

// ValidateUpdate checks the outcomes an update adds.
func (outcomesValidator) ValidateUpdate(_ context.Context, old, s *flowv1.Session) (admission.Warnings, error) {
	return nil, outcomesSizeError(old, s)
}

// ValidateDelete allows deletes: the webhook is not registered for them.
func (outcomesValidator) ValidateDelete(context.Context, *flowv1.Session) (admission.Warnings, error) {
	return nil, nil
}

func outcomesSizeError(old, s *flowv1.Session) error {
	if errs := checkOutcomesSize(&old.Spec, &s.Spec); len(errs) > 0 {
		return apierrors.NewInvalid(sessionGK, s.Name, errs)
	}
	return nil
}

// checkOutcomesSize refuses an update that adds External outcomes when spec.outcomes
// would then hold more than flowv1.MaxOutcomesBytes (data, messages, pathways and a
// fixed overhead each): the CRD schema cannot measure an outcome's free-form data. An
// update that adds no outcome is never refused here, so a Session stored before the
// bound existed can still be edited and compacted.
func checkOutcomesSize(old, s *flowv1.SessionSpec) field.ErrorList {
	if s.OutcomeCount() <= old.OutcomeCount() {
		return nil
	}
	n := flowv1.OutcomesBytes(s.Outcomes)
	if n <= flowv1.MaxOutcomesBytes {
		return nil
	}
	i := len(s.Outcomes) - 1
	last := flowv1.OutcomeBytes(&s.Outcomes[i])
	msg := fmt.Sprintf("spec.outcomes would hold %d bytes, more than %d KiB (data, message, pathway and %d bytes an outcome; the last one takes %d): ",
		n, flowv1.MaxOutcomesBytes/1024, flowv1.OutcomeOverheadBytes, last)
	if last > flowv1.MaxOutcomesBytes {
		msg += "this outcome alone is too large; send less data (a reference to where the rest is stored, for example)"
	} else {
		msg += "drop the processed outcomes from the front of spec.outcomes and raise spec.outcomesDropped by as many (kubectl journey outcome does), or wait until the Session has processed the pending ones"
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec", "outcomes").Index(i), msg)}
}
