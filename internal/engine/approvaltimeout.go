package engine

import (
	"fmt"
	"strings"
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// approvalPolicy is the approval timeout of what ld stands for: the tool's
// approvalTimeout for a tool call, the decision's approval for a decision; nil when
// there is none.
func (s *Snapshot) approvalPolicy(ld *flowv1.DecisionRecord) *flowv1.ApprovalTimeout {
	if name, ok := ld.ToolCall(); ok {
		if t, ok := s.tool(name); ok {
			return t.ApprovalTimeout
		}
		return nil
	}
	p := s.pathways[ld.From]
	if p == nil {
		return nil
	}
	if t := p.Transitions.Named(ld.Transition); t != nil && t.Decision != nil {
		return t.Decision.Approval
	}
	return nil
}

// approvalDeadline is when the approval the Session waits for times out: the time it
// began to wait plus its approval timeout. ok is false when the Session waits for no
// approval (Escalated waits on a person without a timeout) or the wait has none.
func (s *Snapshot) approvalDeadline(st *flowv1.SessionStatus) (at time.Time, policy *flowv1.ApprovalTimeout, ok bool) {
	ld := st.LastDecision
	if st.Phase != flowv1.PhaseAwaitingApproval || ld == nil || ld.State != flowv1.DecisionPending || ld.WaitingSince == nil {
		return time.Time{}, nil, false
	}
	policy = s.approvalPolicy(ld)
	if policy == nil || policy.Timeout.Duration <= 0 {
		return time.Time{}, nil, false
	}
	return ld.WaitingSince.Add(policy.Timeout.Duration), policy, true
}

// approvalExpired applies the approval timeout when it has passed and no approval
// waits to be processed (a person who answered, even late, goes first). It reports
// whether it applied.
func (r *run) approvalExpired() bool {
	at, policy, ok := r.snap.approvalDeadline(r.st)
	if !ok || !r.in.Now.After(at) || r.approvalsPending() {
		return false
	}
	why := fmt.Sprintf("no approval within %s", policy.Timeout.Duration)
	ld := r.st.LastDecision
	if _, ok := ld.ToolCall(); ok {
		r.expireToolApproval(ld, policy.OnTimeout, why)
		return true
	}
	r.st.LastTurn = &flowv1.TurnOutcome{Trigger: flowv1.TurnApproval, Pathway: r.st.CurrentPathway}
	if policy.OnTimeout == flowv1.ApprovalTimeoutEscalate {
		rec := ld.DeepCopy()
		rec.State, rec.Source = flowv1.DecisionEscalated, flowv1.SourceTimeout
		rec.Reasoning = truncate.Bytes(why+": escalated; "+ld.Reasoning, 1024, "")
		r.waitForApprover(rec, flowv1.PhaseEscalated, flowv1.FinishEscalated)
		return true
	}
	r.reject(ld, flowv1.Approval{By: "the system", Reason: why}, r.decisionSpec(ld), flowv1.SourceTimeout)
	return true
}

// expireToolApproval applies an approval timeout to the tool call ld stands for:
// Reject rejects it like a person would (the turn goes on with the rejection as the
// call's result; the tool is never called); Escalate leaves it waiting, Escalated.
func (r *run) expireToolApproval(ld *flowv1.DecisionRecord, onTimeout flowv1.ApprovalTimeoutAction, why string) {
	st := r.st
	var c *flowv1.ToolCallProgress
	if st.Turn != nil {
		for i := range st.Turn.ToolCalls {
			if st.Turn.ToolCalls[i].ID == ld.ID && st.Turn.ToolCalls[i].AwaitingApproval {
				c = &st.Turn.ToolCalls[i]
			}
		}
	}
	d := ld.DeepCopy()
	d.Source = flowv1.SourceTimeout
	if onTimeout == flowv1.ApprovalTimeoutEscalate || c == nil {
		d.State = flowv1.DecisionEscalated
		d.Reasoning = truncate.Bytes(why+": escalated; "+ld.Reasoning, 1024, "")
		st.LastDecision = d
		st.Phase = flowv1.PhaseEscalated
		return
	}
	d.State = flowv1.DecisionRejected
	c.AwaitingApproval = false
	c.State, c.Error = flowv1.ToolCallRejected, "rejected by the system: "+why
	st.LastDecision = d
	st.Phase = flowv1.PhaseRunning
	r.syncToolCall(c)
}

// timeoutEvents is the Event of a step in which an approval timed out.
func timeoutEvents(old, cur *flowv1.SessionStatus) []Event {
	d := cur.LastDecision
	if d == nil || d.Source != flowv1.SourceTimeout {
		return nil
	}
	if o := old.LastDecision; o != nil && o.ID == d.ID && o.Source == flowv1.SourceTimeout {
		return nil
	}
	what := "Decision"
	if _, ok := d.ToolCall(); ok {
		what = "Tool call"
	}
	return []Event{{EventWarning, flowv1.ReasonApprovalTimeout,
		truncate.Bytes(fmt.Sprintf("%s %s in pathway %s timed out waiting for approval: %s %s", what, d.ID, d.From, strings.ToLower(string(d.State)), d.Reasoning), 1024, "")}}
}
