package agent

import (
	"context"
	"encoding/json"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// ToolRequest is one tool call, as its write-ahead record in the Session holds it.
type ToolRequest struct {
	// ID names the call in the Session (t-<step>-<index>).
	ID string `json:"id"`
	// Tool is the tool's name in the journey.
	Tool string `json:"tool"`
	// Args are the call's arguments.
	Args map[string]any `json:"args"`
	// IdempotencyKey is sent with the call: every delivery of the call carries it.
	IdempotencyKey string `json:"idempotencyKey"`
	// Builtin is the CEL expression of a builtin tool; empty for a server tool.
	Builtin flowv1.Expression `json:"builtin,omitempty"`
	// Server is the MCP server of a server tool, ServerTool its name there.
	Server     *flowv1.ToolServer `json:"server,omitempty"`
	ServerTool string             `json:"serverTool,omitempty"`
	// Context is the Session context, for builtin tools.
	Context map[string]any `json:"context,omitempty"`
	// ApprovedBy is who approved the call, when it needed approval.
	ApprovedBy string `json:"approvedBy,omitempty"`
	// Pathway is the pathway whose turn makes the call: its retry limit and timeout
	// bound the call.
	Pathway string `json:"pathway,omitempty"`
	// Sampling, when set, is how the server's sampling requests are answered:
	// nil refuses them.
	Sampling *ToolSampling `json:"sampling,omitempty"`
	// Elicitations are the server's earlier requests for input during this call,
	// with the user's answers: a request the server makes again is given its
	// answer at once; a new one ends the attempt (ToolResponse.Elicitation).
	Elicitations []flowv1.ToolElicitation `json:"elicitations,omitempty"`
	// Hooks answer what the server asks of its client during the call; nil
	// answers nothing (no progress is reported, sampling is refused).
	Hooks *ToolHooks `json:"-"`
}

// ToolHooks are how a tool call answers what its server sends during the call.
type ToolHooks struct {
	// Progress, when set, is told the server's progress notifications while the
	// call is in flight, in order; it is never told after the call returned (a
	// notification still queued when the result arrives is dropped).
	Progress func(ToolProgress)
	// Sample, when set, answers the server's sampling requests.
	Sample func(ctx context.Context, req SampleRequest) (SampleResponse, error)
}

// ToolSampling is the agent whose model answers a tool server's sampling requests,
// and the completion tokens one tool call may sample in all.
type ToolSampling struct {
	Agent     flowv1.AgentSpec `json:"agent"`
	MaxTokens int              `json:"maxTokens"`
}

// SampleRequest is a tool server's sampling request: a conversation to complete.
type SampleRequest struct {
	SystemPrompt string     `json:"systemPrompt,omitempty"`
	Messages     []Exchange `json:"messages"`
	// MaxTokens caps the completion's tokens.
	MaxTokens int `json:"maxTokens"`
}

// SampleResponse is a model's completion for a sampling request.
type SampleResponse struct {
	Text       string `json:"text"`
	Model      string `json:"model,omitempty"`
	StopReason string `json:"stopReason,omitempty"`
	Usage      Usage  `json:"usage,omitzero"`
}

// Sampler is an agent that can complete a conversation for a tool server.
type Sampler interface {
	Sample(ctx context.Context, req SampleRequest) (SampleResponse, error)
}

// ToolProgress is a progress notification of a call in flight.
type ToolProgress struct {
	// Progress is how far the call has come, Total where it is done (0: unknown).
	Progress, Total float64
	// Message is what the server says about it.
	Message string
}

// ToolResponse is a tool's answer.
type ToolResponse struct {
	// Result is the tool's result: the structured content of an MCP result, else its text.
	Result any `json:"result,omitempty"`
	// Error, when set, is the tool's own error message (an MCP result with isError).
	Error string `json:"error,omitempty"`
	// DurationMs is how long the call took.
	DurationMs int64 `json:"durationMs,omitempty"`
	// Usage is what the server's sampling requests during the call used.
	Usage Usage `json:"usage,omitzero"`
	// Elicitation, when set, is the input the server asked the user for, with no
	// answer yet: the call was abandoned, to be sent again once the user answers.
	Elicitation *flowv1.ToolElicitation `json:"elicitation,omitempty"`
}

// ToolSpec is a tool as a model sees it: its name in the journey, what it does and
// the JSON schema of its arguments (the input schema the revision pins; an empty one
// for a builtin tool).
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// ToolCall is a tool call a model asked for.
type ToolCall struct {
	// ID is the model's id for the call.
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Arguments are the call's arguments as the model wrote them: JSON text.
	Arguments string `json:"arguments,omitempty"`
}

// ToolExchange is one tool call of the turn so far and what came of it.
type ToolExchange struct {
	// Round numbers the model's answers in the turn: the calls of one answer share it.
	Round int `json:"round"`
	// ID names the call in the Session (t-<step>-<index>).
	ID   string `json:"id"`
	Tool string `json:"tool"`
	// Arguments are the call's arguments as JSON text.
	Arguments string `json:"arguments"`
	// Result is what the model is told: the tool's result as JSON, or why the call
	// was refused, rejected or failed.
	Result string `json:"result"`
	// AssistantText is the text the model wrote with the round's calls, on the
	// round's first exchange.
	AssistantText string `json:"assistantText,omitempty"`
}
