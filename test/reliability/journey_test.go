package reliability

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/journeyops/journey-operator/internal/testenv"
)

// supportDesk is the journey of the chaos test: a triage pathway whose order
// questions go to an LLM decision between billing and shipping, an FAQ detour taken on
// a pattern or on the LLM intent classifier, and billing run by an LLM agent. Unclear
// decisions go to the human pathway. No pathway runs on entry, there are no External
// outcomes and no approvals, so every turn is a message: status.turns must equal
// status.processedMessages. The billing clerk refunds the customer with a tool before
// it answers: refund on a shop that honours idempotency keys, refund_once on one that
// does not (a call whose outcome is unknown fails: the model is told).
//
// %[1]s is the namespace, %[2]s the base URL of the chat completions server, %[3]s
// and %[4]s the MCP endpoints of the keyed and the unkeyed shop.
const supportDesk = `
apiVersion: flow.journey.dev/v1alpha1
kind: Journey
metadata: {name: support-desk, namespace: %[1]s}
spec:
  entryPathway: triage
  pathways:
    - {name: triage, pathwayRef: sd-triage}
    - {name: faq, pathwayRef: sd-faq}
    - {name: billing, pathwayRef: sd-billing}
    - {name: shipping, pathwayRef: sd-shipping}
    - {name: human, pathwayRef: sd-human}
  agents:
    - {name: classifier, provider: openai, model: test-model, baseURL: "%[2]s", timeout: 1s, maxRetries: 1}
    - {name: decider, provider: openai, model: test-model, baseURL: "%[2]s", timeout: 1s, maxRetries: 1}
    - {name: clerk, provider: openai, model: test-model, baseURL: "%[2]s", timeout: 1s, maxRetries: 1}
  toolServers:
    - {name: shop, url: "%[3]s", timeout: 10s}
    - {name: old-shop, url: "%[4]s", timeout: 10s, idempotency: None}
  tools:
    - {name: refund, server: shop, serverTool: pay, approval: Never}
    - {name: refund_once, server: old-shop, serverTool: pay, approval: Never, onUnknown: Fail}
  transitions:
    - name: faq-detour
      from: "*"
      to: faq
      priority: 10
      trigger:
        intent:
          patterns: ["what is", "how do i"]
          description: The customer asks a question.
          llmFallback: true
  intentDetection: {agent: classifier, confidenceThreshold: "0.6"}
  escalationPathway: human
  limits: {maxTurns: 50, maxTransitions: 100, maxHistory: 100, maxPathwayDepth: 3}
  loopPrevention: {window: 8, maxCycleRepeats: 3}
  errorRecovery: Graceful
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: sd-triage, namespace: %[1]s}
spec:
  signature: {instructions: Sort the customer's request.}
  builtin:
    outputs:
      - {name: topic, expression: "message.lowerAscii().contains('order') ? 'order' : 'other'"}
      - {name: said, expression: "message"}
    outcome: "outputs.topic == 'order' ? 'partial_success' : 'success'"
    complete: "outputs.topic == 'order' || message.lowerAscii().contains('bye')"
    reply: Noted.
  transitions:
    onSuccess: {action: Close}
    onPartialSuccess:
      decision:
        agent: decider
        prompt: Route the order question to billing or shipping.
        allowedDestinations: [billing, shipping]
        confidenceThresholds: {autoAdvance: "0.5", requireApproval: "0.5"}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: sd-faq, namespace: %[1]s}
spec:
  signature: {instructions: Answer the customer's question.}
  returnBehavior: {type: ReturnToPrevious}
  builtin: {reply: "Here is the answer. Back to where we were."}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: sd-billing, namespace: %[1]s}
spec:
  signature:
    instructions: Settle the customer's billing question.
    outputs: [{name: note, type: string}]
  agents: [clerk]
  tools: [refund, refund_once]
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: sd-shipping, namespace: %[1]s}
spec:
  signature: {instructions: Track the customer's parcel.}
  builtin:
    complete: "message.lowerAscii().contains('bye')"
    reply: Your parcel is on its way.
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: sd-human, namespace: %[1]s}
spec:
  signature: {instructions: Hand over to a person.}
  builtin:
    complete: "message.lowerAscii().contains('bye')"
    reply: A colleague will take it from here.
`

// allowedDecisions are the destinations the decision may choose; escalation is where
// an unclear decision goes.
var (
	allowedDecisions = map[string]bool{"billing": true, "shipping": true}
	escalation       = "human"
	journeyPathways  = map[string]bool{"triage": true, "faq": true, "billing": true, "shipping": true, "human": true}
	globalNames      = map[string]bool{"faq-detour": true}
)

// conversation is what each chaos Session says, in order. Odd sessions have a late
// order (shipping), even ones a double charge (billing).
func conversation(i int) []string {
	order := "my order 42 was charged twice"
	if i%2 == 1 {
		order = "my order 42 is late"
	}
	// Distinct texts, so the intent cache does not spare the classifier its faults.
	return []string{
		fmt.Sprintf("hi, I have a question about my account %d", i),
		order,
		"what is the delivery date",
		fmt.Sprintf("thanks, bye (ticket %d)", i),
	}
}

// decodeObjects decodes a multi-document manifest into unstructured objects.
func decodeObjects(t *testing.T, manifest string) []client.Object {
	t.Helper()
	objs, err := testenv.DecodeManifests([]byte(manifest))
	if err != nil {
		t.Fatalf("decoding manifest: %v", err)
	}
	out := make([]client.Object, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

func supportDeskObjects(t *testing.T, ns, baseURL, shopURL, oldShopURL string) []client.Object {
	return decodeObjects(t, fmt.Sprintf(supportDesk, ns, strings.TrimSuffix(baseURL, "/"), shopURL, oldShopURL))
}
