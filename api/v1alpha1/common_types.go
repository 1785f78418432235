package v1alpha1

// Name is a DNS label: the local name of a pathway, agent or transition.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit"
type Name string

// Confidence is a decimal in [0,1] written as a string, for example "0.82".
// Strings keep the value exact across languages and round trips.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=8
// +kubebuilder:validation:XValidation:rule="self.matches('^(0([.][0-9]{1,6})?|1([.]0{1,6})?)$')",message="must be a decimal between 0 and 1 written as a string, for example \"0.85\""
type Confidence string

// Decimal is a non-negative decimal number written as a string, for example
// "0.15".
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=20
// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{1,9}([.][0-9]{1,9})?$')",message="must be a non-negative decimal written as a string, for example \"0.15\""
type Decimal string

// Expression is a CEL expression. It is compiled by the controllers; one
// that does not compile makes the owning Journey or Pathway Ready=False.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=2048
type Expression string

// Phase is where a Session is in its lifecycle.
// +kubebuilder:validation:Enum=Pending;Running;WaitingForInput;AwaitingApproval;Escalated;Completed;Failed;Cancelled
type Phase string

const (
	// PhasePending: the Session has not taken its first step yet.
	PhasePending Phase = "Pending"
	// PhaseRunning: the Session has work to do (a message, an outcome, an agent
	// call).
	PhaseRunning Phase = "Running"
	// PhaseWaitingForInput: nothing to do until a new message or External
	// outcome arrives.
	PhaseWaitingForInput Phase = "WaitingForInput"
	// PhaseAwaitingApproval: a decision waits for an entry in spec.approvals.
	PhaseAwaitingApproval Phase = "AwaitingApproval"
	// PhaseEscalated: a decision was below its approval threshold and the
	// journey has no escalation pathway; an approval naming the decision can
	// still move it on.
	PhaseEscalated Phase = "Escalated"
	// PhaseCompleted: the journey finished. Terminal.
	PhaseCompleted Phase = "Completed"
	// PhaseFailed: the journey failed (FailFast error, a terminal agent error).
	// Terminal.
	PhaseFailed Phase = "Failed"
	// PhaseCancelled: spec.cancel was set. Terminal.
	PhaseCancelled Phase = "Cancelled"
)

// IsTerminal reports whether no further step can change a Session in this
// phase.
func (p Phase) IsTerminal() bool {
	return p == PhaseCompleted || p == PhaseFailed || p == PhaseCancelled
}

// ResultType classifies how a pathway turn went.
// +kubebuilder:validation:Enum=success;failure;partial_success;unclear
type ResultType string

const (
	ResultSuccess        ResultType = "success"
	ResultFailure        ResultType = "failure"
	ResultPartialSuccess ResultType = "partial_success"
	ResultUnclear        ResultType = "unclear"
)

// Action is what a transition does to the Session.
// +kubebuilder:validation:Enum=Advance;JumpBack;Retry;Block;Close
type Action string

const (
	// ActionAdvance moves to the destination.
	ActionAdvance Action = "Advance"
	// ActionJumpBack moves to an earlier pathway and starts a new cycle
	// (iteration + 1).
	ActionJumpBack Action = "JumpBack"
	// ActionRetry runs the current pathway again, counted against
	// retryLimitPerPathway.
	ActionRetry Action = "Retry"
	// ActionBlock stops the Session: loop prevention or a cap. The Session is
	// Stalled.
	ActionBlock Action = "Block"
	// ActionClose completes the journey.
	ActionClose Action = "Close"
)

// SecretKeyRef names a key of a Secret in the namespace of the Session.
type SecretKeyRef struct {
	// name is the name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="name must be a Secret name: lowercase letters, digits, '-' and '.'"
	Name string `json:"name"`
	// key is the key within the Secret's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="key must be a Secret data key: letters, digits, '-', '_' and '.'"
	Key string `json:"key"`
}
