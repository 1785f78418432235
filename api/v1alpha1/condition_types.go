package v1alpha1

// Condition types and reasons, as kstatus (sigs.k8s.io/cli-utils) and
// `kubectl wait` read them: Ready is always present; Reconciling and Stalled
// only while true; every condition carries the metadata.generation it
// observed. Events reuse these reasons. docs/operations.md has the table
// phase -> conditions -> kstatus status.

// Ready: the object is usable (a Journey or Pathway is valid; a Session is
// healthy: running, waiting for a message, waiting on a person, or
// completed).
const (
	ConditionReady = "Ready"

	// ReasonValid: the Journey or Pathway passed validation.
	ReasonValid = "Valid"
	// ReasonInvalid: the spec failed a check the API server cannot make (see
	// status.issues).
	ReasonInvalid = "Invalid"
	// ReasonPathwayNotFound: a referenced Pathway object does not exist.
	ReasonPathwayNotFound = "PathwayNotFound"
	// ReasonJourneyNotFound: the Session's Journey does not exist.
	ReasonJourneyNotFound = "JourneyNotFound"
	// ReasonJourneyNotReady: the Session's Journey has no valid revision yet
	// (status.readyRevision is empty), so it cannot start.
	ReasonJourneyNotReady = "JourneyNotReady"
	// ReasonRevisionNotFound: the revision the Session is pinned to is gone.
	ReasonRevisionNotFound = "RevisionNotFound"
	// ReasonProgressing: the Session has work to do.
	ReasonProgressing = "Progressing"
	// ReasonWaitingForInput: the Session waits for a message or an External
	// outcome.
	ReasonWaitingForInput = "WaitingForInput"
	// ReasonAwaitingApproval: the Session waits for an approval.
	ReasonAwaitingApproval = "AwaitingApproval"
	// ReasonEscalated: a decision's confidence was too low; a person must
	// decide.
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

// Reconciling: the controller is working towards the desired state (only
// while true).
const (
	ConditionReconciling = "Reconciling"
)

// Stalled: the object cannot make progress without a change from a person
// (only while true): an invalid Journey or Pathway (reason Invalid), a
// Session blocked by a cap (the reasons below), and every Session that ended
// without completing (Failed, Cancelled or the reason it failed with).
const (
	ConditionStalled = "Stalled"

	ReasonLoopDetected       = "LoopDetected"
	ReasonTurnLimit          = "TurnLimit"
	ReasonIterationLimit     = "IterationLimit"
	ReasonTransitionLimit    = "TransitionLimit"
	ReasonRetryLimit         = "RetryLimit"
	ReasonSessionTimeout     = "SessionTimeout"
	ReasonIdleTimeout        = "IdleTimeout"
	ReasonBudgetExceeded     = "BudgetExceeded"
	ReasonContextTooLarge    = "ContextTooLarge"
	ReasonStackOverflow      = "StackOverflow"
	ReasonAgentTerminalError = "AgentTerminalError"
	ReasonInvalidSpec        = "InvalidSpec"
	// ReasonOutcomeUnknown: a tool call was sent to a server that does not
	// honour idempotency keys and its answer was never recorded; the Session
	// waits for kubectl journey answer to say whether it was done.
	ReasonOutcomeUnknown = "OutcomeUnknown"
)

// Completed: the Session finished (present once it did): True when it
// completed, False when it failed or was cancelled, with the same reason as
// Ready. So `kubectl wait --for=condition=Completed` returns when a Session
// completed.
const (
	ConditionCompleted = "Completed"
)

// AwaitingInput: the Session waits for a message or an External outcome
// (reason WaitingForInput), or for the input a tool server asked the user for
// during a call (reason InputRequested: the message shows what was asked and
// the kubectl journey answer command).
const (
	ConditionAwaitingInput = "AwaitingInput"

	// ReasonInputRequested: a tool server asked the user for input during a
	// call (MCP elicitation); the call waits for kubectl journey answer.
	ReasonInputRequested = "InputRequested"
)

// AwaitingApproval: a decision waits for an entry in spec.approvals.
const (
	ConditionAwaitingApproval = "AwaitingApproval"
)

// TranscriptTrimmed: the oldest exchanges of status.transcript were dropped
// to keep it under limits.maxTranscriptBytes (status.transcriptDropped
// counts them); pathway agents no longer see them. Absent until the first
// drop.
const (
	ConditionTranscriptTrimmed = "TranscriptTrimmed"

	ReasonOldestExchangesDropped = "OldestExchangesDropped"
)

// AgentAvailable: the last agent or tool call answered (True), or failed:
// transiently, while it is tried again, or for good, once it was given up
// (False, with the error class as reason: RateLimited, AgentTimeout or
// AgentError). An answer that was not usable (invalid JSON, a tool's error
// result) is still an answer: True, the message says what was wrong with it.
const (
	ConditionAgentAvailable = "AgentAvailable"

	ReasonAgentReady   = "AgentReady"
	ReasonRateLimited  = "RateLimited"
	ReasonAgentTimeout = "AgentTimeout"
	ReasonAgentError   = "AgentError"
)

// TurnFailed: the last turn failed (True) or ended without a failure (False).
// Absent until a turn fails. While True, the reason says how: the turn's
// finishReason when a cap or policy stopped it (ToolCallLimit,
// BudgetExceeded, TurnLimit, LoopDetected, PolicyDenied, ...), else the source
// and kind of its last failure (LLMTimeout, ToolException, SystemException,
// TransportTimeout, LLMValidation, ...); the message is that failure in one
// line. status.reason, the REASON column, says TurnFailed while it is True
// and the Session is otherwise healthy.
const (
	ConditionTurnFailed = "TurnFailed"

	// ReasonTurnAnswered: the last turn ended without a failure.
	ReasonTurnAnswered = "TurnAnswered"
)

// Event reasons of timers and overrides.
const (
	// ReasonApprovalTimeout: a decision or tool call waited for approval
	// longer than its approval timeout; its onTimeout applied.
	ReasonApprovalTimeout = "ApprovalTimeout"
	// ReasonLimitsOverridden: the Session's spec.limits raised the cap that
	// stalled it, and it continues.
	ReasonLimitsOverridden = "LimitsOverridden"
)

// Event reasons of interventions (spec.interventions).
const (
	// ReasonIntervened: an intervention applied; the message says who, what
	// and why.
	ReasonIntervened = "Intervened"
	// ReasonInterventionRefused: an intervention could not apply (Warning); it
	// counts as processed, and status.lastTurn keeps why.
	ReasonInterventionRefused = "InterventionRefused"
)

// WaitingForBudget: a Session's next call does not fit in a Budget that
// selects it (only while true): the message names the Budget, what the call
// could cost and what is left. The call is not made; the Session goes on by
// itself when the Budget's window rolls over or its limit is raised. Ready is
// False with the same reason while it waits.
const (
	ConditionWaitingForBudget = "WaitingForBudget"

	// ReasonBudgetExhausted: a Budget has no room for the Session's next call.
	ReasonBudgetExhausted = "BudgetExhausted"
)

// Degraded: the Session's last model call of its pathway was made with the
// degradeTo agent of a Budget with onExhausted: Degrade, which had no room for
// the pathway's own agents (only while true, reason Degraded): the message
// names the Budget and both agents. It goes when a call of the pathway fits
// with its own agents again.
const ConditionDegraded = "Degraded"

// Budget conditions: Ready (the Budget is valid and its ledger counted),
// SoftLimitReached (a limit is past spec.softLimitPercent) and Exhausted (a
// call of a selected Session found no room in the current window).
const (
	ConditionSoftLimitReached = "SoftLimitReached"
	ConditionExhausted        = "Exhausted"

	// ReasonCounted: the Budget is valid and its ledger is counted.
	ReasonCounted = "Counted"
	// ReasonInvalidTimeZone: spec.timeZone is not a known IANA time zone.
	ReasonInvalidTimeZone = "InvalidTimeZone"
	// ReasonWithinLimits: the spend is below the soft limit, or every call
	// found room.
	ReasonWithinLimits = "WithinLimits"
	// ReasonSoftLimitReached: a limit is past spec.softLimitPercent.
	ReasonSoftLimitReached = "SoftLimitReached"
	// ReasonCallsDenied: calls of selected Sessions found no room in the
	// current window; they wait.
	ReasonCallsDenied = "CallsDenied"
	// ReasonDegraded: a call was made with the Budget's degradeTo agent.
	ReasonDegraded = "Degraded"
)

// Event reasons of what an agent learned about its endpoint.
const (
	// ReasonToolCallingPrompted: an openai agent with toolCalling Auto found
	// that its endpoint refuses native tools, and offers them in the prompt
	// from then on for that endpoint and model (said once per manager process).
	ReasonToolCallingPrompted = "ToolCallingPrompted"
)

// UpgradeBlocked: an Upgrade (kubectl journey upgrade, or the journey's
// upgradePolicy ReplayCompatible) did not move the Session, because a replay of
// its journal on the target revision diverges (True, reason ReplayDiverged:
// the message names the revision, the first step that diverges and the field).
// Set False (reason Upgraded) once an upgrade moves it; absent until an upgrade
// is blocked.
const (
	ConditionUpgradeBlocked = "UpgradeBlocked"

	// ReasonReplayDiverged: a replay of the Session's journal on a revision
	// does not reproduce one of its steps.
	ReasonReplayDiverged = "ReplayDiverged"
	// ReasonUpgraded: the Session moved to another revision of its journey
	// (also the Event's reason).
	ReasonUpgraded = "Upgraded"
)

// ForkDiverged: a fork (spec.forkOf) runs on another revision than its source,
// and the source's steps up to the fork step replay differently on it (True,
// reason ReplayDiverged: the message names the first step and field). The fork's
// status is still the source's up to that step. False (reason
// ReplayReproduced) when they replay the same. Absent on other Sessions.
const (
	ConditionForkDiverged = "ForkDiverged"

	// ReasonReplayReproduced: a replay reproduced every step it compared.
	ReasonReplayReproduced = "ReplayReproduced"
	// ReasonForked: a fork's status was rebuilt from its source (Event).
	ReasonForked = "Forked"
	// ReasonForkSourceNotFound: the fork's source Session (or its revision)
	// is gone, or its journal cannot rebuild the fork step (Stalled).
	ReasonForkSourceNotFound = "ForkSourceNotFound"
)

// Canary (Journeys with spec.rollout): True while a canary revision runs beside
// the stable one (reason CanaryProgressing while it takes its steps,
// CanaryPaused while it waits for a promotion or for its analysis); False once
// it ended (Promoted or Aborted), the message saying why. Events reuse the
// reasons, with CanaryStarted and CanaryStep for the transitions in between;
// Aborted is a Warning.
const (
	ConditionCanary = "Canary"

	// ReasonCanaryProgressing: the canary takes its steps.
	ReasonCanaryProgressing = "CanaryProgressing"
	// ReasonCanaryPaused: the canary holds until kubectl journey rollout promote,
	// or until its analysis has enough finished Sessions or its successCondition.
	ReasonCanaryPaused = "CanaryPaused"
	// ReasonCanaryStarted: a new valid revision became the canary.
	ReasonCanaryStarted = "CanaryStarted"
	// ReasonCanaryStep: the canary moved to its next step.
	ReasonCanaryStep = "CanaryStep"
	// ReasonPromoted: the canary became the stable revision.
	ReasonPromoted = "Promoted"
	// ReasonAborted: the canary was aborted (its failureCondition held, or
	// kubectl journey rollout abort); new Sessions start on the stable revision.
	ReasonAborted = "Aborted"
)
