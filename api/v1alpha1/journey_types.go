package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JourneySpec declares the pathways of a journey, the agents they may use,
// and the global transitions between them.
// +kubebuilder:validation:XValidation:rule="self.pathways.exists(p, p.name == self.entryPathway)",fieldPath=".entryPathway",message="entryPathway must name one of spec.pathways",messageExpression="'entryPathway \"' + self.entryPathway + '\" is not one of spec.pathways'"
// +kubebuilder:validation:XValidation:rule="!has(self.transitions) || self.transitions.all(t, t.to == '*' || self.pathways.exists(p, p.name == t.to))",fieldPath=".transitions",message="every transition's to must name one of spec.pathways"
// +kubebuilder:validation:XValidation:rule="!has(self.transitions) || self.transitions.all(t, t.from == '*' || self.pathways.exists(p, p.name == t.from))",fieldPath=".transitions",message="every transition's from must be \"*\" or name one of spec.pathways"
// +kubebuilder:validation:XValidation:rule="!has(self.escalationPathway) || self.pathways.exists(p, p.name == self.escalationPathway)",fieldPath=".escalationPathway",message="escalationPathway must name one of spec.pathways"
// +kubebuilder:validation:XValidation:rule="!has(self.intentDetection) || (has(self.agents) && self.agents.exists(a, a.name == self.intentDetection.agent))",fieldPath=".intentDetection.agent",message="intentDetection.agent must name one of spec.agents"
// +kubebuilder:validation:XValidation:rule="has(self.intentDetection) || !has(self.transitions) || !self.transitions.exists(t, has(t.trigger.intent) && has(t.trigger.intent.llmFallback) && t.trigger.intent.llmFallback)",fieldPath=".intentDetection",message="intentDetection is required when a transition's intent trigger sets llmFallback: it names the classifier agent"
type JourneySpec struct {
	// entryPathway is the local name of the pathway a new Session starts in.
	// +required
	EntryPathway Name `json:"entryPathway"`

	// description says what the journey does, for the people and agents that
	// reach it from outside the cluster: the A2A gateway publishes it as the
	// description of the journey's agent card.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// pathways maps local names to Pathway objects in the same namespace.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Pathways []PathwayEntry `json:"pathways"`

	// agents are the named agents ("capabilities") that pathways, decisions and
	// intent detection refer to. A name no agent declares falls back to the
	// builtin provider.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Agents []AgentSpec `json:"agents,omitempty"`

	// transitions are global rules evaluated on every message, highest priority
	// first, ties broken by declaration order.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Transitions []GlobalTransition `json:"transitions,omitempty"`

	// intentDetection configures the classifier used by intent triggers
	// with llmFallback when no pattern matched: an LLM, or the builtin
	// classifier, which scores the words a message shares with each
	// intent's description and patterns.
	// +optional
	IntentDetection *IntentDetection `json:"intentDetection,omitempty"`

	// escalationPathway is where a Session goes when a decision's confidence is
	// below requireApproval. Without it the Session's phase becomes Escalated.
	// +optional
	EscalationPathway Name `json:"escalationPathway,omitempty"`

	// limits caps what one Session may consume.
	// +optional
	Limits Limits `json:"limits,omitzero"`

	// loopPrevention blocks a Session that keeps repeating the same cycle of
	// pathways.
	// +optional
	LoopPrevention LoopPrevention `json:"loopPrevention,omitzero"`

	// errorRecovery says what a recoverable failure (a refused detour, a pathway
	// error) does: Graceful records it and stays; FailFast fails the Session.
	// +optional
	// +kubebuilder:default=Graceful
	ErrorRecovery ErrorRecovery `json:"errorRecovery,omitempty"`

	// fallbackReply is the reply of a turn that ends without one of its own (it
	// failed, a cap or the budget stopped it, it reached maxToolCalls, the model
	// answered with empty text, or the pathways a message led through replied
	// nothing), for pathways without their own fallbackReply. Without it the
	// reply is a default sentence that says what happened (see
	// docs/concepts.md, "Every turn answers"). Plain text, shown as written.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	FallbackReply string `json:"fallbackReply,omitempty"`

	// toolServers are the MCP servers (streamable HTTP) the journey's tools come
	// from.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	ToolServers []ToolServer `json:"toolServers,omitempty"`

	// tools are the tools the journey's agents may call; a pathway lists the
	// ones its agents use.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Tools []Tool `json:"tools,omitempty"`

	// redact masks text in the audit records and archives the manager writes
	// about this journey's Sessions (when it runs with an audit sink): every
	// match of a pattern in a decision's reasoning, an approver's or
	// intervention's reason, a block reason, and in an archive's transcript,
	// journal, history, context and tool calls, is replaced by the mask. The
	// Session itself keeps the text. A Session uses the patterns of the journey
	// revision it runs on.
	// +optional
	Redact *Redaction `json:"redact,omitempty"`

	// sessionDefaults are settings of this journey's Sessions that a Session's
	// own spec overrides.
	// +optional
	SessionDefaults *SessionDefaults `json:"sessionDefaults,omitempty"`

	// upgradePolicy says what becomes of running Sessions when a new revision
	// of the journey serves. Pinned (the default, when empty): they stay on
	// the revision they started on until a person upgrades them (kubectl
	// journey upgrade). ReplayCompatible: a running Session, between turns,
	// moves to the revision that serves new Sessions (status.readyRevision, or
	// under spec.rollout status.stableRevision) when a replay of its journal
	// on it reproduces every step (no model or tool call is made to check);
	// one that would diverge stays, with the UpgradeBlocked condition saying
	// where. The Sessions of a running canary stay on it; once it is aborted
	// they move back to the stable revision when their replay allows. It is
	// not part of the revision Sessions run on.
	// +optional
	UpgradePolicy UpgradePolicy `json:"upgradePolicy,omitempty"`

	// rollout, when set, makes each new valid revision a canary: a share of new
	// Sessions start on it, step by step, while the stable revision serves the
	// others, until it is promoted (automatically or with kubectl journey rollout
	// promote) or aborted (by its analysis's failureCondition, or kubectl journey
	// rollout abort). Without it a new valid revision serves every new Session at
	// once. It is not part of the revision Sessions run on.
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`
}

// UpgradePolicy is what becomes of running Sessions when a new revision is ready.
// +kubebuilder:validation:Enum=Pinned;ReplayCompatible
type UpgradePolicy string

const (
	// UpgradePinned keeps running Sessions on the revision they started on.
	UpgradePinned UpgradePolicy = "Pinned"
	// UpgradeReplayCompatible moves running Sessions to the ready revision when
	// their journal replays on it unchanged.
	UpgradeReplayCompatible UpgradePolicy = "ReplayCompatible"
)

// SessionDefaults are the defaults of a journey's Sessions.
type SessionDefaults struct {
	// ttlSecondsAfterFinished deletes a Session this long after it reached a
	// terminal phase, unless the Session sets its own. With an audit sink, the
	// manager writes the Session's archive (transcript, journal, history) to it
	// before the deletion. The value of the revision the Session runs on
	// applies.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// Redaction is what to mask in audit records and archives.
type Redaction struct {
	// patterns are regular expressions (RE2 syntax, as Go's regexp reads them),
	// for example "INS-[0-9]{6}" for an insurance id. A pattern that does not
	// compile makes the Journey not Ready, naming it.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +listType=atomic
	Patterns []string `json:"patterns"`
	// mask replaces each match (default "[redacted]").
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Mask string `json:"mask,omitempty"`
}

// DefaultRedactionMask is what a match is replaced by when redact.mask is not set.
const DefaultRedactionMask = "[redacted]"

// ErrorRecovery is the journey's policy for recoverable failures.
// +kubebuilder:validation:Enum=Graceful;FailFast
type ErrorRecovery string

const (
	ErrorRecoveryGraceful ErrorRecovery = "Graceful"
	ErrorRecoveryFailFast ErrorRecovery = "FailFast"
)

// PathwayEntry gives a Pathway object a local name in the journey.
type PathwayEntry struct {
	// name is the pathway's local name, used by transitions and Session status.
	// +required
	Name Name `json:"name"`
	// pathwayRef is the name of the Pathway object in the Journey's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="pathwayRef must be a Pathway object name: lowercase letters, digits, '-' and '.'"
	PathwayRef string `json:"pathwayRef"`
}

// Provider selects how an agent answers.
// +kubebuilder:validation:Enum=builtin;openai
type Provider string

const (
	// ProviderBuiltin answers offline and deterministically from the Pathway's
	// builtin section, decision rules and intent patterns. No API key needed.
	ProviderBuiltin Provider = "builtin"
	// ProviderOpenAI calls any OpenAI-compatible chat completions endpoint.
	ProviderOpenAI Provider = "openai"
)

// ResponseFormat is how an openai agent asks the endpoint for a JSON answer.
// +kubebuilder:validation:Enum=Auto;JSONSchema;JSONObject;Prompt
type ResponseFormat string

const (
	// ResponseFormatAuto starts with a strict JSON schema and steps down to a
	// JSON object, then to the schema in the instructions only, when the
	// endpoint says it does not support the richer format. What was learned is
	// kept per endpoint and model for the life of the process.
	ResponseFormatAuto ResponseFormat = "Auto"
	// ResponseFormatJSONSchema always sends a strict json_schema response
	// format.
	ResponseFormatJSONSchema ResponseFormat = "JSONSchema"
	// ResponseFormatJSONObject sends a json_object response format and the
	// schema in the instructions.
	ResponseFormatJSONObject ResponseFormat = "JSONObject"
	// ResponseFormatPrompt sends no response format: the schema is in the
	// instructions only.
	ResponseFormatPrompt ResponseFormat = "Prompt"
)

// ToolCalling is how an openai agent offers a pathway's tools to the model.
// +kubebuilder:validation:Enum=Auto;Native;Prompted
type ToolCalling string

const (
	// ToolCallingAuto offers the tools as native function tools and steps down
	// to Prompted when the endpoint refuses them. What was learned is kept per
	// endpoint and model for the life of the process.
	ToolCallingAuto ToolCalling = "Auto"
	// ToolCallingNative always offers the tools as native function tools; an
	// endpoint that refuses them stalls the Session with its answer.
	ToolCallingNative ToolCalling = "Native"
	// ToolCallingPrompted describes the tools in the instructions and asks for
	// the calls inside the JSON answer, in its tool_calls property.
	ToolCallingPrompted ToolCalling = "Prompted"
)

// AgentSpec declares a named agent.
// +kubebuilder:validation:XValidation:rule="self.provider == 'openai' || (!has(self.model) && !has(self.baseURL) && !has(self.apiKeySecretRef) && !has(self.temperature) && !has(self.pricing) && !has(self.maxRetries) && !has(self.maxTokens) && !has(self.responseFormat))",message="model, baseURL, apiKeySecretRef, temperature, pricing, maxRetries, maxTokens and responseFormat are only valid with provider openai"
// +kubebuilder:validation:XValidation:rule="self.provider != 'openai' || has(self.model)",fieldPath=".model",message="model is required with provider openai"
// +kubebuilder:validation:XValidation:rule="self.provider == 'openai' || !has(self.toolCalling)",fieldPath=".toolCalling",message="toolCalling is only valid with provider openai"
// +kubebuilder:validation:XValidation:rule="self.provider == 'builtin' || !has(self.builtin)",fieldPath=".builtin",message="builtin is only valid with provider builtin"
type AgentSpec struct {
	// name is the agent's name, referenced by pathways, decisions and
	// intentDetection.
	// +required
	Name Name `json:"name"`

	// instructions are the agent's own system prompt, its role: added to the
	// pathway's signature when the agent runs a pathway, so the agents of a
	// pipeline can each do their part.
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	Instructions string `json:"instructions,omitempty"`

	// provider is builtin (offline, deterministic; the default) or openai (any
	// OpenAI-compatible endpoint: OpenAI, vLLM, Ollama, LocalAI).
	// +optional
	// +kubebuilder:default=builtin
	Provider Provider `json:"provider,omitempty"`

	// model is the model name sent to the endpoint, for example gpt-4o-mini.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model,omitempty"`

	// baseURL is the endpoint's base URL, for example
	// http://ollama.default:11434/v1. Empty means the OpenAI API.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (url(self).getScheme() == 'http' || url(self).getScheme() == 'https')",message="baseURL must be an http or https URL"
	BaseURL string `json:"baseURL,omitempty"`

	// apiKeySecretRef names the Secret key holding the API key, in the Session's
	// namespace.
	// +optional
	APIKeySecretRef *SecretKeyRef `json:"apiKeySecretRef,omitempty"`

	// temperature is the sampling temperature, a decimal such as "0" or "0.2".
	// +optional
	Temperature Decimal `json:"temperature,omitempty"`

	// timeout bounds one call, retries excluded. Defaults to 30s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="timeout must be a positive duration such as 30s, 2m or 1m30s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// maxRetries is how often a call is retried on 429 and 5xx answers. Defaults
	// to 2.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	MaxRetries *int32 `json:"maxRetries,omitempty"`

	// responseFormat is how the answer is asked for as JSON: Auto (a strict JSON
	// schema, then a JSON object, then the schema in the instructions, stepping
	// down when the endpoint says it does not support a format), JSONSchema,
	// JSONObject or Prompt. Every answer is validated against the schema
	// whatever the format. Unset means Auto.
	// +optional
	ResponseFormat ResponseFormat `json:"responseFormat,omitempty"`

	// toolCalling is how the tools of a pathway are offered to the model: Auto
	// (as native function tools, stepping down to Prompted when the endpoint
	// refuses them: a vLLM server without --enable-auto-tool-choice, an Ollama
	// model without tool support), Native, or Prompted (the tools described in
	// the instructions, the calls asked for in the JSON answer). Whatever the
	// mode, calls the model writes as text (Hermes <tool_call>, Mistral
	// [TOOL_CALLS], a bare JSON call) are recognised, and every call goes
	// through the same checks. Unset means Auto.
	// +optional
	ToolCalling ToolCalling `json:"toolCalling,omitempty"`

	// maxTokens caps the tokens the model may generate in one answer, reasoning
	// included; it bounds the cost and the time of a call. It is sent as
	// max_completion_tokens to OpenAI and Azure OpenAI endpoints and to OpenAI
	// reasoning models, and as max_tokens to every other endpoint. Defaults to
	// 1024.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	MaxTokens *int32 `json:"maxTokens,omitempty"`

	// pricing converts token usage into cost for budget accounting.
	// +optional
	Pricing *Pricing `json:"pricing,omitempty"`

	// builtin configures the builtin provider's decisions.
	// +optional
	Builtin *BuiltinAgent `json:"builtin,omitempty"`
}

// Pricing is the price of a million tokens, in US dollars.
type Pricing struct {
	// promptPerMTok is the price of one million prompt tokens.
	// +optional
	PromptPerMTok Decimal `json:"promptPerMTok,omitempty"`
	// completionPerMTok is the price of one million completion tokens.
	// +optional
	CompletionPerMTok Decimal `json:"completionPerMTok,omitempty"`
}

// BuiltinAgent configures a builtin agent: how it decides when no rule
// matched (the first allowed destination with this confidence), and what it
// adds to a pathway turn of a pipeline of builtin agents.
type BuiltinAgent struct {
	// confidence is reported for decisions that no rule decided. Defaults to
	// "1".
	// +optional
	Confidence Confidence `json:"confidence,omitempty"`
	// outputs this agent computes in a pathway turn, after the pathway's
	// builtin outputs (CEL over the same variables). In a Sequential pipeline
	// the agents after it see them in inputs and context.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Outputs []BuiltinOutput `json:"outputs,omitempty"`
	// reply, when set, replaces the pathway's builtin reply in the turns this
	// agent answers (a Go text/template over the same data).
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	Reply string `json:"reply,omitempty"`
	// patterns make the first agent of a Router pipeline choose this agent
	// for a message containing one of them (case-insensitive, word-aware).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	Patterns []string `json:"patterns,omitempty"`
}

// GlobalTransition is a rule evaluated on every message.
type GlobalTransition struct {
	// name identifies the transition in status, events and metrics.
	// +required
	Name Name `json:"name"`

	// from is the pathway the rule applies in, or "*" for any pathway.
	// +optional
	// +kubebuilder:default="*"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == '*' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="from must be \"*\" or a pathway name (a DNS label)"
	From string `json:"from,omitempty"`

	// to is the pathway the Session moves to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self != '*'",message="to must name a pathway: \"*\" is only allowed in from"
	// +kubebuilder:validation:XValidation:rule="self == '*' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="to must be a pathway name (a DNS label)"
	To string `json:"to"`

	// priority orders the rules: higher first, ties by declaration order.
	// +optional
	// +kubebuilder:validation:Minimum=-1000
	// +kubebuilder:validation:Maximum=1000
	Priority int32 `json:"priority,omitempty"`

	// trigger says when the rule fires.
	// +required
	Trigger Trigger `json:"trigger"`

	// contextUpdate edits the Session context when the rule fires.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ContextUpdate []ContextUpdate `json:"contextUpdate,omitempty"`
}

// Trigger is exactly one of an intent or a CEL condition.
// +kubebuilder:validation:XValidation:rule="has(self.intent) != has(self.condition)",message="trigger must set exactly one of intent or condition"
type Trigger struct {
	// intent fires on messages that match its patterns (or the LLM classifier).
	// +optional
	Intent *IntentTrigger `json:"intent,omitempty"`

	// condition is a CEL expression over context, message and session that fires
	// the rule when true, for example "context.escalation_count >= 3".
	// +optional
	Condition Expression `json:"condition,omitempty"`
}

// IntentTrigger matches user messages against patterns.
type IntentTrigger struct {
	// patterns are phrases matched case-insensitively on word boundaries ("why"
	// does not match "whyte").
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Patterns []string `json:"patterns"`

	// description tells the classifier what this intent means: an LLM
	// reads it, the builtin classifier matches its words. Defaults to the
	// patterns.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// llmFallback asks the journey's intent classifier when no pattern matched.
	// +optional
	LLMFallback bool `json:"llmFallback,omitempty"`
}

// ContextOp is a context update operation.
// +kubebuilder:validation:Enum=Append;Set;Copy
type ContextOp string

const (
	// ContextAppend appends the value of `from` (or `value`) to the list in
	// `field`, without duplicates.
	ContextAppend ContextOp = "Append"
	// ContextSet sets `field` to `value`.
	ContextSet ContextOp = "Set"
	// ContextCopy copies context field `from` into `field`.
	ContextCopy ContextOp = "Copy"
)

// ContextUpdate edits one context field.
// +kubebuilder:validation:XValidation:rule="self.op != 'Set' || !has(self.from)",message="op Set takes value, not from"
// +kubebuilder:validation:XValidation:rule="self.op != 'Copy' || has(self.from)",message="op Copy needs from"
type ContextUpdate struct {
	// field is the context field to change.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Field string `json:"field"`
	// op is Append, Set or Copy.
	// +required
	Op ContextOp `json:"op"`
	// from is the context field whose value is appended or copied.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	From string `json:"from,omitempty"`
	// value is the literal value to set or append.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Value *apiextensionsv1.JSON `json:"value,omitempty"`
}

// IntentDetection configures the intent classifier.
type IntentDetection struct {
	// agent is the agent asked to classify messages no pattern matched.
	// +required
	Agent Name `json:"agent"`
	// confidenceThreshold: a classification below it counts as no match.
	// Defaults to "0.7".
	// +optional
	ConfidenceThreshold Confidence `json:"confidenceThreshold,omitempty"`
	// cacheTTL is how long an LLM classification of the same message and
	// intents is reused (the builtin classifier computes each one).
	// Defaults to 5m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="cacheTTL must be a positive duration such as 5m or 1h"
	CacheTTL *metav1.Duration `json:"cacheTTL,omitempty"`
}

// Limits caps what one Session may consume. Reaching a cap blocks the
// Session (phase unchanged, Stalled=True with the cap as reason).
type Limits struct {
	// maxPathwayDepth is the deepest ReturnToPrevious stack allowed. Defaults to
	// 10.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	MaxPathwayDepth int32 `json:"maxPathwayDepth,omitempty"`
	// maxTurns caps processed messages, outcomes and entry runs. Defaults to
	// 100.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MaxTurns int32 `json:"maxTurns,omitempty"`
	// maxIterations caps cycles started by JumpBack. Defaults to 5.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxIterations int32 `json:"maxIterations,omitempty"`
	// maxTransitions caps transitions of any kind. Defaults to 500.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MaxTransitions int32 `json:"maxTransitions,omitempty"`
	// retryLimitPerPathway caps Retry actions per pathway and iteration.
	// Defaults to 2.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	RetryLimitPerPathway *int32 `json:"retryLimitPerPathway,omitempty"`
	// sessionTimeout bounds a Session's age. Defaults to 24h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="sessionTimeout must be a positive duration such as 30m or 24h"
	SessionTimeout *metav1.Duration `json:"sessionTimeout,omitempty"`
	// idleTimeout bounds how long a Session waits for input: a Session waiting
	// for a message or an External outcome longer than this since its status
	// last changed (status.lastActivityTime) is stalled with reason IdleTimeout,
	// like sessionTimeout. Unset, a Session waits until sessionTimeout.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="idleTimeout must be a positive duration such as 30m or 24h"
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`
	// maxContextBytes caps the JSON size of the context. Exceeding it is an
	// error, never a silent truncation. Defaults to 49152 (48 KiB). A Session's
	// stored size grows with it (see docs/PERFORMANCE.md, "Session size"): at
	// the maximum (and the largest maxTranscriptBytes) a Session may take
	// about 1.38 MiB, under etcd's request limit.
	// +optional
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=524288
	MaxContextBytes int32 `json:"maxContextBytes,omitempty"`
	// maxHistory is how many transitions status.history keeps. Defaults to 50.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=500
	MaxHistory int32 `json:"maxHistory,omitempty"`
	// maxJournal is how many agent answers status.journal keeps. Defaults to
	// 100.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=500
	MaxJournal *int32 `json:"maxJournal,omitempty"`
	// maxTranscriptBytes bounds status.transcript, the conversation pathway
	// agents see, as stored: the JSON of its exchanges (messages, replies,
	// their ids and pathways, tool-call previews). The oldest exchanges are
	// dropped whole to stay under it, never cut mid-message; at most 1000 are
	// kept however small. It includes status.lastTurn.replies (at most 1.5
	// KiB), the replies of the last turn. Defaults to 16384.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=131072
	MaxTranscriptBytes *int32 `json:"maxTranscriptBytes,omitempty"`
	// budget caps token usage and cost across all agent calls of a Session.
	// Without it, each Session's cost is still capped at USD 5.00 (see
	// maxCostUSD).
	// +optional
	Budget *SessionBudget `json:"budget,omitempty"`
}

// SessionBudget caps a Session's token usage, cost and tool calls.
type SessionBudget struct {
	// maxTokens caps prompt plus completion tokens.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxTokens int64 `json:"maxTokens,omitempty"`
	// maxCostUSD caps the cost in US dollars, from the agents' pricing. In a
	// Journey's limits, unset (or no budget at all) caps each Session at the
	// default of USD 5.00, and "0" means no cost cap, explicitly. In a
	// Session's spec.limits, unset keeps the Journey's cap.
	// +optional
	MaxCostUSD Decimal `json:"maxCostUSD,omitempty"`
	// maxToolCalls caps the tool calls the Session makes (see
	// status.usage.toolCalls). A call that would pass it is not made: the
	// Session stalls with reason BudgetExceeded and the turn stays in
	// progress, to go on when spec.limits.budget raises it.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxToolCalls int64 `json:"maxToolCalls,omitempty"`
}

// LoopPrevention blocks oscillation: a cycle of pathways repeated more than
// maxCycleRepeats times within the last window transitions.
type LoopPrevention struct {
	// window is how many recent transitions are inspected. Defaults to 8.
	// +optional
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=100
	Window int32 `json:"window,omitempty"`
	// maxCycleRepeats is how often a cycle may repeat inside the window.
	// Defaults to 2.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	MaxCycleRepeats int32 `json:"maxCycleRepeats,omitempty"`
}

// JourneyStatus is the observed state of a Journey.
type JourneyStatus struct {
	// conditions: Ready is True when the current generation (with the
	// Pathways it references as they are now) is valid and serves new
	// Sessions. When it is not, Ready is False with the problems in its
	// message, Stalled (invalid) or Reconciling (a referenced Pathway does
	// not exist) is True, and new Sessions still start on readyRevision,
	// the message saying "serving R1; R2 is invalid: ..." (R1 the
	// readyRevision, R2 the latestRevision).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// readyRevision is the ControllerRevision new Sessions start on and pin:
	// the snapshot of the newest valid generation. An invalid edit, or a
	// referenced Pathway deleted or made invalid later, leaves it where it
	// was, so new Sessions keep starting on the last good revision. Empty
	// until the Journey has been valid once: new Sessions wait (reason
	// JourneyNotReady) until it is.
	// +optional
	ReadyRevision string `json:"readyRevision,omitempty"`
	// latestRevision names the snapshot of the current generation with the
	// Pathways it references as they are now, valid or not. It equals
	// readyRevision when the Journey is Ready; otherwise it is the revision
	// the Ready condition says is invalid. Only valid snapshots are stored
	// as ControllerRevisions.
	// +optional
	LatestRevision string `json:"latestRevision,omitempty"`
	// pathways is how many pathways were resolved.
	// +optional
	Pathways int32 `json:"pathways,omitempty"`
	// issues lists every validation problem found, one line each.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Issues []string `json:"issues,omitempty"`
	// tools are the journey's tools as last discovered on their servers.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Tools []DiscoveredTool `json:"tools,omitempty"`
	// stableRevision is the revision that serves new Sessions under a rollout
	// (spec.rollout): all of them, or those the canary does not take.
	// +optional
	StableRevision string `json:"stableRevision,omitempty"`
	// canaryRevision is the revision being rolled out, while a canary runs.
	// +optional
	CanaryRevision string `json:"canaryRevision,omitempty"`
	// rollout is the state of the latest canary: its step, weight, counts and
	// phase, and why it was promoted or aborted.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=jny,categories=journeyops
// +kubebuilder:printcolumn:name="Entry",type=string,JSONPath=`.spec.entryPathway`
// +kubebuilder:printcolumn:name="Pathways",type=integer,JSONPath=`.status.pathways`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.readyRevision`
// +kubebuilder:printcolumn:name="Latest",type=string,JSONPath=`.status.latestRevision`
// +kubebuilder:printcolumn:name="Stable",type=string,JSONPath=`.status.stableRevision`
// +kubebuilder:printcolumn:name="Canary",type=string,JSONPath=`.status.canaryRevision`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Journey declares pathways, agents and transitions. Sessions run on it.
type Journey struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired journey.
	// +required
	Spec JourneySpec `json:"spec"`
	// status is the observed state.
	// +optional
	Status JourneyStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// JourneyList contains a list of Journey.
type JourneyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Journeys.
	Items []Journey `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Journey{}, &JourneyList{})
}
