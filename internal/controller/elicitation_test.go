package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/plugin"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools"
)

// elicitingDesk is a go-sdk MCP server whose tool register asks the user for ask
// (MCP elicitation) before it acts. It keeps the answers it was given, the requests
// for input that got no answer, and what it did, by idempotency key.
type elicitingDesk struct {
	mu       sync.Mutex
	answers  []*mcp.ElicitResult
	unserved int
	effects  map[string]int
}

func newElicitingDesk(t *testing.T, ask *mcp.ElicitParams) (*elicitingDesk, string) {
	d := &elicitingDesk{effects: map[string]int{}}
	server := mcp.NewServer(&mcp.Implementation{Name: "desk"}, nil)
	server.AddTool(&mcp.Tool{Name: "register", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.Elicit(ctx, ask)
			d.mu.Lock()
			defer d.mu.Unlock()
			if err != nil {
				d.unserved++
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no answer: " + err.Error()}}}, nil
			}
			d.answers = append(d.answers, res)
			if res.Action != "accept" {
				return &mcp.CallToolResult{StructuredContent: map[string]any{"registered": false, "note": "the user answered " + res.Action}}, nil
			}
			key, _ := req.Params.Meta[tools.IdempotencyKeyMeta].(string)
			d.effects[key]++
			return &mcp.CallToolResult{StructuredContent: map[string]any{"registered": true, "for": res.Content}}, nil
		})
	return d, serveMCP(t, server)
}

// seen is what the server was given: the answers, the requests for input that got
// none, and its effects by key.
func (d *elicitingDesk) seen() ([]*mcp.ElicitResult, int, map[string]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	effects := map[string]int{}
	for k, v := range d.effects {
		effects[k] = v
	}
	return append([]*mcp.ElicitResult(nil), d.answers...), d.unserved, effects
}

// awaitingInput waits until Session name waits for the user's input, and returns the
// call that waits.
func awaitingInput(t *testing.T, ns, name string) (*flowv1.Session, *flowv1.ToolCallProgress) {
	t.Helper()
	var s *flowv1.Session
	var call *flowv1.ToolCallProgress
	eventually(t, 60*time.Second, func() error {
		s = get(t, ns, name, &flowv1.Session{})
		cond := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionAwaitingInput)
		if s.Status.Phase != flowv1.PhaseWaitingForInput || cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != flowv1.ReasonInputRequested {
			return fmt.Errorf("phase %s, AwaitingInput %+v, conditions %+v", s.Status.Phase, cond, s.Status.Conditions)
		}
		for c := range s.Status.AnswerableToolCalls() {
			call = c
		}
		if call == nil || call.State != flowv1.ToolCallAwaitingInput {
			return fmt.Errorf("turn %+v", s.Status.Turn)
		}
		return nil
	})
	return s, call
}

// kubectlJourney runs the kubectl journey plugin in-process as user alice.
func kubectlJourney(t *testing.T, ns string, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append(args, "-n", ns, "--kubeconfig", env.Kubeconfig(t, testenv.Admin("alice"))))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("kubectl journey %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// completedSession waits until Session name completed.
func completedSession(t *testing.T, ns, name string) *flowv1.Session {
	t.Helper()
	var s *flowv1.Session
	eventually(t, 60*time.Second, func() error {
		s = get(t, ns, name, &flowv1.Session{})
		if s.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %s, turn %+v, conditions %+v", s.Status.Phase, s.Status.Turn, s.Status.Conditions)
		}
		return nil
	})
	return s
}

// TestElicitationFormWaitsAcrossARestart: a server asks the user to fill in a form
// during a call. The Session waits, AwaitingInput showing the question, and keeps
// waiting across a manager restart; kubectl journey answer fills in the form, the
// call is made again with the same key, the answer reaches the server once, and the
// Session completes with what the server made of it.
func TestElicitationFormWaitsAcrossARestart(t *testing.T) {
	ns := newNamespace(t)
	desk, url := newElicitingDesk(t, &mcp.ElicitParams{Message: "Who is the appointment for?", RequestedSchema: map[string]any{
		"type": "object", "required": []any{"name"},
		"properties": map[string]any{"name": map[string]any{"type": "string"}, "age": map[string]any{"type": "integer"}},
	}})
	mgr := startManager(t, ns, Options{})
	p, j := deskJourney(ns, url, "register")
	create(t, p, j, sessionOf(ns, "s1", "desk"))

	s, call := awaitingInput(t, ns, "s1")
	e := call.WaitingElicitation()
	if e == nil || e.Mode != flowv1.ElicitationForm || e.Message != "Who is the appointment for?" || !strings.Contains(string(e.RequestedSchema.Raw), `"required":["name"]`) {
		t.Fatalf("call %+v", call)
	}
	cond := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionAwaitingInput)
	for _, want := range []string{"Who is the appointment for?", "age (integer), name (string)*", "kubectl journey answer s1 " + call.ID + " --accept"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("AwaitingInput message %q lacks %q", cond.Message, want)
		}
	}

	// The manager stops; the new one finds the Session waiting and sends nothing.
	if err := mgr.Stop(); err != nil {
		t.Fatal(err)
	}
	startManager(t, ns, Options{})
	send(t, ns, "s1", "m1", "anyone there?") // a change the new manager reconciles
	eventually(t, 30*time.Second, func() error {
		if s := get(t, ns, "s1", &flowv1.Session{}); s.Status.ObservedGeneration != s.Generation {
			return fmt.Errorf("generation %d not observed (%d)", s.Generation, s.Status.ObservedGeneration)
		}
		return nil
	})
	awaitingInput(t, ns, "s1")
	if answers, unserved, _ := desk.seen(); len(answers) != 0 || unserved != 1 {
		t.Fatalf("before the answer the server got %d answers and %d requests without one, want 0 and 1", len(answers), unserved)
	}

	out := kubectlJourney(t, ns, "answer", "s1", call.ID, "--accept", "name=Ada Lovelace", "age=36")
	if !strings.Contains(out, "(Answer) sent to session/s1") {
		t.Errorf("kubectl journey answer printed %q", out)
	}
	s = completedSession(t, ns, "s1")
	answers, unserved, effects := desk.seen()
	if len(answers) != 1 || answers[0].Action != "accept" || answers[0].Content["name"] != "Ada Lovelace" || answers[0].Content["age"] != float64(36) || unserved != 1 {
		t.Fatalf("the server got %+v (and %d requests without an answer): want the answer once", answers, unserved)
	}
	if len(effects) != 1 || effects[call.IdempotencyKey] != 1 {
		t.Errorf("effects %v, want one under the call's key %s", effects, call.IdempotencyKey)
	}
	if !strings.Contains(string(s.Status.Context.Raw), `"for":{"age":36,"name":"Ada Lovelace"}`) {
		t.Errorf("context %s does not hold what the server did with the answer", s.Status.Context.Raw)
	}
	iv := s.Spec.Interventions[len(s.Spec.Interventions)-1]
	if iv.Action != flowv1.InterventionAnswer || iv.Outcome != flowv1.AnswerAccept || iv.Call != call.ID {
		t.Errorf("intervention %+v", iv)
	}
}

// TestElicitationURL: a server asks the user to visit a page; the Session shows the
// URL, kubectl journey answer --accept says it was visited, and the call is made
// again.
func TestElicitationURL(t *testing.T) {
	ns := newNamespace(t)
	desk, url := newElicitingDesk(t, &mcp.ElicitParams{Mode: "url", Message: "Sign the consent form", URL: "https://clinic.example/consent/42", ElicitationID: "e-42"})
	startManager(t, ns, Options{})
	p, j := deskJourney(ns, url, "register")
	create(t, p, j, sessionOf(ns, "s2", "desk"))

	s, call := awaitingInput(t, ns, "s2")
	if e := call.WaitingElicitation(); e.Mode != flowv1.ElicitationURL || e.URL != "https://clinic.example/consent/42" || e.ElicitationID != "e-42" {
		t.Fatalf("elicitation %+v", e)
	}
	cond := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionAwaitingInput)
	if !strings.Contains(cond.Message, "visit https://clinic.example/consent/42, then say it is done: kubectl journey answer s2 "+call.ID+" --accept") {
		t.Errorf("message %q", cond.Message)
	}
	kubectlJourney(t, ns, "answer", "s2", call.ID, "--accept")
	completedSession(t, ns, "s2")
	if answers, _, effects := desk.seen(); len(answers) != 1 || answers[0].Action != "accept" || effects[call.IdempotencyKey] != 1 {
		t.Fatalf("answers %+v, effects %v", answers, effects)
	}
}

// TestElicitationDeclineGoesBackToTheModel: the user declines; the call is made
// again, the server is told, and what it answers is the tool's result the model is
// given.
func TestElicitationDeclineGoesBackToTheModel(t *testing.T) {
	ns := newNamespace(t)
	desk, url := newElicitingDesk(t, &mcp.ElicitParams{Message: "Your insurance number?", RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{"number": map[string]any{"type": "string"}}}})
	model := newReactModel(t, map[string]modelScript{"s3": func(results []testenv.ToolResult) testenv.Reply {
		if len(results) == 0 {
			return callTool("register", `{}`)
		}
		return finalAnswer("Registration: "+results[0].Content, "")
	}})
	startManager(t, ns, Options{})
	p := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "book"}, Spec: flowv1.PathwaySpec{
		Agents: []flowv1.Name{"gpt"}, Tools: []flowv1.ToolName{"register"},
		Signature: flowv1.Signature{Instructions: "Register the patient.", Outputs: []flowv1.SignatureField{{Name: "booking_id", Type: "string"}}},
	}}
	j := journeyOf(ns, "react", p)
	j.Spec.Agents = []flowv1.AgentSpec{{Name: "gpt", Provider: flowv1.ProviderOpenAI, Model: "test-model", BaseURL: model.BaseURL(), MaxRetries: ptr.To[int32](0)}}
	j.Spec.ToolServers = []flowv1.ToolServer{{Name: "desk", URL: url, Timeout: &metav1.Duration{Duration: 20 * time.Second}}}
	j.Spec.Tools = []flowv1.Tool{{Name: "register", Server: "desk", Approval: flowv1.ToolApprovalNever}}
	create(t, p, j)
	eventually(t, 30*time.Second, func() error {
		if j := get(t, ns, "react", &flowv1.Journey{}); j.Status.ReadyRevision == "" || len(j.Status.Tools) != 1 {
			return fmt.Errorf("revision %q, tools %+v", j.Status.ReadyRevision, j.Status.Tools)
		}
		return nil
	})
	talk(t, ns, "s3")

	_, call := awaitingInput(t, ns, "s3")
	kubectlJourney(t, ns, "answer", "s3", call.ID, "--decline")
	s := finished(t, ns, "s3")
	if answers, _, effects := desk.seen(); len(answers) != 1 || answers[0].Action != "decline" || len(effects) != 0 {
		t.Fatalf("answers %+v, effects %v", answers, effects)
	}
	reqs := model.asked("s3")
	if len(reqs) != 2 {
		t.Fatalf("the model was asked %d times, want 2", len(reqs))
	}
	results := reqs[1].ToolResults()
	var got map[string]any
	if len(results) != 1 || json.Unmarshal([]byte(results[0].Content), &got) != nil || got["note"] != "the user answered decline" {
		t.Fatalf("the model was given %+v", results)
	}
	if !strings.Contains(s.Status.LastTurn.AssistantText, "the user answered decline") {
		t.Errorf("last turn %+v", s.Status.LastTurn)
	}
}

// TestUpgradeAfterAnAnswer: a Session whose tool call waited for the user's input,
// answered with kubectl journey answer, is upgraded to a compatible revision with
// kubectl journey upgrade, which drops the processed Answer from spec.interventions:
// the replay gives the Answer again at its step from its record, so the Session
// moves, and neither the server nor the user is asked again.
func TestUpgradeAfterAnAnswer(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	desk, url := newElicitingDesk(t, &mcp.ElicitParams{Message: "Who is the appointment for?", RequestedSchema: map[string]any{
		"type": "object", "required": []any{"name"}, "properties": map[string]any{"name": map[string]any{"type": "string"}},
	}})
	startManager(t, ns, Options{})
	p, j := deskJourney(ns, url, "register")
	p.Spec.Builtin.Complete = "false" // it waits for the next message after the call
	create(t, p, j, sessionOf(ns, "s1", "desk"))
	_, call := awaitingInput(t, ns, "s1")
	kubectlJourney(t, ns, "answer", "s1", call.ID, "--accept", "name=Ada Lovelace")
	var s *flowv1.Session
	eventually(t, 60*time.Second, func() error {
		s = get(t, ns, "s1", &flowv1.Session{})
		if s.Status.ProcessedInterventions != 1 || s.Status.Turn != nil || s.Status.Phase != flowv1.PhaseWaitingForInput {
			return fmt.Errorf("processed %d interventions, phase %s, turn %+v", s.Status.ProcessedInterventions, s.Status.Phase, s.Status.Turn)
		}
		return nil
	})
	if rec := s.Status.InterventionRecord("i-1"); rec == nil || rec.Result != flowv1.InterventionApplied || rec.Intervention.Call != call.ID {
		t.Fatalf("the Answer's record %+v", rec)
	}
	answers, unserved, effects := desk.seen()

	compatible := editJourney(t, ns, "desk", func(j *flowv1.Journey) { j.Spec.FallbackReply = "Sorry, try again." })
	out := kubectlJourney(t, ns, "upgrade", "s1", "--to-revision", compatible, "--wait", "--timeout", "30s")
	s = get(t, ns, "s1", &flowv1.Session{})
	if s.Status.JourneyRevision != compatible || s.Spec.InterventionsDropped != 1 {
		t.Fatalf("on %s (want %s), spec.interventionsDropped %d; kubectl journey upgrade printed:\n%s\nUpgradeBlocked %+v", s.Status.JourneyRevision, compatible,
			s.Spec.InterventionsDropped, out, apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionUpgradeBlocked))
	}
	a, u, e := desk.seen()
	if len(a) != len(answers) || u != unserved || fmt.Sprint(e) != fmt.Sprint(effects) {
		t.Errorf("the upgrade reached the server: answers %d -> %d, unanswered requests %d -> %d, effects %v -> %v", len(answers), len(a), unserved, u, effects, e)
	}
}
