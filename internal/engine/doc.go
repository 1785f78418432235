// Package engine is the pure step machine of journey Sessions: no client, no network,
// no clock reads (time is an input). It owns the Session's status: every condition,
// the journal, the transcript and their byte bounds are set here (conditions.go holds
// what the step protocol sets outside a step: the journal, and the conditions of a
// Session that waits, stalls or retries).
//
// The step protocol (internal/step) calls Step, performs the one Effect it may
// return, journals the answer with Effect.Record in status.pendingEffect (Journal),
// and calls Step again, which applies the journaled answer. Builtin agents are pure
// and local, so their answers are applied inside the step that asks, without a journal
// entry; only openai agents and tools produce an Effect.
//
// # Steps per write
//
// One status write carries several engine steps: at most one model call (a
// ClassifyIntent, RunPathway or Decide effect) with the step that applies its answer;
// the CallTool effects whose write-ahead records the written status already holds, and
// builtin tool calls (pure); and up to 16 more steps that call nothing (the
// controller's bound). The protocol stops before a step whose effect the write may not
// perform and leaves it to the next write, which takes it again from the written
// status: Step is deterministic, so the step numbers, decision ids, tool call ids and
// idempotency keys come out the same. A written status is therefore always one Step
// could have returned, with at most one journaled answer not yet applied, and a crash
// repeats at most the one model call of the write it lost. So a turn with no model
// call is one write, and a turn with k model calls is k writes whatever its tool
// calls; a wait for an approval is written with the answer that asked for it.
//
// Each section below is implemented in the files named in its title; validate.go
// holds Validate, the checks of a journey the API server cannot make, and snapshot.go
// the compiled journey revision and its limits.
//
// # Steps (step.go, status.go)
//
// A step does, in order, the first of these that applies:
//
//  1. A terminal phase (Completed, Failed, Cancelled): nothing.
//  2. spec.cancel: phase Cancelled, completionTime set, any turn in progress dropped.
//  3. spec.suspend: nothing but Ready=False, reason Suspended.
//  4. The first step (phase empty or Pending) starts the Session in the entry pathway:
//     iteration 1, the context from spec.initialContext, startTime, journeyRevision. It
//     then goes on with the next rules in the same step.
//  5. The next unprocessed intervention (see Interventions) applies, between turns or
//     while a cap holds a turn (an Upgrade at any time); a finished Session takes one step for it too (a Failed
//     one may resume, the others refuse). Else a blocked Session (see Caps) does
//     nothing more until an intervention lifts the block or it is cancelled, or,
//     blocked by the budget or maxTurns, until spec.limits lifts the cap.
//  6. The session timeout (from the creation time, else startTime) blocks the Session,
//     even when it is idle.
//  7. An approval waited for past its approval timeout (no approval left to process)
//     applies its onTimeout. A turn in progress (status.turn) continues, consuming
//     status.pendingEffect.
//  8. In AwaitingApproval or Escalated, the next approval is processed; messages and
//     outcomes wait.
//  9. Otherwise an unprocessed approval is processed (it can only be ignored: no
//     decision waits), else one turn starts: an entry run (a runOn Entry pathway that has
//     not run since it was entered), else the next External outcome (current External
//     pathway only), else the next message.
//
// A step does at most one unit of work (one turn or one approval), as far as builtin
// agents allow, and stops at the first remote agent call. At its end the phase is
// Running when another step would act at once, else WaitingForInput (or
// AwaitingApproval / Escalated), and the conditions follow the phase (Ready always;
// Reconciling only while Running; Stalled only while blocked; AwaitingInput and
// AwaitingApproval True or False once set). status.step increments on every step that
// changes the status; a step with nothing to do returns a status equal to its input
// and no effect, so the controller writes nothing.
//
// # Turns and the journal (turn.go, effect.go)
//
// A turn has stages, recorded in status.turn while it waits on a remote agent: Route
// (message turns: global transitions), Run (the pathway's agents) and Decide (outcome
// transitions). status.lastTurn is the turn's typed outcome, started when the turn
// starts (finishReason empty while in progress). The step that returns an Effect
// returns the status with all progress up to it. The next step recomputes the
// request of the turn's stage and uses status.pendingEffect only when its kind and
// input hash match (a stale entry is dropped and the question asked again; an entry
// without a turn in progress is dropped). So a crash repeats at most one agent call, a
// journaled answer is applied exactly once, and replaying a step gives the same
// status. An agent's Invalid or Terminal error, journaled as a failure, is a failed
// pathway run, no intent, or an unclear decision.
//
// # Every turn answers (answer.go)
//
// A message's turn goes on through the runOn Entry pathways it leads into (greet ->
// diagnose -> resolved): each entry run is a turn of its own in status.turns and the
// transcript (its exchange without the message), but lastTurn stays the message's
// record: its trigger and messageID, the failures and usage of every run, and every
// reply in lastTurn.replies, in order. The moves of those runs carry the message's id
// in history, so the turn's transitions are the history entries with its messageID.
// An entry run continues the record when the last move entered its pathway with the
// record's message; an entry run at the start, or after an outcome or an approval,
// starts a record of its own.
//
// A run that ends without a reply of its own answers with a fallback reply when it
// failed or was stopped (finishReason Error, a cap, LoopDetected, ToolCallLimit,
// PolicyDenied, Deadline; a budget stall, though the turn stays in progress), or when
// it ends a message's turn that has no reply at all (an empty or blank model answer,
// a pathway that waits for input, a decision that waits for a person); a run the turn
// goes on from (an entry run is due) leaves that to the next run. The fallback is the
// pathway's fallbackReply, else the Journey's, else a default sentence per finish
// reason (FallbackReply for an error; "This conversation is complete." for a journey
// that completed), with nothing from the conversation in it. It is the run's
// assistantText, joins lastTurn.replies (marked fallback) and the transcript. A budget
// stall that spec.limits lifts takes its fallback back: the turn answers when it ends.
//
// TurnFailed follows the last turn once it is over: True when it recorded failures or
// ended on a failure finishReason (reason: that finishReason for a cap or policy,
// else the last failure's source and kind, such as SystemValidation or LLMTimeout;
// message: that failure in one line), False (TurnAnswered) after a turn without
// failures, absent until a turn fails. status.reason is the REASON column: the Ready
// condition's reason, or TurnFailed while the Session is healthy and not Completed
// and TurnFailed is True. AgentAvailable (set by Journal) is True when the last agent
// or tool call answered, even unusably, and False with RateLimited, AgentTimeout or
// AgentError once a call was given up.
//
// # Routing a message (route.go)
//
// Global transitions apply when their from is the current pathway or "*"; they are
// tried in one order, priority (higher first) then declaration, whatever their trigger:
// an intent whose patterns match (package match: case-insensitive, on word boundaries)
// or a CEL condition that holds (context, message, session, and outputs: the previous
// turn's) fires. The journey's classifier (intentDetection.agent) is asked once per
// message about the llmFallback intents tried before the first transition that fired
// on its own, the only ones that could still win: an openai agent through a
// ClassifyIntent effect (cached for intentDetection.cacheTTL), a builtin one inline
// (builtin.Classify: the words the message shares with each intent's description and
// patterns); below confidenceThreshold, "none", an intent not asked about, or an error
// is no match. The first that fires moves the
// Session, then applies its contextUpdate (Append de-duplicates; Set; Copy). Entering a
// pathway with returnBehavior ReturnToPrevious from another pathway pushes the current
// one; past maxPathwayDepth the move is refused with a Policy failure: FailFast fails
// the Session (reason StackOverflow), Graceful stays and runs the current pathway. A
// self-transition (booking -> booking) does not push and does not reset pathwayTurns.
//
// # Running a pathway (pathway.go, context.go)
//
// The (new) current pathway runs with the message. External pathways do not run on
// messages (the message only routes); they take the next spec.outcomes entry for
// (current pathway, iteration); outcomes for another pathway or iteration are skipped.
// A pathway whose agents are all builtin or undeclared runs builtin inline; one with
// an openai agent is a RunPathway effect with all its agents in pipeline order. Inputs
// come from the context, else the input's default, else the message for inputs named
// message, question or *_message. The result's accumulate fields merge into the
// context (scalars replace, lists append without duplicates, lists of objects compared
// as JSON, objects deep-merge); a context over maxContextBytes is a failure that
// leaves the context unchanged (FailFast: the Session fails, reason ContextTooLarge),
// never a truncation. Each change increments contextVersion and records a delta in
// contextHistory: the values it replaced and, for a list it appended to, only the items
// it added (at most MaxContextVersions versions, at most flowv1.ContextHistoryBytes of them),
// from which a detour's changes are undone and ContextAt rebuilds an earlier context. A failed run (an agent error, a builtin expression error) is recoverable:
// Graceful records it in lastTurn (finishReason Error, and the fallback reply) and
// stays, FailFast fails the Session. session.turns in
// CEL counts turns including the current one; session.pathwayTurns counts earlier
// runs of the current pathway since it was entered.
//
// # Deciding where to go (decide.go)
//
// Only a complete turn moves on. Its result type (missing: success) picks
// transitions.on<Result>; a partial success without onPartialSuccess takes onSuccess.
// Without a transition: success goes to next, else back from a detour (pop; with
// preserveContext false the detour's context versions are undone), else the journey
// completes; a failure without onFailure is a recoverable error (Graceful stays,
// FailFast fails); an unclear result without onUnclear stays and waits for input.
// The string form moves to `to` with its action (default Advance, Retry when `to` is
// the current pathway). The decision form evaluates rules (CEL over outputs, context,
// session; first match; confidence default 1), else asks the decision agent (builtin:
// the first allowed destination with the agent's builtin.confidence; openai: a Decide
// effect). A destination outside allowedDestinations, or none, is an unclear decision
// (confidence 0): never a jump. By confidence: >= autoAdvance (default 0.8) applies it;
// >= retryWithFeedback (when set) runs the deciding pathway once more at once, a Retry
// with the decision's reasoning as the request's feedback (lastDecision state
// RetriedWithFeedback; a second decision in that band waits for approval instead);
// >= requireApproval (default 0.6) waits in AwaitingApproval with lastDecision
// {id d-<step>, state Pending}; lower, or unclear, moves to the journey's
// escalationPathway, else the phase becomes Escalated. messaging copies the pathway's
// outputs into context.messages.<pathway> when the decision is applied. Close completes
// the journey; after a failure result it fails it (so an External "error" can end a
// workflow as Failed).
//
// # Approvals (approval.go)
//
// In AwaitingApproval or Escalated, spec.approvals are read in order. One naming
// lastDecision.id approves (to its destination, or to the approval's destination when
// that is one of the allowed destinations; an escalated unclear decision needs one) or
// rejects: the Session goes to the decision's onRejected, else back to the pathway it
// came from into the deciding one (a rejected review goes back to the draft), else the
// deciding pathway; that pathway runs at once with the rejection as its feedback, so
// the same question is never asked unchanged. Approvals naming anything else, overriding with a destination that is not
// allowed, or from someone not in decision.approvers.users (when only users are
// listed) are counted as processed and recorded as a PolicyDenied turn.
//
// A decision's approval.timeout and a tool's approvalTimeout count from
// lastDecision.waitingSince (approvaltimeout.go). Past it, with no approval left to
// process, onTimeout applies: Reject rejects as the system (source Timeout; a
// decision goes to onRejected, a tool call is Rejected and never made), Escalate makes
// the Session Escalated. NextDeadline includes the deadline.
//
// # Actions, caps and loops (move.go)
//
// Advance moves; JumpBack moves and starts a new cycle (iteration + 1, retries
// reset); Retry runs the pathway again, counted in status.retries against retry.limit
// or retryLimitPerPathway (default 2). Leaving a pathway, Retry and JumpBack reset
// pathwayTurns, so an Entry pathway runs again. Caps block the Session instead of
// acting: maxTurns (before a turn starts), maxIterations (before a JumpBack),
// maxTransitions, the retry limit, sessionTimeout, idleTimeout (while waiting for
// input, counted from status.lastActivityTime) and the budget (tokens or cost:
// before a turn starts, what was spent; before any remote call, what was spent plus
// the call's worst case, budget.go; the turn then waits in progress). Loop prevention blocks a move that
// would complete more than maxCycleRepeats traversals of one cycle of pathways within
// the last window Advance moves of the current iteration (retries and self-transitions
// are not cycles; a JumpBack starts a new cycle on purpose and maxIterations caps
// those). A block keeps the phase, sets Stalled=True and Ready=False with the cap's
// reason, ends the turn with the matching finishReason and a Policy failure, and
// records a Block entry in history. It lasts until an intervention lifts it or the
// Session is cancelled; spec.limits (a per-Session override) also lifts BudgetExceeded
// and TurnLimit when it raises the cap: the stalled turn goes on. Stalled conditions set by the controller
// with other reasons (AgentTerminalError, ...) do not block the engine and are
// cleared by the next step that runs.
//
// # Shared Budgets (sharedbudget.go)
//
// Input.Budgets are the Budget objects that select the Session, each with the room
// the manager's ledger says it has left. Before any remote call (each model round of
// a ReAct loop, each tool call) the call's worst case (WorstCase: a pipeline's agents
// summed, one model call per remote agent, one tool call per tool call) must fit in
// every one of them; otherwise the call is not made, the turn stays in progress and
// the Session waits: WaitingForBudget=True and Ready=False with reason
// BudgetExhausted, the message naming the Budget, what the call could cost and what
// is left, Reconciling=True, no history entry and no failure. It is not a block: the
// next step tries again, and goes on by itself once the Budget has room (a new
// window, a raised limit, calls of other Sessions settled). The step package
// journals each answer with Charge: status.budgets holds what the Session spent in
// each Budget's current window, written with the answer that spent it, so the
// ledger can be rebuilt from the Sessions and no call is counted twice.
//
// # Interventions (intervene.go)
//
// spec.interventions are a person's acts, applied in order, one a step, each exactly
// once: status.processedInterventions counts them, applied or refused, so a repeated
// step never applies one twice. An applied one is a history entry with source Human,
// its action, by and reason (Event Intervened); a refused one changes nothing but the
// count (Warning Event InterventionRefused saying why). It is not a turn: lastTurn and
// TurnFailed stay as the last turn left them. Either way status.interventions records
// it whole, with its step, Applied or Refused and why (the newest within 4 KiB), so a
// replay of the Session (package rebuild) gives it again at that step after it left
// spec.interventions. Completed and Cancelled Sessions refuse every intervention.
//
//   - Resume lifts what stops the Session: a cap, loop prevention, the retry limit, a
//     timeout or a failure, first raising the caps by its limits (kept in
//     status.interventionLimits; with spec.limits, the higher cap applies). The loop
//     window restarts at the entry (loop never looks past a person's entry); the retry
//     limit resets the pathway's retry count; a session timeout counts from now
//     (status.sessionTimeoutFrom), an idle timeout from the step; a Failed Session
//     settles as Running or WaitingForInput. A turn a cap held goes on; a runOn Entry
//     pathway whose move was refused runs again and decides again. Refused when nothing
//     stops the Session, or when a count or budget cap is still reached.
//   - Retry runs the current pathway again at once with its feedback for the agents,
//     as the retry-with-feedback band does (lastDecision source Human, state
//     RetriedWithFeedback; not counted against the retry limit). Refused before any
//     turn and for External pathways.
//   - Goto moves to any pathway of the revision, as a transition would, without caps
//     or loop prevention: a detour pushes the pathway left, a pathway on the stack pops
//     back to it; the pathway then runs at once when it runs on entry, else with the
//     next message. lastDecision records it with source Human.
//   - Rewind restores the pathway, stack and iteration of the last move at or before
//     step N (history entries keep the stack), or the start when history holds every
//     move, and the context of that step (ContextAt, from the versions' steps), as a
//     new context version. Transcript exchanges and journal entries of later steps stay,
//     marked rewound; agents no longer see rewound exchanges. The Session waits for the
//     next message there. Refused when step N or its context is no longer kept.
//   - Upgrade (upgrade.go) moves the Session to another revision of its journey
//     (status.journeyRevision), at once, a turn in progress included: the step is given
//     the verdict of a replay of the Session's journal on that revision (Input.Upgrade,
//     from package rebuild: no call is made). When every step reproduced, or with
//     force, it moves (UpgradeBlocked False, reason Upgraded; Event Upgraded; the
//     history entry says whether it was forced and where the replay diverged); the
//     turn goes on on the new revision. Otherwise it is refused and UpgradeBlocked
//     (True, ReplayDiverged) names the revision, the first step that diverges and the
//     field, and the command that forces it. Refused without a verdict for that
//     revision (it cannot be read, or is not the journey's).
//
// UpgradeByPolicy (upgrade.go) applies the Journey's upgradePolicy ReplayCompatible to
// a Session between turns, outside any step: given the verdict of a replay of its
// journal on the revision that serves, it moves there when every step reproduced
// (UpgradeBlocked False, reason Upgraded; Event Upgraded), and otherwise stays, with
// UpgradeBlocked True naming where the replay diverged, as a refused Upgrade does. A
// move takes no step number and leaves no history entry: it changes nothing the
// Session did, so later replays number its steps as before.
//
// Fork (upgrade.go) makes a fork's first status (spec.forkOf) from its source's
// status rebuilt up to the fork step: on the fork's revision, counting none of the
// source's approvals and interventions processed (the fork's spec does not carry
// them), with ForkDiverged saying whether the source's steps replay the same there.
//
// Retry, Goto and Rewind on a stopped Session first lift what stops it, as Resume
// does (dropping a held turn), and are refused when Resume would be. Each condition
// that stops a Session ends with the command that gets it going (kubectl journey
// resume, retry, goto, limits, rewind or cancel and the Session's name).
//
// # Tool calls (tools.go, toolapproval.go, toolschema.go)
//
// A pathway lists the journey's tools its agents may call. Every call is a record in
// status.turn.toolCalls, planned by a step and made by a later one: the step that plans
// it checks it in Go (a tool of the pathway, arguments that match the schema pinned in
// the revision, `requires` prerequisites in the context, maxToolCalls per turn, no
// third identical call in a turn) and writes it Pending with an idempotency key from
// the Session UID, the step and the call's index, or Failed with why it was refused,
// or Done from the Session's tool cache (`cache: Session`). The step that plans a call
// pauses, so the record is written before the call is made; the next step asks for it
// as a CallTool effect, whose answer is journaled and applied to the record (Done with
// its result, or Failed). A crash between the two re-sends the call with the same key.
// A call that needs an approval (`approval: Always`, or IfDestructive for a tool the
// server marks destructive, narrowed by `when`) holds the Session in
// AwaitingApproval, shown like a decision; a rejection is the call's result. Builtin
// tools are CEL over the arguments and the context: pure, computed as effects of
// their own so journey tests and replays see every call. The Session's budget of tool
// calls (limits.budget.maxToolCalls) is checked before each call; usage.toolCalls
// counts the calls made.
//
// # The ReAct loop (react.go)
//
// A pathway with tools run by one openai agent (or a Sequential pipeline of them)
// offers the agent its tools: the model answers with its structured answer or with
// tool calls. An answer with calls is journaled like any; the step that applies it
// plans every call (above). Once every call of the answer has a result, the model is
// asked again with the turn's calls, their results and the text it wrote with them,
// until it answers or a limit (maxToolCalls, loop prevention, the budget, the
// pathway's timeout) ends the turn with a typed failure. Each agent of a Sequential
// pipeline runs its own loop in turn, seeing the earlier agents' outputs.
//
// # The transcript (transcript.go)
//
// status.transcript is the conversation pathway agents see: each turn's message, its
// reply and previews of its tool calls, bounded by limits.maxTranscriptBytes as stored
// and by MaxTranscriptExchanges; the oldest exchanges are dropped whole and counted in
// status.transcriptDropped, and the first drop sets TranscriptTrimmed.
//
// # Builtin pipelines (builtinpipeline.go)
//
// A pathway whose agents are all builtin runs inline, as its pipeline says:
// Sequential passes each agent's outputs to the next, Parallel merges, Router lets the
// first agent choose by the others' names and patterns, Ensemble votes. Builtin agents
// are deterministic and combined in declared order, so the turn is too. A builtin
// intent classifier scores a message's words against the intents' descriptions and
// patterns, inline as well.
//
// History keeps the last maxHistory moves (time, step, from, to, action, source,
// transition, confidence, iteration, messageID, reason). lastDecision and
// status.confidence follow decisions (transitions, rules, agents, approvals, outcome
// transitions), not the automatic next and return moves. Events lists what a step did
// for the controller to emit.
package engine
