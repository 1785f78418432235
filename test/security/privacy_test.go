package security

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tracing"
)

// markerModel is a model that repeats what it was told everywhere it can: the worker
// calls the copay tool with the message's and the context's markers as arguments,
// then replies with them and puts them in its outputs; the judge gives them as its
// reasoning.
func markerModel(t *testing.T, inMessage, inContext string) *testenv.ChatServer {
	echo := inMessage + " " + inContext
	return testenv.NewChatServer(t, func(r testenv.ChatRequest) testenv.Reply {
		switch {
		case r.Model == "judge":
			b, _ := json.Marshal(map[string]any{"destination": "done", "confidence": 0.7, "reasoning": "the patient said " + echo})
			return testenv.Answer(string(b))
		case len(r.ToolResults()) == 0:
			args, _ := json.Marshal(map[string]any{"note": echo})
			return testenv.CallTools(testenv.ToolCall{ID: "call_1", Name: "copay", Arguments: string(args)})
		default:
			b, _ := json.Marshal(map[string]any{"reply": "You said " + echo, "outputs": map[string]any{"note": echo},
				"outcome": "success", "complete": true})
			return testenv.Answer(string(b))
		}
	})
}

// TestNoConversationTextInEventsLogsOrTraces runs a conversation through an openai
// pathway that calls a tool waiting for approval, and a decision that waits for
// approval, with a marker in the message and another in the initial context that the
// model repeats in its tool arguments, its reply, its outputs and its reasoning, and
// the approver in her reasons. The manager logs at verbosity 10 through the cap the
// manager uses (audit.CapVerbosity) and traces without content. Afterwards neither
// marker is in any Event (both APIs), any log line, or any span (name, attributes,
// events, status, links), while both are in the Session's status: the text went
// through.
func TestNoConversationTextInEventsLogsOrTraces(t *testing.T) {
	raw := make([]byte, 8)
	_, _ = rand.Read(raw)
	inMessage, inContext := "MSG-"+hex.EncodeToString(raw), "INS-"+hex.EncodeToString(raw)

	env := controlPlane(t)
	c := env.Client
	ctx := context.Background()
	ns := env.Namespace(t)
	spans := tracetest.NewSpanRecorder()
	env.StartManager(t, testenv.ManagerOptions{
		Namespaces: []string{ns},
		Setup: func(mgr ctrl.Manager) error {
			return controller.Setup(mgr, controller.Options{Tracing: tracing.NewWithProcessor(spans, false)})
		},
	})
	model := markerModel(t, inMessage, inContext)
	agent := func(name string) flowv1.AgentSpec {
		return flowv1.AgentSpec{Name: flowv1.Name(name), Provider: flowv1.ProviderOpenAI, Model: name, BaseURL: model.BaseURL(),
			MaxRetries: ptr.To[int32](0), Timeout: &metav1.Duration{Duration: 10 * time.Second}}
	}
	initial, _ := json.Marshal(map[string]any{"insurance_id": inContext})
	env.Create(t,
		&flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "intake"}, Spec: flowv1.PathwaySpec{
			Agents: []flowv1.Name{"worker"},
			Tools:  []flowv1.ToolName{"copay"},
			Signature: flowv1.Signature{
				Instructions: "Take the patient's details.",
				Inputs:       []flowv1.SignatureField{{Name: "insurance_id", Type: "string"}},
				Outputs:      []flowv1.SignatureField{{Name: "note", Type: "string"}},
			},
			Accumulate: []string{"note"},
			Transitions: &flowv1.OutcomeTransitions{OnSuccess: &flowv1.OutcomeTransition{Decision: &flowv1.Decision{
				Agent: "judge", Prompt: "Is the intake done?", AllowedDestinations: []flowv1.Name{"done"},
				ConfidenceThresholds: &flowv1.ConfidenceThresholds{AutoAdvance: "0.9", RequireApproval: "0.5"},
			}}},
		}},
		&flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "done"}, Spec: flowv1.PathwaySpec{
			RunOn: flowv1.RunOnEntry, Builtin: &flowv1.BuiltinPathway{Reply: "finished"},
		}},
		&flowv1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "clinic"}, Spec: flowv1.JourneySpec{
			EntryPathway: "intake",
			Pathways:     []flowv1.PathwayEntry{{Name: "intake", PathwayRef: "intake"}, {Name: "done", PathwayRef: "done"}},
			Agents:       []flowv1.AgentSpec{agent("worker"), agent("judge")},
			Tools: []flowv1.Tool{{Name: "copay", Approval: flowv1.ToolApprovalAlways,
				Builtin: &flowv1.BuiltinTool{Expression: "{'copay_usd': 40, 'note': args.note}"}}},
		}},
	)
	waitFor(t, 30*time.Second, func() error {
		var j flowv1.Journey
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "clinic"}, &j); err != nil {
			return err
		}
		if j.Status.ReadyRevision == "" {
			return fmt.Errorf("journey not ready: %+v", j.Status.Conditions)
		}
		return nil
	})
	env.Create(t, &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s1"}, Spec: flowv1.SessionSpec{
		JourneyRef:     flowv1.JourneyReference{Name: "clinic"},
		InitialContext: &apiextensionsv1.JSON{Raw: initial},
		Messages:       []flowv1.Message{{ID: "m1", Text: "My insurance is " + inContext + " and I say " + inMessage}},
	}})

	// The tool call, then the decision, each approved with a reason that quotes the
	// patient.
	for _, want := range []string{"t-", "d-"} {
		var s flowv1.Session
		waitFor(t, 60*time.Second, func() error {
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s1"}, &s); err != nil {
				return err
			}
			if s.Status.Phase != flowv1.PhaseAwaitingApproval || s.Status.LastDecision == nil || !strings.HasPrefix(s.Status.LastDecision.ID, want) {
				return fmt.Errorf("phase %s, decision %+v, want one %s... waiting", s.Status.Phase, s.Status.LastDecision, want)
			}
			return nil
		})
		s.Spec.Approvals = append(s.Spec.Approvals, flowv1.Approval{DecisionID: s.Status.LastDecision.ID, Approve: ptr.To(true),
			By: "alice", Reason: "fine for " + inMessage})
		if err := c.Update(ctx, &s); err != nil {
			t.Fatal(err)
		}
	}
	var s flowv1.Session
	waitFor(t, 60*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s1"}, &s); err != nil {
			return err
		}
		if s.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %s", s.Status.Phase)
		}
		return nil
	})
	// The text went through: the model saw both markers, and status keeps them.
	status, _ := json.Marshal(s.Status)
	for _, m := range []string{inMessage, inContext} {
		if !strings.Contains(string(status), m) {
			t.Fatalf("the Session's status does not hold %s: the test did not exercise the leak it guards against", m)
		}
	}
	if n := len(model.Requests()); n < 3 {
		t.Fatalf("the model was asked %d times, want 3 (a tool call, an answer, a decision)", n)
	}

	// Every Event is written, and every span ended, before the manager stops: wait for
	// the Completed Event, then stop the manager.
	var haystack map[string]string
	waitFor(t, 10*time.Second, func() error {
		var err error
		if haystack, err = readable(ctx, c, ns); err != nil {
			return err
		}
		for _, reason := range []string{flowv1.ReasonCompleted, flowv1.ReasonAwaitingApproval} {
			if !strings.Contains(haystack["events.k8s.io events"], reason) {
				return fmt.Errorf("no %s Event yet", reason)
			}
		}
		return nil
	})
	delete(haystack, "sessions")
	delete(haystack, "journeys")
	delete(haystack, "controllerrevisions")
	haystack["spans"] = spanText(spans)
	if !strings.Contains(haystack["spans"], "execute_tool copay") || !strings.Contains(haystack["spans"], "chat judge") {
		t.Errorf("no tool or decision span recorded: %.500s", haystack["spans"])
	}
	// The manager logged below the info level: the logger ran past the default verbosity.
	if !strings.Contains(haystack["manager logs"], `"level":"Level(-5)"`) {
		t.Error("no log line at verbosity 5: the logger did not run at a high verbosity")
	}
	for where, text := range haystack {
		for _, m := range []string{inMessage, inContext} {
			if i := strings.Index(text, m); i >= 0 {
				start, end := max(0, i-160), min(len(text), i+len(m)+40)
				t.Errorf("%s appears in %s: ...%s...", m, where, text[start:end])
			}
		}
	}
}

// spanText is every span the recorder holds as text: names, attributes, events with
// their attributes, status descriptions and links' attributes.
func spanText(rec *tracetest.SpanRecorder) string {
	var b strings.Builder
	for _, sp := range rec.Ended() {
		fmt.Fprintf(&b, "%s status=%q", sp.Name(), sp.Status().Description)
		for _, kv := range sp.Attributes() {
			fmt.Fprintf(&b, " %s=%s", kv.Key, kv.Value.String())
		}
		for _, e := range sp.Events() {
			fmt.Fprintf(&b, " event %s", e.Name)
			for _, kv := range e.Attributes {
				fmt.Fprintf(&b, " %s=%s", kv.Key, kv.Value.String())
			}
		}
		for _, l := range sp.Links() {
			for _, kv := range l.Attributes {
				fmt.Fprintf(&b, " link %s=%s", kv.Key, kv.Value.String())
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
