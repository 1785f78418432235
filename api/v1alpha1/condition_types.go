package v1alpha1

// Condition types and reasons. Ready is always present (kstatus); Reconciling and
// Stalled only while true. Events reuse these reasons.

// Ready: the object is usable (a Journey or Pathway is valid; a Session is healthy).
const (
	ConditionReady = "Ready"

	// ReasonValid: the Journey or Pathway passed validation.
	ReasonValid = "Valid"
	// ReasonInvalid: the spec failed a check the API server cannot make (see status.issues).
	ReasonInvalid = "Invalid"
	// ReasonPathwayNotFound: a referenced Pathway object does not exist.
	ReasonPathwayNotFound = "PathwayNotFound"
	// ReasonJourneyNotFound: the Session's Journey does not exist.
	ReasonJourneyNotFound = "JourneyNotFound"
	// ReasonJourneyNotReady: the Session's Journey is not Ready, so it cannot start.
	ReasonJourneyNotReady = "JourneyNotReady"
	// ReasonRevisionNotFound: the revision the Session is pinned to is gone.
	ReasonRevisionNotFound = "RevisionNotFound"
	// ReasonProgressing: the Session has work to do.
	ReasonProgressing = "Progressing"
	// ReasonWaitingForInput: the Session waits for a message or an External outcome.
	ReasonWaitingForInput = "WaitingForInput"
	// ReasonAwaitingApproval: the Session waits for an approval.
	ReasonAwaitingApproval = "AwaitingApproval"
	// ReasonEscalated: a decision's confidence was too low; a person must decide.
	ReasonEscalated = "Escalated"
	// ReasonSuspended: spec.suspend is true.
	ReasonSuspended = "Suspended"
	// ReasonCompleted: the journey finished.
	ReasonCompleted = "Completed"
	// ReasonFailed: the journey failed.
	ReasonFailed = "Failed"
	// ReasonCancelled: spec.cancel was set.
	ReasonCancelled = "Cancelled"
)

// Reconciling: the controller is working towards the desired state (only while true).
const (
	ConditionReconciling = "Reconciling"
)

// Stalled: the object cannot make progress without a change from a person (only while
// true). Reasons for Sessions are the caps and blocks of the engine.
const (
	ConditionStalled = "Stalled"

	ReasonLoopDetected       = "LoopDetected"
	ReasonTurnLimit          = "TurnLimit"
	ReasonIterationLimit     = "IterationLimit"
	ReasonTransitionLimit    = "TransitionLimit"
	ReasonRetryLimit         = "RetryLimit"
	ReasonSessionTimeout     = "SessionTimeout"
	ReasonBudgetExceeded     = "BudgetExceeded"
	ReasonContextTooLarge    = "ContextTooLarge"
	ReasonStackOverflow      = "StackOverflow"
	ReasonAgentTerminalError = "AgentTerminalError"
	ReasonInvalidSpec        = "InvalidSpec"
)

// AwaitingInput: the Session waits for a message or an External outcome.
const (
	ConditionAwaitingInput = "AwaitingInput"
)

// AwaitingApproval: a decision waits for an entry in spec.approvals.
const (
	ConditionAwaitingApproval = "AwaitingApproval"
)

// AgentAvailable: the last agent call succeeded (True) or failed transiently (False).
const (
	ConditionAgentAvailable = "AgentAvailable"

	ReasonAgentReady   = "AgentReady"
	ReasonRateLimited  = "RateLimited"
	ReasonAgentTimeout = "AgentTimeout"
	ReasonAgentError   = "AgentError"
)
