package a2a_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	gateway "github.com/journeyops/journey-operator/internal/a2a"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/webhook"
)

var env *testenv.Environment

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Environment) error {
		env = e
		mgr, err := e.RunManager(testenv.ManagerOptions{Webhooks: true, Setup: func(mgr ctrl.Manager) error {
			if err := controller.Setup(mgr, controller.Options{}); err != nil {
				return err
			}
			return webhook.SetupWebhooks(mgr, webhook.Options{Checks: controller.AdmissionChecks()})
		}})
		if err != nil {
			return err
		}
		return mgr.WaitForWebhooks(30 * time.Second)
	}, testenv.WithWebhooks())
}

// deskJourney is a help desk: chat answers each message and waits for the next; "bye"
// closes the journey; "refund" asks a decision whose confidence (0.75) needs a
// person's approval before the refund pathway runs and closes it; "tour" leads
// through three pathways that run on entry, each replying, and back to chat.
const deskJourney = `
apiVersion: flow.journey.dev/v1alpha1
kind: Journey
metadata: {name: desk}
spec:
  description: A help desk that chats, refunds after a person approves, and gives tours.
  entryPathway: chat
  pathways:
    - {name: chat, pathwayRef: desk-chat}
    - {name: refund, pathwayRef: desk-refund}
    - {name: tour-1, pathwayRef: desk-tour-1}
    - {name: tour-2, pathwayRef: desk-tour-2}
    - {name: tour-3, pathwayRef: desk-tour-3}
  agents:
    - {name: judge, provider: builtin}
  transitions:
    - name: refund-request
      from: chat
      to: refund
      trigger: {intent: {patterns: ["i want my money back"]}}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: desk-chat}
spec:
  signature:
    instructions: Chat with the customer.
    intent: Help the customer
  builtin:
    outputs:
      - {name: refund, expression: "message.lowerAscii().contains('refund')"}
      - {name: tour, expression: "message.lowerAscii().contains('tour')"}
    outcome: "outputs.refund ? 'partial_success' : (outputs.tour ? 'failure' : 'success')"
    complete: "outputs.refund || outputs.tour || message.lowerAscii().contains('bye')"
    reply: "You said: {{ .message }}"
  transitions:
    onSuccess: {action: Close}
    onFailure: {to: tour-1}
    onPartialSuccess:
      decision:
        agent: judge
        prompt: Should the customer get a refund?
        allowedDestinations: [refund]
        rules: [{when: "true", to: refund, confidence: "0.75"}]
        confidenceThresholds: {autoAdvance: "0.9", requireApproval: "0.5"}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: desk-refund}
spec:
  signature: {instructions: Refund the customer.}
  runOn: Entry
  builtin: {reply: Refund issued.}
  transitions:
    onSuccess: {action: Close}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: desk-tour-1}
spec:
  signature: {instructions: Show the first room.}
  runOn: Entry
  builtin: {reply: This is room one.}
  next: tour-2
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: desk-tour-2}
spec:
  signature: {instructions: Show the second room.}
  runOn: Entry
  builtin: {reply: This is room two.}
  next: tour-3
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: desk-tour-3}
spec:
  signature: {instructions: Show the third room.}
  runOn: Entry
  builtin: {reply: This is room three.}
  next: chat
`

// fixture is a namespace with the desk journey, users alice (who may use Sessions)
// and bob (who may not), and a gateway.
type fixture struct {
	ns         string
	alice, bob string // bearer tokens
	gw         *httptest.Server
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	f := &fixture{ns: env.Namespace(t)}
	objs, err := testenv.DecodeManifests([]byte(deskJourney))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		u.SetNamespace(f.ns)
		if err := env.Client.Create(ctx, u); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	env.Create(t,
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "a2a-user"},
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{flowv1.GroupVersion.Group}, Resources: []string{"sessions"},
				Verbs: []string{"get", "list", "watch", "create", "patch", "update"},
			}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "alice"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "a2a-user"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: f.ns, Name: "alice"}},
		},
	)
	f.alice, f.bob = token(t, f.ns, "alice"), token(t, f.ns, "bob")
	testenv.Eventually(t, 20*time.Second, func() error {
		j := testenv.Get(t, env, f.ns, "desk", &flowv1.Journey{})
		if j.Status.ReadyRevision == "" {
			return fmt.Errorf("journey desk is not ready: %v", j.Status.Conditions)
		}
		return nil
	})
	f.gw = startGateway(t)
	return f
}

// token creates service account name and returns a token of it.
func token(t *testing.T, ns, name string) string {
	t.Helper()
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s: %v", name, err)
	}
	return tr.Status.Token
}

// startGateway serves a gateway acting with the control plane's admin credentials;
// it stops when the test ends.
func startGateway(t *testing.T) *httptest.Server {
	t.Helper()
	o, err := gateway.ForConfig(env.Config, gateway.Options{MaxWait: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gateway.New(o))
	t.Cleanup(srv.Close)
	return srv
}

// bearer adds a bearer token to each request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// client is an A2A client of the desk agent of gw, from its agent card, with token.
func (f *fixture) client(t *testing.T, gw *httptest.Server, token string) *a2aclient.Client {
	t.Helper()
	base := gw.URL + "/a2a/" + f.ns + "/desk"
	card, err := agentcard.DefaultResolver.Resolve(t.Context(), base)
	if err != nil {
		t.Fatalf("resolving the agent card: %v", err)
	}
	c, err := a2aclient.NewFromCard(t.Context(), card,
		a2aclient.WithJSONRPCTransport(&http.Client{Transport: bearer{token}}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func text(s string) a2a.Part { return a2a.TextPart{Text: s} }

func message(task a2a.TaskID, parts ...a2a.Part) *a2a.MessageSendParams {
	m := a2a.NewMessage(a2a.MessageRoleUser, parts...)
	m.TaskID = task
	return &a2a.MessageSendParams{Message: m}
}

func session(t *testing.T, ns string, task a2a.TaskID) *flowv1.Session {
	t.Helper()
	return testenv.Get(t, env, ns, string(task), &flowv1.Session{})
}

func asTask(t *testing.T, r a2a.SendMessageResult) *a2a.Task {
	t.Helper()
	task, ok := r.(*a2a.Task)
	if !ok {
		t.Fatalf("message/send answered %T, want a task", r)
	}
	return task
}

// replies are the texts of a task's reply artifacts.
func replies(artifacts []*a2a.Artifact) []string {
	var out []string
	for _, a := range artifacts {
		for _, p := range a.Parts {
			if tp, ok := p.(a2a.TextPart); ok {
				out = append(out, tp.Text)
			}
		}
	}
	return out
}

func TestCard(t *testing.T) {
	f := setup(t)
	card, err := agentcard.DefaultResolver.Resolve(t.Context(), f.gw.URL+"/a2a/"+f.ns+"/desk")
	if err != nil {
		t.Fatal(err)
	}
	if card.Name != "desk" || !strings.HasPrefix(card.Description, "A help desk") {
		t.Errorf("card name %q, description %q", card.Name, card.Description)
	}
	if want := f.gw.URL + "/a2a/" + f.ns + "/desk"; card.URL != want || !card.Capabilities.Streaming {
		t.Errorf("card url %q (want %q), streaming %v", card.URL, want, card.Capabilities.Streaming)
	}
	var skills []string
	for _, s := range card.Skills {
		skills = append(skills, s.ID+": "+s.Description)
		if s.ID == "refund" && (len(s.Examples) != 1 || s.Examples[0] != "i want my money back") {
			t.Errorf("refund skill examples %q, want the refund-request transition's pattern", s.Examples)
		}
	}
	if len(card.Skills) != 5 || !strings.Contains(strings.Join(skills, "\n"), "chat: Chat with the customer.\nIntent: Help the customer") {
		t.Errorf("skills:\n%s", strings.Join(skills, "\n"))
	}
	if _, ok := card.SecuritySchemes[gateway.BearerScheme].(a2a.HTTPAuthSecurityScheme); !ok || len(card.Security) != 1 {
		t.Errorf("security schemes %v, security %v", card.SecuritySchemes, card.Security)
	}
	resp, err := http.Get(f.gw.URL + "/a2a/" + f.ns + "/nothere/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("card of a missing journey: %s, want 404", resp.Status)
	}
}

func TestConversationEndsCompleted(t *testing.T) {
	f := setup(t)
	c := f.client(t, f.gw, f.alice)
	ctx := t.Context()

	task := send(t, c, message("", text("hello")))
	if task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("after the first message: %s, want input-required", task.Status.State)
	}
	id := task.ID
	task = send(t, c, message(id, text("how are you")))
	if task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("after the second message: %s, want input-required", task.Status.State)
	}
	task = send(t, c, message(id, text("bye")))
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("after the third message: %s, want completed", task.Status.State)
	}

	s := session(t, f.ns, id)
	if s.Status.Phase != flowv1.PhaseCompleted || s.Spec.JourneyRef.Name != "desk" {
		t.Fatalf("session phase %s, journey %s", s.Status.Phase, s.Spec.JourneyRef.Name)
	}
	var transcript []string
	for _, x := range s.Status.Transcript {
		transcript = append(transcript, x.Assistant)
	}
	want := []string{"You said: hello", "You said: how are you", "You said: bye"}
	if got := replies(task.Artifacts); strings.Join(got, "|") != strings.Join(want, "|") || strings.Join(transcript, "|") != strings.Join(want, "|") {
		t.Errorf("replies %q, transcript %q, want %q", got, transcript, want)
	}
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: id, HistoryLength: ptr.To(2)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != a2a.TaskStateCompleted || len(got.History) != 2 || got.History[0].Role != a2a.MessageRoleUser {
		t.Errorf("tasks/get: state %s, history %d messages", got.Status.State, len(got.History))
	}
	if _, err := c.SendMessage(ctx, message(id, text("anyone there?"))); err == nil || !strings.Contains(err.Error(), "takes no more input") {
		t.Errorf("a message to a completed task: %v, want refused", err)
	}
}

func TestApprovalOverA2A(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	alice, bob := f.client(t, f.gw, f.alice), f.client(t, f.gw, f.bob)

	task := send(t, alice, message("", text("I need a refund")))
	if task.Status.State != a2a.TaskStateInputRequired || task.Status.Message == nil {
		t.Fatalf("after asking a refund: %s, want input-required with the decision", task.Status.State)
	}
	var pending map[string]any
	for _, p := range task.Status.Message.Parts {
		if dp, ok := p.(a2a.DataPart); ok {
			pending, _ = dp.Data[gateway.MetaPendingDecision].(map[string]any)
		}
	}
	if pending == nil || pending["to"] != "refund" || pending["confidence"] != "0.75" {
		t.Fatalf("input-required without the pending decision: %+v", task.Status.Message)
	}
	decision, _ := pending["decision"].(string)

	before := session(t, f.ns, task.ID)
	if _, err := bob.SendMessage(ctx, message(task.ID, a2a.DataPart{Data: map[string]any{"approve": true}})); err == nil ||
		!strings.Contains(err.Error(), "forbidden") {
		t.Errorf("bob's approval: %v, want a forbidden protocol error", err)
	}
	if _, err := bob.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); err == nil {
		t.Error("bob read alice's task")
	}
	if after := session(t, f.ns, task.ID); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("bob's refused approval changed the Session (resourceVersion %s -> %s)", before.ResourceVersion, after.ResourceVersion)
	}

	task = send(t, alice, message(task.ID, a2a.DataPart{Data: map[string]any{"approve": true, "reason": "fair"}}))
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("after the approval: %s, want completed", task.Status.State)
	}
	s := session(t, f.ns, task.ID)
	want := "system:serviceaccount:" + f.ns + ":alice"
	if len(s.Spec.Approvals) != 1 || s.Spec.Approvals[0].DecisionID != decision || s.Spec.Approvals[0].By != want || !s.Spec.Approvals[0].Approves() {
		t.Errorf("approvals %+v, want %s approved by %s", s.Spec.Approvals, decision, want)
	}
	if got := replies(task.Artifacts); len(got) == 0 || got[len(got)-1] != "Refund issued." {
		t.Errorf("replies %q, want the refund's", got)
	}
}

func TestUnauthenticated(t *testing.T) {
	f := setup(t)
	for name, token := range map[string]string{"no token": "", "a bad token": "not-a-token"} {
		req, _ := http.NewRequest(http.MethodPost, f.gw.URL+"/a2a/"+f.ns+"/desk", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %s, want 401", name, resp.Status)
		}
	}
}

// eventID is the gateway's id of an event.
func eventID(t *testing.T, ev a2a.Event) string {
	t.Helper()
	id, _ := ev.Meta()[gateway.MetaEventID].(string)
	if id == "" {
		t.Fatalf("event %T has no id: %+v", ev, ev)
	}
	return id
}

func describe(t *testing.T, events []a2a.Event) []string {
	var out []string
	for _, ev := range events {
		d := eventID(t, ev)
		switch ev := ev.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			d += " " + strings.Join(replies([]*a2a.Artifact{ev.Artifact}), "")
		case *a2a.TaskStatusUpdateEvent:
			d += fmt.Sprintf(" %s final=%v", ev.Status.State, ev.Final)
		case *a2a.Task:
			d += " task " + string(ev.Status.State)
		}
		out = append(out, d)
	}
	return out
}

func TestResubscribeAfterRestart(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	c := f.client(t, f.gw, f.alice)
	task := send(t, c, message("", text("hello")))

	// The whole stream of "tour", for reference.
	var full []a2a.Event
	for ev, err := range c.SendStreamingMessage(ctx, message(task.ID, text("show me the tour"))) {
		if err != nil {
			t.Fatal(err)
		}
		full = append(full, ev)
	}
	want := []string{"You said: show me the tour", "This is room one.", "This is room two.", "This is room three."}
	if len(full) != 6 {
		t.Fatalf("the tour's stream has %d events, want a task, 4 replies and input-required:\n%s", len(full), strings.Join(describe(t, full), "\n"))
	}
	for i, w := range want {
		if ev, ok := full[i+1].(*a2a.TaskArtifactUpdateEvent); !ok || replies([]*a2a.Artifact{ev.Artifact})[0] != w {
			t.Fatalf("event %d is not the reply %q:\n%s", i+2, w, strings.Join(describe(t, full), "\n"))
		}
	}
	if ev, ok := full[5].(*a2a.TaskStatusUpdateEvent); !ok || ev.Status.State != a2a.TaskStateInputRequired || !ev.Final {
		t.Fatalf("the stream does not end input-required:\n%s", strings.Join(describe(t, full), "\n"))
	}

	// The same again on a second tour, cut after its second event; then the gateway
	// restarts and the client resubscribes to a new one with the last id it saw.
	streamCtx, cut := context.WithCancel(ctx)
	var seen []a2a.Event
	for ev, err := range c.SendStreamingMessage(streamCtx, message(task.ID, text("the tour again"))) {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, ev)
		if len(seen) == 2 {
			break
		}
	}
	cut()
	f.gw.CloseClientConnections()
	f.gw.Close()
	second := startGateway(t)
	c2 := f.client(t, second, f.alice)

	var rest []a2a.Event
	last := eventID(t, seen[1])
	for ev, err := range c2.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: task.ID, Metadata: map[string]any{gateway.MetaLastEventID: last}}) {
		if err != nil {
			t.Fatal(err)
		}
		rest = append(rest, ev)
	}
	got := describe(t, append(seen, rest...))
	s := session(t, f.ns, task.ID)
	n := len(s.Status.Transcript)
	wantIDs := []string{
		"task working",
		"You said: the tour again", "This is room one.", "This is room two.", "This is room three.",
		"input-required final=true",
	}
	if len(got) != len(wantIDs) {
		t.Fatalf("events before the cut and after resubscribing:\n%s\nwant %d events", strings.Join(got, "\n"), len(wantIDs))
	}
	for i, w := range wantIDs {
		if !strings.HasSuffix(got[i], w) {
			t.Errorf("event %d is %q, want ... %q", i+1, got[i], w)
		}
	}
	// Ids follow the transcript: exchange n of the conversation is t<n>, its reply
	// the transcript's.
	for i, ev := range rest[:len(rest)-1] {
		x := s.Status.Transcript[n-3+i]
		if wantID := fmt.Sprintf("t%d.s%d", n-2+i, x.Step); eventID(t, ev) != wantID {
			t.Errorf("event %d has id %s, want %s", i+3, eventID(t, ev), wantID)
		}
	}
	// Resubscribing from the last event yields nothing more: the client has it all.
	var more []a2a.Event
	for ev, err := range c2.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: task.ID, Metadata: map[string]any{gateway.MetaLastEventID: eventID(t, rest[len(rest)-1])}}) {
		if err != nil {
			t.Fatal(err)
		}
		more = append(more, ev)
	}
	if len(more) != 0 {
		t.Errorf("resubscribing from the last event yields %s", describe(t, more))
	}
}

// send sends p with c and returns the task it answers with.
func send(t *testing.T, c *a2aclient.Client, p *a2a.MessageSendParams) *a2a.Task {
	t.Helper()
	r, err := c.SendMessage(t.Context(), p)
	if err != nil {
		t.Fatalf("message/send: %v", err)
	}
	return asTask(t, r)
}
