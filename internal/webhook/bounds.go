package webhook

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// OutcomesPath serves the webhook that checks new outcomes: spec.outcomes bounded in
// bytes, and each new outcome for an External pathway of the Session's Journey. It
// sees only the updates that add outcomes (matchConditions) and fails open
// (failurePolicy Ignore): while the manager is down outcomes are taken unchecked
// rather than refused, as messages are, and the CRD still bounds them in count.
const OutcomesPath = "/validate-flow-journey-dev-v1alpha1-session-outcomes"

// +kubebuilder:webhook:path=/validate-flow-journey-dev-v1alpha1-session-outcomes,mutating=false,failurePolicy=ignore,sideEffects=None,groups=flow.journey.dev,resources=sessions,verbs=create;update,versions=v1alpha1,name=vsessionoutcomes-v1alpha1.flow.journey.dev,admissionReviewVersions=v1,timeoutSeconds=5,patch=`{"matchConditions":[{"name":"outcomes-added","expression":"has(object.spec.outcomes) && size(object.spec.outcomes) > 0 && (request.operation == 'CREATE' || !has(oldObject.spec.outcomes) || object.spec.outcomes != oldObject.spec.outcomes)"}]}`

// outcomesValidator refuses a Session create or update whose spec.outcomes would hold
// more than flowv1.MaxOutcomesBytes, or that adds an outcome the Session would never
// read: for a pathway its Journey does not have, or for one its agents run.
type outcomesValidator struct {
	pathways pathwayLookup
}

// pathwayLookup finds the spec of a pathway of the Journey a Session runs on (its
// pinned revision, else the live Journey); a *noPathwayError when there is none.
type pathwayLookup interface {
	pathway(ctx context.Context, s *flowv1.Session, local string) (*flowv1.PathwaySpec, error)
}

// ValidateCreate checks the outcomes of a new Session.
func (v outcomesValidator) ValidateCreate(ctx context.Context, s *flowv1.Session) (admission.Warnings, error) {
	return nil, v.check(ctx, &flowv1.Session{}, s)
}

// ValidateUpdate checks the outcomes an update adds.
func (v outcomesValidator) ValidateUpdate(ctx context.Context, old, s *flowv1.Session) (admission.Warnings, error) {
	return nil, v.check(ctx, old, s)
}

// ValidateDelete allows deletes: the webhook is not registered for them.
func (outcomesValidator) ValidateDelete(context.Context, *flowv1.Session) (admission.Warnings, error) {
	return nil, nil
}

func (v outcomesValidator) check(ctx context.Context, old, s *flowv1.Session) error {
	errs := checkOutcomesSize(&old.Spec, &s.Spec)
	if len(errs) == 0 && v.pathways != nil {
		errs = v.checkExecutors(ctx, old, s)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(sessionGK, s.Name, errs)
	}
	return nil
}

// checkExecutors refuses a new outcome for a pathway that is not External: the
// Session reads an outcome only while it waits in that External pathway, so an
// outcome for an Agent pathway, or for a pathway the Journey does not have, would be
// kept and never read. The pathway is looked up as the Session sees it: in its pinned
// revision (the old object's status: a create carries none), else in the live
// Journey. What cannot be read (no Journey yet, an API error) is let through, as
// the webhook's failurePolicy lets outcomes through while it is down.
func (v outcomesValidator) checkExecutors(ctx context.Context, old, s *flowv1.Session) field.ErrorList {
	from := max(len(old.Spec.Outcomes)-max(int(s.Spec.OutcomesDropped-old.Spec.OutcomesDropped), 0), 0)
	pinned := s.DeepCopy()
	pinned.Status = old.Status
	var errs field.ErrorList
	for i := from; i < len(s.Spec.Outcomes); i++ {
		name := string(s.Spec.Outcomes[i].Pathway)
		path := field.NewPath("spec", "outcomes").Index(i).Child("pathway")
		p, err := v.pathways.pathway(ctx, pinned, name)
		var missing *noPathwayError
		switch {
		case errors.As(err, &missing):
			errs = append(errs, field.Invalid(path, name, missing.Error()+": an outcome posted for it would never be read"))
		case err != nil:
			logf.FromContext(ctx).V(4).Info("Cannot check an outcome's pathway", "session", klog.KObj(s), "pathway", name, "error", err.Error())
		case p.Executor != flowv1.ExecutorExternal:
			errs = append(errs, field.Invalid(path, name, fmt.Sprintf(
				"pathway %s runs with executor %s: its agents give its results, and an outcome posted for it would never be read; outcomes are for External pathways",
				name, executorOf(p))))
		}
	}
	return errs
}

// executorOf is p's executor, Agent when unset (the CRD's default).
func executorOf(p *flowv1.PathwaySpec) flowv1.Executor {
	if p.Executor == "" {
		return flowv1.ExecutorAgent
	}
	return p.Executor
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
