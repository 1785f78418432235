package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Schema names the version of the record format below. A change that removes or
// renames a field, or changes a field's meaning, is a new version.
const Schema = "journey.audit/v1"

// Kind is what a record tells.
type Kind string

// The kinds of record.
const (
	// KindTransition: the Session moved (status.history gained an entry).
	KindTransition Kind = "Transition"
	// KindBlocked: a cap or loop prevention stopped the Session (a Block entry),
	// except a budget.
	KindBlocked Kind = "Blocked"
	// KindBudgetDenied: a budget stopped the Session before a call was made.
	KindBudgetDenied Kind = "BudgetDenied"
	// KindDecision: a rule or an agent decided where to go, with its band.
	KindDecision Kind = "Decision"
	// KindApproval and KindRejection: a person answered a decision or a tool call.
	KindApproval  Kind = "Approval"
	KindRejection Kind = "Rejection"
	// KindIntervention: a person intervened (spec.interventions).
	KindIntervention Kind = "Intervention"
	// KindToolCall: a tool call was made and its answer journaled.
	KindToolCall Kind = "ToolCall"
	// KindPhase: the Session's phase changed between two status writes.
	KindPhase Kind = "Phase"
	// KindArchive: a finished Session's conversation, kept before it was deleted.
	KindArchive Kind = "Archive"
	// KindErasure: Sessions were erased on request.
	KindErasure Kind = "Erasure"
)

// Operator is the actor of what the operator did by itself.
const Operator = "system:journey-operator"

// Record is one audit record, one JSON object a line in the JSON lines sink.
type Record struct {
	// Schema is always Schema.
	Schema string `json:"schema"`
	// ID is unique and stable: <session UID>/<step>/<n>, n counting the records of
	// one status write from 0; archives end in /archive; an erasure's is
	// erasure/<request>/<smallest UID of its Sessions>.
	ID string `json:"id"`
	// Kind is what the record tells.
	Kind Kind `json:"kind"`
	// Time is when it happened, by the step's clock.
	Time time.Time `json:"time"`
	// Session is the Session it is about (an erasure: only the namespace of the
	// Sessions it names).
	Session SessionRef `json:"session"`
	// Journey and Revision are what the Session runs.
	Journey  string `json:"journey,omitempty"`
	Revision string `json:"revision,omitempty"`
	// Step is status.step of the status write that carried it.
	Step int64 `json:"step"`
	// Actor is who acted: a person's user name (approvals, interventions,
	// erasures), agent:<name> for an agent's decision, rule for a rule's, else
	// system:journey-operator.
	Actor string `json:"actor"`

	Transition   *Transition   `json:"transition,omitempty"`
	Decision     *Decision     `json:"decision,omitempty"`
	Approval     *Approval     `json:"approval,omitempty"`
	Intervention *Intervention `json:"intervention,omitempty"`
	ToolCall     *ToolCall     `json:"toolCall,omitempty"`
	Phase        *PhaseChange  `json:"phase,omitempty"`
	Archive      *Archive      `json:"archive,omitempty"`
	Erasure      *Erasure      `json:"erasure,omitempty"`
}

// SessionRef names a Session.
type SessionRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// Transition is a status.history entry, without its reason text unless it is a
// block's (written by the operator).
type Transition struct {
	From       string `json:"from,omitempty"`
	To         string `json:"to,omitempty"`
	Action     string `json:"action"`
	Source     string `json:"source,omitempty"`
	Rule       string `json:"rule,omitempty"`
	Confidence string `json:"confidence,omitempty"`
	Iteration  int32  `json:"iteration,omitempty"`
	MessageID  string `json:"messageID,omitempty"`
	// HistoryStep is the engine step of the entry (a write may carry several).
	HistoryStep int64 `json:"historyStep"`
	// Reason is a block's reason (the cap and its numbers).
	Reason string `json:"reason,omitempty"`
}

// Decision is a decision as it was made: by a rule or an agent, with its band.
type Decision struct {
	ID                  string   `json:"id"`
	From                string   `json:"from,omitempty"`
	To                  string   `json:"to,omitempty"`
	Source              string   `json:"source"`
	Agent               string   `json:"agent,omitempty"`
	Confidence          string   `json:"confidence,omitempty"`
	AllowedDestinations []string `json:"allowedDestinations,omitempty"`
	// Band is what the confidence led to: autoAdvance, retryWithFeedback,
	// requireApproval or escalate.
	Band string `json:"band"`
	// Reasoning is the agent's or rule's reasoning, redacted.
	Reasoning string `json:"reasoning,omitempty"`
}

// Approval is an entry of spec.approvals the Session took in.
type Approval struct {
	DecisionID  string     `json:"decisionID"`
	Approve     bool       `json:"approve"`
	Destination string     `json:"destination,omitempty"`
	At          *time.Time `json:"at,omitempty"`
	// Reason is the approver's reason, redacted.
	Reason string `json:"reason,omitempty"`
}

// Intervention is an entry of spec.interventions the Session took in.
type Intervention struct {
	ID      string `json:"id"`
	Action  string `json:"action"`
	Pathway string `json:"pathway,omitempty"`
	// Reason is the person's reason, redacted.
	Reason string `json:"reason,omitempty"`
}

// ToolCall is a tool call that was made, by digests: no arguments, no result.
type ToolCall struct {
	ID             string `json:"id"`
	Tool           string `json:"tool"`
	ArgsDigest     string `json:"argsDigest,omitempty"`
	ResultDigest   string `json:"resultDigest,omitempty"`
	IdempotencyKey string `json:"idempotencyKey"`
	ApprovedBy     string `json:"approvedBy,omitempty"`
	// State is Done or Failed; Failure is the failure's kind then.
	State      string `json:"state"`
	Failure    string `json:"failure,omitempty"`
	DurationMs int64  `json:"durationMs,omitempty"`
}

// PhaseChange is a change of status.phase between two status writes.
type PhaseChange struct {
	From string `json:"from,omitempty"`
	To   string `json:"to"`
}

// Archive is a finished Session's conversation and audit trail as its status kept
// them, written before the Session is deleted. Text in it is redacted.
type Archive struct {
	Phase             string                  `json:"phase"`
	CompletionTime    *time.Time              `json:"completionTime,omitempty"`
	Transcript        []flowv1.Exchange       `json:"transcript,omitempty"`
	TranscriptDropped int32                   `json:"transcriptDropped,omitempty"`
	Journal           []flowv1.EffectRecord   `json:"journal,omitempty"`
	JournalDropped    int32                   `json:"journalDropped,omitempty"`
	History           []flowv1.HistoryEntry   `json:"history,omitempty"`
	Usage             flowv1.Usage            `json:"usage,omitzero"`
	ContextVersion    int64                   `json:"contextVersion,omitempty"`
	Context           json.RawMessage         `json:"context,omitempty"`
	LastDecision      *flowv1.DecisionRecord  `json:"lastDecision,omitempty"`
	ToolCalls         []flowv1.ToolCallRecord `json:"toolCalls,omitempty"`
}

// Erasure is the erasure of Sessions on a person's request: which Sessions, never
// what they held.
type Erasure struct {
	// Request identifies the request (the value of the erasure annotation).
	Request string `json:"request"`
	// Reason is why, as the person gave it, redacted.
	Reason string `json:"reason,omitempty"`
	// Sessions are the Sessions erased, by namespace, name and UID.
	Sessions []SessionRef `json:"sessions"`
}

// ErasureOf is the erasure record of sessions (one namespace's), erased at now on
// request by actor for reason: their namespaces, names and UIDs, nothing they held.
// Its session names the namespace only; its id is erasure/<request>/<smallest UID>,
// the same however often it is written for the same Sessions.
func ErasureOf(sessions []*flowv1.Session, request, actor, reason string, now time.Time) Record {
	e := &Erasure{Request: request, Reason: reason}
	for _, s := range sessions {
		e.Sessions = append(e.Sessions, sessionOf(s))
	}
	slices.SortFunc(e.Sessions, func(a, b SessionRef) int { return strings.Compare(a.Name, b.Name) })
	r := Record{Schema: Schema, Kind: KindErasure, Time: now.UTC(), Actor: actor, Erasure: e}
	smallest := ""
	for _, ref := range e.Sessions {
		r.Session.Namespace = ref.Namespace
		if smallest == "" || ref.UID < smallest {
			smallest = ref.UID
		}
	}
	r.ID = "erasure/" + request + "/" + smallest
	return r
}

// ArchiveOf is the archive record of finished Session s, written at now: its
// transcript, journal, history, context, usage, last decision and last tool calls,
// as its status holds them. Its id is <session UID>/archive.
func ArchiveOf(s *flowv1.Session, now time.Time) Record {
	st := s.Status.DeepCopy()
	r := base(s, KindArchive, st.Step, now, Operator)
	r.ID = string(s.UID) + "/archive"
	a := &Archive{Phase: string(st.Phase), Transcript: st.Transcript, TranscriptDropped: st.TranscriptDropped,
		Journal: st.Journal, JournalDropped: st.JournalDropped, History: st.History, Usage: st.Usage,
		ContextVersion: st.ContextVersion, LastDecision: st.LastDecision}
	if st.CompletionTime != nil {
		t := st.CompletionTime.UTC()
		a.CompletionTime = &t
	}
	if st.Context != nil {
		a.Context = json.RawMessage(st.Context.Raw)
	}
	if st.LastTurn != nil {
		a.ToolCalls = st.LastTurn.ToolCalls
	}
	r.Archive = a
	return r
}

// sessionOf is the reference to s.
func sessionOf(s *flowv1.Session) SessionRef {
	return SessionRef{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)}
}

// base is a record about s at step with the fields every record has.
func base(s *flowv1.Session, kind Kind, step int64, t time.Time, actor string) Record {
	return Record{Schema: Schema, Kind: kind, Time: t.UTC(), Session: sessionOf(s), Journey: s.Spec.JourneyRef.Name,
		Revision: s.Status.JourneyRevision, Step: step, Actor: actor}
}

// digest is the SHA-256 (hex) of v's canonical JSON (object keys sorted), so the same
// value gives the same digest however its bytes were laid out.
func digest(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if err := json.Unmarshal(raw, &v); err == nil {
		if c, err := json.Marshal(v); err == nil {
			raw = c
		}
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// band is what a decision's state says its confidence led to.
func band(state flowv1.DecisionState) string {
	switch state {
	case flowv1.DecisionApplied:
		return "autoAdvance"
	case flowv1.DecisionRetriedWithFeedback:
		return "retryWithFeedback"
	case flowv1.DecisionPending:
		return "requireApproval"
	case flowv1.DecisionEscalated:
		return "escalate"
	}
	return ""
}

// decisionKey is d as the cursor keeps it.
func decisionKey(d *flowv1.DecisionRecord) string {
	if d == nil {
		return ""
	}
	return d.ID + "/" + string(d.State)
}

// CursorOf is the cursor of status: what the next status write records as
// acknowledged once the records up to status are written.
func CursorOf(status *flowv1.SessionStatus) *flowv1.AuditCursor {
	return &flowv1.AuditCursor{
		AcknowledgedStep:       status.Step,
		Phase:                  status.Phase,
		ProcessedApprovals:     status.ProcessedApprovals,
		ProcessedInterventions: status.ProcessedInterventions,
		Journal:                status.JournalDropped + int32(len(status.Journal)),
		Decision:               decisionKey(status.LastDecision),
	}
}

// Records are the audit records of what Session s's status holds after from, in
// order: the approvals and interventions the Session took in, the tool calls it
// made, the decision it reached, its transitions, then the phase it reached, each
// numbered in the write's step. A
// status whose step is not past from's carries none. The records are a function of
// from and s alone, so a manager that writes them again after a restart writes the
// same records with the same ids.
func Records(s *flowv1.Session, from *flowv1.AuditCursor) []Record {
	st := &s.Status
	if from == nil {
		from = &flowv1.AuditCursor{}
	}
	if st.Step <= from.AcknowledgedStep {
		return nil
	}
	at := s.CreationTimestamp.Time
	if st.LastActivityTime != nil {
		at = st.LastActivityTime.Time
	}
	var out []Record
	add := func(r Record) { out = append(out, r) }
	approvals := approvalsTaken(s, from)
	for _, a := range approvals {
		kind := KindApproval
		if !a.Approves() {
			kind = KindRejection
		}
		r := base(s, kind, st.Step, at, a.By)
		r.Approval = &Approval{DecisionID: a.DecisionID, Approve: a.Approves(), Destination: string(a.Destination), Reason: a.Reason}
		if a.At != nil {
			t := a.At.UTC()
			r.Approval.At = &t
		}
		add(r)
	}
	for _, iv := range interventionsTaken(s, from) {
		r := base(s, KindIntervention, st.Step, at, iv.By)
		r.Intervention = &Intervention{ID: iv.ID, Action: string(iv.Action), Pathway: string(iv.Pathway), Reason: iv.Reason}
		add(r)
	}
	first := int(from.Journal - st.JournalDropped)
	for i := max(0, first); i < len(st.Journal); i++ {
		if e := &st.Journal[i]; e.Kind == flowv1.EffectCallTool {
			add(toolCall(s, e, at))
		}
	}
	if d := st.LastDecision; d != nil && decisionKey(d) != from.Decision && band(d.State) != "" {
		if _, tool := d.ToolCall(); !tool && (d.Source == flowv1.SourceAgent || d.Source == flowv1.SourceRule) {
			actor := "rule"
			if d.Source == flowv1.SourceAgent {
				actor = "agent:" + d.Agent
			}
			r := base(s, KindDecision, st.Step, at, actor)
			r.Decision = &Decision{ID: d.ID, From: d.From, To: d.To, Source: string(d.Source), Agent: d.Agent,
				Confidence: string(d.Confidence), AllowedDestinations: d.AllowedDestinations, Band: band(d.State), Reasoning: d.Reasoning}
			add(r)
		}
	}
	for _, h := range st.History {
		if h.Step > from.AcknowledgedStep {
			add(transition(s, h, approvals))
		}
	}
	if st.Phase != from.Phase {
		r := base(s, KindPhase, st.Step, at, Operator)
		r.Phase = &PhaseChange{From: string(from.Phase), To: string(st.Phase)}
		add(r)
	}
	for i := range out {
		out[i].ID = fmt.Sprintf("%s/%d/%d", s.UID, st.Step, i)
	}
	return out
}

// transition is the record of history entry h.
func transition(s *flowv1.Session, h flowv1.HistoryEntry, approvals []flowv1.Approval) Record {
	kind, actor := KindTransition, Operator
	switch {
	case h.Action == flowv1.ActionBlock && strings.HasPrefix(h.Reason, flowv1.ReasonBudgetExceeded):
		kind = KindBudgetDenied
	case h.Action == flowv1.ActionBlock:
		kind = KindBlocked
	case h.By != "":
		actor = h.By
	case h.Source == flowv1.SourceApproval && len(approvals) > 0:
		actor = approvals[len(approvals)-1].By
	}
	r := base(s, kind, s.Status.Step, h.Time.Time, actor)
	r.Transition = &Transition{From: h.From, To: h.To, Action: string(h.Action), Source: string(h.Source), Rule: h.Transition,
		Confidence: string(h.Confidence), Iteration: h.Iteration, MessageID: h.MessageID, HistoryStep: h.Step}
	if h.Action == flowv1.ActionBlock {
		r.Transition.Reason = h.Reason
	}
	return r
}

// toolCall is the record of the journaled answer e of a tool call.
func toolCall(s *flowv1.Session, e *flowv1.EffectRecord, at time.Time) Record {
	tc := &ToolCall{ID: e.ToolCall, Tool: e.Agent, IdempotencyKey: fmt.Sprintf("%s-%s", s.UID, strings.TrimPrefix(e.ToolCall, "t-")),
		State: string(flowv1.ToolCallDone), DurationMs: e.Result.DurationMs}
	if e.Result.ToolResult != nil {
		tc.ResultDigest = digest(e.Result.ToolResult.Raw)
	}
	if f := e.Result.Failure; f != nil {
		tc.State, tc.Failure = string(flowv1.ToolCallFailed), string(f.Kind)
	}
	if c := findToolCall(&s.Status, e.ToolCall); c != nil {
		tc.ArgsDigest, tc.ApprovedBy = c.ArgsDigest, c.ApprovedBy
	}
	r := base(s, KindToolCall, s.Status.Step, at, Operator)
	r.ToolCall = tc
	return r
}

// findToolCall is the record of tool call id in the turn in progress or the last one.
func findToolCall(st *flowv1.SessionStatus, id string) *flowv1.ToolCallRecord {
	if st.Turn != nil {
		for i := range st.Turn.ToolCalls {
			if st.Turn.ToolCalls[i].ID == id {
				return &st.Turn.ToolCalls[i].ToolCallRecord
			}
		}
	}
	if st.LastTurn != nil {
		for i := range st.LastTurn.ToolCalls {
			if st.LastTurn.ToolCalls[i].ID == id {
				return &st.LastTurn.ToolCalls[i]
			}
		}
	}
	return nil
}

// approvalsTaken are the approvals the Session took in after from, as spec.approvals
// still holds them (a processed approval dropped from the spec before its record was
// written is missing).
func approvalsTaken(s *flowv1.Session, from *flowv1.AuditCursor) []flowv1.Approval {
	var out []flowv1.Approval
	for n := from.ProcessedApprovals; n < s.Status.ProcessedApprovals; n++ {
		if i := int(n - s.Spec.ApprovalsDropped); i >= 0 && i < len(s.Spec.Approvals) {
			out = append(out, s.Spec.Approvals[i])
		}
	}
	return out
}

// interventionsTaken are the interventions the Session took in after from, as
// spec.interventions still holds them.
func interventionsTaken(s *flowv1.Session, from *flowv1.AuditCursor) []flowv1.Intervention {
	var out []flowv1.Intervention
	for n := from.ProcessedInterventions; n < s.Status.ProcessedInterventions; n++ {
		if i := int(n - s.Spec.InterventionsDropped); i >= 0 && i < len(s.Spec.Interventions) {
			out = append(out, s.Spec.Interventions[i])
		}
	}
	return out
}
