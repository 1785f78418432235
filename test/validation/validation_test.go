package validation

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Manifest builders: the spec fragments below are written without indentation.

func manifest(kind, spec string) string {
	var b strings.Builder
	b.WriteString("apiVersion: flow.journey.dev/v1alpha1\nkind: " + kind + "\nmetadata: {name: x}\nspec:\n")
	for _, line := range strings.Split(strings.TrimRight(spec, "\n"), "\n") {
		b.WriteString("  " + line + "\n")
	}
	return b.String()
}

func journey(spec string) string { return manifest("Journey", spec) }
func pathway(spec string) string { return manifest("Pathway", spec) }
func session(spec string) string { return manifest("Session", spec) }
func budget(spec string) string  { return manifest("Budget", spec) }

// journeyBase is a valid Journey spec with pathways a and b.
const journeyBase = `entryPathway: a
pathways:
- {name: a, pathwayRef: pw-a}
- {name: b, pathwayRef: pw-b}
`

// sessionBase is a valid Session spec with messages, an outcome, an approval and an
// intervention.
const sessionBase = `journeyRef: {name: j}
initialContext: {tier: gold}
messages:
- {id: m1, text: hello}
- {id: m2, text: I need a cardiologist}
outcomes:
- {pathway: review, iteration: 1, resultType: failure, data: {findings: [no tenant filter]}}
approvals:
- {decisionID: d-7, approve: true, by: alice}
interventions:
- {id: i-1, action: Resume, reason: loop was a false alarm, limits: {maxTurns: 200}}
`

// processedAll is a status merge patch that marks everything in sessionBase processed.
const processedAll = `{"status":{"processedMessages":2,"processedOutcomes":1,"processedApprovals":1,"processedInterventions":1}}`

// decision is an onSuccess decision transition with the given extra decision fields.
func decision(extra string) string {
	return "transitions:\n  onSuccess:\n    decision:\n      allowedDestinations: [a, b]\n" + indent(extra, "      ")
}

func indent(s, prefix string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}

// rejectCase is a manifest the API server must refuse. With patch set, the manifest is
// valid and created first; the JSON patch (RFC 6902) applied to it must be refused.
type rejectCase struct {
	name  string
	obj   string
	patch string
	// status, when set, is a merge patch of the status written after the create, and
	// before, a JSON patch the API server must accept; both come before patch.
	status, before string
	// field is the path the error names, msg the message; both must appear in it.
	field, msg string
}

var rejectCases = []rejectCase{
	// Journey: the pathway graph.
	{name: "entryPathway not listed",
		obj:   journey("entryPathway: c\npathways:\n- {name: a, pathwayRef: pw-a}"),
		field: "spec.entryPathway", msg: `entryPathway "c" is not one of spec.pathways`},
	{name: "no pathways",
		obj:   journey("entryPathway: a\npathways: []"),
		field: "spec.pathways", msg: "should have at least 1 items"},
	{name: "duplicate pathway names",
		obj:   journey("entryPathway: a\npathways:\n- {name: a, pathwayRef: pw-a}\n- {name: a, pathwayRef: pw-b}"),
		field: "spec.pathways[1]", msg: "Duplicate value"},
	{name: "pathway name not a DNS label",
		obj:   journey("entryPathway: Intake\npathways:\n- {name: Intake, pathwayRef: pw-a}"),
		field: "spec.pathways[0].name", msg: "must be a DNS label"},
	{name: "pathway name too long",
		obj:   journey("entryPathway: a\npathways:\n- {name: a, pathwayRef: pw-a}\n- {name: " + strings.Repeat("b", 64) + ", pathwayRef: pw-b}"),
		field: "spec.pathways[1].name", msg: "may not be more than 63 bytes"},
	{name: "pathwayRef not an object name",
		obj:   journey("entryPathway: a\npathways:\n- {name: a, pathwayRef: Booking_Path}"),
		field: "spec.pathways[0].pathwayRef", msg: "pathwayRef must be a Pathway object name"},
	{name: "transition to an unknown pathway",
		obj:   journey(journeyBase + "transitions:\n- {name: t, to: nowhere, trigger: {condition: 'true'}}"),
		field: "spec.transitions", msg: "every transition's to must name one of spec.pathways"},
	{name: "transition from an unknown pathway",
		obj:   journey(journeyBase + "transitions:\n- {name: t, from: nowhere, to: b, trigger: {condition: 'true'}}"),
		field: "spec.transitions", msg: `every transition's from must be "*" or name one of spec.pathways`},
	{name: "transition to star",
		obj:   journey(journeyBase + "transitions:\n- {name: t, to: '*', trigger: {condition: 'true'}}"),
		field: "spec.transitions[0].to", msg: `"*" is only allowed in from`},
	{name: "transition from not a name",
		obj:   journey(journeyBase + "transitions:\n- {name: t, from: 'a*', to: b, trigger: {condition: 'true'}}"),
		field: "spec.transitions[0].from", msg: `from must be "*" or a pathway name`},
	{name: "duplicate transition names",
		obj:   journey(journeyBase + "transitions:\n- {name: t, to: b, trigger: {condition: 'true'}}\n- {name: t, to: a, trigger: {condition: 'true'}}"),
		field: "spec.transitions[1]", msg: "Duplicate value"},
	{name: "trigger with intent and condition",
		obj:   journey(journeyBase + "transitions:\n- {name: t, to: b, trigger: {condition: 'true', intent: {patterns: [help]}}}"),
		field: "spec.transitions[0].trigger", msg: "trigger must set exactly one of intent or condition"},
	{name: "trigger with neither intent nor condition",
		obj:   journey(journeyBase + "transitions:\n- {name: t, to: b, trigger: {}}"),
		field: "spec.transitions[0].trigger", msg: "trigger must set exactly one of intent or condition"},
	{name: "intent without patterns",
		obj:   journey(journeyBase + "transitions:\n- {name: t, to: b, trigger: {intent: {patterns: []}}}"),
		field: "spec.transitions[0].trigger.intent.patterns", msg: "should have at least 1 items"},
	{name: "llmFallback without intentDetection",
		obj:   journey(journeyBase + "transitions:\n- {name: t, to: b, trigger: {intent: {patterns: [help], llmFallback: true}}}"),
		field: "spec.intentDetection", msg: "intentDetection is required when a transition's intent trigger sets llmFallback"},
	{name: "context update Copy without from",
		obj:   journey(journeyBase + "transitions:\n- {name: t, to: b, trigger: {condition: 'true'}, contextUpdate: [{field: x, op: Copy}]}"),
		field: "spec.transitions[0].contextUpdate[0]", msg: "op Copy needs from"},
	{name: "context update Set with from",
		obj:   journey(journeyBase + "transitions:\n- {name: t, to: b, trigger: {condition: 'true'}, contextUpdate: [{field: x, op: Set, from: src, value: 1}]}"),
		field: "spec.transitions[0].contextUpdate[0]", msg: "op Set takes value, not from"},
	{name: "escalationPathway not listed",
		obj:   journey(journeyBase + "escalationPathway: human"),
		field: "spec.escalationPathway", msg: "escalationPathway must name one of spec.pathways"},
	{name: "intentDetection agent not declared",
		obj:   journey(journeyBase + "intentDetection: {agent: triage}"),
		field: "spec.intentDetection.agent", msg: "intentDetection.agent must name one of spec.agents"},
	{name: "intentDetection threshold above 1",
		obj:   journey(journeyBase + "agents: [{name: triage}]\nintentDetection: {agent: triage, confidenceThreshold: '1.5'}"),
		field: "spec.intentDetection.confidenceThreshold", msg: "must be a decimal between 0 and 1"},
	{name: "cacheTTL not a duration",
		obj:   journey(journeyBase + "agents: [{name: triage}]\nintentDetection: {agent: triage, cacheTTL: five minutes}"),
		field: "spec.intentDetection.cacheTTL", msg: "cacheTTL must be a positive duration"},

	// Journey: agents.
	{name: "openai fields on a builtin agent",
		obj:   journey(journeyBase + "agents: [{name: triage, provider: builtin, model: gpt-4o-mini}]"),
		field: "spec.agents[0]", msg: "only valid with provider openai"},
	{name: "openai agent without model",
		obj:   journey(journeyBase + "agents: [{name: triage, provider: openai}]"),
		field: "spec.agents[0].model", msg: "model is required with provider openai"},
	{name: "builtin section on an openai agent",
		obj:   journey(journeyBase + "agents: [{name: triage, provider: openai, model: m, builtin: {confidence: '0.5'}}]"),
		field: "spec.agents[0].builtin", msg: "builtin is only valid with provider builtin"},
	{name: "baseURL not http",
		obj:   journey(journeyBase + "agents: [{name: triage, provider: openai, model: m, baseURL: 'ftp://llm.example'}]"),
		field: "spec.agents[0].baseURL", msg: "baseURL must be an http or https URL"},
	{name: "temperature not a decimal",
		obj:   journey(journeyBase + "agents: [{name: triage, provider: openai, model: m, temperature: hot}]"),
		field: "spec.agents[0].temperature", msg: "must be a non-negative decimal"},
	{name: "negative agent timeout",
		obj:   journey(journeyBase + "agents: [{name: triage, timeout: -5s}]"),
		field: "spec.agents[0].timeout", msg: "timeout must be a positive duration"},
	{name: "unknown provider",
		obj:   journey(journeyBase + "agents: [{name: triage, provider: anthropic}]"),
		field: "spec.agents[0].provider", msg: "Unsupported value"},

	// Journey: limits.
	{name: "maxPathwayDepth above 10",
		obj:   journey(journeyBase + "limits: {maxPathwayDepth: 11}"),
		field: "spec.limits.maxPathwayDepth", msg: "should be less than or equal to 10"},
	{name: "maxPathwayDepth below 1",
		obj:   journey(journeyBase + "limits: {maxPathwayDepth: 0}"),
		field: "spec.limits.maxPathwayDepth", msg: "should be greater than or equal to 1"},
	{name: "sessionTimeout zero",
		obj:   journey(journeyBase + "limits: {sessionTimeout: 0s}"),
		field: "spec.limits.sessionTimeout", msg: "sessionTimeout must be a positive duration"},
	{name: "budget cost not a decimal",
		obj:   journey(journeyBase + "limits: {budget: {maxCostUSD: '$2'}}"),
		field: "spec.limits.budget.maxCostUSD", msg: "must be a non-negative decimal"},
	{name: "unknown errorRecovery",
		obj:   journey(journeyBase + "errorRecovery: Ignore"),
		field: "spec.errorRecovery", msg: "Unsupported value"},

	// Pathway: outcome transitions.
	{name: "outcome transition with to and decision",
		obj:   pathway("transitions:\n  onSuccess: {to: a, decision: {allowedDestinations: [a]}}"),
		field: "spec.transitions.onSuccess", msg: "set exactly one of to or decision"},
	{name: "outcome transition with neither to nor decision",
		obj:   pathway("transitions:\n  onFailure: {action: JumpBack}"),
		field: "spec.transitions.onFailure", msg: "set exactly one of to or decision"},
	{name: "onPartialSuccess in string form",
		obj:   pathway("transitions:\n  onPartialSuccess: {to: a}"),
		field: "spec.transitions.onPartialSuccess", msg: "onPartialSuccess must use the decision form"},
	{name: "onUnclear in string form",
		obj:   pathway("transitions:\n  onUnclear: {to: a}"),
		field: "spec.transitions.onUnclear", msg: "onUnclear must use the decision form"},
	{name: "Close with a destination",
		obj:   pathway("transitions:\n  onSuccess: {to: a, action: Close}"),
		field: "spec.transitions.onSuccess", msg: "action Close ends the journey and takes neither to nor decision"},
	{name: "Block in a transition",
		obj:   pathway("transitions:\n  onFailure: {to: a, action: Block}"),
		field: "spec.transitions.onFailure.action", msg: "action Block is reserved for the engine"},
	{name: "action beside a decision",
		obj:   pathway("transitions:\n  onSuccess: {action: JumpBack, decision: {allowedDestinations: [a]}}"),
		field: "spec.transitions.onSuccess.action", msg: "with a decision, set the action in decision.action"},
	{name: "destination not a DNS label",
		obj:   pathway("transitions:\n  onSuccess: {to: Deploy}"),
		field: "spec.transitions.onSuccess.to", msg: "must be a DNS label"},

	// Pathway: decisions.
	{name: "no allowed destinations",
		obj:   pathway("transitions:\n  onSuccess:\n    decision: {allowedDestinations: []}"),
		field: "spec.transitions.onSuccess.decision.allowedDestinations", msg: "should have at least 1 items"},
	{name: "duplicate allowed destinations",
		obj:   pathway("transitions:\n  onSuccess:\n    decision: {allowedDestinations: [a, b, a]}"),
		field: "spec.transitions.onSuccess.decision.allowedDestinations[2]", msg: "Duplicate value"},
	{name: "rule destination not allowed",
		obj:   pathway(decision("rules: [{when: 'true', to: c}]")),
		field: "spec.transitions.onSuccess.decision.rules", msg: "every rule's to must be one of allowedDestinations"},
	{name: "autoAdvance below requireApproval",
		obj:   pathway(decision("confidenceThresholds: {autoAdvance: '0.5', requireApproval: '0.6'}")),
		field: "spec.transitions.onSuccess.decision.confidenceThresholds", msg: "autoAdvance must be greater than or equal to requireApproval"},
	{name: "requireApproval above the default autoAdvance",
		obj:   pathway(decision("confidenceThresholds: {requireApproval: '0.9'}")),
		field: "spec.transitions.onSuccess.decision.confidenceThresholds", msg: "autoAdvance must be greater than or equal to requireApproval"},
	{name: "autoAdvance above 1",
		obj:   pathway(decision("confidenceThresholds: {autoAdvance: '1.2'}")),
		field: "spec.transitions.onSuccess.decision.confidenceThresholds.autoAdvance", msg: "must be a decimal between 0 and 1"},
	{name: "rule confidence not a decimal",
		obj:   pathway(decision("rules: [{when: 'true', to: a, confidence: high}]")),
		field: "spec.transitions.onSuccess.decision.rules[0].confidence", msg: "must be a decimal between 0 and 1"},
	{name: "decision action Close",
		obj:   pathway(decision("action: Close")),
		field: "spec.transitions.onSuccess.decision.action", msg: "a decision's action must be Advance, JumpBack or Retry"},

	// Pathway: executor, builtin section and the rest.
	{name: "External pathway with agents",
		obj:   pathway("executor: External\nagents: [reviewer]"),
		field: "spec.agents", msg: "an External pathway has no agents"},
	{name: "External pathway with a builtin section",
		obj:   pathway("executor: External\nbuiltin: {reply: hi}"),
		field: "spec.builtin", msg: "an External pathway has no builtin section"},
	{name: "next not a DNS label",
		obj:   pathway("next: Confirmation"),
		field: "spec.next", msg: "must be a DNS label"},
	{name: "turn timeout zero",
		obj:   pathway("timeout: 0s"),
		field: "spec.timeout", msg: "timeout must be a positive duration"},
	{name: "builtin output name not an identifier",
		obj:   pathway("builtin:\n  outputs: [{name: 1st, expression: '1'}]"),
		field: "spec.builtin.outputs[0].name", msg: "name must be an identifier"},
	{name: "duplicate builtin outputs",
		obj:   pathway("builtin:\n  outputs: [{name: a, expression: '1'}, {name: a, expression: '2'}]"),
		field: "spec.builtin.outputs[1]", msg: "Duplicate value"},
	{name: "unknown runOn",
		obj:   pathway("runOn: Timer"),
		field: "spec.runOn", msg: "Unsupported value"},
	{name: "retry limit negative",
		obj:   pathway("retry: {limit: -1}"),
		field: "spec.retry.limit", msg: "should be greater than or equal to 0"},

	// Session: creation.
	{name: "duplicate message ids",
		obj:   session("journeyRef: {name: j}\nmessages:\n- {id: m1, text: a}\n- {id: m1, text: b}"),
		field: "spec.messages[1]", msg: "Duplicate value"},
	{name: "message id with a space",
		obj:   session("journeyRef: {name: j}\nmessages:\n- {id: 'm 1', text: a}"),
		field: "spec.messages[0].id", msg: "id must start with a letter or digit"},
	{name: "empty message",
		obj:   session("journeyRef: {name: j}\nmessages:\n- {id: m1, text: ''}"),
		field: "spec.messages[0].text", msg: "should be at least 1 chars long"},
	{name: "journeyRef not an object name",
		obj:   session("journeyRef: {name: Healthcare_Referral}"),
		field: "spec.journeyRef.name", msg: "name must be a Journey object name"},
	{name: "outcome with an unknown result type",
		obj:   session("journeyRef: {name: j}\noutcomes: [{pathway: review, iteration: 1, resultType: passed}]"),
		field: "spec.outcomes[0].resultType", msg: "Unsupported value"},
	{name: "outcome for iteration 0",
		obj:   session("journeyRef: {name: j}\noutcomes: [{pathway: review, iteration: 0, resultType: success}]"),
		field: "spec.outcomes[0].iteration", msg: "should be greater than or equal to 1"},

	// Session: updates that break immutability or append-only lists.
	{name: "journeyRef changed", obj: session(sessionBase),
		patch: `[{"op":"replace","path":"/spec/journeyRef/name","value":"other"}]`,
		field: "spec.journeyRef", msg: "journeyRef is immutable"},
	{name: "initialContext changed", obj: session(sessionBase),
		patch: `[{"op":"replace","path":"/spec/initialContext/tier","value":"platinum"}]`,
		field: "spec.initialContext", msg: "initialContext is immutable"},
	{name: "initialContext removed", obj: session(sessionBase),
		patch: `[{"op":"remove","path":"/spec/initialContext"}]`,
		field: "spec.initialContext", msg: "initialContext is immutable"},
	{name: "message text edited", obj: session(sessionBase),
		patch: `[{"op":"replace","path":"/spec/messages/0/text","value":"goodbye"}]`,
		field: "spec.messages", msg: "existing messages cannot change or move"},
	{name: "message removed", obj: session(sessionBase),
		patch: `[{"op":"remove","path":"/spec/messages/1"}]`,
		field: "spec.messages", msg: "a message leaves spec.messages only once processed"},
	{name: "message inserted before the others", obj: session(sessionBase),
		patch: `[{"op":"add","path":"/spec/messages/0","value":{"id":"m0","text":"first"}}]`,
		field: "spec.messages", msg: "existing messages cannot change or move, new ones go at the end"},
	{name: "messages reordered", obj: session(sessionBase),
		patch: `[{"op":"move","from":"/spec/messages/1","path":"/spec/messages/0"}]`,
		field: "spec.messages", msg: "existing messages cannot change or move"},
	{name: "all messages dropped", obj: session(sessionBase),
		patch: `[{"op":"remove","path":"/spec/messages"}]`,
		field: "spec.messages", msg: "a message leaves spec.messages only once processed"},
	{name: "message replaced under a new id", obj: session(sessionBase),
		patch: `[{"op":"replace","path":"/spec/messages/1/id","value":"m9"}]`,
		field: "spec.messages", msg: "existing messages cannot change or move"},
	{name: "approval flipped", obj: session(sessionBase),
		patch: `[{"op":"replace","path":"/spec/approvals/0/approve","value":false}]`,
		field: "spec.approvals", msg: "existing approvals cannot change or move"},
	{name: "approval removed", obj: session(sessionBase),
		patch: `[{"op":"replace","path":"/spec/approvals","value":[]}]`,
		field: "spec.approvals", msg: "approvals are append-only"},
	{name: "approval inserted before the others", obj: session(sessionBase),
		patch: `[{"op":"add","path":"/spec/approvals/0","value":{"decisionID":"d-1","approve":false}}]`,
		field: "spec.approvals", msg: "existing approvals cannot change or move"},
	{name: "intervention edited", obj: session(sessionBase),
		patch: `[{"op":"replace","path":"/spec/interventions/0/reason","value":"no reason"}]`,
		field: "spec.interventions", msg: "existing interventions cannot change or move"},
	{name: "intervention removed", obj: session(sessionBase),
		patch: `[{"op":"remove","path":"/spec/interventions/0"}]`,
		field: "spec.interventions", msg: "interventions are append-only"},
	{name: "unprocessed intervention dropped", obj: session(sessionBase),
		patch: `[{"op":"remove","path":"/spec/interventions/0"},{"op":"add","path":"/spec/interventionsDropped","value":1}]`,
		field: "spec.interventionsDropped", msg: "spec.interventionsDropped is past the processed interventions"},
	{name: "messagesDropped lowered", obj: session(sessionBase), status: processedAll,
		before: `[{"op":"remove","path":"/spec/messages/0"},{"op":"add","path":"/spec/messagesDropped","value":1}]`,
		patch:  `[{"op":"replace","path":"/spec/messagesDropped","value":0}]`,
		field:  "spec.messagesDropped", msg: "messagesDropped cannot decrease"},
	{name: "messagesDropped raised past the messages removed", obj: session(sessionBase), status: `{"status":{"processedMessages":3}}`,
		patch: `[{"op":"remove","path":"/spec/messages"},{"op":"add","path":"/spec/messagesDropped","value":3}]`,
		field: "spec.messagesDropped", msg: "messagesDropped may only grow by the number of messages removed from the front"},
	{name: "outcomesDropped lowered", obj: session(sessionBase), status: processedAll,
		before: `[{"op":"remove","path":"/spec/outcomes/0"},{"op":"add","path":"/spec/outcomesDropped","value":1}]`,
		patch:  `[{"op":"replace","path":"/spec/outcomesDropped","value":0}]`,
		field:  "spec.outcomesDropped", msg: "outcomesDropped cannot decrease"},
	{name: "approvalsDropped raised past the approvals removed", obj: session(sessionBase), status: `{"status":{"processedApprovals":2}}`,
		patch: `[{"op":"remove","path":"/spec/approvals"},{"op":"add","path":"/spec/approvalsDropped","value":2}]`,
		field: "spec.approvalsDropped", msg: "approvalsDropped may only grow by the number of approvals removed from the front"},
	{name: "interventionsDropped lowered", obj: session(sessionBase), status: processedAll,
		before: `[{"op":"remove","path":"/spec/interventions/0"},{"op":"add","path":"/spec/interventionsDropped","value":1}]`,
		patch:  `[{"op":"replace","path":"/spec/interventionsDropped","value":0}]`,
		field:  "spec.interventionsDropped", msg: "interventionsDropped cannot decrease"},
	{name: "processed intervention dropped and the next one edited", obj: session(sessionBase + "- {id: i-2, action: Retry}\n"), status: processedAll,
		patch: `[{"op":"remove","path":"/spec/interventions/0"},{"op":"add","path":"/spec/interventionsDropped","value":1},{"op":"add","path":"/spec/interventions/0/feedback","value":"again"}]`,
		field: "spec.interventions", msg: "existing interventions cannot change or move"},
	{name: "Goto without a pathway", obj: session(sessionBase + "- {id: i-2, action: Goto}\n"),
		field: "spec.interventions[1]", msg: "pathway is required for action Goto"},
	{name: "Rewind with a pathway", obj: session(sessionBase + "- {id: i-2, action: Rewind, step: 3, pathway: a}\n"),
		field: "spec.interventions[1]", msg: "pathway is required for action Goto and belongs to no other action"},
	{name: "Rewind without a step", obj: session(sessionBase + "- {id: i-2, action: Rewind}\n"),
		field: "spec.interventions[1]", msg: "step is required for action Rewind"},
	{name: "Retry with limits", obj: session(sessionBase + "- {id: i-2, action: Retry, limits: {maxTurns: 9}}\n"),
		field: "spec.interventions[1]", msg: "limits belongs to action Resume"},
	{name: "Resume with feedback", obj: session(sessionBase + "- {id: i-2, action: Resume, feedback: try harder}\n"),
		field: "spec.interventions[1]", msg: "feedback belongs to action Retry"},
	{name: "unknown intervention action", obj: session(sessionBase + "- {id: i-2, action: Restart}\n"),
		field: "spec.interventions[1].action", msg: "Unsupported value"},
	{name: "interventions past 2,000 bytes", obj: session(sessionBase + "- {id: i-2, action: Retry, feedback: '" + strings.Repeat("x", 1000) + "'}\n- {id: i-3, action: Retry, feedback: '" + strings.Repeat("y", 1000) + "'}\n"),
		field: "spec.interventions", msg: "spec.interventions would hold more than 2,000 bytes"},
	{name: "outcome data edited", obj: session(sessionBase),
		patch: `[{"op":"replace","path":"/spec/outcomes/0/data/findings","value":[]}]`,
		field: "spec.outcomes", msg: "existing outcomes cannot change or move"},
	{name: "cancel unset", obj: session(sessionBase + "cancel: true"),
		patch: `[{"op":"replace","path":"/spec/cancel","value":false}]`,
		field: "spec.cancel", msg: "cancel cannot be unset"},
	{name: "cancel removed", obj: session(sessionBase + "cancel: true"),
		patch: `[{"op":"remove","path":"/spec/cancel"}]`,
		field: "spec.cancel", msg: "cancel cannot be unset"},
	// Budget.
	{name: "budget without limits", obj: budget("limits: {}"),
		field: "spec.limits", msg: "set at least one of limits.costUSD, limits.tokens, limits.toolCalls and limits.modelCalls"},
	{name: "budget of no dollars", obj: budget("limits: {costUSD: '0.00'}"),
		field: "spec.limits.costUSD", msg: "costUSD must be more than 0"},
	{name: "budget window unknown", obj: budget("window: Week\nlimits: {tokens: 10}"),
		field: "spec.window", msg: "window must be Day, Month or a duration of at least 1m"},
	{name: "budget window too short", obj: budget("window: 30s\nlimits: {tokens: 10}"),
		field: "spec.window", msg: "window must be Day, Month or a duration of at least 1m"},
	{name: "budget Degrade without an agent", obj: budget("onExhausted: Degrade\nlimits: {tokens: 10}"),
		field: "spec", msg: "onExhausted Degrade needs degradeTo.agent"},
	{name: "budget degradeTo without Degrade", obj: budget("degradeTo: {agent: small}\nlimits: {tokens: 10}"),
		field: "spec", msg: "degradeTo is only used with onExhausted: Degrade"},
	{name: "budget time zone on a duration window", obj: budget("window: 1h\ntimeZone: Europe/Berlin\nlimits: {tokens: 10}"),
		field: "spec", msg: "timeZone applies to the Day and Month windows only"},
	{name: "budget soft limit over 100", obj: budget("softLimitPercent: 120\nlimits: {tokens: 10}"),
		field: "spec.softLimitPercent", msg: "should be less than or equal to 100"},
}

func TestRejected(t *testing.T) {
	ctx := context.Background()
	for i, tc := range rejectCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			obj := decodeOne(t, tc.obj)
			obj.SetNamespace(ns)
			obj.SetName(fmt.Sprintf("reject-%03d", i))
			err := k.Create(ctx, obj)
			if tc.patch != "" {
				if err != nil {
					t.Fatalf("creating the object to update: %v", err)
				}
				prepare(ctx, t, obj, tc.status, tc.before)
				err = k.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, []byte(tc.patch)))
			}
			assertInvalid(t, err, tc.field, tc.msg)
		})
	}
}

// prepare writes status (a merge patch of the status subresource) and then applies
// before (a JSON patch) to obj, each when set; both must be accepted.
func prepare(ctx context.Context, t *testing.T, obj client.Object, status, before string) {
	t.Helper()
	if status != "" {
		if err := k.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(status))); err != nil {
			t.Fatalf("writing the status %s: %v", status, err)
		}
	}
	if before != "" {
		if err := k.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, []byte(before))); err != nil {
			t.Fatalf("the update before refused: %v", err)
		}
	}
}

func assertInvalid(t *testing.T, err error, field, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want %s rejected with %q", field, msg)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error, got %v", err)
	}
	text := err.Error()
	if !strings.Contains(text, field+":") || !strings.Contains(text, msg) {
		t.Fatalf("want the error to name %s with %q, got:\n%s", field, msg, text)
	}
	if !causeFor(err, field, msg) {
		t.Fatalf("no single cause names %s with %q:\n%s", field, msg, text)
	}
}

// causeFor reports whether one cause of the Invalid error is about field with msg.
func causeFor(err error, field, msg string) bool {
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message, msg) {
			return true
		}
	}
	return false
}

// acceptCase is a manifest the API server must accept, often at the edge of a rule
// that rejectCases tests from the other side. With patch set, the patch applied to the
// created object must be accepted too.
type acceptCase struct {
	name  string
	obj   string
	patch string
	// status is a merge patch of the status written before patch.
	status string
}

var acceptCases = []acceptCase{
	{name: "minimal journey", obj: journey(journeyBase)},
	{name: "transitions from star, self and a listed pathway", obj: journey(journeyBase + `transitions:
- {name: any, from: '*', to: b, priority: 10, trigger: {intent: {patterns: [what is]}}}
- {name: self, from: b, to: b, trigger: {intent: {patterns: [another]}}, contextUpdate: [{field: rejected, op: Append, from: selected}]}
- {name: cond, from: a, to: b, trigger: {condition: context.n >= 3}, contextUpdate: [{field: x, op: Set, value: {deep: [1]}}, {field: dst, op: Copy, from: x}]}
`)},
	{name: "llmFallback with intentDetection", obj: journey(journeyBase + `agents: [{name: triage}]
intentDetection: {agent: triage, confidenceThreshold: '0.7', cacheTTL: 1m30s}
transitions:
- {name: t, to: b, trigger: {intent: {patterns: [help], llmFallback: true}}}
`)},
	{name: "openai agent with every field", obj: journey(journeyBase + `agents:
- name: llm
  provider: openai
  model: gpt-4o-mini
  baseURL: http://ollama.default:11434/v1
  apiKeySecretRef: {name: llm, key: api-key}
  temperature: '0.2'
  timeout: 20s
  maxRetries: 3
  pricing: {promptPerMTok: '0.15', completionPerMTok: '0.60'}
- {name: offline, builtin: {confidence: '1.0'}}
`)},
	{name: "limits at their bounds", obj: journey(journeyBase + `limits: {maxPathwayDepth: 10, maxTurns: 1, retryLimitPerPathway: 0, sessionTimeout: 24h, budget: {maxTokens: 1, maxCostUSD: '2.00'}}`)},
	{name: "outcome transitions of every form", obj: pathway(`retry: {limit: 2}
timeout: 1m
transitions:
  onSuccess: {action: Close}
  onFailure: {to: a, action: JumpBack}
  onPartialSuccess:
    decision:
      agent: judge
      allowedDestinations: [a, b]
      confidenceThresholds: {autoAdvance: '0.7', requireApproval: '0.7'}
      messaging: true
      action: Retry
      rules: [{when: outputs.failures > 5, to: b, confidence: '0.95', action: JumpBack}]
  onUnclear:
    decision: {allowedDestinations: [a], confidenceThresholds: {autoAdvance: '1', requireApproval: '0'}}
`)},
	{name: "threshold below the default autoAdvance", obj: pathway(decision("confidenceThresholds: {requireApproval: '0.8'}"))},
	{name: "External pathway", obj: pathway("executor: External\naccumulate: [plan]\ntransitions:\n  onSuccess: {to: generate}")},
	{name: "session", obj: session(sessionBase)},
	{name: "budget with every field", obj: budget(`selector: {journeys: [healthcare-referral], matchLabels: {team: care}}
window: Month
timeZone: Europe/Berlin
limits: {costUSD: '50.00', tokens: 5000000, toolCalls: 20000, modelCalls: 10000}
softLimitPercent: 80
onExhausted: Degrade
degradeTo: {agent: small}
`)},
	{name: "budget of an hour", obj: budget("window: 1h30m\nlimits: {costUSD: '0.05'}")},
	{name: "message appended", obj: session(sessionBase),
		patch: `[{"op":"add","path":"/spec/messages/-","value":{"id":"m3","text":"Book the Tuesday slot"}}]`},
	{name: "first message added", obj: session("journeyRef: {name: j}"),
		patch: `[{"op":"add","path":"/spec/messages","value":[{"id":"m1","text":"hi"}]}]`},
	{name: "approval and outcome appended, session suspended and cancelled", obj: session(sessionBase),
		patch: `[{"op":"add","path":"/spec/approvals/-","value":{"decisionID":"d-9","approve":false,"reason":"not now"}},
			{"op":"add","path":"/spec/outcomes/-","value":{"pathway":"revise","iteration":2,"resultType":"success"}},
			{"op":"add","path":"/spec/suspend","value":true},
			{"op":"add","path":"/spec/cancel","value":true}]`},
	{name: "processed messages, outcomes, approvals and interventions dropped from the front", obj: session(sessionBase), status: processedAll,
		patch: `[{"op":"remove","path":"/spec/messages/0"},{"op":"add","path":"/spec/messagesDropped","value":1},
			{"op":"add","path":"/spec/messages/-","value":{"id":"m3","text":"Book the Tuesday slot"}},
			{"op":"remove","path":"/spec/outcomes"},{"op":"add","path":"/spec/outcomesDropped","value":1},
			{"op":"remove","path":"/spec/approvals"},{"op":"add","path":"/spec/approvalsDropped","value":1},
			{"op":"remove","path":"/spec/interventions/0"},{"op":"add","path":"/spec/interventionsDropped","value":1}]`},
	{name: "interventions appended", obj: session(sessionBase),
		patch: `[{"op":"add","path":"/spec/interventions/-","value":{"id":"i-2","action":"Retry","feedback":"use the insurance id"}},
			{"op":"add","path":"/spec/interventions/-","value":{"id":"i-3","action":"Goto","pathway":"booking"}},
			{"op":"add","path":"/spec/interventions/-","value":{"id":"i-4","action":"Rewind","step":0}}]`},
}

func TestAccepted(t *testing.T) {
	ctx := context.Background()
	for i, tc := range acceptCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			obj := decodeOne(t, tc.obj)
			obj.SetNamespace(ns)
			obj.SetName(fmt.Sprintf("accept-%03d", i))
			if err := k.Create(ctx, obj); err != nil {
				t.Fatalf("create refused: %v", err)
			}
			prepare(ctx, t, obj, tc.status, "")
			if tc.patch != "" {
				if err := k.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, []byte(tc.patch))); err != nil {
					t.Fatalf("update refused: %v", err)
				}
			}
		})
	}
}

// TestEnoughRejectCases keeps the table honest: at least 30 invalid manifests, and
// updates among them for every append-only or immutable Session field.
func TestEnoughRejectCases(t *testing.T) {
	if len(rejectCases) < 30 {
		t.Fatalf("only %d reject cases", len(rejectCases))
	}
	updated := map[string]bool{}
	for _, tc := range rejectCases {
		if tc.patch != "" {
			updated[tc.field] = true
		}
	}
	for _, f := range []string{"spec.journeyRef", "spec.initialContext", "spec.messages", "spec.approvals", "spec.outcomes", "spec.interventions", "spec.cancel"} {
		if !updated[f] {
			t.Errorf("no update case for %s", f)
		}
	}
}
