package agent

import flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"

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
}

// ToolResponse is a tool's answer.
type ToolResponse struct {
	// Result is the tool's result: the structured content of an MCP result, else its text.
	Result any `json:"result,omitempty"`
	// Error, when set, is the tool's own error message (an MCP result with isError).
	Error string `json:"error,omitempty"`
	// DurationMs is how long the call took.
	DurationMs int64 `json:"durationMs,omitempty"`
}
