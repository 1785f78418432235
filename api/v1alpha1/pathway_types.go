package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PathwaySpec declares one pathway: what it does (its signature), who runs
// it, and where the Session goes when a turn completes.
// +kubebuilder:validation:XValidation:rule="self.executor != 'External' || !has(self.agents) || size(self.agents) == 0",fieldPath=".agents",message="an External pathway has no agents: its outcome is posted on the Session"
// +kubebuilder:validation:XValidation:rule="self.executor != 'External' || !has(self.builtin)",fieldPath=".builtin",message="an External pathway has no builtin section: its outcome is posted on the Session"
type PathwaySpec struct {
	// signature is what the pathway does: instructions, intent, guidelines,
	// inputs and outputs. Agents are prompted from it.
	// +optional
	Signature Signature `json:"signature,omitzero"`

	// agents are the Journey agents that run the pathway, in pipeline order.
	// Empty means the builtin provider.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Agents []Name `json:"agents,omitempty"`

	// pipeline is how several agents combine: Sequential, Parallel, Router or
	// Ensemble.
	// +optional
	// +kubebuilder:default=Sequential
	Pipeline Pipeline `json:"pipeline,omitempty"`

	// executor is Agent (agents run the pathway) or External (the Session waits
	// for an outcome posted in spec.outcomes).
	// +optional
	// +kubebuilder:default=Agent
	Executor Executor `json:"executor,omitempty"`

	// runOn is Message (a turn runs for each user message; conversational
	// pathways) or Entry (a turn runs as soon as the Session enters the pathway;
	// workflow steps).
	// +optional
	// +kubebuilder:default=Message
	RunOn RunOn `json:"runOn,omitempty"`

	// accumulate lists the outputs merged into the Session context after each
	// turn: scalars replace, lists append without duplicates, objects
	// deep-merge.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	Accumulate []string `json:"accumulate,omitempty"`

	// next is the pathway (local name in the Journey) a complete turn moves to
	// when no outcome transition applies. Without it, a complete turn ends the
	// journey (or, in a detour, returns to the previous pathway).
	// +optional
	Next Name `json:"next,omitempty"`

	// returnBehavior makes the pathway a detour: entering it pushes the current
	// pathway, completing it pops back there.
	// +optional
	ReturnBehavior *ReturnBehavior `json:"returnBehavior,omitempty"`

	// retry bounds Retry actions on this pathway, and the attempts of an agent
	// call that fails transiently (overrides the journey's
	// retryLimitPerPathway).
	// +optional
	Retry *RetryPolicy `json:"retry,omitempty"`

	// timeout bounds each call the pathway's turn makes (an agent, a decision
	// agent, a tool), retries included: a call still without an answer this
	// long after its first attempt is abandoned and the turn fails (result
	// failure, so onFailure applies). It bounds every call on its own, not the
	// whole turn.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="timeout must be a positive duration such as 30s, 2m or 1m30s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// transitions pick the next pathway by the turn's outcome.
	// +optional
	Transitions *OutcomeTransitions `json:"transitions,omitempty"`

	// builtin is how the builtin provider answers for this pathway, offline.
	// +optional
	Builtin *BuiltinPathway `json:"builtin,omitempty"`

	// tools are the Journey tools this pathway's agents may call.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	Tools []ToolName `json:"tools,omitempty"`

	// maxToolCalls bounds the tool calls of one turn. Defaults to 8.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	MaxToolCalls *int32 `json:"maxToolCalls,omitempty"`

	// fallbackReply is the reply of a turn of this pathway that ends without
	// one of its own (it failed, a cap or the budget stopped it, it reached
	// maxToolCalls, or the model answered with empty text). It takes
	// precedence over the Journey's fallbackReply; without either the reply is
	// a default sentence that says what happened. Plain text, shown as
	// written.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	FallbackReply string `json:"fallbackReply,omitempty"`

	// degrade is whether this pathway's model calls may run on a cheaper
	// agent when a Budget has no room for them: Allow (a Budget with
	// onExhausted: Degrade switches them to its degradeTo agent) or Never
	// (the Session waits for room). Defaults to Never.
	// +optional
	Degrade DegradePolicy `json:"degrade,omitempty"`
}

// Pipeline combines several agents.
// +kubebuilder:validation:Enum=Sequential;Parallel;Router;Ensemble
type Pipeline string

const (
	PipelineSequential Pipeline = "Sequential"
	PipelineParallel   Pipeline = "Parallel"
	PipelineRouter     Pipeline = "Router"
	PipelineEnsemble   Pipeline = "Ensemble"
)

// Executor says who runs a pathway.
// +kubebuilder:validation:Enum=Agent;External
type Executor string

const (
	ExecutorAgent    Executor = "Agent"
	ExecutorExternal Executor = "External"
)

// RunOn says when a pathway's turn runs.
// +kubebuilder:validation:Enum=Message;Entry
type RunOn string

const (
	RunOnMessage RunOn = "Message"
	RunOnEntry   RunOn = "Entry"
)

// Signature is a pathway's contract with its agents.
type Signature struct {
	// instructions tell the agent what to do (the signature's docstring).
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	Instructions string `json:"instructions,omitempty"`
	// intent is the goal of the pathway in one sentence.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Intent string `json:"intent,omitempty"`
	// guidelines are rules the agent must follow.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	Guidelines []string `json:"guidelines,omitempty"`
	// inputs are read from the context (and the message) before a turn.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Inputs []SignatureField `json:"inputs,omitempty"`
	// outputs are what a turn produces; an output named "outcome" sets the
	// result type.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Outputs []SignatureField `json:"outputs,omitempty"`
}

// FieldType is the JSON type of a signature field.
// +kubebuilder:validation:Enum=string;number;integer;boolean;array;object
type FieldType string

// SignatureField is one input or output of a signature.
type SignatureField struct {
	// name is the field name (a context key for inputs).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z_][A-Za-z0-9_]*$')",message="name must be an identifier: letters, digits and '_', not starting with a digit"
	Name string `json:"name"`
	// type is the field's JSON type. Defaults to string.
	// +optional
	// +kubebuilder:default=string
	Type FieldType `json:"type,omitempty"`
	// description explains the field to the agent.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`
	// default is used when the context has no value for an input.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Default *apiextensionsv1.JSON `json:"default,omitempty"`
}

// ReturnBehavior makes a pathway a detour.
type ReturnBehavior struct {
	// type is ReturnToPrevious (pop back when complete) or None.
	// +optional
	// +kubebuilder:default=ReturnToPrevious
	// +kubebuilder:validation:Enum=ReturnToPrevious;None
	Type string `json:"type,omitempty"`
	// preserveContext keeps what the detour accumulated when returning. Defaults
	// to true.
	// +optional
	PreserveContext *bool `json:"preserveContext,omitempty"`
}

// ReturnToPrevious is the ReturnBehavior type of detours.
const ReturnToPrevious = "ReturnToPrevious"

// RetryPolicy bounds retries of one pathway.
type RetryPolicy struct {
	// limit is how many Retry actions one pathway may take per iteration.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Limit int32 `json:"limit"`
}

// OutcomeTransitions pick the next pathway by a complete turn's result type.
type OutcomeTransitions struct {
	// onSuccess applies to a success outcome.
	// +optional
	OnSuccess *OutcomeTransition `json:"onSuccess,omitempty"`
	// onFailure applies to a failure outcome.
	// +optional
	OnFailure *OutcomeTransition `json:"onFailure,omitempty"`
	// onPartialSuccess applies to a partial_success outcome; decision form only.
	// +optional
	// +kubebuilder:validation:XValidation:rule="has(self.decision)",message="onPartialSuccess must use the decision form"
	OnPartialSuccess *OutcomeTransition `json:"onPartialSuccess,omitempty"`
	// onUnclear applies to an unclear outcome; decision form only.
	// +optional
	// +kubebuilder:validation:XValidation:rule="has(self.decision)",message="onUnclear must use the decision form"
	OnUnclear *OutcomeTransition `json:"onUnclear,omitempty"`
}

// OutcomeTransition is either a fixed destination (`to`), a decision, or
// action Close alone (the journey completes).
// +kubebuilder:validation:XValidation:rule="(has(self.action) && self.action == 'Close') || has(self.to) != has(self.decision)",message="set exactly one of to or decision (or only action: Close to end the journey)"
// +kubebuilder:validation:XValidation:rule="!has(self.action) || self.action != 'Close' || (!has(self.to) && !has(self.decision))",message="action Close ends the journey and takes neither to nor decision"
// +kubebuilder:validation:XValidation:rule="!has(self.action) || !has(self.decision)",fieldPath=".action",message="with a decision, set the action in decision.action or in its rules"
type OutcomeTransition struct {
	// to is the destination pathway (the "string form").
	// +optional
	To Name `json:"to,omitempty"`
	// action is what moving there means: Advance, JumpBack, Retry, or Close
	// (ends the journey; no to). Defaults to Advance (Retry when the destination
	// is the current pathway). Block is reserved for the engine.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self != 'Block'",message="action Block is reserved for the engine (loop prevention and caps)"
	Action Action `json:"action,omitempty"`
	// decision asks rules, then a decision agent, to choose the destination.
	// +optional
	Decision *Decision `json:"decision,omitempty"`
}

// Decision lets rules or an agent choose among allowed destinations.
// +kubebuilder:validation:XValidation:rule="!has(self.rules) || self.rules.all(r, r.to in self.allowedDestinations)",fieldPath=".rules",message="every rule's to must be one of allowedDestinations"
type Decision struct {
	// agent is the decision agent. Empty means the builtin provider.
	// +optional
	Agent Name `json:"agent,omitempty"`
	// prompt instructs the decision agent.
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	Prompt string `json:"prompt,omitempty"`
	// allowedDestinations are the only pathways the decision may choose.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	AllowedDestinations []Name `json:"allowedDestinations"`
	// confidenceThresholds decide between applying, asking for approval and
	// escalating.
	// +optional
	ConfidenceThresholds *ConfidenceThresholds `json:"confidenceThresholds,omitempty"`
	// onRejected is where a rejected approval of this decision goes. Defaults to
	// the pathway the Session was in before the deciding one (a rejected review
	// goes back to the draft), else the deciding pathway runs again; either way
	// the pathway runs with the rejection as feedback, so the same question is
	// never asked unchanged.
	// +optional
	OnRejected Name `json:"onRejected,omitempty"`
	// messaging passes this pathway's outputs to the destination (context key
	// "messages.<pathway>").
	// +optional
	Messaging bool `json:"messaging,omitempty"`
	// rules are deterministic decisions evaluated before the agent, first match
	// wins.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Rules []DecisionRule `json:"rules,omitempty"`
	// action is the action of the chosen destination: Advance, JumpBack or
	// Retry. Defaults to Advance (Retry when the destination is the current
	// pathway).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self in ['Advance', 'JumpBack', 'Retry']",message="a decision's action must be Advance, JumpBack or Retry"
	Action Action `json:"action,omitempty"`
	// approvers, when set, restricts who may approve this decision (users or
	// groups).
	// +optional
	Approvers *Approvers `json:"approvers,omitempty"`
	// approval bounds how long the decision waits for an approval, and what
	// happens then.
	// +optional
	Approval *ApprovalTimeout `json:"approval,omitempty"`
}

// ApprovalTimeoutAction is what an approval timeout does: Reject or
// Escalate.
// +kubebuilder:validation:Enum=Reject;Escalate
type ApprovalTimeoutAction string

const (
	// ApprovalTimeoutReject rejects the decision or tool call, as a rejection
	// by the system.
	ApprovalTimeoutReject ApprovalTimeoutAction = "Reject"
	// ApprovalTimeoutEscalate makes the Session Escalated: a person decides.
	ApprovalTimeoutEscalate ApprovalTimeoutAction = "Escalate"
)

// ApprovalTimeout bounds a wait for approval.
type ApprovalTimeout struct {
	// timeout is how long a pending approval waits before onTimeout applies.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="timeout must be a positive duration such as 30m or 24h"
	Timeout metav1.Duration `json:"timeout"`
	// onTimeout is Reject (a rejection by the system: a decision goes to
	// onRejected, a tool call's rejection goes back to the model) or Escalate
	// (the Session becomes Escalated). Defaults to Reject.
	// +optional
	OnTimeout ApprovalTimeoutAction `json:"onTimeout,omitempty"`
}

// ConfidenceThresholds: confidence >= autoAdvance applies the decision, >=
// retryWithFeedback runs the deciding pathway once more with the reasoning
// as feedback, >= requireApproval waits for approval, lower escalates.
// +kubebuilder:validation:XValidation:rule="!(has(self.autoAdvance) ? self.autoAdvance : '0.8').matches('^[0-9]+([.][0-9]+)?$') || !(has(self.requireApproval) ? self.requireApproval : '0.6').matches('^[0-9]+([.][0-9]+)?$') || double(has(self.autoAdvance) ? self.autoAdvance : '0.8') >= double(has(self.requireApproval) ? self.requireApproval : '0.6')",message="autoAdvance must be greater than or equal to requireApproval (they default to 0.8 and 0.6)"
type ConfidenceThresholds struct {
	// autoAdvance: at or above it the decision applies. Defaults to "0.8".
	// +optional
	AutoAdvance Confidence `json:"autoAdvance,omitempty"`
	// retryWithFeedback: at or above it (and below autoAdvance) the deciding
	// pathway runs once more, at once, with the decision's reasoning as feedback
	// (counted against its retry limit); a second decision in this band waits
	// for approval. Unset, there is no such band.
	// +optional
	RetryWithFeedback Confidence `json:"retryWithFeedback,omitempty"`
	// requireApproval: at or above it (and below autoAdvance and
	// retryWithFeedback) the decision waits for an approval. Defaults to "0.6".
	// +optional
	RequireApproval Confidence `json:"requireApproval,omitempty"`
}

// DecisionRule is a deterministic decision: when its CEL condition holds, go
// to `to`.
type DecisionRule struct {
	// when is a CEL expression over outputs, context and session.
	// +required
	When Expression `json:"when"`
	// to is the destination, one of allowedDestinations.
	// +required
	To Name `json:"to"`
	// confidence is reported for this rule's decision. Defaults to "1".
	// +optional
	Confidence Confidence `json:"confidence,omitempty"`
	// action overrides the decision's action for this rule: Advance, JumpBack or
	// Retry.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self in ['Advance', 'JumpBack', 'Retry']",message="a rule's action must be Advance, JumpBack or Retry"
	Action Action `json:"action,omitempty"`
}

// Approvers restricts who may approve a decision.
type Approvers struct {
	// users may approve.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	Users []string `json:"users,omitempty"`
	// groups may approve.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	Groups []string `json:"groups,omitempty"`
}

// BuiltinPathway is how the builtin provider answers a pathway turn, offline
// and deterministically. CEL expressions see message, context, inputs,
// outputs (those computed so far, in order), session and tools (the results
// of toolCalls).
type BuiltinPathway struct {
	// reply is a Go text/template over .message, .context, .inputs, .outputs,
	// .session and .history (the conversation so far, oldest first: a list of
	// {role, text} with role user or assistant) giving the assistant's reply.
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	Reply string `json:"reply,omitempty"`
	// outputs are computed in order by CEL expressions; later ones see earlier
	// ones.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Outputs []BuiltinOutput `json:"outputs,omitempty"`
	// outcome is a CEL expression giving the result type (success, failure,
	// partial_success, unclear). Defaults to the "outcome" output, else success.
	// +optional
	Outcome Expression `json:"outcome,omitempty"`
	// complete is a CEL expression: false keeps the Session in the pathway for
	// another turn. Defaults to true.
	// +optional
	Complete Expression `json:"complete,omitempty"`
	// toolCalls are made in order before the outputs are computed; outputs,
	// outcome, complete and the reply see their results as tools.<tool name>.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ToolCalls []BuiltinToolCall `json:"toolCalls,omitempty"`
}

// BuiltinOutput computes one output.
type BuiltinOutput struct {
	// name is the output's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z_][A-Za-z0-9_]*$')",message="name must be an identifier: letters, digits and '_', not starting with a digit"
	Name string `json:"name"`
	// expression is the CEL expression giving its value.
	// +required
	Expression Expression `json:"expression"`
}

// PathwayStatus is the observed state of a Pathway.
type PathwayStatus struct {
	// conditions: Ready says whether the pathway's own fields are valid (its CEL
	// compiles).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pw,categories=journeyops
// +kubebuilder:printcolumn:name="Executor",type=string,JSONPath=`.spec.executor`
// +kubebuilder:printcolumn:name="Next",type=string,JSONPath=`.spec.next`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Pathway is one step of a journey: a signature, the agents that run it, and
// its outcome transitions.
type Pathway struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired pathway.
	// +required
	Spec PathwaySpec `json:"spec"`
	// status is the observed state.
	// +optional
	Status PathwayStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// PathwayList contains a list of Pathway.
type PathwayList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Pathways.
	Items []Pathway `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Pathway{}, &PathwayList{})
}
