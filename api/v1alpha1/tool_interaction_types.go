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
