package llmservers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// copayJourney is a one-pathway journey whose openai agent may call a builtin copay
// tool. %[1]s is the namespace, %[2]s the journey's name (and its Session's), %[3]s
// the chat server's base URL, %[4]s the agent's toolCalling.
const copayJourney = `
apiVersion: flow.journey.dev/v1alpha1
kind: Journey
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  entryPathway: copay
  pathways:
    - {name: copay, pathwayRef: %[2]s-copay}
  agents:
    - {name: clerk, provider: openai, model: test-model, baseURL: "%[3]s", timeout: 2s, maxRetries: 0, temperature: "0", toolCalling: %[4]s}
  tools:
    - {name: copay, description: "The patient's copay.", builtin: {expression: "{'copay_usd': 40}"}}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: %[2]s-copay, namespace: %[1]s}
spec:
  signature:
    instructions: Tell the patient their copay, from the copay tool.
    outputs: [{name: copay, type: string}]
  agents: [clerk]
  tools: [copay]
  transitions:
    onSuccess: {action: Close}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  journeyRef: {name: %[2]s}
  messages:
    - {id: m1, text: "What is my copay?"}
`

// copayModel calls copay, then answers with its result.
func copayModel(req testenv.ChatRequest) testenv.Reply {
	results := req.ToolResults()
	if len(results) == 0 {
		return testenv.CallTools(testenv.ToolCall{ID: "call_1", Name: "copay", Arguments: "{}"})
	}
	last := results[len(results)-1].Content
	return testenv.Answer(fmt.Sprintf(`{"reply":"copay tool said %s","outputs":{"copay":%q},"outcome":"success","complete":true}`,
		strings.ReplaceAll(last, `"`, `\"`), last))
}

// TestToolCallingModes: behind stand-ins of servers that return calls as text, or
// refuse native tools, a Session whose model calls a tool completes in each mode.
func TestToolCallingModes(t *testing.T) {
	ns := env.Namespace(t)
	startManager(t, ns)
	cases := []struct {
		name, toolCalling string
		respond           testenv.Responder
		// native is whether the first request offers native tools.
		native bool
	}{
		{"hermes", "Auto", testenv.InDialect(testenv.DialectHermes, copayModel), true},
		{"mistral", "Auto", testenv.InDialect(testenv.DialectMistral, copayModel), true},
		{"mistral-args", "Native", testenv.InDialect(testenv.DialectMistralArgs, copayModel), true},
		{"bare-json", "Auto", testenv.InDialect(testenv.DialectBareJSON, copayModel), true},
		{"vllm-refuses", "Auto", testenv.RefusingTools(testenv.ToolRefusals["vLLM"], copayModel), true},
		{"ollama-refuses", "Auto", testenv.RefusingTools(testenv.ToolRefusals["Ollama"], copayModel), true},
		{"prompted", "Prompted", testenv.InDialect(testenv.DialectPrompted, copayModel), false},
	}
	servers := map[string]*testenv.ChatServer{}
	for _, tc := range cases {
		servers[tc.name] = testenv.NewChatServer(t, tc.respond)
		env.Create(t, decode(t, fmt.Sprintf(copayJourney, ns, tc.name, servers[tc.name].BaseURL(), tc.toolCalling))...)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s flowv1.Session
			testenv.Eventually(t, 60*time.Second, func() error {
				if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: tc.name}, &s); err != nil {
					return err
				}
				if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionStalled); c != nil && c.Status == "True" {
					return fmt.Errorf("stalled (%s): %s", c.Reason, c.Message)
				}
				if s.Status.Phase != flowv1.PhaseCompleted {
					return fmt.Errorf("phase %q after %d calls", s.Status.Phase, servers[tc.name].Calls())
				}
				return nil
			})
			lt := s.Status.LastTurn
			if lt == nil || len(lt.ToolCalls) != 1 || lt.ToolCalls[0].Tool != "copay" || lt.ToolCalls[0].State != flowv1.ToolCallDone ||
				!strings.Contains(lt.AssistantText, "copay_usd") {
				t.Fatalf("last turn %+v", lt)
			}
			cs := servers[tc.name]
			if first := cs.Request(t, 1); first.OffersTools() != tc.native {
				t.Errorf("the first request offers native tools: %v, want %v", first.OffersTools(), tc.native)
			}
			if last := cs.Request(t, cs.Calls()); last.OffersTools() && strings.HasSuffix(tc.name, "-refuses") {
				t.Errorf("the last request offers native tools to a server that refuses them")
			}
		})
	}
}
