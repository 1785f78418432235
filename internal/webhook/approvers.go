package webhook

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/revision/revdata"
)

// approverResolver finds a decision's approvers in the Pathway spec the decision was
// made with:
//
//  1. the Session's pinned revision (status.journeyRevision): the ControllerRevision
//     holding the Journey spec and the resolved Pathway specs the Session runs on, so
//     editing a Pathway never changes who may approve a running Session's decision;
//  2. when no revision is pinned yet, the live Journey (spec.journeyRef) and the
//     Pathway object its entry for status.lastDecision.from references.
//
// In that Pathway, status.lastDecision.transition names the outcome transition
// (onSuccess, onFailure, onPartialSuccess, onUnclear) whose decision was made. If it
// names none of them, the union of the approvers of all the pathway's decisions
// applies, so an unexpected name never lifts a restriction. Anything that cannot be
// read is an error, and the approval is refused (fail closed).
type approverResolver struct {
	reader client.Reader
}

func (r *approverResolver) approvers(ctx context.Context, s *flowv1.Session, d *flowv1.DecisionRecord) (flowv1.Approvers, bool, error) {
	if d.From == "" {
		return flowv1.Approvers{}, false, errors.New("the decision names no pathway (status.lastDecision.from is empty)")
	}
	p, err := r.pathway(ctx, s, d.From)
	if err != nil {
		return flowv1.Approvers{}, false, err
	}
	a, restricted := decisionApprovers(p, d.Transition)
	return a, restricted, nil
}

// pathway returns the spec of the pathway with local name local, as the Session sees it.
func (r *approverResolver) pathway(ctx context.Context, s *flowv1.Session, local string) (*flowv1.PathwaySpec, error) {
	if rev := s.Status.JourneyRevision; rev != "" {
		raw, err := revdata.Read(ctx, r.reader, s.Namespace, rev)
		if err != nil {
			return nil, fmt.Errorf("reading the Session's revision %s: %w", rev, err)
		}
		data, err := revdata.Decode(rev, raw)
		if err != nil {
			return nil, fmt.Errorf("decoding %w", err)
		}
		p := data.Pathways[local]
		if p == nil {
			return nil, &noPathwayError{in: "revision " + rev, pathway: local}
		}
		return p, nil
	}
	var j flowv1.Journey
	if err := r.reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.JourneyRef.Name}, &j); err != nil {
		return nil, fmt.Errorf("reading Journey %s: %w", s.Spec.JourneyRef.Name, err)
	}
	for _, e := range j.Spec.Pathways {
		if string(e.Name) != local {
			continue
		}
		var p flowv1.Pathway
		if err := r.reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: e.PathwayRef}, &p); err != nil {
			return nil, fmt.Errorf("reading Pathway %s: %w", e.PathwayRef, err)
		}
		return &p.Spec, nil
	}
	return nil, &noPathwayError{in: "journey " + j.Name, pathway: local}
}

// noPathwayError says that the Journey (or its revision) the Session runs on has no
// pathway of that name.
type noPathwayError struct{ in, pathway string }

func (e *noPathwayError) Error() string { return fmt.Sprintf("%s has no pathway %q", e.in, e.pathway) }

// decisionApprovers returns the approvers of the decision behind transition in p.
func decisionApprovers(p *flowv1.PathwaySpec, transition string) (flowv1.Approvers, bool) {
	if ot := p.Transitions.Named(transition); ot != nil && ot.Decision != nil {
		if a := ot.Decision.Approvers; a != nil {
			return *a, true
		}
		return flowv1.Approvers{}, false
	}
	var union flowv1.Approvers
	restricted := false
	for _, ot := range p.Transitions.All() {
		if ot.Decision == nil || ot.Decision.Approvers == nil {
			continue
		}
		restricted = true
		union.Users = append(union.Users, ot.Decision.Approvers.Users...)
		union.Groups = append(union.Groups, ot.Decision.Approvers.Groups...)
	}
	return union, restricted
}
