package engine

import (
	"fmt"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// awaiting reports whether the Session waits on a person (AwaitingApproval or
// Escalated): approvals are processed, messages and outcomes wait.
func (r *run) awaiting() bool {
	return r.st.Phase.AwaitsApproval()
}

// approvalsPending reports whether spec.approvals has entries not processed yet.
func (r *run) approvalsPending() bool {
	return r.st.ProcessedApprovals < r.spec.ApprovalCount()
}

// approval processes the next entry of spec.approvals: it approves or rejects the
// decision the Session waits on, or is denied (counted as processed and recorded as a
// PolicyDenied turn).
func (r *run) approval() {
	st := r.st
	a := r.nextApproval()
	defer r.recordApproval(a, st.ProcessedApprovals, st.CurrentPathway)
	var prevOutputs map[string]any
	if st.LastTurn != nil && st.LastTurn.Outputs != nil {
		prevOutputs, _ = decodeJSON(st.LastTurn.Outputs)
	}
	st.LastTurn = &flowv1.TurnOutcome{Trigger: flowv1.TurnApproval, Pathway: st.CurrentPathway}
	ld := st.PendingDecision()
	if !r.awaiting() || ld == nil || a.DecisionID != ld.ID {
		r.denyApproval(fmt.Sprintf("approval for decision %q ignored: no decision with that id is waiting", a.DecisionID))
		return
	}
	d := r.decisionSpec(ld)
	if d != nil && d.Approvers != nil && len(d.Approvers.Users) > 0 && len(d.Approvers.Groups) == 0 && !contains(d.Approvers.Users, a.By) {
		r.denyApproval(fmt.Sprintf("%q may not approve decision %s", a.By, ld.ID))
		return
	}
	if !a.Approves() {
		r.reject(ld, a, d, flowv1.SourceApproval)
		return
	}
	r.approve(ld, a, d != nil && d.Messaging, prevOutputs)
}

// denyApproval records an approval that is not applied.
func (r *run) denyApproval(msg string) {
	r.st.LastTurn.FinishReason = flowv1.FinishPolicyDenied
	r.addFailure(flowv1.Failure{Source: flowv1.FailurePolicy, Component: "approval", Kind: flowv1.FailurePolicyKind, Message: msg})
}

// approverReason is why an approval moved the Session: "<verb> by <who>[: <reason>]".
func approverReason(verb string, a flowv1.Approval) string {
	by := a.By
	if by == "" {
		by = "an unnamed approver"
	}
	reason := verb + " by " + by
	if a.Reason != "" {
		reason += ": " + a.Reason
	}
	return reason
}

// reject sends the work back: to the decision's onRejected, else to the pathway the
// Session was in before the deciding one, else the deciding pathway runs again. The
// pathway runs at once with the rejection as feedback, so the same question is never
// asked unchanged. source is who rejected: an Approval, or the approval Timeout.
func (r *run) reject(ld *flowv1.DecisionRecord, a flowv1.Approval, d *flowv1.Decision, source flowv1.DecisionSource) {
	st := r.st
	to := r.rejectedTo(ld, d)
	rec := ld.DeepCopy()
	rec.State = flowv1.DecisionRejected
	rec.Source = source
	rec.To = to
	rec.Reasoning = truncate.Bytes(approverReason("rejected", a), 1024, "")
	st.Phase = flowv1.PhaseRunning
	st.LastTurn.Transition = ld.Transition
	if to == st.CurrentPathway {
		rec.Action = flowv1.ActionRetry
		st.LastDecision = rec
		st.PathwayTurns = 0
		st.Transitions++
		r.appendHistory(flowv1.HistoryEntry{Time: r.now, Step: r.step, From: st.CurrentPathway, To: st.CurrentPathway,
			Action: flowv1.ActionRetry, Source: source, Transition: ld.Transition, Confidence: ld.Confidence,
			Iteration: st.Iteration, Reason: rec.Reasoning})
	} else {
		rec.Action = flowv1.ActionAdvance
		r.move(move{to: to, action: flowv1.ActionAdvance, source: source, transition: ld.Transition,
			confidence: ld.Confidence, reasoning: rec.Reasoning, record: rec})
	}
	if st.LastTurn.FinishReason == "" {
		st.LastTurn.FinishReason = flowv1.FinishSuccess
	}
}

// rejectedTo is where a rejected decision goes: onRejected, else the pathway the
// Session came from into the deciding one (the last move into it from elsewhere),
// else the deciding pathway.
func (r *run) rejectedTo(ld *flowv1.DecisionRecord, d *flowv1.Decision) string {
	if d != nil && d.OnRejected != "" {
		if _, ok := r.snap.pathways[string(d.OnRejected)]; ok {
			return string(d.OnRejected)
		}
	}
	h := r.st.History
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].To == ld.From && h[i].From != "" && h[i].From != ld.From {
			return h[i].From
		}
	}
	return ld.From
}

// approve applies the decision the Session waits on: to its destination, or to the
// approval's destination when that is one of the allowed ones. messaging passes the
// deciding pathway's outputs on when the Session moves.
func (r *run) approve(ld *flowv1.DecisionRecord, a flowv1.Approval, messaging bool, outputs map[string]any) {
	st := r.st
	dest := ld.To
	if a.Destination != "" {
		if !contains(ld.AllowedDestinations, string(a.Destination)) {
			r.denyApproval(fmt.Sprintf("destination %q is not one of the decision's allowed destinations", a.Destination))
			return
		}
		dest = string(a.Destination)
	}
	if _, ok := r.snap.pathways[dest]; !ok {
		r.denyApproval(fmt.Sprintf("approval of decision %s needs a destination", ld.ID))
		return
	}
	// The decision's action holds for its own destination; another one (or none) takes
	// the default, and a JumpBack stays a JumpBack.
	action := ld.Action
	if action != flowv1.ActionJumpBack && (dest != ld.To || action == "") {
		action = defaultAction("", dest, ld.From)
	}
	rec := ld.DeepCopy()
	rec.State = flowv1.DecisionApproved
	rec.Source = flowv1.SourceApproval
	rec.To = dest
	rec.Action = action
	st.Phase = flowv1.PhaseRunning
	st.LastTurn.Transition = ld.Transition
	if r.move(move{to: dest, action: action, source: flowv1.SourceApproval, transition: ld.Transition, confidence: ld.Confidence,
		reasoning: approverReason("approved", a), record: rec}) == moved && messaging {
		r.passOutputs(ld.From, outputs)
	}
	if st.LastTurn.FinishReason == "" {
		st.LastTurn.FinishReason = flowv1.FinishSuccess
	}
}

// decisionSpec finds the Decision a decision record came from.
func (r *run) decisionSpec(ld *flowv1.DecisionRecord) *flowv1.Decision {
	p := r.snap.pathways[ld.From]
	if p == nil {
		return nil
	}
	if t := p.Transitions.Named(ld.Transition); t != nil {
		return t.Decision
	}
	return nil
}

// nextApproval takes the next pending approval (approvalsPending said there is one) and
// counts it as processed. Only an update that bypassed the Session's validation drops
// an approval that was not processed; it can no longer be read, so it is skipped.
func (r *run) nextApproval() flowv1.Approval {
	st := r.st
	st.ProcessedApprovals = max(st.ProcessedApprovals, r.spec.ApprovalsDropped)
	a, _ := r.spec.ApprovalAt(st.ProcessedApprovals)
	st.ProcessedApprovals++
	return *a
}
