package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// revisionsCluster is the lifecycle commands' control plane (liveCluster: the
// admission webhooks, which stamp who intervened, and a manager with the controllers);
// run runs kubectl journey as alice in namespace ns. Each test works in a namespace of
// its own, so the tests share the control plane and run in parallel.
type revisionsCluster struct {
	env        *testenv.Environment
	kubeconfig string
}

func newRevisionsCluster(t *testing.T) *revisionsCluster {
	t.Helper()
	env := liveCluster(t)
	return &revisionsCluster{env: env, kubeconfig: liveKubeconfig}
}

func (c *revisionsCluster) run(ns string, args ...string) (string, error) {
	return runAs(c.kubeconfig, ns, args...)
}

// runAs runs kubectl journey with kubeconfig in namespace ns.
func runAs(kubeconfig, ns string, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	o.PollInterval = 50 * time.Millisecond
	cmd := NewCommandWithOptions(o)
	cmd.SetArgs(append(args, "--kubeconfig", kubeconfig, "-n", ns))
	err := cmd.ExecuteContext(context.Background())
	return out.String() + errOut.String(), err
}

// nextReady changes the cluster with edit and waits for the Journey's new ready revision.
func (c *revisionsCluster) nextReady(t *testing.T, ns, journey string, edit func()) string {
	t.Helper()
	var cur flowv1alpha1.Journey
	_ = c.env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: journey}, &cur) // not there yet when edit creates it
	old := cur.Status.ReadyRevision
	edit()
	var rev string
	testenv.Eventually(t, 30*time.Second, func() error {
		j := testenv.Get(t, c.env, ns, journey, &flowv1alpha1.Journey{})
		if rev = j.Status.ReadyRevision; rev == old || rev == "" || j.Status.ObservedGeneration != j.Generation {
			return fmt.Errorf("ready revision %q (was %q), issues %v", rev, old, j.Status.Issues)
		}
		return nil
	})
	return rev
}

// update reads obj, changes it with mod and writes it, until it is not a conflict.
func update[T client.Object](t *testing.T, c *revisionsCluster, ns, name string, obj T, mod func(T)) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		cur := testenv.Get(t, c.env, ns, name, obj)
		mod(cur)
		return c.env.Client.Update(context.Background(), cur)
	})
}

// chatJourney creates in ns the journey "chat": its one pathway, "talk", asks the
// openai agent "gpt" on a local chat server that answers every call "Noted.". edit,
// when set, changes the Journey before it is created. It returns the chat server and
// the journey's first ready revision.
func (c *revisionsCluster) chatJourney(t *testing.T, ns string, edit func(*flowv1alpha1.Journey)) (*testenv.ChatServer, string) {
	t.Helper()
	chat := testenv.NewChatServer(t, func(testenv.ChatRequest) testenv.Reply {
		return testenv.Answer(`{"reply": "Noted.", "outcome": "success", "complete": false}`)
	})
	p := &flowv1alpha1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "talk"},
		Spec: flowv1alpha1.PathwaySpec{Agents: []flowv1alpha1.Name{"gpt"}, Signature: flowv1alpha1.Signature{Instructions: "Answer the user."}}}
	j := &flowv1alpha1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"}, Spec: flowv1alpha1.JourneySpec{
		EntryPathway: "talk", Pathways: []flowv1alpha1.PathwayEntry{{Name: "talk", PathwayRef: "talk"}},
		Agents: []flowv1alpha1.AgentSpec{{Name: "gpt", Provider: flowv1alpha1.ProviderOpenAI, Model: "test-model", BaseURL: chat.BaseURL(), MaxRetries: ptr.To[int32](0)}},
	}}
	if edit != nil {
		edit(j)
	}
	return chat, c.nextReady(t, ns, "chat", func() { c.env.Create(t, p, j) })
}

// A Session created with its first message in spec.messages (as kubectl create -f
// does with a manifest that has messages) takes that message in its first step, with
// the step that starts it. It is upgraded by kubectl journey upgrade with no request
// to the chat server, upgraded again to a later revision once kubectl journey has
// dropped the first, processed Upgrade from spec.interventions (a Session is upgraded
// more than once; the command prints the revision it moved to), and forked after its
// first turn with no request for that turn. A Session created afterwards starts on the
// revision it moved to.
func TestUpgradeTwiceAndForkASessionCreatedWithItsMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	t.Parallel()
	c := newRevisionsCluster(t)
	ns := c.env.Namespace(t)
	chat, first := c.chatJourney(t, ns, nil)
	c.env.Create(t, &flowv1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s1"},
		Spec: flowv1alpha1.SessionSpec{JourneyRef: flowv1alpha1.JourneyReference{Name: "chat"}, Messages: []flowv1alpha1.Message{{ID: "m1", Text: "First."}}}})
	between := func(n int32) func(*flowv1alpha1.Session) bool {
		return func(s *flowv1alpha1.Session) bool {
			return s.Status.ProcessedMessages == n && s.Status.Turn == nil && s.Status.Phase == flowv1alpha1.PhaseWaitingForInput
		}
	}
	s := waitLive(t, c.env, ns, "s1", "to answer its first message", between(1))
	if len(s.Status.Journal) != 1 || s.Status.Journal[0].Step != 1 {
		t.Fatalf("the first message was not taken in the first step: journal %+v", s.Status.Journal)
	}
	firstTurn := s.Status.Step
	if out, err := c.run(ns, "say", "s1", "Second."); err != nil {
		t.Fatalf("say: %v\n%s", err, out)
	}
	s = waitLive(t, c.env, ns, "s1", "to answer both messages", between(2))
	if s.Status.JourneyRevision != first || len(s.Status.Journal) != 2 {
		t.Fatalf("revision %s, journal %+v", s.Status.JourneyRevision, s.Status.Journal)
	}

	before := chat.Calls()
	var latest string
	for i, reply := range []string{"Sorry, try again.", "Sorry, say it again."} {
		to := c.nextReady(t, ns, "chat", func() {
			update(t, c, ns, "chat", &flowv1alpha1.Journey{}, func(j *flowv1alpha1.Journey) { j.Spec.FallbackReply = reply })
		})
		out, err := c.run(ns, "upgrade", "s1", "--to-revision", to, "--wait", "--timeout", "30s")
		if err != nil {
			t.Fatalf("upgrade %d to %s: %v\n%s", i+1, to, err, out)
		}
		if !strings.Contains(out, "Revision:") || !strings.Contains(out, to) {
			t.Errorf("upgrade %d printed\n%s\nwant the revision %s", i+1, out, to)
		}
		latest = to
		s = testenv.Get(t, c.env, ns, "s1", &flowv1alpha1.Session{})
		if s.Status.JourneyRevision != to {
			t.Fatalf("upgrade %d: session s1 on %s, want %s", i+1, s.Status.JourneyRevision, to)
		}
		if i == 1 && s.Spec.InterventionsDropped != 1 {
			t.Fatalf("kubectl journey upgrade did not drop the first, processed Upgrade: spec.interventionsDropped %d, interventions %+v",
				s.Spec.InterventionsDropped, s.Spec.Interventions)
		}
	}
	if got := chat.Calls() - before; got != 0 {
		t.Errorf("the upgrades made %d requests to the chat server, want 0", got)
	}

	out, err := c.run(ns, "fork", "s1", "--at-step", fmt.Sprint(firstTurn), "--name", "f1")
	if err != nil || !strings.Contains(out, "session/f1 created") {
		t.Fatalf("fork: %v\n%s", err, out)
	}
	f := waitLive(t, c.env, ns, "f1", "to be rebuilt", between(1))
	if f.Status.Step != firstTurn || f.Status.LastTurn == nil || f.Status.LastTurn.AssistantText != "Noted." || !jsonSame(f.Status.Journal, s.Status.Journal[:1]) {
		t.Errorf("fork at step %d, last turn %+v, journal %+v; want step %d and the source's first answer", f.Status.Step, f.Status.LastTurn, f.Status.Journal, firstTurn)
	}
	if got := chat.Calls() - before; got != 0 {
		t.Errorf("the fork made %d requests to the chat server, want 0", got)
	}

	// A second Session starts on the revision s1 moved to.
	startThenSay(t, c, ns, "s2", "chat", "First.")
	s = waitLive(t, c.env, ns, "s2", "to answer", between(1))
	if s.Status.JourneyRevision != latest || len(s.Status.Journal) != 1 {
		t.Fatalf("s2: revision %s, journal %+v; want %s and one answer", s.Status.JourneyRevision, s.Status.Journal, latest)
	}
}

// kubectl journey upgrade of a Session started, then sent two messages: an upgrade
// to R2, which changes the question its turns asked, is refused, UpgradeBlocked naming
// the step its question changed at. It is upgraded later to a compatible R3 without
// --force, after kubectl journey dropped the refused Upgrade from
// spec.interventions; a fork of it after that upgrade is itself upgraded and forked; a
// forced upgrade after a blocked one moves it, its history saying alice did and giving
// the real divergence. No request reaches the chat server.
func TestUpgradeAfterABlockedOneAndAForkOfAFork(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	t.Parallel()
	c := newRevisionsCluster(t)
	ns := c.env.Namespace(t)
	chat, first := c.chatJourney(t, ns, nil)
	startThenSay(t, c, ns, "s1", "chat", "First.", "Second.")
	between := func(n int32) func(*flowv1alpha1.Session) bool {
		return func(s *flowv1alpha1.Session) bool {
			return s.Status.ProcessedMessages == n && s.Status.Turn == nil && s.Status.Phase == flowv1alpha1.PhaseWaitingForInput
		}
	}
	s := waitLive(t, c.env, ns, "s1", "to answer both messages", between(2))
	if s.Status.JourneyRevision != first || len(s.Status.Journal) != 2 {
		t.Fatalf("revision %s, journal %+v", s.Status.JourneyRevision, s.Status.Journal)
	}
	asked := s.Status.Journal[0].Step
	// revision makes the next ready revision: talk's instructions and the journey's
	// fallback reply.
	revision := func(instructions, fallback string) string {
		return c.nextReady(t, ns, "chat", func() {
			update(t, c, ns, "talk", &flowv1alpha1.Pathway{}, func(p *flowv1alpha1.Pathway) { p.Spec.Signature.Instructions = instructions })
			update(t, c, ns, "chat", &flowv1alpha1.Journey{}, func(j *flowv1alpha1.Journey) { j.Spec.FallbackReply = fallback })
		})
	}
	upgrade := func(session, to string, flags ...string) (*flowv1alpha1.Session, string, error) {
		out, err := c.run(ns, append([]string{"upgrade", session, "--to-revision", to, "--wait", "--timeout", "30s"}, flags...)...)
		return testenv.Get(t, c.env, ns, session, &flowv1alpha1.Session{}), out, err
	}
	before := chat.Calls()

	r2 := revision("Answer in French.", "")
	s, out, err := upgrade("s1", r2)
	if err == nil || !strings.Contains(out, "refused") || !apimeta.IsStatusConditionTrue(s.Status.Conditions, flowv1alpha1.ConditionUpgradeBlocked) {
		t.Fatalf("upgrade to the incompatible %s: %v\n%s\nconditions %+v", r2, err, out, s.Status.Conditions)
	}
	want := fmt.Sprintf("step %d replays differently on revision %s: journal", asked, r2)
	if !strings.Contains(err.Error(), "refused intervention i-1 (Upgrade)") || !strings.Contains(err.Error(), want) {
		t.Errorf("incompatible upgrade: error %v, want a refusal with %q", err, want)
	}
	if cond := apimeta.FindStatusCondition(s.Status.Conditions, flowv1alpha1.ConditionUpgradeBlocked); !strings.Contains(cond.Message, want) || s.Status.JourneyRevision != first {
		t.Errorf("revision %s, UpgradeBlocked %+v; want it blocked on %s with %q", s.Status.JourneyRevision, cond, first, want)
	}
	if rec := s.Status.InterventionRecord("i-1"); rec == nil || rec.Result != flowv1alpha1.InterventionRefused || rec.Step != s.Status.Step {
		t.Fatalf("the refused Upgrade's record %+v (step %d)", rec, s.Status.Step)
	}

	r3 := revision("Answer the user.", "Sorry, try again.")
	s, out, err = upgrade("s1", r3)
	if err != nil || s.Status.JourneyRevision != r3 {
		t.Fatalf("upgrade to the compatible %s after a blocked one: %v\n%s\non %s, UpgradeBlocked %+v", r3, err, out,
			s.Status.JourneyRevision, apimeta.FindStatusCondition(s.Status.Conditions, flowv1alpha1.ConditionUpgradeBlocked))
	}
	if s.Spec.InterventionsDropped != 1 {
		t.Fatalf("kubectl journey upgrade did not drop the refused Upgrade: spec.interventionsDropped %d", s.Spec.InterventionsDropped)
	}
	upgraded := s.Status.Step

	// A fork after the upgrade inherits the records of both Upgrades; it is upgraded,
	// and forked, in turn.
	out, err = c.run(ns, "fork", "s1", "--at-step", fmt.Sprint(upgraded), "--name", "f1")
	if err != nil || !strings.Contains(out, "session/f1 created") {
		t.Fatalf("fork: %v\n%s", err, out)
	}
	f := waitLive(t, c.env, ns, "f1", "to be rebuilt", between(2))
	if f.Status.Step != upgraded || f.Status.ProcessedInterventions != 0 || len(f.Status.Interventions) != 2 {
		t.Fatalf("fork at step %d, processed interventions %d, records %+v; want step %d and the source's two records", f.Status.Step, f.Status.ProcessedInterventions, f.Status.Interventions, upgraded)
	}
	r5 := revision("Answer the user.", "Sorry, say it again.")
	if f, out, err = upgrade("f1", r5); err != nil || f.Status.JourneyRevision != r5 {
		t.Fatalf("upgrade of the fork to %s: %v\n%s\non %s", r5, err, out, f.Status.JourneyRevision)
	}
	out, err = c.run(ns, "fork", "f1", "--at-step", fmt.Sprint(upgraded), "--name", "f2")
	if err != nil || !strings.Contains(out, "session/f2 created") {
		t.Fatalf("fork of the fork: %v\n%s", err, out)
	}
	if f2 := waitLive(t, c.env, ns, "f2", "to be rebuilt", between(2)); f2.Status.Step != upgraded || f2.Status.JourneyRevision != r5 {
		t.Fatalf("fork of the fork at step %d on %s, want step %d on %s", f2.Status.Step, f2.Status.JourneyRevision, upgraded, r5)
	}

	// Blocked again, then forced: the history entry gives the real divergence.
	r4 := revision("Answer in German.", "Sorry, try again.")
	if _, out, err = upgrade("s1", r4); err == nil {
		t.Fatalf("upgrade to the incompatible %s moved the Session\n%s", r4, out)
	}
	if s, out, err = upgrade("s1", r4, "--force", "--reason", "German it is"); err != nil || s.Status.JourneyRevision != r4 {
		t.Fatalf("forced upgrade to %s: %v\n%s", r4, err, out)
	}
	h := s.Status.History[len(s.Status.History)-1]
	if h.Intervention != flowv1alpha1.InterventionUpgrade || !strings.Contains(h.Reason, "(forced; step ") ||
		!strings.Contains(h.Reason, ": journal ") || !strings.Contains(h.Reason, "another question than the Session did") {
		t.Errorf("the forced upgrade's history entry %+v does not give the divergence of the question", h)
	}
	if h.By != "alice" || !strings.Contains(h.Reason, "German it is") {
		t.Errorf("the forced upgrade's history entry %+v; want an Upgrade by alice with her reason", h)
	}
	if got := chat.Calls() - before; got != 0 {
		t.Errorf("the upgrades and forks made %d requests to the chat server, want 0", got)
	}
}

var forkSessionName = regexp.MustCompile(`"session":\{"name":"([^"]+)"`)

// kubectl journey fork: a fork after step 4 of a Session whose turn called the model
// and the clinic's MCP tools is rebuilt with no chat and no tool request for those
// steps (it makes only the requests the source made after step 4), its history and
// journal up to step 4 are the source's, and the source is not written; a fork onto a
// revision whose threshold asks approval for the source's decision says ForkDiverged
// at that step; --agent runs a fork on a revision with another model.
func TestForkCommandOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	t.Parallel()
	c := newRevisionsCluster(t)
	ns := c.env.Namespace(t)
	cl := clinic.New()
	srv := httptest.NewServer(cl.Handler())
	defer srv.Close()
	var mu sync.Mutex
	asked := map[string]int{}
	chat := testenv.NewChatServer(t, func(r testenv.ChatRequest) testenv.Reply {
		if m := forkSessionName.FindStringSubmatch(r.User()); m != nil {
			mu.Lock()
			asked[m[1]]++
			mu.Unlock()
		}
		switch len(r.ToolResults()) {
		case 0:
			return testenv.CallTools(testenv.ToolCall{ID: "call_find", Name: "find_doctors", Arguments: `{"specialty":"cardiology"}`})
		case 1:
			return testenv.CallTools(testenv.ToolCall{ID: "call_book", Name: "book_slot", Arguments: `{"doctor_id":"d-1","slot":"2026-12-01T09:00"}`})
		}
		b, _ := json.Marshal(map[string]any{"reply": "Booked.", "outputs": map[string]any{"booking_id": "b-1"}, "outcome": "success", "complete": true})
		return testenv.Answer(string(b))
	})
	askedBy := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return asked[name]
	}
	book := &flowv1alpha1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "book"}, Spec: flowv1alpha1.PathwaySpec{
		Agents: []flowv1alpha1.Name{"gpt"}, Tools: []flowv1alpha1.ToolName{"find_doctors", "book_slot"},
		Signature: flowv1alpha1.Signature{Instructions: "Find a doctor and book a slot.",
			Outputs: []flowv1alpha1.SignatureField{{Name: "booking_id", Type: "string"}}},
		Accumulate: []string{"booking_id"},
		Transitions: &flowv1alpha1.OutcomeTransitions{OnSuccess: &flowv1alpha1.OutcomeTransition{Decision: &flowv1alpha1.Decision{
			AllowedDestinations:  []flowv1alpha1.Name{"done"},
			Rules:                []flowv1alpha1.DecisionRule{{When: "true", To: "done", Confidence: "0.9"}},
			ConfidenceThresholds: &flowv1alpha1.ConfidenceThresholds{AutoAdvance: "0.8", RequireApproval: "0.5"},
		}}},
	}}
	done := &flowv1alpha1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "done"},
		Spec: flowv1alpha1.PathwaySpec{Builtin: &flowv1alpha1.BuiltinPathway{Reply: "Anything else?"}}}
	j := &flowv1alpha1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "react"}, Spec: flowv1alpha1.JourneySpec{
		EntryPathway: "book",
		Pathways:     []flowv1alpha1.PathwayEntry{{Name: "book", PathwayRef: "book"}, {Name: "done", PathwayRef: "done"}},
		Agents:       []flowv1alpha1.AgentSpec{{Name: "gpt", Provider: flowv1alpha1.ProviderOpenAI, Model: "test-model", BaseURL: chat.BaseURL(), MaxRetries: ptr.To[int32](0)}},
		ToolServers:  []flowv1alpha1.ToolServer{{Name: "clinic", URL: srv.URL, Timeout: &metav1.Duration{Duration: 20 * time.Second}}},
		Tools: []flowv1alpha1.Tool{
			{Name: "find_doctors", Server: "clinic", Approval: flowv1alpha1.ToolApprovalNever},
			{Name: "book_slot", Server: "clinic", Approval: flowv1alpha1.ToolApprovalNever},
		},
	}}
	c.nextReady(t, ns, "react", func() { c.env.Create(t, book, done, j) })
	startThenSay(t, c, ns, "src", "react", "Please book me a cardiologist.")
	atDone := func(s *flowv1alpha1.Session) bool {
		return s.Status.CurrentPathway == "done" && s.Status.Turn == nil && s.Status.Phase == flowv1alpha1.PhaseWaitingForInput
	}
	src := waitLive(t, c.env, ns, "src", "to reach pathway done", atDone)
	var decided int64
	for _, h := range src.Status.History {
		if h.To == "done" {
			decided = h.Step
		}
	}
	const at = 4
	calls := func(upTo bool) (model, tools int) {
		for _, r := range src.Status.Journal {
			if (r.Step <= at) == upTo {
				if r.Kind == flowv1alpha1.EffectCallTool {
					tools++
				} else {
					model++
				}
			}
		}
		return
	}
	if m, tl := calls(true); m < 1 || tl < 1 || decided <= at {
		t.Fatalf("steps up to %d made %d model and %d tool calls, the decision is at step %d; want both kinds before it: journal %+v", at, m, tl, decided, src.Status.Journal)
	}
	laterModel, laterTools := calls(false)
	toolsBefore := cl.Calls("find_doctors") + cl.Calls("book_slot")

	out, err := c.run(ns, "fork", "src", "--at-step", fmt.Sprint(at), "--name", "f1")
	if err != nil || !strings.Contains(out, fmt.Sprintf("session/f1 created: a fork of session/src after step %d, on revision %s", at, src.Status.JourneyRevision)) {
		t.Fatalf("fork: %v\n%s", err, out)
	}
	f := waitLive(t, c.env, ns, "f1", "to reach pathway done", atDone)
	// The script answers by the tool results a request carries: a request of the
	// fork with fewer than the prefix's would ask a question of the prefix again.
	_, prefixTools := calls(true)
	for _, r := range chat.Requests() {
		if m := forkSessionName.FindStringSubmatch(r.User()); m != nil && m[1] == "f1" && len(r.ToolResults()) < prefixTools {
			t.Errorf("the fork asked a question of its first %d steps again (%d tool results, the prefix has %d)", at, len(r.ToolResults()), prefixTools)
		}
	}
	if askedBy("f1") == 0 && laterModel > 0 {
		t.Errorf("the fork made no chat request after step %d", at)
	}
	if got := cl.Calls("find_doctors") + cl.Calls("book_slot") - toolsBefore; got != laterTools {
		t.Errorf("the fork made %d tool calls, want %d (the source's after step %d: none for the steps before)", got, laterTools, at)
	}
	var fh, sh []flowv1alpha1.HistoryEntry
	for _, h := range f.Status.History {
		if h.Step <= at {
			fh = append(fh, h)
		}
	}
	for _, h := range src.Status.History {
		if h.Step <= at {
			sh = append(sh, h)
		}
	}
	if !jsonSame(fh, sh) {
		t.Errorf("the fork's history up to step %d %+v, the source's %+v", at, fh, sh)
	}
	var fj, sj []flowv1alpha1.EffectRecord
	for _, r := range f.Status.Journal {
		if r.Step <= at {
			fj = append(fj, r)
		}
	}
	for _, r := range src.Status.Journal {
		if r.Step <= at {
			sj = append(sj, r)
		}
	}
	if len(fj) == 0 || !jsonSame(fj, sj) {
		t.Errorf("the fork's journal up to step %d %+v, the source's %+v", at, fj, sj)
	}

	// A revision that asks approval at confidence 0.9 diverges at the decision.
	stricter := c.nextReady(t, ns, "react", func() {
		update(t, c, ns, "book", &flowv1alpha1.Pathway{}, func(p *flowv1alpha1.Pathway) {
			p.Spec.Transitions.OnSuccess.Decision.ConfidenceThresholds.AutoAdvance = "0.95"
		})
	})
	out, err = c.run(ns, "fork", "src", "--at-step", fmt.Sprint(decided), "--revision", stricter, "--name", "f2")
	want := fmt.Sprintf("step %d replays differently on revision %s: history[step %d]", decided, stricter, decided)
	if err != nil || !strings.Contains(out, "ForkDiverged: "+want) {
		t.Fatalf("fork --revision: %v\n%s\nwant ForkDiverged: %s", err, out, want)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		f := testenv.Get(t, c.env, ns, "f2", &flowv1alpha1.Session{})
		cond := apimeta.FindStatusCondition(f.Status.Conditions, flowv1alpha1.ConditionForkDiverged)
		if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, fmt.Sprintf("Step %d of the source replays differently on revision %s: history[step %d]", decided, stricter, decided)) {
			return fmt.Errorf("ForkDiverged %+v, want %q", cond, want)
		}
		if f.Status.JourneyRevision != stricter {
			return fmt.Errorf("f2 on %s", f.Status.JourneyRevision)
		}
		return nil
	})

	// --agent makes a revision with the agent's other model, and the fork runs on it.
	out, err = c.run(ns, "fork", "src", "--at-step", fmt.Sprint(at), "--agent", "gpt=other-model", "--name", "f3")
	if err != nil {
		t.Fatalf("fork --agent: %v\n%s", err, out)
	}
	f = waitLive(t, c.env, ns, "f3", "to reach pathway done", atDone)
	if f.Status.JourneyRevision == src.Status.JourneyRevision || f.Status.JourneyRevision == stricter || f.Spec.ForkOf.Revision != f.Status.JourneyRevision {
		t.Errorf("f3 on %s (forkOf %+v); want a revision of its own", f.Status.JourneyRevision, f.Spec.ForkOf)
	}
	var models []string
	for _, r := range chat.Requests() {
		if m := forkSessionName.FindStringSubmatch(r.User()); m != nil && m[1] == "f3" {
			models = append(models, r.Model)
		}
	}
	if len(models) == 0 || models[0] != "other-model" {
		t.Errorf("f3 asked models %v; want requests to other-model", models)
	}

	if s := testenv.Get(t, c.env, ns, "src", &flowv1alpha1.Session{}); s.ResourceVersion != src.ResourceVersion {
		t.Errorf("the source was written: resourceVersion %s, was %s", s.ResourceVersion, src.ResourceVersion)
	}
}

func jsonSame(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// startThenSay creates Session name, waits until it started, then sends it msgs.
// (The Sessions are given their messages once started, as people send them.)
func startThenSay(t *testing.T, c *revisionsCluster, ns, name, journey string, msgs ...string) {
	t.Helper()
	c.env.Create(t, &flowv1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: flowv1alpha1.SessionSpec{JourneyRef: flowv1alpha1.JourneyReference{Name: journey}}})
	waitLive(t, c.env, ns, name, "to start", func(s *flowv1alpha1.Session) bool { return s.Status.Phase == flowv1alpha1.PhaseWaitingForInput })
	for _, m := range msgs {
		if out, err := c.run(ns, "say", name, m); err != nil {
			t.Fatalf("say: %v\n%s", err, out)
		}
	}
}

// userRole creates ClusterRole file of config/rbac (as the chart renders it from the
// same file), binds it to user in namespace ns, and returns a kubeconfig of the user:
// what kubectl journey may do with it is what the role grants.
func (c *revisionsCluster) userRole(t *testing.T, ns, file, user string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(raw, &role); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	c.env.Create(t, &role, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})
	return c.env.Kubeconfig(t, envtest.User{Name: user})
}

// journey-editor may do what kubectl journey upgrade, fork and rollout promote|abort
// do (as a user bound to it alone, authenticated by the API server); journey-viewer is
// refused each of them and changes nothing.
func TestUserRolesForRevisionCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	t.Parallel()
	c := newRevisionsCluster(t)
	ns := c.env.Namespace(t)
	editor := c.userRole(t, ns, "journey_editor_role.yaml", "erin")
	viewer := c.userRole(t, ns, "journey_viewer_role.yaml", "victor")
	_, first := c.chatJourney(t, ns, func(j *flowv1alpha1.Journey) {
		j.Spec.Rollout = &flowv1alpha1.Rollout{Canary: flowv1alpha1.CanaryStrategy{Steps: []flowv1alpha1.CanaryStep{{Weight: 50}}}}
	})
	c.env.Create(t, &flowv1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s1"},
		Spec: flowv1alpha1.SessionSpec{JourneyRef: flowv1alpha1.JourneyReference{Name: "chat"}, Messages: []flowv1alpha1.Message{{ID: "m1", Text: "First."}}}})
	s := waitLive(t, c.env, ns, "s1", "to answer", func(s *flowv1alpha1.Session) bool {
		return s.Status.ProcessedMessages == 1 && s.Status.Turn == nil && s.Status.Phase == flowv1alpha1.PhaseWaitingForInput
	})
	canary := c.nextReady(t, ns, "chat", func() {
		update(t, c, ns, "chat", &flowv1alpha1.Journey{}, func(j *flowv1alpha1.Journey) { j.Spec.FallbackReply = "Sorry, try again." })
	})
	testenv.Eventually(t, 30*time.Second, func() error {
		if j := testenv.Get(t, c.env, ns, "chat", &flowv1alpha1.Journey{}); j.Status.CanaryRevision != canary || j.Status.StableRevision != first {
			return fmt.Errorf("stable %q, canary %q; want %s and %s", j.Status.StableRevision, j.Status.CanaryRevision, first, canary)
		}
		return nil
	})
	if s.Status.JourneyRevision != first {
		t.Fatalf("s1 on %s, want %s", s.Status.JourneyRevision, first)
	}

	for _, args := range [][]string{
		{"upgrade", "s1", "--to-revision", canary},
		{"fork", "s1", "--at-step", fmt.Sprint(s.Status.Step), "--name", "f0"},
		{"rollout", "promote", "chat"},
		{"rollout", "abort", "chat"},
	} {
		out, err := runAs(viewer, ns, args...)
		if err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("journey-viewer: kubectl journey %s: %v\n%s\nwant it forbidden", strings.Join(args, " "), err, out)
		}
	}
	if got := testenv.Get(t, c.env, ns, "s1", &flowv1alpha1.Session{}); got.ResourceVersion != s.ResourceVersion {
		t.Errorf("journey-viewer changed s1: %+v", got.Spec.Interventions)
	}

	if out, err := runAs(editor, ns, "upgrade", "s1", "--to-revision", canary, "--wait", "--timeout", "30s"); err != nil {
		t.Fatalf("journey-editor: upgrade: %v\n%s", err, out)
	}
	if got := testenv.Get(t, c.env, ns, "s1", &flowv1alpha1.Session{}); got.Status.JourneyRevision != canary {
		t.Errorf("s1 on %s after the upgrade, want %s", got.Status.JourneyRevision, canary)
	}
	if out, err := runAs(editor, ns, "fork", "s1", "--at-step", fmt.Sprint(s.Status.Step), "--name", "f1"); err != nil {
		t.Fatalf("journey-editor: fork: %v\n%s", err, out)
	}
	waitLive(t, c.env, ns, "f1", "to be rebuilt", func(f *flowv1alpha1.Session) bool { return f.Status.Step == s.Status.Step })
	if out, err := runAs(editor, ns, "rollout", "abort", "chat"); err != nil || !strings.Contains(out, "abort of canary "+canary+" requested") {
		t.Fatalf("journey-editor: rollout abort: %v\n%s", err, out)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		j := testenv.Get(t, c.env, ns, "chat", &flowv1alpha1.Journey{})
		if r := j.Status.Rollout; r == nil || r.Phase != flowv1alpha1.RolloutAborted {
			return fmt.Errorf("rollout %+v", r)
		}
		return nil
	})
	if out, err := runAs(editor, ns, "rollout", "promote", "chat"); err != nil || !strings.Contains(out, "promote of canary "+canary+" requested") {
		t.Fatalf("journey-editor: rollout promote: %v\n%s", err, out)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if j := testenv.Get(t, c.env, ns, "chat", &flowv1alpha1.Journey{}); j.Status.StableRevision != canary {
			return fmt.Errorf("stable %q, want %s", j.Status.StableRevision, canary)
		}
		return nil
	})
}
