package engine

import (
	"encoding/json"
	"fmt"
	"maps"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/expr"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// ToolInfo is a server tool as the revision pins it.
type ToolInfo struct {
	ReadOnly, Destructive bool
	InputSchema           json.RawMessage
	// Description is what the server says the tool does.
	Description string
}

// WithServerTools returns a copy of s that knows its server tools as the revision
// pins them: their hints decide IfDestructive approvals, their input schemas check
// the arguments of every call before it is made.
func (s *Snapshot) WithServerTools(tools map[string]ToolInfo) *Snapshot {
	c := *s
	c.serverTools = maps.Clone(tools)
	c.toolSchemas = resolveToolSchemas(tools)
	return &c
}

// needsApproval says whether a call of t with args waits for a person: Always, or
// IfDestructive for a server tool its server does not say is read-only (a tool the
// revision did not pin counts as destructive); when narrows either to the calls for
// which it is true. Builtin tools change nothing outside the Session: IfDestructive
// never holds them.
func (r *run) needsApproval(t *flowv1.Tool, args, ctx map[string]any) (bool, error) {
	switch t.Approval {
	case flowv1.ToolApprovalNever:
		return false, nil
	case flowv1.ToolApprovalAlways:
	default:
		if t.Builtin != nil {
			return false, nil
		}
		if info, ok := r.snap.serverTools[string(t.Name)]; ok && (info.ReadOnly || !info.Destructive) {
			return false, nil
		}
	}
	if t.When == "" {
		return true, nil
	}
	return expr.Bool(string(t.When), expr.Vars{Args: args, Context: ctx})
}

// holdForApproval makes call c wait for a person: the Session is AwaitingApproval on
// a pending decision named like the call, whose reasoning previews the call.
func (r *run) holdForApproval(c *flowv1.ToolCallProgress) {
	st := r.st
	c.AwaitingApproval = true
	st.LastDecision = &flowv1.DecisionRecord{
		ID:           c.ID,
		Transition:   flowv1.ToolDecisionTransition(c.Tool),
		From:         st.CurrentPathway,
		Reasoning:    toolPreview(c),
		State:        flowv1.DecisionPending,
		WaitingSince: &r.now,
	}
	st.Phase = flowv1.PhaseAwaitingApproval
}

// toolPreview is a call for a person: the tool, its arguments (cut at 512 bytes) and
// their digest.
func toolPreview(c *flowv1.ToolCallProgress) string {
	args := "{}"
	if c.Args != nil {
		args = string(c.Args.Raw)
	}
	return fmt.Sprintf("call %s %s (args sha256 %s)", c.Tool, truncate.Bytes(args, 512, ""), c.ArgsDigest[:min(12, len(c.ArgsDigest))])
}

// toolApproval applies the next approval to call c, which waits for one. It reports
// whether the call may go on (approved, or rejected: its state then says so); res is
// what the stage does otherwise: wait.
func (r *run) toolApproval(c *flowv1.ToolCallProgress) (res stageResult, goOn bool) {
	st := r.st
	if !r.approvalsPending() {
		return stageResult{pause: true}, false
	}
	a := r.nextApproval()
	if a.DecisionID != c.ID {
		r.addFailure(flowv1.Failure{Source: flowv1.FailurePolicy, Component: "approval", Kind: flowv1.FailurePolicyKind,
			Message: fmt.Sprintf("approval for decision %q ignored: tool call %s waits for approval", a.DecisionID, c.ID)})
		return stageResult{pause: true}, false
	}
	c.AwaitingApproval = false
	st.Phase = flowv1.PhaseRunning
	d := st.LastDecision.DeepCopy()
	if d == nil || d.ID != c.ID {
		d = &flowv1.DecisionRecord{ID: c.ID, Transition: flowv1.ToolDecisionTransition(c.Tool), From: st.CurrentPathway}
	}
	d.Source = flowv1.SourceApproval
	if a.Approves() {
		d.State = flowv1.DecisionApproved
		c.ApprovedBy = a.By
	} else {
		d.State = flowv1.DecisionRejected
		c.State, c.Error = flowv1.ToolCallRejected, truncate.Bytes(approverReason("rejected", a), 1024, "")
	}
	st.LastDecision = d
	r.syncToolCall(c)
	return turnOver, true
}

// toolApprovalMessage is the AwaitingApproval message of a tool call that waits.
func toolApprovalMessage(st *flowv1.SessionStatus) (string, bool) {
	d := st.LastDecision
	if _, ok := d.ToolCall(); !ok {
		return "", false
	}
	return fmt.Sprintf("Tool call %s in pathway %s waits for approval: %s", d.ID, d.From, d.Reasoning), true
}
