// Package v1alpha1 contains the API of the flow.journey.dev group: Journeys, Pathways
// and Sessions.
//
// # Checks made by the API server
//
// The CRD schemas and their CEL rules refuse, with a message naming the field:
//
//   - Journey: an entryPathway or escalationPathway that is not one of spec.pathways;
//     duplicate pathway, agent or transition names (list maps); names that are not DNS
//     labels; a pathwayRef that is not an object name; a global transition whose to is
//     "*" or not a listed pathway, or whose from is neither "*" nor a listed pathway; a
//     trigger without exactly one of intent or condition; llmFallback without
//     intentDetection, or intentDetection naming an undeclared agent; openai-only fields
//     (model, baseURL, apiKeySecretRef, temperature, pricing, maxRetries, maxTokens,
//     responseFormat) on a builtin agent, an openai agent without model, a builtin
//     section on an openai agent; a contextUpdate Copy without from or Set with from;
//     limits out of range
//     (maxPathwayDepth 1..10 and the others); durations that do not parse or are not
//     positive.
//   - Pathway: an outcome transition without exactly one of to or decision (action
//     Close alone is the third form), Close with a destination, Block (reserved for the
//     engine), an action beside a decision; onPartialSuccess or onUnclear in the string
//     form; a decision without allowedDestinations, with duplicates, with a rule whose to
//     is not allowed, or with an action other than Advance, JumpBack or Retry;
//     confidence thresholds outside [0,1] or with autoAdvance below requireApproval
//     (defaults 0.8 and 0.6 included); agents or a builtin section on an External
//     pathway; output and input names that are not identifiers, duplicates among them.
//   - Session: a journeyRef that changes; an initialContext that changes, appears or
//     disappears; messages, outcomes and approvals that are not append-only (an entry
//     changed, moved or removed, a new one not at the end, the whole list dropped);
//     duplicate message ids; cancel unset once set.
//   - Everywhere: confidences that are not decimals in [0,1], decimals that are not
//     non-negative, strings and lists without bounds (every user string and list has a
//     maximum, which keeps the CEL rules within the API server's cost budget).
//
// # Checks made by the controllers
//
// What one object cannot tell, or CEL cannot express, the controllers check and report
// as Ready=False with a reason and, for Journeys, one line per problem in status.issues.
// The Journey controller, on the Journey and the Pathways it resolves:
//
//   - every pathwayRef names an existing Pathway in the Journey's namespace
//     (ReasonPathwayNotFound);
//   - the Pathways' local references name pathways of this journey: next, an outcome
//     transition's to, a decision's allowedDestinations (a Pathway does not know the
//     journeys that use it);
//   - every pathway is reachable from entryPathway;
//   - every agent a Pathway names (spec.agents) and every decision agent is declared in
//     the Journey's spec.agents;
//   - CEL compiles: transition conditions, decision rules, builtin outputs, outcome and
//     complete (CEL stored as a string is not compiled by the API server); builtin reply
//     templates parse;
//   - contextUpdate values: op Set needs value, op Append exactly one of from or value,
//     op Copy no value (value is schemaless, so CEL rules cannot see it).
//
// The Pathway controller reports a Pathway's own CEL and templates (Ready=False,
// ReasonInvalid) before any journey uses it.
//
// The Session controller and the engine, at run time:
//
//   - the Journey exists and is Ready (ReasonJourneyNotFound, ReasonJourneyNotReady),
//     and the ControllerRevision the Session is pinned to still exists
//     (ReasonRevisionNotFound);
//   - initialContext is a JSON object within limits.maxContextBytes, and so is the
//     context after every turn (ReasonContextTooLarge);
//   - an External outcome applies only to the current pathway and iteration; others are
//     ignored;
//   - an approval applies only to the decision that waits (status.lastDecision.id), and
//     its destination must be one of that decision's allowedDestinations;
//   - caps and loop prevention (maxTurns, maxIterations, maxTransitions,
//     retryLimitPerPathway, sessionTimeout, idleTimeout, budget, maxPathwayDepth) block the Session
//     with the matching Stalled reason.
//
// The admission webhook, when installed, stamps an approval's by and refuses approvals
// from users a decision's approvers do not list.
package v1alpha1
