package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ToolName is the name agents see for a tool: letters, digits, '_' and '-',
// as function-calling APIs accept them.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z][A-Za-z0-9_-]*$')",message="must start with a letter and hold only letters, digits, '_' and '-'"
type ToolName string

// ToolServer is an MCP server reached over streamable HTTP.
type ToolServer struct {
	// name is the server's name in the journey; tools refer to it.
	// +required
	Name Name `json:"name"`
	// url is the server's streamable HTTP endpoint, for example
	// http://clinic.default.svc:8080/mcp.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="url must be an http or https URL"
	URL string `json:"url"`
	// headers are sent with every request to the server, for example a bearer
	// token read from a Secret.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Headers []ToolServerHeader `json:"headers,omitempty"`
	// timeout bounds one request to the server. Defaults to 30s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="timeout must be a positive duration such as 10s or 1m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// sampling, when set, answers the server's sampling requests (the server asks
	// for a completion during a call) with the model of one of the journey's
	// agents. Off by default: a server's sampling request is refused.
	// +optional
	Sampling *ToolServerSampling `json:"sampling,omitempty"`
	// idempotency says whether the server honours the idempotency key every call
	// carries. Keyed (the default): a call interrupted after it was sent (a
	// crash, a timeout, a lost connection) is sent again with the same key, and
	// the server does its work once. None: the server would do it again, so such
	// a call is never sent again on its own; its outcome is unknown, and the
	// tool's onUnknown says what happens (docs/tools.md). Defaults to Keyed.
	// +optional
	Idempotency ToolIdempotency `json:"idempotency,omitempty"`
}

// ToolIdempotency says whether a tool server honours idempotency keys.
// +kubebuilder:validation:Enum=Keyed;None
type ToolIdempotency string

const (
	// ToolIdempotencyKeyed: the server does a call's work once per idempotency
	// key, however often the call is sent.
	ToolIdempotencyKeyed ToolIdempotency = "Keyed"
	// ToolIdempotencyNone: the server ignores the key; a call sent twice may be
	// done twice.
	ToolIdempotencyNone ToolIdempotency = "None"
)

// ToolServerHeader is an HTTP header sent to a tool server, with a literal
// value or one read from a Secret at each call.
// +kubebuilder:validation:XValidation:rule="has(self.value) != has(self.valueFrom)",message="exactly one of value and valueFrom must be set"
type ToolServerHeader struct {
	// name is the header's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9!#$%&*+.^_`|~-]+$')",message="name must be an HTTP header name"
	Name string `json:"name"`
	// value is the header's literal value. Use valueFrom for secrets.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value,omitempty"`
	// valueFrom reads the value from a Secret in the Session's namespace.
	// +optional
	ValueFrom *HeaderValueSource `json:"valueFrom,omitempty"`
}

// HeaderValueSource is where a header's value comes from.
type HeaderValueSource struct {
	// secretKeyRef names the Secret key holding the value.
	// +required
	SecretKeyRef SecretKeyRef `json:"secretKeyRef"`
}

// ToolApproval says when a call to a tool waits for a person's approval.
// +kubebuilder:validation:Enum=Never;Always;IfDestructive
type ToolApproval string

const (
	// ToolApprovalNever: calls never wait.
	ToolApprovalNever ToolApproval = "Never"
	// ToolApprovalAlways: every call waits for an approval.
	ToolApprovalAlways ToolApproval = "Always"
	// ToolApprovalIfDestructive: calls wait when the server says the tool is
	// destructive (or does not say it is read-only); builtin tools never wait.
	ToolApprovalIfDestructive ToolApproval = "IfDestructive"
)

// ToolCache says whether identical calls to a tool are answered once.
// +kubebuilder:validation:Enum=None;Session
type ToolCache string

const (
	// ToolCacheNone calls the tool every time.
	ToolCacheNone ToolCache = "None"
	// ToolCacheSession answers identical calls (same tool, same arguments) once
	// per Session.
	ToolCacheSession ToolCache = "Session"
)

// Tool is a tool the journey's agents may call: one of an MCP server's
// tools, or a builtin tool computed by CEL.
// +kubebuilder:validation:XValidation:rule="has(self.server) != has(self.builtin)",message="exactly one of server and builtin must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.serverTool) || has(self.server)",message="serverTool needs server"
// +kubebuilder:validation:XValidation:rule="has(self.probe) == (has(self.onUnknown) && self.onUnknown == 'Probe')",message="probe is required for onUnknown Probe and belongs to no other onUnknown"
type Tool struct {
	// name is the name agents see; unique in the journey.
	// +required
	Name ToolName `json:"name"`
	// description tells agents what the tool does. Defaults to the server's
	// description.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`
	// server is the toolServers entry that serves the tool.
	// +optional
	Server Name `json:"server,omitempty"`
	// serverTool is the tool's name on the server. Defaults to name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ServerTool string `json:"serverTool,omitempty"`
	// builtin computes the tool's result offline with a CEL expression over args
	// and context.
	// +optional
	Builtin *BuiltinTool `json:"builtin,omitempty"`
	// approval is when a call waits for a person: Never, Always or
	// IfDestructive.
	// +optional
	// +kubebuilder:default=IfDestructive
	Approval ToolApproval `json:"approval,omitempty"`
	// when is a CEL expression over args and context; when set, a call needs
	// approval only when it is true.
	// +optional
	When Expression `json:"when,omitempty"`
	// approvalTimeout bounds how long a call waits for an approval, and what
	// happens then: Reject returns the rejection to the model as the tool's
	// result, Escalate makes the Session Escalated.
	// +optional
	ApprovalTimeout *ApprovalTimeout `json:"approvalTimeout,omitempty"`
	// requires lists context keys that must be present before the tool is
	// called; a call without them is refused with a Tool failure and never
	// reaches the server.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	Requires []string `json:"requires,omitempty"`
	// cache is None or Session: identical calls (same arguments) answered once
	// per Session.
	// +optional
	// +kubebuilder:default=None
	Cache ToolCache `json:"cache,omitempty"`
	// onUnknown says what happens when the outcome of a call to this tool is
	// unknown: its server's idempotency is None and the call was sent but its
	// answer never recorded (a crash, a timeout, a lost connection). AskHuman
	// (the default) waits for a person to answer with kubectl journey answer;
	// Probe calls the probe tool with the call's idempotency key to learn the
	// outcome; Fail fails the call. Defaults to AskHuman.
	// +optional
	OnUnknown OnUnknownAction `json:"onUnknown,omitempty"`
	// probe, for onUnknown Probe, is the read-only tool asked whether a call
	// whose outcome is unknown was done.
	// +optional
	Probe *ToolProbe `json:"probe,omitempty"`
	// elicitationTimeout bounds how long a call waits for the user's answer
	// when its server asks for input (MCP elicitation); then the server is
	// answered Cancel and its result goes back to the model. Defaults to 1h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="elicitationTimeout must be a positive duration such as 30m or 24h"
	ElicitationTimeout *metav1.Duration `json:"elicitationTimeout,omitempty"`
}

// OnUnknownAction is what happens to a call whose outcome is unknown.
// +kubebuilder:validation:Enum=AskHuman;Probe;Fail
type OnUnknownAction string

const (
	// OnUnknownAskHuman: the Session waits (Stalled, reason OutcomeUnknown) for
	// an Answer intervention naming the call: done with a result, not done
	// (sent again), or failed.
	OnUnknownAskHuman OnUnknownAction = "AskHuman"
	// OnUnknownProbe: the probe tool is called with the call's idempotency key;
	// its answer says whether the call was done. When it cannot tell, a person
	// is asked as for AskHuman.
	OnUnknownProbe OnUnknownAction = "Probe"
	// OnUnknownFail: the call fails; the model is told its outcome is unknown.
	OnUnknownFail OnUnknownAction = "Fail"
)

// ToolProbe is a read-only tool that tells whether a call was done. It is
// called with the arguments {"idempotencyKey": KEY, "tool": TOOL} and answers an
// object: {"done": true, "result": ...} (the call was done; result, else the
// whole answer, is its result), {"done": false} (it was not: it is sent
// again). Any other answer, or a failed probe, leaves it to a person.
type ToolProbe struct {
	// tool is the journey tool to call (one of spec.tools).
	// +required
	Tool ToolName `json:"tool"`
}

// BuiltinTool is a tool computed offline.
type BuiltinTool struct {
	// expression is a CEL expression over args and context giving the tool's
	// result.
	// +required
	Expression Expression `json:"expression"`
}

// BuiltinToolCall is a tool call the builtin provider makes in a pathway
// turn.
type BuiltinToolCall struct {
	// tool is the tool to call; it must be in the pathway's tools.
	// +required
	Tool ToolName `json:"tool"`
	// args is a CEL expression giving the arguments, an object, over message,
	// context, inputs, session and tools (the results of the turn's earlier
	// calls, by tool name). Defaults to {}.
	// +optional
	Args Expression `json:"args,omitempty"`
}

// DiscoveredTool is a tool a journey's servers offer, as the Journey
// controller last listed it.
type DiscoveredTool struct {
	// name is the tool's name in the journey.
	// +required
	Name string `json:"name"`
	// server is the server offering it, empty for builtin tools.
	// +optional
	Server string `json:"server,omitempty"`
	// description is the server's description of the tool.
	// +optional
	Description string `json:"description,omitempty"`
	// readOnly is the server's hint that the tool changes nothing.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
	// destructive is the server's hint that the tool may change or delete
	// things.
	// +optional
	Destructive bool `json:"destructive,omitempty"`
}

// ToolCallState is where a tool call stands.
// +kubebuilder:validation:Enum=Pending;Done;Failed;Rejected;OutcomeUnknown;AwaitingInput
type ToolCallState string

const (
	// ToolCallPending: the call is journaled and not answered yet (it may be
	// waiting for approval).
	ToolCallPending ToolCallState = "Pending"
	// ToolCallDone: the tool answered.
	ToolCallDone ToolCallState = "Done"
	// ToolCallFailed: the call failed or was refused before it reached the tool.
	ToolCallFailed ToolCallState = "Failed"
	// ToolCallRejected: an approver rejected the call; the tool received
	// nothing.
	ToolCallRejected ToolCallState = "Rejected"
	// ToolCallOutcomeUnknown: the call was sent to a server that does not honour
	// idempotency keys and its answer was never recorded: whether it was done is
	// not known, and it is not sent again on its own (see the tool's onUnknown).
	ToolCallOutcomeUnknown ToolCallState = "OutcomeUnknown"
	// ToolCallAwaitingInput: the server asked the user for input during the
	// call (MCP elicitation); the call waits for kubectl journey answer and is
	// then sent again, with the same key, the answer given to the server.
	ToolCallAwaitingInput ToolCallState = "AwaitingInput"
)

// ToolCallRecord is one tool call of a turn.
type ToolCallRecord struct {
	// id names the call in the Session: t-<step>-<index>.
	// +required
	ID string `json:"id"`
	// tool is the tool called.
	// +required
	Tool string `json:"tool"`
	// argsDigest is the SHA-256 (hex) of the call's canonical JSON arguments.
	// +optional
	ArgsDigest string `json:"argsDigest,omitempty"`
	// state is Pending, Done, Failed, Rejected, OutcomeUnknown or
	// AwaitingInput.
	// +required
	State ToolCallState `json:"state"`
	// durationMs is how long the call took.
	// +optional
	DurationMs int64 `json:"durationMs,omitempty"`
	// error says why the call failed or was rejected.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Error string `json:"error,omitempty"`
	// approvedBy is who approved the call, when it needed approval.
	// +optional
	ApprovedBy string `json:"approvedBy,omitempty"`
	// cached says the result came from an identical earlier call in the Session.
	// +optional
	Cached bool `json:"cached,omitempty"`
}

// ToolCallProgress is a tool call of the turn in progress: the write-ahead
// record the call is made from, and its result once journaled.
type ToolCallProgress struct {
	ToolCallRecord `json:",inline"`
	// awaitingApproval says the call waits for an approval naming its id in
	// spec.approvals.
	// +optional
	AwaitingApproval bool `json:"awaitingApproval,omitempty"`
	// idempotencyKey is sent with the call; a retried call sends the same key.
	// +required
	IdempotencyKey string `json:"idempotencyKey"`
	// sentAt is when the call was sent, for a server whose idempotency is
	// None: it is written before the request is made, so a call found sent and
	// not answered has an unknown outcome.
	// +optional
	SentAt *metav1.Time `json:"sentAt,omitempty"`
	// args are the call's arguments.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Args *apiextensionsv1.JSON `json:"args,omitempty"`
	// result is the tool's result.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:XPreserveUnknownFields
	Result *apiextensionsv1.JSON `json:"result,omitempty"`
	// assistantText is the text the model wrote with the answer that asked
	// for this call, set on that answer's first call; the model is given it
	// back with the calls. Longer text is cut and ends saying so.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	AssistantText string `json:"assistantText,omitempty"`
	// elicitations are what the server asked the user during the call (MCP
	// elicitation), in order, with the answers given. The last one without an
	// answer is what the Session waits for; once answered, the call is sent
	// again with the same key and each answer given to the server's request.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	Elicitations []ToolElicitation `json:"elicitations,omitempty"`
}

// ElicitationMode is how a tool server asks the user for input.
// +kubebuilder:validation:Enum=Form;URL
type ElicitationMode string

const (
	// ElicitationForm: the server asks for fields, described by a schema.
	ElicitationForm ElicitationMode = "Form"
	// ElicitationURL: the server asks the user to visit a page.
	ElicitationURL ElicitationMode = "URL"
)

// ToolElicitation is what a tool server asked the user during a call (MCP
// elicitation), and the answer.
type ToolElicitation struct {
	// mode is Form (fields to fill in) or URL (a page to visit).
	// +required
	Mode ElicitationMode `json:"mode"`
	// message is what the server asks, as it wrote it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// requestedSchema, for Form, is the JSON schema of the fields asked for:
	// an object whose properties are strings, numbers, integers or booleans.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	RequestedSchema *apiextensionsv1.JSON `json:"requestedSchema,omitempty"`
	// url, for URL, is the page the user is asked to visit.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url,omitempty"`
	// elicitationID, for URL, is the server's id of the request.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	ElicitationID string `json:"elicitationID,omitempty"`
	// askedAt is when the server asked.
	// +optional
	AskedAt *metav1.Time `json:"askedAt,omitempty"`
	// answer is Accept, Decline or Cancel once answered (Cancel when no one
	// answered within the tool's elicitationTimeout); empty while it waits.
	// +optional
	Answer AnswerOutcome `json:"answer,omitempty"`
	// content, for Accept in Form mode, is the fields the user gave.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Content *apiextensionsv1.JSON `json:"content,omitempty"`
	// answeredBy is who answered.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	AnsweredBy string `json:"answeredBy,omitempty"`
}

// ModelToolCall is a tool call a model asked for, as journaled before it is
// checked and made.
type ModelToolCall struct {
	// id is the model's id for the call.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	ID string `json:"id,omitempty"`
	// name is the tool the model named.
	// +required
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// arguments are the call's arguments as the model wrote them (JSON). Longer
	// arguments are cut, which makes the call's arguments invalid.
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	Arguments string `json:"arguments,omitempty"`
}

// ToolCacheEntry is the result of a cached tool call, reused for identical
// calls.
type ToolCacheEntry struct {
	// tool is the tool called.
	// +required
	Tool string `json:"tool"`
	// argsDigest is the digest of the call's arguments.
	// +required
	ArgsDigest string `json:"argsDigest"`
	// result is the tool's result.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:XPreserveUnknownFields
	Result *apiextensionsv1.JSON `json:"result,omitempty"`
}

// The Journey condition about its tools, and its reasons.
const (
	// ConditionToolsAvailable says whether every server tool the journey
	// declares was found on its server.
	ConditionToolsAvailable = "ToolsAvailable"
	// ReasonToolsDiscovered: every declared server tool was listed by its
	// server.
	ReasonToolsDiscovered = "ToolsDiscovered"
	// ReasonToolServerUnreachable: a tool server could not be listed; tried
	// again later.
	ReasonToolServerUnreachable = "ToolServerUnreachable"
	// ReasonToolMissing: a declared tool is not among its server's tools.
	ReasonToolMissing = "ToolMissing"
)
