package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SessionSpec is one user's run through a journey: the messages, External
// outcomes, approvals and interventions sent to it. Messages, outcomes,
// approvals and interventions are append-only, except that processed entries
// may be dropped from the front of each list (see messagesDropped,
// outcomesDropped, approvalsDropped and interventionsDropped).
// +kubebuilder:validation:XValidation:rule="self.?messagesDropped.orValue(0) >= oldSelf.?messagesDropped.orValue(0)",fieldPath=".messagesDropped",message="messagesDropped cannot decrease: dropped messages cannot come back"
// +kubebuilder:validation:XValidation:rule="size(self.?messages.orValue([])) + self.?messagesDropped.orValue(0) >= size(oldSelf.?messages.orValue([])) + oldSelf.?messagesDropped.orValue(0)",fieldPath=".messages",message="messages are append-only: a message leaves spec.messages only once processed, dropped from the front with messagesDropped raised by as many"
// +kubebuilder:validation:XValidation:rule="(self.?messagesDropped.orValue(0) - oldSelf.?messagesDropped.orValue(0)) <= size(oldSelf.?messages.orValue([]))",fieldPath=".messagesDropped",message="messagesDropped may only grow by the number of messages removed from the front of spec.messages"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.messages) || oldSelf.messages.all(i, m, i < (self.?messagesDropped.orValue(0) - oldSelf.?messagesDropped.orValue(0)) || !has(self.messages) || i - (self.?messagesDropped.orValue(0) - oldSelf.?messagesDropped.orValue(0)) >= size(self.messages) || self.messages[i - (self.?messagesDropped.orValue(0) - oldSelf.?messagesDropped.orValue(0))] == m)",fieldPath=".messages",message="messages are append-only: existing messages cannot change or move, new ones go at the end; to drop processed messages, remove them from the front and raise messagesDropped by as many"
// +kubebuilder:validation:XValidation:rule="self.?outcomesDropped.orValue(0) >= oldSelf.?outcomesDropped.orValue(0)",fieldPath=".outcomesDropped",message="outcomesDropped cannot decrease: dropped outcomes cannot come back"
// +kubebuilder:validation:XValidation:rule="size(self.?outcomes.orValue([])) + self.?outcomesDropped.orValue(0) >= size(oldSelf.?outcomes.orValue([])) + oldSelf.?outcomesDropped.orValue(0)",fieldPath=".outcomes",message="outcomes are append-only: a processed prefix may leave spec.outcomes, dropped from the front with outcomesDropped raised by as many"
// +kubebuilder:validation:XValidation:rule="(self.?outcomesDropped.orValue(0) - oldSelf.?outcomesDropped.orValue(0)) <= size(oldSelf.?outcomes.orValue([]))",fieldPath=".outcomesDropped",message="outcomesDropped may only grow by the number of outcomes removed from the front of spec.outcomes"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.outcomes) || oldSelf.outcomes.all(i, e, i < (self.?outcomesDropped.orValue(0) - oldSelf.?outcomesDropped.orValue(0)) || !has(self.outcomes) || i - (self.?outcomesDropped.orValue(0) - oldSelf.?outcomesDropped.orValue(0)) >= size(self.outcomes) || self.outcomes[i - (self.?outcomesDropped.orValue(0) - oldSelf.?outcomesDropped.orValue(0))] == e)",fieldPath=".outcomes",message="outcomes are append-only: existing outcomes cannot change or move, new ones go at the end; to drop processed outcomes, remove them from the front and raise outcomesDropped by as many"
// +kubebuilder:validation:XValidation:rule="self.?approvalsDropped.orValue(0) >= oldSelf.?approvalsDropped.orValue(0)",fieldPath=".approvalsDropped",message="approvalsDropped cannot decrease: dropped approvals cannot come back"
// +kubebuilder:validation:XValidation:rule="size(self.?approvals.orValue([])) + self.?approvalsDropped.orValue(0) >= size(oldSelf.?approvals.orValue([])) + oldSelf.?approvalsDropped.orValue(0)",fieldPath=".approvals",message="approvals are append-only: a processed prefix may leave spec.approvals, dropped from the front with approvalsDropped raised by as many"
// +kubebuilder:validation:XValidation:rule="(self.?approvalsDropped.orValue(0) - oldSelf.?approvalsDropped.orValue(0)) <= size(oldSelf.?approvals.orValue([]))",fieldPath=".approvalsDropped",message="approvalsDropped may only grow by the number of approvals removed from the front of spec.approvals"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.approvals) || oldSelf.approvals.all(i, e, i < (self.?approvalsDropped.orValue(0) - oldSelf.?approvalsDropped.orValue(0)) || !has(self.approvals) || i - (self.?approvalsDropped.orValue(0) - oldSelf.?approvalsDropped.orValue(0)) >= size(self.approvals) || self.approvals[i - (self.?approvalsDropped.orValue(0) - oldSelf.?approvalsDropped.orValue(0))] == e)",fieldPath=".approvals",message="approvals are append-only: existing approvals cannot change or move, new ones go at the end; to drop processed approvals, remove them from the front and raise approvalsDropped by as many"
// +kubebuilder:validation:XValidation:rule="self.?interventionsDropped.orValue(0) >= oldSelf.?interventionsDropped.orValue(0)",fieldPath=".interventionsDropped",message="interventionsDropped cannot decrease: dropped interventions cannot come back"
// +kubebuilder:validation:XValidation:rule="size(self.?interventions.orValue([])) + self.?interventionsDropped.orValue(0) >= size(oldSelf.?interventions.orValue([])) + oldSelf.?interventionsDropped.orValue(0)",fieldPath=".interventions",message="interventions are append-only: a processed prefix may leave spec.interventions, dropped from the front with interventionsDropped raised by as many"
// +kubebuilder:validation:XValidation:rule="(self.?interventionsDropped.orValue(0) - oldSelf.?interventionsDropped.orValue(0)) <= size(oldSelf.?interventions.orValue([]))",fieldPath=".interventionsDropped",message="interventionsDropped may only grow by the number of interventions removed from the front of spec.interventions"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.interventions) || oldSelf.interventions.all(i, e, i < (self.?interventionsDropped.orValue(0) - oldSelf.?interventionsDropped.orValue(0)) || !has(self.interventions) || i - (self.?interventionsDropped.orValue(0) - oldSelf.?interventionsDropped.orValue(0)) >= size(self.interventions) || self.interventions[i - (self.?interventionsDropped.orValue(0) - oldSelf.?interventionsDropped.orValue(0))] == e)",fieldPath=".interventions",message="interventions are append-only: existing interventions cannot change or move, new ones go at the end; to drop processed interventions, remove them from the front and raise interventionsDropped by as many"
// +kubebuilder:validation:XValidation:rule="has(self.initialContext) == has(oldSelf.initialContext)",fieldPath=".initialContext",message="initialContext is immutable"
// +kubebuilder:validation:XValidation:rule="!oldSelf.?cancel.orValue(false) || self.?cancel.orValue(false)",fieldPath=".cancel",message="cancel cannot be unset"
type SessionSpec struct {
	// journeyRef names the Journey in the Session's namespace. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="journeyRef is immutable"
	JourneyRef JourneyReference `json:"journeyRef"`

	// initialContext seeds the Session context.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="initialContext is immutable"
	InitialContext *apiextensionsv1.JSON `json:"initialContext,omitempty"`

	// messages are the user's messages, processed in order, each exactly once.
	// Append-only: existing entries cannot change or move. A processed prefix
	// may be dropped, in the same update that raises messagesDropped by as many
	// (kubectl journey say does this in the patch that appends). Their text, ids
	// and 24 bytes per message add up to at most 32 KiB: past that an update is
	// refused, and the sender drops processed messages or waits until pending
	// ones are processed.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:XValidation:rule="self.map(m, size(m.text) + size(m.id) + 24).sum() <= 32768",message="spec.messages would hold more than 32 KiB (text, ids and 24 bytes a message): drop the processed messages from the front of spec.messages and raise spec.messagesDropped by as many (kubectl journey say does), or wait until the Session has processed the pending ones"
	Messages []Message `json:"messages,omitempty"`

	// messagesDropped is how many processed messages have been dropped from the
	// front of spec.messages: spec.messages[i] is message messagesDropped+i of
	// the conversation, counted from 0, and status.processedMessages counts from
	// the same origin, so each message is processed exactly once however many
	// are dropped. It only grows, by the number of messages removed from the
	// front in the same update, and never past status.processedMessages (less
	// the message of a turn still in progress): a message that was not processed
	// cannot be dropped.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	MessagesDropped int32 `json:"messagesDropped,omitempty"`

	// outcomes are results posted by External executors. Append-only. Each is
	// keyed by pathway, iteration and attempt, so server-side apply merges the
	// outcomes of a file with those the plugin or an executor appended. A
	// processed prefix may be dropped, in the same update that raises
	// outcomesDropped by as many (kubectl journey outcome does). Their data
	// and messages add up to at most 12 KiB, checked by the admission
	// webhook: past that an update is refused.
	// +optional
	// +listType=map
	// +listMapKey=pathway
	// +listMapKey=iteration
	// +listMapKey=attempt
	// +kubebuilder:validation:MaxItems=500
	Outcomes []ExternalOutcome `json:"outcomes,omitempty"`

	// outcomesDropped is how many processed outcomes have been dropped from the
	// front of spec.outcomes, as messagesDropped is for messages:
	// status.processedOutcomes counts from the first outcome ever sent. It only
	// grows, by the number of outcomes removed from the front in the same
	// update, and never past status.processedOutcomes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	OutcomesDropped int32 `json:"outcomesDropped,omitempty"`

	// approvals answer decisions that wait in AwaitingApproval or Escalated.
	// Append-only, one per decision: keyed by decisionID, so server-side apply
	// merges the approvals of a file with those the plugin appended. A
	// processed prefix may be dropped, in the same update that raises
	// approvalsDropped by as many (kubectl journey approve does); what the
	// list holds adds up to at most 6 KiB.
	// +optional
	// +listType=map
	// +listMapKey=decisionID
	// +kubebuilder:validation:MaxItems=500
	// +kubebuilder:validation:XValidation:rule="self.map(a, size(a.decisionID) + (has(a.by) ? size(a.by) : 0) + (has(a.reason) ? size(a.reason) : 0) + (has(a.destination) ? size(a.destination) : 0) + 64).sum() <= 6144",message="spec.approvals would hold more than 6 KiB (ids, names, reasons and 64 bytes an approval): drop the processed approvals from the front of spec.approvals and raise spec.approvalsDropped by as many (kubectl journey approve does)"
	Approvals []Approval `json:"approvals,omitempty"`

	// approvalsDropped is how many processed approvals have been dropped from
	// the front of spec.approvals, as messagesDropped is for messages:
	// status.processedApprovals counts from the first approval ever sent. It
	// only grows, by the number of approvals removed from the front in the
	// same update, and never past status.processedApprovals.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	ApprovalsDropped int32 `json:"approvalsDropped,omitempty"`

	// interventions are a person's acts on the Session, applied in order, each
	// exactly once, before the next message is routed: Resume lifts what blocks
	// it (a cap, loop prevention, the retry limit, a timeout, a failure), Retry
	// runs the current pathway's last turn again, Goto moves it to another
	// pathway, Rewind restores it to how it was after an earlier step. One that
	// cannot apply is refused (an InterventionRefused Event and its record in
	// status.interventions say why) and still counts as processed. Answer
	// answers a tool call that waits on a person (a call whose outcome is
	// unknown, or whose server asked for input) and applies while the turn is
	// in progress. Append-only, keyed by id. A processed prefix may be dropped,
	// in the same update that raises interventionsDropped by as many; what the
	// list holds adds up to at most 2,000 bytes (any one intervention fits).
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=25
	// +kubebuilder:validation:XValidation:rule="self.map(i, size(i.id) + (has(i.by) ? size(i.by) : 0) + (has(i.reason) ? size(i.reason) : 0) + (has(i.feedback) ? size(i.feedback) : 0) + (has(i.pathway) ? size(i.pathway) : 0) + (has(i.revision) ? size(i.revision) : 0) + (has(i.call) ? size(i.call) : 0) + (has(i.result) ? size(i.result) : 0) + 80).sum() <= 2000",message="spec.interventions would hold more than 2,000 bytes (ids, names, reasons, feedback, answers and 80 bytes an intervention): drop the processed interventions from the front of spec.interventions and raise spec.interventionsDropped by as many"
	Interventions []Intervention `json:"interventions,omitempty"`

	// interventionsDropped is how many processed interventions have been
	// dropped from the front of spec.interventions, as messagesDropped is for
	// messages: status.processedInterventions counts from the first
	// intervention ever sent. It only grows, by the number of interventions
	// removed from the front in the same update, and never past
	// status.processedInterventions.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	InterventionsDropped int32 `json:"interventionsDropped,omitempty"`

	// suspend pauses the Session: no step runs while it is true.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// cancel ends the Session as Cancelled. It cannot be undone.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self || !oldSelf",message="cancel cannot be unset"
	Cancel bool `json:"cancel,omitempty"`

	// ttlSecondsAfterFinished deletes the Session this long after it reached a
	// terminal phase; it overrides the Journey's
	// sessionDefaults.ttlSecondsAfterFinished. With an audit sink, the manager
	// writes the Session's archive to it before the deletion.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// forkOf, set by kubectl journey fork, makes this Session a fork of another
	// one: its first step rebuilds its status from the source Session's
	// journal up to forkOf.step, offline (no model or tool call; tool calls
	// made by then are inherited as records and never sent again), and it runs
	// live from there on forkOf.revision (the source's revision when empty).
	// The source Session is only read. Immutable.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="forkOf is immutable"
	ForkOf *ForkSource `json:"forkOf,omitempty"`

	// limits overrides the Journey's limits for this Session: set by a person
	// to let a Session that a cap stalled continue. A value may only be set at
	// or above what the Session has used (the webhook refuses a lower one).
	// +optional
	Limits *SessionLimits `json:"limits,omitempty"`
}

// ForkSource is the Session a fork was made from, and where.
type ForkSource struct {
	// session is the name of the source Session, in the same namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Session string `json:"session"`
	// uid is the source Session's metadata.uid: a Session of the same name
	// created since is not the source.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	UID string `json:"uid"`
	// step is the source's status.step the fork starts after: its status is
	// the source's as it was after that step.
	// +required
	// +kubebuilder:validation:Minimum=1
	Step int64 `json:"step"`
	// revision is the Journey revision the fork runs on from step on; empty:
	// the source's. When the source's steps up to step replay differently on
	// it, the ForkDiverged condition names the first one.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision,omitempty"`
}

// SessionLimits are the caps one Session may override.
type SessionLimits struct {
	// maxTurns replaces the Journey's maxTurns for this Session.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MaxTurns int32 `json:"maxTurns,omitempty"`
	// maxIterations replaces the Journey's maxIterations for this Session.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxIterations int32 `json:"maxIterations,omitempty"`
	// maxTransitions replaces the Journey's maxTransitions for this Session.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MaxTransitions int32 `json:"maxTransitions,omitempty"`
	// budget replaces the Journey's budget fields that it sets.
	// +optional
	Budget *SessionBudget `json:"budget,omitempty"`
}

// JourneyReference names a Journey in the same namespace.
type JourneyReference struct {
	// name of the Journey.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="name must be a Journey object name: lowercase letters, digits, '-' and '.'"
	Name string `json:"name"`
}

// Message is one user message.
type Message struct {
	// id identifies the message; unique within the Session.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9][-A-Za-z0-9_.]*$')",message="id must start with a letter or digit and contain only letters, digits, '-', '_' and '.'"
	ID string `json:"id"`
	// text is what the user said.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=8192
	Text string `json:"text"`
}

// ExternalOutcome is the result of an External pathway's turn.
type ExternalOutcome struct {
	// pathway is the External pathway the outcome is for.
	// +required
	Pathway Name `json:"pathway"`
	// iteration is the cycle the outcome is for; an outcome for another
	// iteration is ignored.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	Iteration int32 `json:"iteration"`
	// attempt tells apart outcomes for the same pathway and iteration (a pathway
	// retried within an iteration runs again): 1 for the first, then 2, 3 and
	// on.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Attempt int32 `json:"attempt,omitempty"`
	// resultType is success, failure, partial_success or unclear.
	// +required
	ResultType ResultType `json:"resultType"`
	// data are the turn's outputs; fields listed in the pathway's accumulate
	// merge into context.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Data *apiextensionsv1.JSON `json:"data,omitempty"`
	// message is a human-readable summary.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`
}

// Approval answers a pending decision.
type Approval struct {
	// decisionID names the decision (status.lastDecision.id).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	DecisionID string `json:"decisionID"`
	// approve accepts (true) or rejects (false) the decision. It must be given:
	// an approval without it is refused, never read as a rejection.
	// +required
	Approve *bool `json:"approve,omitempty"`
	// destination overrides the decision's destination; it must be allowed.
	// +optional
	Destination Name `json:"destination,omitempty"`
	// by is who approved. Stamped by the admission webhook when installed.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	By string `json:"by,omitempty"`
	// at is when the approval was given.
	// +optional
	At *metav1.Time `json:"at,omitempty"`
	// reason explains the approval.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}

// InterventionAction is what a person asks of a Session.
// +kubebuilder:validation:Enum=Resume;Retry;Goto;Rewind;Upgrade;Answer
type InterventionAction string

const (
	// InterventionResume lifts what blocks the Session: a cap (turns,
	// iterations, transitions, budget, time), loop prevention, the retry limit,
	// an idle or session timeout, or a failure.
	InterventionResume InterventionAction = "Resume"
	// InterventionRetry runs the current pathway's last turn again, with the
	// intervention's feedback for its agents.
	InterventionRetry InterventionAction = "Retry"
	// InterventionGoto moves the Session to another pathway of its journey.
	InterventionGoto InterventionAction = "Goto"
	// InterventionRewind restores the Session to how it was after an earlier
	// step.
	InterventionRewind InterventionAction = "Rewind"
	// InterventionUpgrade moves the Session to another revision of its
	// journey, when a replay of its journal on that revision reproduces every
	// step (or anyway, with force).
	InterventionUpgrade InterventionAction = "Upgrade"
	// InterventionAnswer answers what a tool call of the turn in progress
	// waits on a person for: whether a call whose outcome is unknown was done,
	// or the input its server asked for.
	InterventionAnswer InterventionAction = "Answer"
)

// AnswerOutcome is what a person says of a tool call an Answer names.
// +kubebuilder:validation:Enum=Done;NotDone;Fail;Accept;Decline;Cancel
type AnswerOutcome string

const (
	// AnswerDone: the call was done; its result is the answer's content, else
	// its result text.
	AnswerDone AnswerOutcome = "Done"
	// AnswerNotDone: the call was not done; it is sent again, with the same
	// idempotency key.
	AnswerNotDone AnswerOutcome = "NotDone"
	// AnswerFail: the call failed (or is not to be made again); the model is
	// told so, with the answer's reason, as the call's result.
	AnswerFail AnswerOutcome = "Fail"
	// AnswerAccept: the user gives the input the call's server asked for (the
	// answer's content holds a form's fields; a URL was visited).
	AnswerAccept AnswerOutcome = "Accept"
	// AnswerDecline: the user declines to give the input asked for.
	AnswerDecline AnswerOutcome = "Decline"
	// AnswerCancel: the user dismisses the request without a choice.
	AnswerCancel AnswerOutcome = "Cancel"
)

// Intervention is a person's act on a Session.
// +kubebuilder:validation:XValidation:rule="!has(self.limits) || self.action == 'Resume'",message="limits belongs to action Resume (it raises the caps as the Session resumes); set it in spec.limits otherwise"
// +kubebuilder:validation:XValidation:rule="!has(self.feedback) || self.action == 'Retry'",message="feedback belongs to action Retry (the agents see it when the turn runs again)"
// +kubebuilder:validation:XValidation:rule="has(self.pathway) == (self.action == 'Goto')",message="pathway is required for action Goto and belongs to no other action"
// +kubebuilder:validation:XValidation:rule="has(self.step) == (self.action == 'Rewind')",message="step is required for action Rewind and belongs to no other action"
// +kubebuilder:validation:XValidation:rule="has(self.revision) == (self.action == 'Upgrade')",message="revision is required for action Upgrade and belongs to no other action"
// +kubebuilder:validation:XValidation:rule="!has(self.force) || !self.force || self.action == 'Upgrade'",message="force belongs to action Upgrade (it moves the Session even when the replay diverges)"
// +kubebuilder:validation:XValidation:rule="has(self.call) == (self.action == 'Answer')",message="call is required for action Answer and belongs to no other action"
// +kubebuilder:validation:XValidation:rule="has(self.outcome) == (self.action == 'Answer')",message="outcome is required for action Answer and belongs to no other action"
// +kubebuilder:validation:XValidation:rule="(!has(self.result) && !has(self.content)) || self.action == 'Answer'",message="result and content belong to action Answer"
type Intervention struct {
	// id identifies the intervention; unique within the Session.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9][-A-Za-z0-9_.]*$')",message="id must start with a letter or digit and contain only letters, digits, '-', '_' and '.'"
	ID string `json:"id"`
	// action is Resume, Retry, Goto, Rewind, Upgrade or Answer.
	// +required
	Action InterventionAction `json:"action"`
	// reason says why, for the Session's history and Events.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Reason string `json:"reason,omitempty"`
	// by is who intervened. Stamped by the admission webhook with the caller's
	// username; a different name is refused.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	By string `json:"by,omitempty"`
	// limits, for Resume only, raise the Session's caps in the same act: they
	// become the Session's limits override (as spec.limits), so a cap that
	// stalled it does not stall it again at once.
	// +optional
	Limits *SessionLimits `json:"limits,omitempty"`
	// feedback, for Retry only, is what the pathway's agents are told when
	// the turn runs again, as a decision's reasoning is when it retries with
	// feedback.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Feedback string `json:"feedback,omitempty"`
	// pathway, for Goto only, is the pathway of the Session's journey to move
	// to.
	// +optional
	Pathway Name `json:"pathway,omitempty"`
	// step, for Rewind only, is the status.step to restore the Session to:
	// its pathway, pathway stack, iteration and context become what they were
	// after that step. It must still be kept in status.history.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Step *int32 `json:"step,omitempty"`
	// revision, for Upgrade only, is the Journey revision (a ControllerRevision
	// of the Session's journey, as in the Journey's status.readyRevision) to
	// move the Session to. The Session's journal is replayed on it offline,
	// with no model or tool call: when every step reproduces, the Session
	// moves; otherwise it stays, and the UpgradeBlocked condition names the
	// first step that diverges and how.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision,omitempty"`
	// force, for Upgrade only, moves the Session even when the replay
	// diverges; the history entry records it and who asked.
	// +optional
	Force bool `json:"force,omitempty"`
	// call, for Answer only, is the id of the tool call answered
	// (t-<step>-<index>, as status.turn.toolCalls and the Stalled condition
	// name it).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Call string `json:"call,omitempty"`
	// outcome, for Answer only, is what the person says of the call: Done (it was
	// done: result or content is its result), NotDone (it was not: it is sent
	// again, with the same idempotency key) or Fail (the call fails: the model is
	// told so, with reason) for a call whose outcome is unknown; Accept (with
	// content for a form), Decline or Cancel for a call whose server asked for
	// input: the call is sent again and the server given the answer.
	// +optional
	Outcome AnswerOutcome `json:"outcome,omitempty"`
	// result, for Answer only, is the call's result as text, for outcome Done.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Result string `json:"result,omitempty"`
	// content, for Answer only, is the call's result as a JSON object, for
	// outcome Done (it is the result instead of result when both are set), or
	// the form's fields, for outcome Accept. Its
	// JSON counts against the 2,000 bytes of spec.interventions (the admission
	// webhook checks it).
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Content *apiextensionsv1.JSON `json:"content,omitempty"`
}

// InterventionResult is what became of a processed intervention.
// +kubebuilder:validation:Enum=Applied;Refused
type InterventionResult string

const (
	// InterventionApplied: the intervention applied (status.history has its
	// entry).
	InterventionApplied InterventionResult = "Applied"
	// InterventionRefused: the intervention could not apply and changed nothing
	// but the count of processed interventions; the record's message says why.
	InterventionRefused InterventionResult = "Refused"
)

// InterventionRecord is an intervention as the step that processed it
// recorded it.
type InterventionRecord struct {
	// step is status.step of the step that processed the intervention.
	// +required
	// +kubebuilder:validation:Minimum=0
	Step int64 `json:"step"`
	// result is Applied or Refused.
	// +required
	Result InterventionResult `json:"result"`
	// message says why a refused intervention could not apply.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
	// intervention is the intervention as spec.interventions held it when it
	// was processed (its action, arguments and who sent it), kept after it
	// leaves spec.interventions.
	// +required
	Intervention Intervention `json:"intervention"`
}

// SessionStatus is where a Session is and how it got there.
type SessionStatus struct {
	// phase is the lifecycle phase; the conditions say the same for tools
	// (docs/operations.md). Pending: not started yet (its Journey is missing or
	// not Ready, or it is suspended). Running: it has work to do (a message, an
	// outcome, an agent call). WaitingForInput: nothing to do until a message or
	// an External outcome arrives. AwaitingApproval: a decision waits for an
	// entry in spec.approvals. Escalated: a decision's confidence was too low;
	// an approval naming it moves it on. Completed: the journey finished.
	// Terminal. Failed: the journey failed (a failure transition closed it).
	// Terminal. Cancelled: spec.cancel was set. Terminal. A Session stalled by a
	// cap keeps its phase; the Stalled condition and REASON say why.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// currentPathway is the pathway the Session is in.
	// +optional
	CurrentPathway string `json:"currentPathway,omitempty"`
	// pathwayStack holds the pathways detours return to, innermost last.
	// +optional
	// +listType=atomic
	PathwayStack []string `json:"pathwayStack,omitempty"`
	// iteration is the current cycle, starting at 1; JumpBack starts a new one.
	// +optional
	Iteration int32 `json:"iteration,omitempty"`
	// confidence is the confidence of the last decision.
	// +optional
	Confidence Confidence `json:"confidence,omitempty"`
	// step counts the steps that changed this status.
	// +optional
	Step int64 `json:"step,omitempty"`
	// writes counts the controller's writes of this status (several may
	// share a step: a retry, a call marked sent). Each write is conditioned
	// on the count it read, so one computed from an older copy fails.
	// +optional
	Writes int64 `json:"writes,omitempty"`
	// turns counts processed turns (messages, outcomes and entry runs).
	// +optional
	Turns int32 `json:"turns,omitempty"`
	// pathwayTurns counts turns in the current pathway since it was entered.
	// +optional
	PathwayTurns int32 `json:"pathwayTurns,omitempty"`
	// transitions counts transitions taken.
	// +optional
	Transitions int32 `json:"transitions,omitempty"`
	// retries counts Retry actions per pathway in the current iteration.
	// +optional
	Retries map[string]int32 `json:"retries,omitempty"`
	// processedMessages is how many messages of the conversation have been
	// processed (or are being processed, by the turn in progress), counted from
	// the first message ever sent: dropping processed messages from
	// spec.messages does not change it.
	// +optional
	ProcessedMessages int32 `json:"processedMessages,omitempty"`
	// processedOutcomes is how many External outcomes have been looked at,
	// counted from the first one ever sent (dropped ones included).
	// +optional
	ProcessedOutcomes int32 `json:"processedOutcomes,omitempty"`
	// processedApprovals is how many approvals have been looked at, counted
	// from the first one ever sent (dropped ones included).
	// +optional
	ProcessedApprovals int32 `json:"processedApprovals,omitempty"`
	// processedInterventions is how many interventions have been applied or
	// refused, counted from the first one ever sent (dropped ones included).
	// +optional
	ProcessedInterventions int32 `json:"processedInterventions,omitempty"`
	// interventions records the interventions processed, applied or refused,
	// oldest first: each whole, with the step that processed it and, when
	// refused, why. A refusal is reported here and by an InterventionRefused
	// Event; it is not a turn, so it leaves lastTurn and TurnFailed alone. The
	// newest records are kept within 4 KiB and 64 entries. A replay of the
	// Session (kubectl journey upgrade, fork) gives each intervention again at
	// its step, whether spec.interventions still holds it or not.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Interventions []InterventionRecord `json:"interventions,omitempty"`
	// interventionLimits are the caps Resume interventions raised (their
	// limits, merged in order). They override the Journey's limits as
	// spec.limits does; where both set a cap, the higher applies.
	// +optional
	InterventionLimits *SessionLimits `json:"interventionLimits,omitempty"`
	// sessionTimeoutFrom is when a Resume intervention lifted a session
	// timeout: limits.sessionTimeout counts from it instead of the Session's
	// creation.
	// +optional
	SessionTimeoutFrom *metav1.Time `json:"sessionTimeoutFrom,omitempty"`
	// turn is the turn in progress, when it waits on an agent between steps.
	// +optional
	Turn *TurnProgress `json:"turn,omitempty"`
	// toolProgress is the last progress the server of the tool call in flight
	// reported, written at most every few seconds while the call runs and
	// removed once its answer is written.
	// +optional
	ToolProgress *ToolProgress `json:"toolProgress,omitempty"`
	// lastDecision is the most recent transition decision.
	// +optional
	LastDecision *DecisionRecord `json:"lastDecision,omitempty"`
	// pendingEffect is an agent's answer, recorded before the next step applies
	// it.
	// +optional
	PendingEffect *EffectRecord `json:"pendingEffect,omitempty"`
	// agentRetry counts the transient failures (timeouts, rate limits, server
	// errors) of the agent call the Session waits on. The call is given up, and
	// its error journaled as the call's failed answer, after the pathway's retry
	// limit of attempts or once its timeout has passed since the first attempt.
	// +optional
	AgentRetry *AgentRetry `json:"agentRetry,omitempty"`
	// Journal keeps every agent answer the Session's steps were given, oldest
	// first, up to limits.maxJournal entries, so a Session can be recorded and
	// replayed exactly. The engine never reads it. It is stored in
	// journalEntries, one JSON string an answer (stored.go).
	Journal []EffectRecord `json:"-"`
	// journal keeps every agent answer the Session's steps were given, oldest
	// first, up to limits.maxJournal entries, so a Session can be recorded and
	// replayed exactly. Each entry is one answer: an EffectRecord (id, kind,
	// step, inputHash, agent, toolCall, result, rewound, spanID, degradedTo)
	// encoded as a JSON object in a string, so that the API server stores and
	// checks an answer as one value, not as a dozen (docs/PERFORMANCE.md).
	// kubectl journey history and record show the answers decoded.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=500
	JournalEntries []EncodedEntry `json:"journal,omitempty"`
	// journalDropped counts the oldest journal entries dropped past
	// limits.maxJournal.
	// +optional
	JournalDropped int32 `json:"journalDropped,omitempty"`
	// lastTurn is the typed outcome of the last turn: the single source of truth
	// for what happened in it.
	// +optional
	LastTurn *TurnOutcome `json:"lastTurn,omitempty"`
	// context is the accumulated context.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Context *apiextensionsv1.JSON `json:"context,omitempty"`
	// contextVersion increments on every context change.
	// +optional
	ContextVersion int64 `json:"contextVersion,omitempty"`
	// contextHistory keeps the last context versions (deltas: what each change
	// added or replaced), for audit and rollback, bounded in count and in bytes.
	// +optional
	// +listType=atomic
	ContextHistory []ContextVersion `json:"contextHistory,omitempty"`
	// History keeps the last limits.maxHistory transitions, oldest first; with an
	// audit sink, the manager's audit trail keeps every one (docs/security.md). It is
	// stored in historyEntries, one JSON string a transition (stored.go).
	History []HistoryEntry `json:"-"`
	// history keeps the last limits.maxHistory transitions, oldest first;
	// with an audit sink, the manager's audit trail keeps every one
	// (docs/security.md). Each entry is one transition: a HistoryEntry
	// (time, step, from, to, action, source, transition, confidence,
	// iteration, messageID, reason, intervention, by, pathwayStack) encoded
	// as a JSON object in a string, so that the API server stores and checks
	// a transition as one value, not as a dozen (docs/PERFORMANCE.md).
	// kubectl journey history shows the transitions decoded.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=500
	HistoryEntries []EncodedEntry `json:"history,omitempty"`
	// transcript is the conversation so far, oldest first: each turn's user
	// message with the reply that answered it. Pathway agents see it as
	// alternating user and assistant messages. It is bounded by
	// limits.maxTranscriptBytes: the oldest exchanges are dropped whole (counted
	// in transcriptDropped).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Transcript []Exchange `json:"transcript,omitempty"`
	// transcriptDropped counts the exchanges dropped from the front of
	// transcript.
	// +optional
	TranscriptDropped int32 `json:"transcriptDropped,omitempty"`
	// usage sums token usage and cost of all agent calls.
	// +optional
	Usage Usage `json:"usage,omitzero"`
	// budgets is what the Session spent in each Budget that selects it, in
	// that Budget's current window: written in the same status write as the
	// answers that spent it, so a Budget's spend is the sum of these entries
	// and nothing is counted twice, across manager restarts too.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Budgets []BudgetCharge `json:"budgets,omitempty"`
	// toolCache holds the results of tools with cache Session, reused for
	// identical calls.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	ToolCache []ToolCacheEntry `json:"toolCache,omitempty"`
	// journeyRevision is the Journey ControllerRevision the Session is pinned
	// to.
	// +optional
	JourneyRevision string `json:"journeyRevision,omitempty"`
	// reason is what `kubectl get sessions` shows in REASON: the Ready
	// condition's reason, except TurnFailed while the Session is healthy (Ready
	// True, not Completed) and its last turn failed.
	// +optional
	Reason string `json:"reason,omitempty"`
	// conditions: Ready, Reconciling, Stalled, AwaitingInput, AwaitingApproval,
	// AgentAvailable, TurnFailed.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// startTime is when the Session took its first step.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// completionTime is when the Session reached a terminal phase.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// lastActivityTime is when a step last changed the Session's status (a
	// message or External outcome taken in, an agent answer applied, a
	// transition). limits.idleTimeout counts from it.
	// +optional
	LastActivityTime *metav1.Time `json:"lastActivityTime,omitempty"`
	// audit is how far the Session's audit trail is known to be written: the
	// manager writes the audit records of each status write to its audit sink
	// after the write, and records here, in its next write, what the sink
	// acknowledged. After a restart the manager writes the records of the steps
	// after acknowledgedStep again, with the same ids. Set only when the manager
	// runs with an audit sink.
	// +optional
	Audit *AuditCursor `json:"audit,omitempty"`
	// traceContext is the OpenTelemetry trace of the Session, set at its first
	// step when the manager runs with tracing: every later step, on any replica
	// and after any restart, is a span of this trace under the Session's root
	// span.
	// +optional
	TraceContext *TraceContext `json:"traceContext,omitempty"`
}

// AuditCursor is the part of a Session's status, as of its last status write
// whose audit records the audit sink acknowledged, that tells which records
// came after it.
type AuditCursor struct {
	// acknowledgedStep is status.step of the last write whose audit records
	// the sink acknowledged.
	// +required
	// +kubebuilder:validation:Minimum=0
	AcknowledgedStep int64 `json:"acknowledgedStep"`
	// phase is status.phase at acknowledgedStep.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// processedApprovals is status.processedApprovals at acknowledgedStep.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ProcessedApprovals int32 `json:"processedApprovals,omitempty"`
	// processedInterventions is status.processedInterventions at
	// acknowledgedStep.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ProcessedInterventions int32 `json:"processedInterventions,omitempty"`
	// journal is how many answers status.journal had taken at
	// acknowledgedStep, dropped ones included.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Journal int32 `json:"journal,omitempty"`
	// decision is status.lastDecision at acknowledgedStep, as <id>/<state>.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Decision string `json:"decision,omitempty"`
}

// TraceContext identifies a Session's trace and its root span, in W3C trace
// context form.
type TraceContext struct {
	// traceID is the trace's id: 32 lowercase hexadecimal digits.
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{32}$`
	TraceID string `json:"traceID"`
	// spanID is the Session's root span: 16 lowercase hexadecimal digits. Each
	// step's span is its child.
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{16}$`
	SpanID string `json:"spanID"`
}

// TurnTrigger is what started a turn.
// +kubebuilder:validation:Enum=Message;Entry;Outcome;Approval;Intervention
type TurnTrigger string

const (
	TurnMessage         TurnTrigger = "Message"
	TurnEntry           TurnTrigger = "Entry"
	TurnExternalOutcome TurnTrigger = "Outcome"
	TurnApproval        TurnTrigger = "Approval"
	// TurnIntervention: an intervention that could not apply, recorded with why
	// by earlier versions of the operator; a refusal is now recorded in
	// status.interventions and is not a turn.
	TurnIntervention TurnTrigger = "Intervention"
)

// TurnStage is how far a turn in progress has got.
// +kubebuilder:validation:Enum=Route;Run;Decide
type TurnStage string

const (
	// StageRoute evaluates global transitions (may wait on the intent
	// classifier).
	StageRoute TurnStage = "Route"
	// StageRun runs the pathway (may wait on its agents).
	StageRun TurnStage = "Run"
	// StageDecide picks the next pathway by outcome (may wait on a decision
	// agent).
	StageDecide TurnStage = "Decide"
)

// TurnProgress is a turn that spans several steps because it waits on
// agents.
type TurnProgress struct {
	// trigger is what started the turn.
	// +required
	Trigger TurnTrigger `json:"trigger"`
	// stage is how far the turn has got.
	// +required
	Stage TurnStage `json:"stage"`
	// messageID is the message being processed, for Message turns.
	// +optional
	MessageID string `json:"messageID,omitempty"`
	// pathway is the pathway the turn runs in.
	// +optional
	Pathway string `json:"pathway,omitempty"`
	// resultType is the outcome of the Run stage, carried into Decide.
	// +optional
	ResultType ResultType `json:"resultType,omitempty"`
	// outputs of the Run stage, carried into Decide.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Outputs *apiextensionsv1.JSON `json:"outputs,omitempty"`
	// toolCalls are the turn's tool calls so far, each journaled before it is
	// made.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	ToolCalls []ToolCallProgress `json:"toolCalls,omitempty"`
	// pipelineAgent is the agent, counted from 0, of the pathway's Sequential
	// pipeline that runs the turn now, when the pathway offers its agents
	// tools: each agent answers, calling tools as it needs, before the next.
	// +optional
	PipelineAgent int32 `json:"pipelineAgent,omitempty"`
	// pipelineFirstCall is the index in toolCalls of pipelineAgent's first
	// call; the calls before it are earlier agents'.
	// +optional
	PipelineFirstCall int32 `json:"pipelineFirstCall,omitempty"`
	// pipelineOutputs are the outputs of the pipeline's earlier agents,
	// merged in order.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	PipelineOutputs *apiextensionsv1.JSON `json:"pipelineOutputs,omitempty"`
	// pipelineReply is the last reply an earlier agent of the pipeline gave.
	// +optional
	PipelineReply string `json:"pipelineReply,omitempty"`
}

// Exchange is one turn of the conversation: the user's message and the reply
// that answered it (either may be empty: a pathway that runs on entry
// replies unasked).
type Exchange struct {
	// messageID is the id of the message in spec.messages, empty for a turn no
	// message started.
	// +optional
	MessageID string `json:"messageID,omitempty"`
	// pathway is the pathway that replied.
	// +optional
	Pathway string `json:"pathway,omitempty"`
	// user is the user's message.
	// +optional
	User string `json:"user,omitempty"`
	// assistant is the reply.
	// +optional
	Assistant string `json:"assistant,omitempty"`
	// toolCalls are the tool calls the turn made, in order, with short
	// previews of their arguments and results, so later turns know what
	// was looked up or done. A cut preview ends saying so.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	ToolCalls []ExchangeToolCall `json:"toolCalls,omitempty"`
	// toolCallsOmitted counts the turn's tool calls left out of toolCalls
	// to keep the exchange small.
	// +optional
	ToolCallsOmitted int32 `json:"toolCallsOmitted,omitempty"`
	// step is the status.step that ended the turn.
	// +optional
	Step int64 `json:"step,omitempty"`
	// rewound says a Rewind intervention undid this exchange: it stays in
	// the conversation as what happened, but pathway agents no longer see it.
	// +optional
	Rewound bool `json:"rewound,omitempty"`
	// outcome is the External outcome that started this turn, as it was
	// sent, kept after it leaves spec.outcomes so that the Session can still
	// be recorded and replayed (pathway agents do not see it).
	// +optional
	Outcome *ExternalOutcome `json:"outcome,omitempty"`
	// approval is the approval this exchange records, as it was sent (an
	// approval exchange has no message and no reply), kept after it leaves
	// spec.approvals so that the Session can still be recorded and replayed.
	// +optional
	Approval *Approval `json:"approval,omitempty"`
	// inputNumber is the position, from 1, of outcome among every External
	// outcome the Session was sent, or of approval among every approval.
	// +optional
	InputNumber int32 `json:"inputNumber,omitempty"`
}

// ExchangeToolCall is a tool call of a past turn as the conversation
// remembers it.
type ExchangeToolCall struct {
	// tool is the tool called.
	// +required
	// +kubebuilder:validation:MaxLength=256
	Tool string `json:"tool"`
	// args previews the call's arguments (JSON, cut when long).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Args string `json:"args,omitempty"`
	// result previews what came of the call: the tool's result (JSON, cut
	// when long), or why the call failed or was refused or rejected.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Result string `json:"result,omitempty"`
	// state is Done, Failed or Rejected.
	// +optional
	State ToolCallState `json:"state,omitempty"`
}

// AgentRetry is an agent call that failed transiently and will be tried
// again.
type AgentRetry struct {
	// inputHash identifies the call: the input hash of the effect.
	// +required
	// +kubebuilder:validation:MaxLength=64
	InputHash string `json:"inputHash"`
	// attempts is how many times the call failed transiently.
	// +required
	// +kubebuilder:validation:Minimum=1
	Attempts int32 `json:"attempts"`
	// since is when the call was first tried.
	// +required
	Since metav1.Time `json:"since"`
}

// EffectKind is the kind of agent call a step asked for.
// +kubebuilder:validation:Enum=ClassifyIntent;RunPathway;Decide;CallTool
type EffectKind string

const (
	EffectClassifyIntent EffectKind = "ClassifyIntent"
	EffectRunPathway     EffectKind = "RunPathway"
	EffectDecide         EffectKind = "Decide"
	EffectCallTool       EffectKind = "CallTool"
)

// EffectRecord is a journaled agent call: what was asked (its input hash)
// and the answer.
type EffectRecord struct {
	// id is unique per Session: <session UID>/<step>/<input hash prefix>.
	// +required
	ID string `json:"id"`
	// kind is the kind of call.
	// +required
	Kind EffectKind `json:"kind"`
	// step is the status.step the call was made for.
	// +required
	Step int64 `json:"step"`
	// inputHash is the SHA-256 of the request the agent saw.
	// +required
	InputHash string `json:"inputHash"`
	// agent is the agent that answered.
	// +optional
	Agent string `json:"agent,omitempty"`
	// toolCall is the id of the tool call a CallTool record answers.
	// +optional
	ToolCall string `json:"toolCall,omitempty"`
	// result is the agent's answer.
	// +required
	Result AgentResult `json:"result"`
	// rewound says a Rewind intervention undid the step this answer was given
	// for: the answer stays in the journal as what happened.
	// +optional
	Rewound bool `json:"rewound,omitempty"`
	// spanID is the span, in the Session's trace (status.traceContext), of the
	// step that obtained the answer, when the manager runs with tracing: the
	// span of the step that applies the answer links to it.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{16}$`
	SpanID string `json:"spanID,omitempty"`
	// degradedTo says the call was made with a Budget's degradeTo agent in
	// place of the pathway's own (onExhausted: Degrade): a replay of the
	// Session (an upgrade, a fork) makes it so again.
	// +optional
	DegradedTo *Degradation `json:"degradedTo,omitempty"`
}

// AgentResult is an agent's answer, as journaled. Only the fields of its
// kind are set.
type AgentResult struct {
	// intent is the classified intent (a global transition's name) or "none".
	// +optional
	Intent string `json:"intent,omitempty"`
	// destination is the decision's chosen pathway.
	// +optional
	Destination string `json:"destination,omitempty"`
	// confidence of the classification or decision.
	// +optional
	Confidence Confidence `json:"confidence,omitempty"`
	// reasoning the agent gave.
	// +optional
	Reasoning string `json:"reasoning,omitempty"`
	// reply is the pathway's assistant text.
	// +optional
	Reply string `json:"reply,omitempty"`
	// outputs of the pathway turn.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Outputs *apiextensionsv1.JSON `json:"outputs,omitempty"`
	// resultType of the pathway turn.
	// +optional
	ResultType ResultType `json:"resultType,omitempty"`
	// complete says whether the pathway turn finished the pathway.
	// +optional
	Complete *bool `json:"complete,omitempty"`
	// usage is what the call cost.
	// +optional
	Usage Usage `json:"usage,omitzero"`
	// toolResult is a tool's result, for CallTool records.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:XPreserveUnknownFields
	ToolResult *apiextensionsv1.JSON `json:"toolResult,omitempty"`
	// durationMs is how long a tool call took.
	// +optional
	DurationMs int64 `json:"durationMs,omitempty"`
	// toolCalls are the tool calls a pathway's model answered with instead
	// of a final answer; each is checked, then made as its own step.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	ToolCalls []ModelToolCall `json:"toolCalls,omitempty"`
	// elicitation, for CallTool records, is the input the server asked the
	// user for during the call (MCP elicitation) instead of answering.
	// +optional
	Elicitation *ToolElicitation `json:"elicitation,omitempty"`
	// failure says why the call gave no usable answer (it is then unclear / no
	// intent).
	// +optional
	Failure *Failure `json:"failure,omitempty"`
}

// DecisionSource is who decided a transition.
// +kubebuilder:validation:Enum=Rule;Agent;Approval;Transition;Outcome;Next;Return;Cap;Timeout;Human
type DecisionSource string

const (
	SourceRule       DecisionSource = "Rule"
	SourceAgent      DecisionSource = "Agent"
	SourceApproval   DecisionSource = "Approval"
	SourceTransition DecisionSource = "Transition"
	SourceOutcome    DecisionSource = "Outcome"
	SourceNext       DecisionSource = "Next"
	SourceReturn     DecisionSource = "Return"
	SourceCap        DecisionSource = "Cap"
	// SourceTimeout: an approval timeout decided (its onTimeout applied).
	SourceTimeout DecisionSource = "Timeout"
	// SourceHuman: a person decided, through spec.interventions.
	SourceHuman DecisionSource = "Human"
)

// DecisionState is where a decision stands.
// +kubebuilder:validation:Enum=Applied;Pending;Approved;Rejected;Escalated;RetriedWithFeedback
type DecisionState string

const (
	DecisionApplied   DecisionState = "Applied"
	DecisionPending   DecisionState = "Pending"
	DecisionApproved  DecisionState = "Approved"
	DecisionRejected  DecisionState = "Rejected"
	DecisionEscalated DecisionState = "Escalated"
	// DecisionRetriedWithFeedback: the deciding pathway runs again with the
	// decision's reasoning as feedback.
	DecisionRetriedWithFeedback DecisionState = "RetriedWithFeedback"
)

// DecisionRecord is a transition decision.
type DecisionRecord struct {
	// id names the decision, for approvals: d-<step>.
	// +required
	ID string `json:"id"`
	// transition is the global transition or outcome transition (on<Result>)
	// that led here.
	// +optional
	Transition string `json:"transition,omitempty"`
	// from is the pathway the decision was made in.
	// +optional
	From string `json:"from,omitempty"`
	// to is the chosen destination.
	// +optional
	To string `json:"to,omitempty"`
	// action is what moving there means.
	// +optional
	Action Action `json:"action,omitempty"`
	// source is who decided.
	// +optional
	Source DecisionSource `json:"source,omitempty"`
	// agent that decided, for agent decisions.
	// +optional
	Agent string `json:"agent,omitempty"`
	// confidence of the decision.
	// +optional
	Confidence Confidence `json:"confidence,omitempty"`
	// reasoning the agent or rule gave.
	// +optional
	Reasoning string `json:"reasoning,omitempty"`
	// allowedDestinations the decision could choose from.
	// +optional
	// +listType=atomic
	AllowedDestinations []string `json:"allowedDestinations,omitempty"`
	// state is Applied, Pending (awaiting approval), Approved, Rejected or
	// Escalated.
	// +optional
	State DecisionState `json:"state,omitempty"`
	// waitingSince is when the Session began to wait on a person for this
	// decision: an approval timeout counts from it.
	// +optional
	WaitingSince *metav1.Time `json:"waitingSince,omitempty"`
}

// FinishReason is how a turn ended.
// +kubebuilder:validation:Enum=Success;Error;IterationLimit;Deadline;PolicyDenied;BudgetExceeded;LoopDetected;TurnLimit;TransitionLimit;AwaitingApproval;Escalated;Cancelled;ToolCallLimit
type FinishReason string

const (
	FinishSuccess          FinishReason = "Success"
	FinishError            FinishReason = "Error"
	FinishIterationLimit   FinishReason = "IterationLimit"
	FinishDeadline         FinishReason = "Deadline"
	FinishPolicyDenied     FinishReason = "PolicyDenied"
	FinishBudgetExceeded   FinishReason = "BudgetExceeded"
	FinishLoopDetected     FinishReason = "LoopDetected"
	FinishTurnLimit        FinishReason = "TurnLimit"
	FinishTransitionLimit  FinishReason = "TransitionLimit"
	FinishAwaitingApproval FinishReason = "AwaitingApproval"
	FinishEscalated        FinishReason = "Escalated"
	FinishCancelled        FinishReason = "Cancelled"
	FinishToolCallLimit    FinishReason = "ToolCallLimit"
)

// TurnOutcome is the typed result of one turn. A message's turn includes the
// runs of the runOn Entry pathways the message led into (greet -> diagnose ->
// resolved is one turn with three replies): each is a run of its own (it
// counts in status.turns and keeps its own exchange in status.transcript),
// recorded here as the turn going on. The turn's transitions are the entries
// of status.history with its messageID.
type TurnOutcome struct {
	// trigger is what started the turn.
	// +optional
	Trigger TurnTrigger `json:"trigger,omitempty"`
	// messageID is the message the turn processed.
	// +optional
	MessageID string `json:"messageID,omitempty"`
	// pathway is the pathway that ran last.
	// +optional
	Pathway string `json:"pathway,omitempty"`
	// finishReason is how the turn (its last pathway run) ended; empty while
	// the turn is in progress.
	// +optional
	FinishReason FinishReason `json:"finishReason,omitempty"`
	// assistantText is the reply of the pathway that ran last: its own reply,
	// or its fallback reply when it ended without one and the turn must answer
	// (see replies).
	// +optional
	AssistantText string `json:"assistantText,omitempty"`
	// replies are every reply of the turn, in order: one for each pathway run
	// that replied, including the entry runs a message led into. A turn that
	// ends without a reply of its own answers with a fallback reply (fallback
	// true): the pathway's fallbackReply, else the Journey's, else a default
	// sentence that says what happened. It does when its run failed or was
	// stopped (by a cap, the budget, maxToolCalls), or when the message's turn
	// ends with no reply at all (an empty model answer, a pathway that waits
	// for input, a decision that waits for a person). Each text is cut at
	// 1 KiB and the list kept under 1.5 KiB, newest last; assistantText holds
	// the last reply whole.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Replies []TurnReply `json:"replies,omitempty"`
	// resultType is the pathway's outcome.
	// +optional
	ResultType ResultType `json:"resultType,omitempty"`
	// complete says whether the turn finished its pathway.
	// +optional
	Complete bool `json:"complete,omitempty"`
	// transition is the transition the turn took, if any.
	// +optional
	Transition string `json:"transition,omitempty"`
	// outputs are the pathway's outputs.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Outputs *apiextensionsv1.JSON `json:"outputs,omitempty"`
	// failures are what went wrong, typed, in all the turn's pathway runs. A
	// turn with failures, or that ended on a failure finishReason, sets the
	// TurnFailed condition.
	// +optional
	// +listType=atomic
	Failures []Failure `json:"failures,omitempty"`
	// usage is what the turn's agent calls cost.
	// +optional
	Usage Usage `json:"usage,omitzero"`
	// toolCalls are the tool calls of the turn's last pathway run.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	ToolCalls []ToolCallRecord `json:"toolCalls,omitempty"`
	// degradedTo says the turn's pathway ran on a cheaper agent: a Budget
	// with onExhausted: Degrade had no room for the pathway's own agents.
	// +optional
	DegradedTo *Degradation `json:"degradedTo,omitempty"`
}

// TurnReply is one reply of a turn.
type TurnReply struct {
	// pathway is the pathway that replied.
	// +optional
	Pathway string `json:"pathway,omitempty"`
	// text is the reply, cut at 1 KiB (a cut text ends saying so).
	// +required
	Text string `json:"text"`
	// fallback says the pathway ended without a reply of its own and this is
	// its fallback reply.
	// +optional
	Fallback bool `json:"fallback,omitempty"`
}

// FailureSource is where a failure came from.
// +kubebuilder:validation:Enum=System;LLM;Tool;Transport;Policy
type FailureSource string

const (
	FailureSystem    FailureSource = "System"
	FailureLLM       FailureSource = "LLM"
	FailureTool      FailureSource = "Tool"
	FailureTransport FailureSource = "Transport"
	FailurePolicy    FailureSource = "Policy"
)

// FailureKind classifies a failure.
// +kubebuilder:validation:Enum=Exception;Timeout;Validation;Policy;RateLimit;Unknown
type FailureKind string

const (
	FailureException  FailureKind = "Exception"
	FailureTimeout    FailureKind = "Timeout"
	FailureValidation FailureKind = "Validation"
	FailurePolicyKind FailureKind = "Policy"
	FailureRateLimit  FailureKind = "RateLimit"
	FailureUnknown    FailureKind = "Unknown"
)

// Failure is a typed failure record.
type Failure struct {
	// source is where it came from.
	// +required
	Source FailureSource `json:"source"`
	// component is what failed: an agent, a pathway, a transition or the engine.
	// +optional
	Component string `json:"component,omitempty"`
	// kind classifies it.
	// +required
	Kind FailureKind `json:"kind"`
	// message is a user-safe summary. Never contains secrets.
	// +optional
	Message string `json:"message,omitempty"`
}

// ContextVersion records one context change.
type ContextVersion struct {
	// version is the contextVersion after the change.
	// +required
	Version int64 `json:"version"`
	// step is the status.step that made the change.
	// +optional
	Step int64 `json:"step,omitempty"`
	// pathway made the change.
	// +optional
	Pathway string `json:"pathway,omitempty"`
	// keys are the top-level fields that changed.
	// +optional
	// +listType=atomic
	Keys []string `json:"keys,omitempty"`
	// previous holds the values the change replaced or removed (null for a key
	// that was absent). A key whose list the change appended to is in appended
	// instead.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Previous *apiextensionsv1.JSON `json:"previous,omitempty"`
	// appended holds, for each list key the change appended to, the items it
	// added: the list before the change is the list after it without them. With
	// previous, a version is a delta, so the context at any kept version can be
	// rebuilt from the current one.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Appended *apiextensionsv1.JSON `json:"appended,omitempty"`
}

// HistoryEntry records one transition.
type HistoryEntry struct {
	// time of the transition (the step's clock).
	// +optional
	Time metav1.Time `json:"time,omitzero"`
	// step is status.step when it happened.
	// +optional
	Step int64 `json:"step,omitempty"`
	// from is the pathway left.
	// +optional
	From string `json:"from,omitempty"`
	// to is the pathway entered.
	// +optional
	To string `json:"to,omitempty"`
	// action is what the move meant.
	// +optional
	Action Action `json:"action,omitempty"`
	// source is who decided.
	// +optional
	Source DecisionSource `json:"source,omitempty"`
	// transition names the rule (global transition name, on<Result>, next,
	// return).
	// +optional
	Transition string `json:"transition,omitempty"`
	// confidence of the decision, when there was one.
	// +optional
	Confidence Confidence `json:"confidence,omitempty"`
	// iteration after the move.
	// +optional
	Iteration int32 `json:"iteration,omitempty"`
	// messageID that caused it, if any.
	// +optional
	MessageID string `json:"messageID,omitempty"`
	// reason explains the move (a block reason, a decision's reasoning, an
	// intervention's reason).
	// +optional
	Reason string `json:"reason,omitempty"`
	// intervention is the action of the intervention that made this entry,
	// when a person intervened (source Human).
	// +optional
	Intervention InterventionAction `json:"intervention,omitempty"`
	// by is who intervened, for entries an intervention made.
	// +optional
	By string `json:"by,omitempty"`
	// pathwayStack is status.pathwayStack after the move, so a Rewind can
	// restore it.
	// +optional
	// +listType=atomic
	PathwayStack []string `json:"pathwayStack,omitempty"`
}

// Usage sums tokens, cost and tool calls.
type Usage struct {
	// promptTokens used.
	// +optional
	PromptTokens int64 `json:"promptTokens,omitempty"`
	// completionTokens used.
	// +optional
	CompletionTokens int64 `json:"completionTokens,omitempty"`
	// costUSD is the cost in US dollars, a decimal string.
	// +optional
	CostUSD string `json:"costUSD,omitempty"`
	// toolCalls counts the tool calls made: a call counts when its answer
	// (a result or a failure from the tool's server or builtin expression)
	// is applied. Calls refused before they are made, rejected by a person
	// or answered from the Session's tool cache do not count.
	// +optional
	ToolCalls int64 `json:"toolCalls,omitempty"`
}

// BudgetCharge is what a Session spent in one Budget's window.
type BudgetCharge struct {
	// name of the Budget.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// windowStart is the start of the Budget window the spend counts in.
	// +required
	WindowStart metav1.Time `json:"windowStart"`
	// costUSD the Session's answered calls cost in that window, in US
	// dollars, a decimal string.
	// +optional
	CostUSD string `json:"costUSD,omitempty"`
	// tokens they used, prompt plus completion.
	// +optional
	Tokens int64 `json:"tokens,omitempty"`
	// toolCalls the Session made in that window.
	// +optional
	ToolCalls int64 `json:"toolCalls,omitempty"`
	// modelCalls the Session made in that window.
	// +optional
	ModelCalls int64 `json:"modelCalls,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sess,categories=journeyops
// +kubebuilder:printcolumn:name="Journey",type=string,JSONPath=`.spec.journeyRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Pathway",type=string,JSONPath=`.status.currentPathway`
// +kubebuilder:printcolumn:name="Iteration",type=integer,JSONPath=`.status.iteration`
// +kubebuilder:printcolumn:name="Confidence",type=string,JSONPath=`.status.confidence`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Session is one run of a journey.
// +kubebuilder:validation:XValidation:rule="self.spec.?outcomesDropped.orValue(0) <= self.?status.?processedOutcomes.orValue(0)",message="spec.outcomesDropped is past the processed outcomes (status.processedOutcomes): only processed outcomes can be dropped from spec.outcomes; keep the pending ones"
// +kubebuilder:validation:XValidation:rule="self.spec.?approvalsDropped.orValue(0) <= self.?status.?processedApprovals.orValue(0)",message="spec.approvalsDropped is past the processed approvals (status.processedApprovals): only processed approvals can be dropped from spec.approvals; keep the pending ones"
// +kubebuilder:validation:XValidation:rule="self.spec.?interventionsDropped.orValue(0) <= self.?status.?processedInterventions.orValue(0)",fieldPath=".spec.interventionsDropped",message="spec.interventionsDropped is past the processed interventions (status.processedInterventions): only processed interventions can be dropped from spec.interventions; keep the pending ones"
// +kubebuilder:validation:XValidation:rule="self.spec.?messagesDropped.orValue(0) <= self.?status.?processedMessages.orValue(0) - (self.?status.?turn.?trigger.orValue('None') == 'Message' ? 1 : 0)",message="spec.messagesDropped is past the processed messages (status.processedMessages, less the message of a turn in progress): only processed messages can be dropped from spec.messages; keep the pending ones"
type Session struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the user sent.
	// +required
	Spec SessionSpec `json:"spec"`
	// status is where the Session is.
	// +optional
	Status SessionStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// SessionList contains a list of Session.
type SessionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Sessions.
	Items []Session `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Session{}, &SessionList{})
}
