package main

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// The journeys of the turn bench. Each is an endless conversation: a turn is one user
// message and the reply, and the Session waits for input after it, in the same or the
// next pathway, so every turn costs the same whatever its number.
const (
	// journeyBuiltin: one builtin pathway that replies and keeps the message in the
	// context; no model call.
	journeyBuiltin = "builtin"
	// journeyLLM: two pathways whose agent is an openai agent; each turn's answer
	// completes the pathway and a decision agent (openai) moves to the other one: two
	// model calls a turn.
	journeyLLM = "llm"
	// journeyReAct: one pathway whose openai agent calls the clinic's find_doctors
	// tool, then answers with its result: two model calls and one tool call a turn.
	journeyReAct = "react"
)

var allJourneys = []string{journeyBuiltin, journeyLLM, journeyReAct}

// needsModels reports whether journey j talks to the model servers.
func needsModels(j string) bool { return j != journeyBuiltin }

// journeyObjects are the Pathways and the Journey of bench journey kind, in namespace
// ns, whose agents reach the model servers at ep.
func journeyObjects(kind, ns string, ep endpoints) ([]*flowv1.Pathway, *flowv1.Journey, error) {
	j := &flowv1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kind}}
	// Conversations longer than the defaults allow: the bench sends as many messages
	// as it needs.
	j.Spec.Limits = flowv1.Limits{MaxTurns: 100000, MaxTransitions: 100000}
	gpt := func(name string) flowv1.AgentSpec {
		return flowv1.AgentSpec{Name: flowv1.Name(name), Provider: flowv1.ProviderOpenAI, Model: "bench", BaseURL: ep.Chat,
			MaxRetries: ptr.To[int32](0), Timeout: &metav1.Duration{Duration: 30 * time.Second}}
	}
	var pathways []*flowv1.Pathway
	switch kind {
	case journeyBuiltin:
		pathways = append(pathways, &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"},
			Spec: flowv1.PathwaySpec{Accumulate: []string{"last"}, Builtin: &flowv1.BuiltinPathway{
				Reply: "Noted, thank you.", Complete: "false", Outputs: []flowv1.BuiltinOutput{{Name: "last", Expression: "message"}}}}})
	case journeyLLM:
		// first and second alternate: a two-pathway cycle for ever, which loop
		// prevention must let through.
		j.Spec.LoopPrevention = flowv1.LoopPrevention{Window: 2, MaxCycleRepeats: 50}
		j.Spec.Agents = []flowv1.AgentSpec{gpt("gpt"), gpt("judge")}
		for _, names := range [][2]string{{"first", "second"}, {"second", "first"}} {
			pathways = append(pathways, &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[0]},
				Spec: flowv1.PathwaySpec{
					Agents: []flowv1.Name{"gpt"},
					Signature: flowv1.Signature{
						Instructions: "Help the user book an appointment; say what you noted.",
						Outputs:      []flowv1.SignatureField{{Name: "topic", Type: "string", Description: "What the message is about."}},
					},
					Accumulate: []string{"topic"},
					Transitions: &flowv1.OutcomeTransitions{OnSuccess: &flowv1.OutcomeTransition{Decision: &flowv1.Decision{
						Agent: "judge", Prompt: "Choose the next step of the conversation.", AllowedDestinations: []flowv1.Name{flowv1.Name(names[1])},
					}}},
				}})
		}
	case journeyReAct:
		j.Spec.Agents = []flowv1.AgentSpec{gpt("gpt")}
		j.Spec.ToolServers = []flowv1.ToolServer{{Name: "clinic", URL: ep.Clinic, Timeout: &metav1.Duration{Duration: 30 * time.Second}}}
		j.Spec.Tools = []flowv1.Tool{{Name: "find_doctors", Server: "clinic", Approval: flowv1.ToolApprovalNever}}
		pathways = append(pathways, &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "book"},
			Spec: flowv1.PathwaySpec{
				Agents:    []flowv1.Name{"gpt"},
				Tools:     []flowv1.ToolName{"find_doctors"},
				Signature: flowv1.Signature{Instructions: "Find a cardiologist with a free slot for the user."},
			}})
	default:
		return nil, nil, fmt.Errorf("unknown journey %q (want %s)", kind, strings.Join(allJourneys, ", "))
	}
	j.Spec.EntryPathway = flowv1.Name(pathways[0].Name)
	for _, p := range pathways {
		j.Spec.Pathways = append(j.Spec.Pathways, flowv1.PathwayEntry{Name: flowv1.Name(p.Name), PathwayRef: p.Name})
	}
	return pathways, j, nil
}

// journeyReady reports whether j can start Sessions: Ready on a revision, its tools
// discovered.
func journeyReady(j *flowv1.Journey) bool {
	ready := false
	for _, c := range j.Status.Conditions {
		if c.Type == flowv1.ConditionReady && c.Status == metav1.ConditionTrue {
			ready = true
		}
	}
	return ready && j.Status.ReadyRevision != "" && len(j.Status.Tools) >= len(j.Spec.Tools)
}

// messageText is the text of message k of Session name: its own, so no cache of any
// kind answers for another Session.
func messageText(name string, k int) string {
	return fmt.Sprintf("Message %d of %s: I would like to see a cardiologist next week, mornings if possible.", k, name)
}
