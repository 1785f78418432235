package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

var interventionsPath = field.NewPath("spec", "interventions")

// newInterventionsFrom is the index in s.Interventions of the first intervention the
// update adds: the ones before it were in old, less those the update drops.
func newInterventionsFrom(old, s *flowv1.SessionSpec) int {
	return max(len(old.Interventions)-max(int(s.InterventionsDropped-old.InterventionsDropped), 0), 0)
}

// stampInterventions sets by on the new interventions to the requesting user; a by
// naming someone else is refused, not overwritten, as for approvals.
func stampInterventions(old, s *flowv1.SessionSpec, user string) field.ErrorList {
	from := newInterventionsFrom(old, s)
	for i := from; i < len(s.Interventions); i++ {
		if s.Interventions[i].By == "" {
			s.Interventions[i].By = user
		}
	}
	return checkInterventionForgery(s.Interventions, from, user)
}

// checkInterventionForgery refuses new interventions that name someone other than the
// requester, or no one (the mutating webhook did not run).
func checkInterventionForgery(ivs []flowv1.Intervention, from int, user string) field.ErrorList {
	var errs field.ErrorList
	for i := from; i < len(ivs); i++ {
		p := interventionsPath.Index(i).Child("by")
		switch by := ivs[i].By; {
		case user == "":
			errs = append(errs, field.Forbidden(p, "the request has no authenticated user to record as who intervened"))
		case by == "":
			errs = append(errs, field.Forbidden(p, "is empty: who intervened is stamped by the mutating webhook, which did not run"))
		case by != user:
			errs = append(errs, field.Forbidden(p, fmt.Sprintf(
				"intervention forged: by is %q but the request was made by %q; leave by empty, it is set to the authenticated user", by, user)))
		}
	}
	return errs
}

// checkInterventions refuses new interventions that cannot apply, as far as the
// stored object tells: any on a Completed or Cancelled Session, a Goto to a pathway
// the Session's journey revision does not have, and, when no earlier intervention is
// still to be applied (it could change the Session first), a Resume when nothing
// stops the Session and a Rewind to a step that is not before the current one or no
// longer kept in status.history. The engine checks again when it applies them.
func checkInterventions(ctx context.Context, paths approverLookup, old, s *flowv1.Session) field.ErrorList {
	from := newInterventionsFrom(&old.Spec, &s.Spec)
	st := &old.Status // the stored status: a create has none
	errs := checkInterventionsSize(s.Spec.Interventions, from)
	for i := from; i < len(s.Spec.Interventions); i++ {
		iv := s.Spec.Interventions[i]
		p := interventionsPath.Index(i)
		if st.Phase == flowv1.PhaseCompleted || st.Phase == flowv1.PhaseCancelled {
			errs = append(errs, field.Invalid(p.Child("action"), iv.Action, fmt.Sprintf(
				"session/%s is %s, which is final: no intervention applies to it", s.Name, st.Phase)))
			continue
		}
		if iv.Action == flowv1.InterventionUpgrade {
			if j := s.Spec.JourneyRef.Name; !strings.HasPrefix(iv.Revision, j+"-") {
				errs = append(errs, field.Invalid(p.Child("revision"), iv.Revision, fmt.Sprintf(
					"is not a revision of journey %s: its revisions are named %s-<hash> (kubectl get journey %s -o wide shows the latest and the ready one)", j, j, j)))
			}
			continue
		}
		if iv.Action == flowv1.InterventionGoto {
			if err := gotoTarget(ctx, paths, old, string(iv.Pathway)); err != nil {
				errs = append(errs, field.Invalid(p.Child("pathway"), iv.Pathway, err.Error()))
			}
			continue
		}
		// Only the first intervention to apply meets the stored status.
		if i > from || old.InterventionsPending() {
			continue
		}
		switch iv.Action {
		case flowv1.InterventionResume:
			if st.Phase != flowv1.PhaseFailed && !apimeta.IsStatusConditionTrue(st.Conditions, flowv1.ConditionStalled) {
				errs = append(errs, field.Invalid(p.Child("action"), iv.Action, fmt.Sprintf(
					"nothing stops session/%s (phase %s): Resume lifts a cap, loop prevention, the retry limit, a timeout or a failure",
					s.Name, orUnknown(string(st.Phase)))))
			}
		case flowv1.InterventionAnswer:
			c := st.TurnToolCall(iv.Call)
			if c == nil || (c.State != flowv1.ToolCallOutcomeUnknown && c.WaitingElicitation() == nil) {
				errs = append(errs, field.Invalid(p.Child("call"), iv.Call, fmt.Sprintf(
					"tool call %s of session/%s does not wait for an answer%s", iv.Call, s.Name, waitingCalls(st))))
				continue
			}
			if why := c.AnswerFits(iv.Outcome, iv.Content); why != "" {
				at := p.Child("outcome")
				if c.WaitingElicitation() != nil && iv.Outcome == flowv1.AnswerAccept {
					at = p.Child("content") // the form's fields
				}
				errs = append(errs, field.Invalid(at, iv.Outcome, why))
			}
		case flowv1.InterventionRewind:
			if iv.Step == nil {
				continue
			}
			n := int64(*iv.Step)
			if n >= st.Step {
				errs = append(errs, field.Invalid(p.Child("step"), n, fmt.Sprintf(
					"step %d is not before the current step %d of session/%s", n, st.Step, s.Name)))
				continue
			}
			if _, ok, kept := st.MoveAtOrBefore(n); !ok && !kept {
				errs = append(errs, field.Invalid(p.Child("step"), n, fmt.Sprintf(
					"step %d is no longer kept in status.history of session/%s", n, s.Name)))
			}
		}
	}
	return errs
}

// checkInterventionsSize refuses an update whose spec.interventions would hold more
// than flowv1.MaxInterventionsBytes with the answers' content counted (the CRD
// counts the strings, which is all it can measure).
func checkInterventionsSize(ivs []flowv1.Intervention, from int) field.ErrorList {
	if from >= len(ivs) {
		return nil
	}
	n := 0
	for i := range ivs {
		n += ivs[i].Bytes()
	}
	if n <= flowv1.MaxInterventionsBytes {
		return nil
	}
	return field.ErrorList{field.Invalid(interventionsPath, n, fmt.Sprintf("spec.interventions would hold %d bytes (ids, names, reasons, feedback, answers and their content, and %d bytes an intervention), more than %d: drop the processed interventions from the front of spec.interventions and raise spec.interventionsDropped by as many",
		n, flowv1.InterventionOverheadBytes, flowv1.MaxInterventionsBytes))}
}

// waitingCalls names the tool calls of the turn in progress that wait for an answer.
func waitingCalls(st *flowv1.SessionStatus) string {
	var ids []string
	for c := range st.AnswerableToolCalls() {
		ids = append(ids, c.ID)
	}
	if len(ids) == 0 {
		return " (no tool call waits for one)"
	}
	return " (waiting: " + strings.Join(ids, ", ") + ")"
}

// gotoTarget says why pathway is not one the Session can go to: its journey revision
// (or, before it started, its Journey) has no such pathway. A revision that cannot be
// read does not refuse the Goto: the engine checks it against the revision it runs.
func gotoTarget(ctx context.Context, paths approverLookup, s *flowv1.Session, pathway string) error {
	_, err := paths.pathway(ctx, s, pathway)
	var missing *noPathwayError
	if errors.As(err, &missing) {
		return fmt.Errorf("session/%s cannot go to pathway %q: %w", s.Name, pathway, err)
	}
	if err != nil {
		logf.FromContext(ctx).Info("Cannot check a Goto's pathway; the engine will", "session", s.Namespace+"/"+s.Name, "error", err.Error())
	}
	return nil
}
