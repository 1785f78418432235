// Package webhook is the admission webhooks: for Sessions, and for Journeys and
// Pathways. For Sessions it makes spec.approvals
// trustworthy: the mutating webhook stamps every new approval with the user the API
// server authenticated and the time, and the validating webhook rejects forged
// approvals, edits to entries already sent, approvals of anything but the decision the
// Session waits on, and approvals by anyone a decision's approvers do not list. It does
// the same for spec.interventions (stamped by, forgeries refused) and refuses those
// the stored Session shows cannot apply. A third
// webhook checks new External outcomes: spec.outcomes bounded in bytes, and each for an
// External pathway of the Session's Journey (an outcome for any other would never be
// read).
//
// The Journey and Pathway webhooks refuse what the Journey and Pathway controllers
// would report invalid and the namespace's Pathways already show, with the
// controllers' own messages (Checks); see docs/operations.md, "Changing a journey".
//
// See docs/security.md for the rules and the tests that prove them.
package webhook

import (
	"errors"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Paths the webhooks are served on (kubebuilder's naming).
const (
	MutatePath   = "/mutate-flow-journey-dev-v1alpha1-session"
	ValidatePath = "/validate-flow-journey-dev-v1alpha1-session"
)

// Options configure the webhooks.
type Options struct {
	// Clock stamps approvals' at; nil means the real clock.
	Clock clock.PassiveClock
	// Reader reads the ControllerRevisions, Journeys and Pathways that say who may
	// approve a decision. Nil means the manager's uncached API reader: approvals are
	// rare, and an uncached read needs only the get verb and no informer.
	Reader client.Reader
	// Checks are the checks the Journey and Pathway webhooks run: the controllers'
	// own (controller.AdmissionChecks). Required.
	Checks Checks
}

// The webhook reads what says who may approve a decision: the Session's pinned
// ControllerRevision, or the live Journey and Pathway when none is pinned yet.
// +kubebuilder:rbac:groups=flow.journey.dev,resources=journeys;pathways,verbs=get
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get

// Both webhooks see only the Session creates and updates that add or change approvals
// or interventions, or change the annotations of a Session marked to erase
// (matchConditions), and the validating one the updates that set or change
// spec.limits: a message, an outcome or a suspend never waits on the manager, so
// an outage of the webhook server does not stop users from talking to their Sessions.
// The append-only rules for messages and outcomes are the CRD's own validation rules.
// +kubebuilder:webhook:path=/mutate-flow-journey-dev-v1alpha1-session,mutating=true,failurePolicy=fail,sideEffects=None,groups=flow.journey.dev,resources=sessions,verbs=create;update,versions=v1alpha1,name=msession-v1alpha1.flow.journey.dev,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded,timeoutSeconds=10,patch=`{"matchConditions":[{"name":"approvals-interventions-or-erasure-changed","expression":"(has(object.spec.approvals) && size(object.spec.approvals) > 0 && (request.operation == 'CREATE' || !has(oldObject.spec.approvals) || object.spec.approvals != oldObject.spec.approvals)) || (has(object.spec.interventions) && size(object.spec.interventions) > 0 && (request.operation == 'CREATE' || !has(oldObject.spec.interventions) || object.spec.interventions != oldObject.spec.interventions)) || (has(object.metadata.annotations) && ('flow.journey.dev/forget' in object.metadata.annotations || 'flow.journey.dev/forget-by' in object.metadata.annotations) && (request.operation == 'CREATE' || !has(oldObject.metadata.annotations) || object.metadata.annotations != oldObject.metadata.annotations))"}]}`
// +kubebuilder:webhook:path=/validate-flow-journey-dev-v1alpha1-session,mutating=false,failurePolicy=fail,sideEffects=None,groups=flow.journey.dev,resources=sessions,verbs=create;update,versions=v1alpha1,name=vsession-v1alpha1.flow.journey.dev,admissionReviewVersions=v1,timeoutSeconds=10,patch=`{"matchConditions":[{"name":"approvals-interventions-limits-or-erasure-changed","expression":"(has(object.spec.approvals) && size(object.spec.approvals) > 0 && (request.operation == 'CREATE' || !has(oldObject.spec.approvals) || object.spec.approvals != oldObject.spec.approvals)) || (has(object.spec.interventions) && size(object.spec.interventions) > 0 && (request.operation == 'CREATE' || !has(oldObject.spec.interventions) || object.spec.interventions != oldObject.spec.interventions)) || (has(object.spec.limits) && request.operation == 'UPDATE' && (!has(oldObject.spec.limits) || object.spec.limits != oldObject.spec.limits)) || (has(object.metadata.annotations) && ('flow.journey.dev/forget' in object.metadata.annotations || 'flow.journey.dev/forget-by' in object.metadata.annotations) && (request.operation == 'CREATE' || !has(oldObject.metadata.annotations) || object.metadata.annotations != oldObject.metadata.annotations))"}]}`

// SetupWebhooks registers the Session mutating and validating webhooks, and the
// Journey and Pathway validating webhooks, with the manager's webhook server.
func SetupWebhooks(mgr ctrl.Manager, opts Options) error {
	if opts.Checks.Journey == nil || opts.Checks.Pathway == nil {
		return errors.New("webhook.Options.Checks is required: pass controller.AdmissionChecks()")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Reader == nil {
		opts.Reader = mgr.GetAPIReader()
	}
	pathways := &approverResolver{reader: opts.Reader}
	srv := mgr.GetWebhookServer()
	srv.Register(OutcomesPath, admission.WithValidator[*flowv1.Session](mgr.GetScheme(), outcomesValidator{pathways: pathways}))
	srv.Register(JourneyPath, admission.WithValidator[*flowv1.Journey](mgr.GetScheme(), journeyValidator{reader: opts.Reader, checks: opts.Checks}))
	srv.Register(PathwayPath, admission.WithValidator[*flowv1.Pathway](mgr.GetScheme(), pathwayValidator{reader: opts.Reader, checks: opts.Checks}))
	return ctrl.NewWebhookManagedBy(mgr, &flowv1.Session{}).
		WithDefaulter(&sessionDefaulter{clock: opts.Clock}).
		WithValidator(&sessionValidator{approvers: pathways}).
		Complete()
}
