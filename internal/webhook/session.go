package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

var (
	sessionGK       = schema.GroupKind{Group: flowv1.GroupVersion.Group, Kind: "Session"}
	sessionResource = flowv1.GroupVersion.WithResource("sessions").GroupResource()
	approvalsPath   = field.NewPath("spec", "approvals")
)

// sessionDefaulter stamps new approvals with the requesting user and the time.
type sessionDefaulter struct {
	clock clock.PassiveClock
}

// Default stamps every approval and intervention at an index the old object did not
// have (all of them on create), and who asked for an erasure (the forget-by
// annotation) when the update marks the Session to erase. One that already names someone else is refused here,
// not overwritten: a forged approval or intervention must fail loudly.
func (d *sessionDefaulter) Default(ctx context.Context, s *flowv1.Session) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	old, err := oldSession(req)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if errs := stampForget(old, s, req.UserInfo.Username); len(errs) > 0 {
		logf.FromContext(ctx).Info("Denied forged erasure request", "session", req.Namespace+"/"+req.Name, "user", req.UserInfo.Username)
		return apierrors.NewForbidden(sessionResource, s.Name, errs.ToAggregate())
	}
	if errs := stampInterventions(&old.Spec, &s.Spec, req.UserInfo.Username); len(errs) > 0 {
		logf.FromContext(ctx).Info("Denied forged intervention", "session", req.Namespace+"/"+req.Name, "user", req.UserInfo.Username)
		return apierrors.NewForbidden(sessionResource, s.Name, errs.ToAggregate())
	}
	from := newApprovalsFrom(&old.Spec, &s.Spec)
	if from >= len(s.Spec.Approvals) {
		return nil
	}
	user := req.UserInfo.Username
	now := metav1.NewTime(d.clock.Now().UTC().Truncate(time.Second))
	stamped := slices.Clone(s.Spec.Approvals)
	for i := from; i < len(stamped); i++ {
		if stamped[i].By == "" {
			stamped[i].By = user
		}
		stamped[i].At = &now
	}
	// An empty by is the webhook's to fill; any other name must be the requester's.
	if errs := checkForgery(stamped, from, user); len(errs) > 0 {
		logf.FromContext(ctx).Info("Denied forged approval", "session", req.Namespace+"/"+req.Name, "user", user)
		return apierrors.NewForbidden(sessionResource, s.Name, errs.ToAggregate())
	}
	s.Spec.Approvals = stamped
	return nil
}

// sessionValidator checks what the CRD schema cannot: who sent an approval, whether
// its decision waits for one, and whether the decision's approvers include the sender.
type sessionValidator struct {
	approvers approverLookup
}

// approverLookup finds who may approve a decision of a Session. restricted is false
// when the decision lists no approvers (any user allowed to patch the Session may).
type approverLookup interface {
	approvers(ctx context.Context, s *flowv1.Session, d *flowv1.DecisionRecord) (a flowv1.Approvers, restricted bool, err error)
	// pathway returns the spec of the Session's pathway with local name local; a
	// *noPathwayError when its journey revision has none.
	pathway(ctx context.Context, s *flowv1.Session, local string) (*flowv1.PathwaySpec, error)
}

// ValidateCreate checks the approvals of a new Session: a new Session has no decision
// waiting, so it cannot carry approvals.
func (v *sessionValidator) ValidateCreate(ctx context.Context, s *flowv1.Session) (admission.Warnings, error) {
	return nil, v.validate(ctx, &flowv1.Session{}, s)
}

// ValidateUpdate checks that sent entries are unchanged and that new approvals are
// genuine and allowed.
func (v *sessionValidator) ValidateUpdate(ctx context.Context, old, s *flowv1.Session) (admission.Warnings, error) {
	return nil, v.validate(ctx, old, s)
}

// ValidateDelete allows deletes: the webhook is not registered for them.
func (v *sessionValidator) ValidateDelete(context.Context, *flowv1.Session) (admission.Warnings, error) {
	return nil, nil
}

func (v *sessionValidator) validate(ctx context.Context, old, s *flowv1.Session) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if errs := checkAppendOnly(&old.Spec, &s.Spec); len(errs) > 0 {
		return apierrors.NewInvalid(sessionGK, s.Name, errs)
	}
	if errs := checkLimits(old, s); len(errs) > 0 {
		return apierrors.NewForbidden(sessionResource, s.Name, errs.ToAggregate())
	}
	if errs := checkForgetForgery(old, s, req.UserInfo.Username); len(errs) > 0 {
		logf.FromContext(ctx).Info("Denied forged erasure request", "session", req.Namespace+"/"+req.Name, "user", req.UserInfo.Username)
		return apierrors.NewForbidden(sessionResource, s.Name, errs.ToAggregate())
	}
	if errs := checkInterventionForgery(s.Spec.Interventions, newInterventionsFrom(&old.Spec, &s.Spec), req.UserInfo.Username); len(errs) > 0 {
		logf.FromContext(ctx).Info("Denied forged intervention", "session", req.Namespace+"/"+req.Name, "user", req.UserInfo.Username)
		return apierrors.NewForbidden(sessionResource, s.Name, errs.ToAggregate())
	}
	if errs := checkInterventions(ctx, v.approvers, old, s); len(errs) > 0 {
		return apierrors.NewInvalid(sessionGK, s.Name, errs)
	}
	from := newApprovalsFrom(&old.Spec, &s.Spec)
	if from >= len(s.Spec.Approvals) {
		return nil
	}
	user := req.UserInfo
	log := logf.FromContext(ctx).WithValues("session", req.Namespace+"/"+req.Name, "user", user.Username)
	if errs := checkForgery(s.Spec.Approvals, from, user.Username); len(errs) > 0 {
		log.Info("Denied forged approval")
		return apierrors.NewForbidden(sessionResource, s.Name, errs.ToAggregate())
	}
	// The status the request carries is the stored one (the status subresource owns
	// it), but read it from the old object so a create never brings its own.
	d := old.Status.PendingDecision()
	if errs := checkAgainstDecision(s, from, d); len(errs) > 0 {
		return apierrors.NewInvalid(sessionGK, s.Name, errs)
	}
	approvers, restricted, err := v.approvers.approvers(ctx, old, d)
	if err != nil {
		log.Error(err, "Cannot resolve approvers", "decision", d.ID)
		return apierrors.NewForbidden(sessionResource, s.Name,
			fmt.Errorf("cannot check who may approve decision %s: %w", d.ID, err))
	}
	if !restricted {
		return nil
	}
	if errs := checkApprovers(s.Spec.Approvals, from, user, approvers); len(errs) > 0 {
		log.Info("Denied approval by a user the decision's approvers do not list", "decision", d.ID)
		return apierrors.NewForbidden(sessionResource, s.Name, errs.ToAggregate())
	}
	return nil
}

// oldSession decodes the request's old object; a create has none (an empty Session).
func oldSession(req admission.Request) (*flowv1.Session, error) {
	old := &flowv1.Session{}
	if req.Operation != admissionv1.Update || len(req.OldObject.Raw) == 0 {
		return old, nil
	}
	if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
		return nil, fmt.Errorf("decoding the old Session: %w", err)
	}
	return old, nil
}

// checkAppendOnly re-checks what the CRD's CEL rules say about messages, outcomes and
// approvals: entries already sent cannot be removed, changed or moved. The schema
// should have refused such an update already; the webhook makes sure, whatever CRD
// version is installed.
func checkAppendOnly(old, s *flowv1.SessionSpec) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, prefixDroppable(field.NewPath("spec"), "messages", old.Messages, s.Messages, old.MessagesDropped, s.MessagesDropped)...)
	errs = append(errs, prefixDroppable(field.NewPath("spec"), "outcomes", old.Outcomes, s.Outcomes, old.OutcomesDropped, s.OutcomesDropped)...)
	errs = append(errs, prefixDroppable(field.NewPath("spec"), "approvals", old.Approvals, s.Approvals, old.ApprovalsDropped, s.ApprovalsDropped)...)
	errs = append(errs, prefixDroppable(field.NewPath("spec"), "interventions", old.Interventions, s.Interventions, old.InterventionsDropped, s.InterventionsDropped)...)
	return errs
}

func appendOnly[T any](path *field.Path, what string, old, s []T) field.ErrorList {
	if len(s) < len(old) {
		return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
			"%s are append-only: %d of the %d already sent would be removed", what, len(old)-len(s), len(old)))}
	}
	var errs field.ErrorList
	for i := range old {
		if !equality.Semantic.DeepEqual(old[i], s[i]) {
			errs = append(errs, field.Forbidden(path.Index(i), fmt.Sprintf(
				"%s are append-only: an entry already sent cannot change or move; append a new one at the end", what)))
		}
	}
	return errs
}

// prefixDroppable checks spec.<what> (messages, outcomes or approvals) like
// appendOnly, except that a processed prefix may be dropped in the update that raises
// spec.<what>Dropped by as many (that the dropped entries were processed is the CRD's
// rule: the webhook sees the status the request carries, not the stored one).
func prefixDroppable[T any](spec *field.Path, what string, old, s []T, oldDropped, dropped int32) field.ErrorList {
	counter := spec.Child(what + "Dropped")
	drop := int(dropped) - int(oldDropped)
	switch {
	case drop < 0:
		return field.ErrorList{field.Forbidden(counter, fmt.Sprintf("%sDropped cannot decrease: dropped %s cannot come back", what, what))}
	case drop > len(old):
		return field.ErrorList{field.Forbidden(counter, fmt.Sprintf(
			"%sDropped grows by %d but spec.%s held only %d to drop", what, drop, what, len(old)))}
	}
	return appendOnly(spec.Child(what), what, old[drop:], s)
}

// newApprovalsFrom is the index in s.Approvals of the first approval the update adds:
// the ones before it were in old, less those the update drops from the front.
func newApprovalsFrom(old, s *flowv1.SessionSpec) int {
	return max(len(old.Approvals)-max(int(s.ApprovalsDropped-old.ApprovalsDropped), 0), 0)
}

// checkForgery refuses new approvals that name someone other than the requester.
// An empty by is refused too: the mutating webhook stamps it, so an empty one means
// the request bypassed it.
func checkForgery(approvals []flowv1.Approval, from int, user string) field.ErrorList {
	var errs field.ErrorList
	for i := from; i < len(approvals); i++ {
		by := approvals[i].By
		switch {
		case user == "":
			errs = append(errs, field.Forbidden(approvalsPath.Index(i).Child("by"),
				"the request has no authenticated user to record as the approver"))
		case by == "":
			errs = append(errs, field.Forbidden(approvalsPath.Index(i).Child("by"),
				"is empty: the approver is stamped by the mutating webhook, which did not run"))
		case by != user:
			errs = append(errs, field.Forbidden(approvalsPath.Index(i).Child("by"), fmt.Sprintf(
				"approval forged: by is %q but the request was made by %q; leave by empty, it is set to the authenticated user",
				by, user)))
		}
	}
	return errs
}

// checkAgainstDecision checks new approvals against the decision the Session waits
// on: they must name it, only once, and a destination must be one it allows.
// Approving anything else is refused, so nobody can pre-approve a decision that does
// not exist yet (and so escape its approvers).
func checkAgainstDecision(s *flowv1.Session, from int, d *flowv1.DecisionRecord) field.ErrorList {
	var errs field.ErrorList
	for i := from; i < len(s.Spec.Approvals); i++ {
		a := s.Spec.Approvals[i]
		p := approvalsPath.Index(i)
		if d == nil {
			errs = append(errs, field.Invalid(p.Child("decisionID"), a.DecisionID,
				fmt.Sprintf("session/%s has no decision waiting for approval%s", s.Name, lastDecisionNote(s))))
			continue
		}
		if a.DecisionID != d.ID {
			errs = append(errs, field.Invalid(p.Child("decisionID"), a.DecisionID, fmt.Sprintf(
				"decision %q is not pending: session/%s waits on decision %s", a.DecisionID, s.Name, d.ID)))
			continue
		}
		if j := s.Spec.ApprovalIndex(d.ID); j < i {
			errs = append(errs, field.Duplicate(p.Child("decisionID"), fmt.Sprintf(
				"decision %s is already answered by spec.approvals[%d] (by %s); the first answer counts",
				d.ID, j, orUnknown(s.Spec.Approvals[j].By))))
			continue
		}
		if a.Approve == nil {
			errs = append(errs, field.Required(p.Child("approve"),
				"say true to accept the decision or false to reject it; an approval without it is not read as a rejection"))
			continue
		}
		if !a.Approves() && a.Destination != "" {
			errs = append(errs, field.Invalid(p.Child("destination"), a.Destination,
				"a rejection (approve: false) has no destination"))
			continue
		}
		if dest := string(a.Destination); dest != "" && !slices.Contains(d.AllowedDestinations, dest) {
			errs = append(errs, field.NotSupported(p.Child("destination"), dest, d.AllowedDestinations))
		}
	}
	return errs
}

// checkApprovers refuses new approvals by a user whom the decision's approvers do not
// list, by name or through one of the user's groups. Approvers that list nobody let
// nobody approve.
func checkApprovers(approvals []flowv1.Approval, from int, user authenticationv1.UserInfo, a flowv1.Approvers) field.ErrorList {
	if slices.Contains(a.Users, user.Username) || slices.ContainsFunc(user.Groups, func(g string) bool { return slices.Contains(a.Groups, g) }) {
		return nil
	}
	var errs field.ErrorList
	for i := from; i < len(approvals); i++ {
		errs = append(errs, field.Forbidden(approvalsPath.Index(i), fmt.Sprintf(
			"user %q may not answer decision %s: its approvers are %s", user.Username, approvals[i].DecisionID, describe(a))))
	}
	return errs
}

func describe(a flowv1.Approvers) string {
	var parts []string
	if len(a.Users) > 0 {
		parts = append(parts, "users "+strings.Join(a.Users, ", "))
	}
	if len(a.Groups) > 0 {
		parts = append(parts, "groups "+strings.Join(a.Groups, ", "))
	}
	if len(parts) == 0 {
		return "an empty list, so nobody may"
	}
	return strings.Join(parts, " and ")
}

func lastDecisionNote(s *flowv1.Session) string {
	// The new object of an update carries the stored status.
	if d := s.Status.LastDecision; d != nil && d.ID != "" {
		return fmt.Sprintf(" (its last decision %s is %s)", d.ID, orUnknown(string(d.State)))
	}
	if s.Status.Phase != "" {
		return fmt.Sprintf(" (phase %s)", s.Status.Phase)
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
