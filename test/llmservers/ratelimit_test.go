package llmservers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// greeting is a one-pathway journey whose pathway is run by an openai agent without
// in-process retries, so every failed call goes back to the controller. %[1]s is the
// namespace, %[2]s the chat server's base URL.
const greeting = `
apiVersion: flow.journey.dev/v1alpha1
kind: Journey
metadata: {name: greeting, namespace: %[1]s}
spec:
  entryPathway: greet
  pathways:
    - {name: greet, pathwayRef: greet}
  agents:
    - {name: clerk, provider: openai, model: test-model, baseURL: "%[2]s", timeout: 2s, maxRetries: 0, temperature: "0"}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: greet, namespace: %[1]s}
spec:
  signature:
    instructions: Greet the customer and close.
    outputs: [{name: name, type: string}]
  agents: [clerk]
  transitions:
    onSuccess: {action: Close}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Session
metadata: {name: s1, namespace: %[1]s}
spec:
  journeyRef: {name: greeting}
  messages:
    - {id: m1, text: "Hello, I am Ada."}
`

const greetAnswer = `{"reply":"Hello Ada!","outputs":{"name":"Ada"},"outcome":"success","complete":true}`

func decode(t *testing.T, manifest string) []client.Object {
	t.Helper()
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifest)), 4096)
	var out []client.Object
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding manifest: %v", err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// TestStringBodied429ThenSessionCompletes: a server that rate-limits with a string
// error body (LM Studio, TGI) twice, then answers. The 429s are Transient (the Session
// waits, nothing is journaled, it never stalls) and the Session completes on the
// answer.
func TestStringBodied429ThenSessionCompletes(t *testing.T) {
	ns := env.Namespace(t)
	limited := testenv.JSONReply(http.StatusTooManyRequests, map[string]any{"error": "Model is overloaded", "error_type": "overloaded"})
	cs := testenv.NewChatServer(t, testenv.Always(testenv.Answer(greetAnswer)))
	cs.Script(limited, limited)
	startManager(t, ns)
	env.Create(t, decode(t, fmt.Sprintf(greeting, ns, cs.BaseURL()))...)

	var s flowv1.Session
	testenv.Eventually(t, 60*time.Second, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "s1"}, &s); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionStalled); c != nil && c.Status == "True" {
			return fmt.Errorf("stalled (%s): %s", c.Reason, c.Message)
		}
		if s.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %q after %d calls", s.Status.Phase, cs.Calls())
		}
		return nil
	})
	if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionStalled); c != nil && c.Status == "True" {
		t.Fatalf("the Session stalled: %s", c.Message)
	}
	if n := cs.Calls(); n < 3 {
		t.Errorf("%d calls, want the two 429s and the answer", n)
	}
	for n := 1; n <= 2; n++ {
		if req := cs.Request(t, n); req.Schema != "pathway_turn" {
			t.Errorf("request %d is %q, want the pathway turn", n, req.Schema)
		}
	}
	if !bytes.Contains(cs.Request(t, 3).Body, []byte(`"temperature":0`)) {
		t.Errorf("temperature 0 not sent: %s", cs.Request(t, 3).Body)
	}
	if s.Status.Turns < 1 {
		t.Errorf("turns = %d, want the answered turn", s.Status.Turns)
	}
}
