package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What MCP servers send their client during a call, besides the call's result:
// progress notifications, sampling requests (the server asks the client's model
// for a completion) and elicitations (the server asks the user for input).

// ToolProgress is the last progress a tool server reported for the call in
// flight.
type ToolProgress struct {
	// call is the id of the tool call in flight (t-<step>-<index>).
	// +required
	// +kubebuilder:validation:MaxLength=64
	Call string `json:"call"`
	// tool is the tool called.
	// +required
	// +kubebuilder:validation:MaxLength=256
	Tool string `json:"tool"`
	// progress is how far the call has come, in the server's units, as a
	// decimal string.
	// +required
	// +kubebuilder:validation:MaxLength=32
	Progress string `json:"progress"`
	// total is the progress at which the call is done, when the server knows
	// it.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Total string `json:"total,omitempty"`
	// message is what the server says about the progress.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
	// updatedAt is when the server reported this progress.
	// +required
	UpdatedAt metav1.Time `json:"updatedAt"`
}

// ToolServerSampling is how a journey answers its tool server's sampling requests.
type ToolServerSampling struct {
	// agent is the journey's agent whose model answers the server's sampling
	// requests (under its own instructions, then the server's system prompt). A
	// builtin agent answers with its builtin.reply template, else with the last
	// message's text. What the requests use is journaled with the tool call's
	// answer and counted in the Session's usage and budget like a model call.
	// +required
	Agent Name `json:"agent"`
	// maxTokens caps the completion tokens all the sampling requests of one tool
	// call may use together; each request is capped at what is left (or at the
	// server's own maxTokens when lower), and a request once they are used up is
	// refused. Defaults to 1024.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	MaxTokens *int32 `json:"maxTokens,omitempty"`
}

// DefaultSamplingMaxTokens is sampling.maxTokens when it is not set.
const DefaultSamplingMaxTokens = 1024

// TokenCap is maxTokens, or DefaultSamplingMaxTokens.
func (s *ToolServerSampling) TokenCap() int {
	if s.MaxTokens != nil && *s.MaxTokens > 0 {
		return int(*s.MaxTokens)
	}
	return DefaultSamplingMaxTokens
}
