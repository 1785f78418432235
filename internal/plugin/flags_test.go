package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func pendingSession() *flowv1alpha1.Session {
	return &flowv1alpha1.Session{
		ObjectMeta: metav1.ObjectMeta{Name: "deploy-42", Namespace: "default"},
		Spec:       flowv1alpha1.SessionSpec{JourneyRef: flowv1alpha1.JourneyReference{Name: "release"}},
		Status: flowv1alpha1.SessionStatus{
			Phase: flowv1alpha1.PhaseAwaitingApproval,
			LastDecision: &flowv1alpha1.DecisionRecord{
				ID: "d-7", From: "test", To: "deploy", Confidence: "0.7",
				AllowedDestinations: []string{"deploy", "rollback"}, State: flowv1alpha1.DecisionPending,
			},
		},
	}
}

// writes counts the calls that would change something on the API server.
type writes struct{ patch, create, update int }

// runWithFake runs the plugin with args against a fake API server holding objs.
func runWithFake(t *testing.T, w *writes, objs []client.Object, args ...string) (string, string, error) {
	t.Helper()
	out, errOut, _, err := runWithFakeInput(t, w, objs, "", args...)
	return out, errOut, err
}

// runWithFakeInput is runWithFake with standard input; it also returns the fake client.
func runWithFakeInput(t *testing.T, w *writes, objs []client.Object, stdin string, args ...string) (string, string, client.Client, error) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(Scheme).WithObjects(objs...).
		WithStatusSubresource(&flowv1alpha1.Session{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
				w.patch++
				return c.Patch(ctx, obj, p, opts...)
			},
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				w.create++
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				w.update++
				return c.Update(ctx, obj, opts...)
			},
		}).Build()
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	o.NewClient = func() (client.WithWatch, error) { return c, nil }
	cmd := NewCommandWithOptions(o)
	cmd.SetArgs(append(args, "-n", "default"))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), c, err
}

func TestSayReadsStandardInput(t *testing.T) {
	var w writes
	s := pendingSession()
	out, _, c, err := runWithFakeInput(t, &w, []client.Object{s}, "I need a cardiologist\n", "say", "deploy-42", "-")
	if err != nil {
		t.Fatal(err)
	}
	if out != "message m-1 sent to session/deploy-42\n" {
		t.Errorf("output %q", out)
	}
	got := &flowv1alpha1.Session{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(s), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Messages) != 1 || got.Spec.Messages[0] != (flowv1alpha1.Message{ID: "m-1", Text: "I need a cardiologist"}) {
		t.Errorf("messages %+v", got.Spec.Messages)
	}
}

func TestApproveRefusesDestinationOutsideAllowedList(t *testing.T) {
	var w writes
	_, _, err := runWithFake(t, &w, []client.Object{pendingSession()}, "approve", "deploy-42", "--to", "production")
	if err == nil {
		t.Fatal("approve --to production succeeded; production is not an allowed destination")
	}
	for _, want := range []string{`"production" is not allowed`, "d-7", "deploy, rollback"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if w != (writes{}) {
		t.Errorf("refused approval still wrote to the API server: %+v", w)
	}
}

func TestApproveFlagValidationNeedsNoCluster(t *testing.T) {
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut})
	o.NewClient = func() (client.WithWatch, error) {
		t.Fatal("the cluster was contacted for an invalid command line")
		return nil, nil
	}
	for _, args := range [][]string{
		{"approve", "s", "--to", "deploy", "--reject"},
		{"approve"},
		{"approve", "s", "--reason", strings.Repeat("x", 1025)},
		{"outcome", "s", "--pathway", "test", "--result", "great"},
		{"outcome", "s", "--pathway", "test", "--result", "success", "--data", "novalue"},
		{"outcome", "s", "--pathway", "test", "--result", "success", "--data", "a=1", "--data", "a=2"},
		{"outcome", "s", "--pathway", "test", "--result", "success", "--iteration", "0"},
		{"outcome", "s", "--result", "success"},
		{"say", "s"},
		{"say", "s", "hello", "--id", "-bad"},
		{"say", "s", "   "},
		{"history", "s", "-o", "json"},
		{"graph", "j", "--format", "jpeg"},
		{"graph"},
		{"watch", "s", "--timeout", "-1s"},
	} {
		cmd := NewCommandWithOptions(o)
		cmd.SetArgs(args)
		if err := cmd.Execute(); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

func TestCheckApproval(t *testing.T) {
	s := pendingSession()
	cases := []struct {
		name, decision, to string
		reject             bool
		wantErr            string
	}{
		{name: "as decided"},
		{name: "allowed override", to: "rollback"},
		{name: "same destination", to: "deploy"},
		{name: "explicit id", decision: "d-7"},
		{name: "reject", reject: true},
		{name: "outside allowed", to: "prod", wantErr: `destination "prod" is not allowed for decision d-7; allowed destinations: deploy, rollback`},
		{name: "other decision", decision: "d-3", wantErr: `decision "d-3" is not pending: session/deploy-42 waits on decision d-7`},
		{name: "reject with destination", to: "rollback", reject: true, wantErr: "--to and --reject cannot be used together"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, err := CheckApproval(s, tc.decision, tc.to, tc.reject)
			if tc.wantErr == "" {
				if err != nil || id != "d-7" {
					t.Fatalf("got %q, %v; want d-7", id, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got error %v; want %q", err, tc.wantErr)
			}
		})
	}

	t.Run("nothing pending", func(t *testing.T) {
		s := pendingSession()
		s.Status.Phase = flowv1alpha1.PhaseWaitingForInput
		s.Status.LastDecision.State = flowv1alpha1.DecisionApplied
		_, err := CheckApproval(s, "", "", false)
		if err == nil || !strings.Contains(err.Error(), "has no decision waiting for approval (phase WaitingForInput); its last decision d-7 is Applied") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("escalated decisions can be approved", func(t *testing.T) {
		s := pendingSession()
		s.Status.LastDecision.State = flowv1alpha1.DecisionEscalated
		if _, err := CheckApproval(s, "", "rollback", false); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("already answered", func(t *testing.T) {
		s := pendingSession()
		s.Spec.Approvals = []flowv1alpha1.Approval{{DecisionID: "d-7", Approve: ptr.To(false), By: "bob"}}
		_, err := CheckApproval(s, "", "", false)
		if err == nil || !strings.Contains(err.Error(), "decision d-7 already has a rejection by bob") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestApproveRecordsApproval(t *testing.T) {
	var w writes
	out, _, err := runWithFake(t, &w, []client.Object{pendingSession()}, "approve", "deploy-42", "--to", "rollback", "--reason", "budget")
	if err != nil {
		t.Fatal(err)
	}
	if out != "decision d-7 approved on session/deploy-42 (destination rollback)\n" {
		t.Errorf("output %q", out)
	}
	if w.patch != 1 {
		t.Errorf("%d patches; want 1", w.patch)
	}
}

func TestParseData(t *testing.T) {
	got, err := ParseData([]string{
		"failures=3", "ratio=0.25", "flaky=true", "none=null", `suites=["api","ui"]`,
		`meta={"a": {"b": 1}}`, "owner=team-a", "url=http://x/?q=1=2", "empty=", `quoted="7"`, " spaced = 12 ",
		"word=yes", "neg=-4",
	})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(got.Raw, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"failures": 3.0, "ratio": 0.25, "flaky": true, "none": nil, "suites": []any{"api", "ui"},
		"meta": map[string]any{"a": map[string]any{"b": 1.0}}, "owner": "team-a", "url": "http://x/?q=1=2",
		"empty": "", "quoted": "7", "spaced": 12.0, "word": "yes", "neg": -4.0,
	}
	gotJSON, _ := json.Marshal(m)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("ParseData:\n got  %s\n want %s", gotJSON, wantJSON)
	}
	if d, err := ParseData(nil); d != nil || err != nil {
		t.Errorf("no --data gave %v, %v; want no data", d, err)
	}
	for _, bad := range [][]string{{"=1"}, {"k"}, {"k=1", "k=2"}} {
		if _, err := ParseData(bad); err == nil {
			t.Errorf("ParseData(%q) accepted", bad)
		}
	}
}

func TestParseResultType(t *testing.T) {
	for in, want := range map[string]flowv1alpha1.ResultType{
		"success": "success", "FAILURE": "failure", "partial-success": "partial_success", "partial_success": "partial_success", "unclear": "unclear",
	} {
		if got, err := ParseResultType(in); err != nil || got != want {
			t.Errorf("ParseResultType(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseResultType("ok"); err == nil || !strings.Contains(err.Error(), "success, failure, partial_success, unclear") {
		t.Errorf("ParseResultType(ok) error %v", err)
	}
}

func TestNextMessageID(t *testing.T) {
	if got := nextMessageID(&flowv1alpha1.SessionSpec{}); got != "m-1" {
		t.Errorf("first id %q", got)
	}
	msgs := []flowv1alpha1.Message{{ID: "m-1"}, {ID: "custom"}}
	if got := nextMessageID(&flowv1alpha1.SessionSpec{Messages: msgs}); got != "m-3" {
		t.Errorf("third id %q", got)
	}
	msgs = []flowv1alpha1.Message{{ID: "a"}, {ID: "m-3"}}
	got := nextMessageID(&flowv1alpha1.SessionSpec{Messages: msgs})
	if !strings.HasPrefix(got, "m-3-") || len(got) != len("m-3-")+5 || validateMessageID(got) != nil {
		t.Errorf("id after a taken m-3 is %q; want m-3-<5 chars>", got)
	}
	// Dropped messages still count: ids go on from the whole conversation.
	if got := nextMessageID(&flowv1alpha1.SessionSpec{Messages: []flowv1alpha1.Message{{ID: "m-7"}}, MessagesDropped: 6}); got != "m-8" {
		t.Errorf("id after 6 dropped and one pending %q", got)
	}
}

// A say drops the processed messages in the patch that appends, never the message of
// a turn in progress nor a pending one.
func TestSayPatchCompacts(t *testing.T) {
	s := &flowv1alpha1.Session{}
	s.ResourceVersion = "7"
	s.Spec.MessagesDropped = 2
	s.Spec.Messages = []flowv1alpha1.Message{{ID: "m-3"}, {ID: "m-4"}, {ID: "m-5"}, {ID: "m-6"}}
	s.Status.ProcessedMessages = 5 // m-5 is being processed
	s.Status.Turn = &flowv1alpha1.TurnProgress{Trigger: flowv1alpha1.TurnMessage, MessageID: "m-5"}
	p, err := compactingPatch(s, "messages", flowv1alpha1.Message{ID: "m-7", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"replace","path":"/metadata/resourceVersion","value":"7"},` +
		`{"op":"add","path":"/spec/messages","value":[{"id":"m-5","text":""},{"id":"m-6","text":""},{"id":"m-7","text":"hi"}]},` +
		`{"op":"add","path":"/spec/messagesDropped","value":4}]`
	if string(p) != want {
		t.Errorf("patch\n%s\nwant\n%s", p, want)
	}
	s.Status.Turn = nil
	s.Status.ProcessedMessages = 2
	if p, _ = compactingPatch(s, "messages", flowv1alpha1.Message{ID: "m-7", Text: "hi"}); strings.Contains(string(p), "messagesDropped") {
		t.Errorf("nothing to drop, yet %s", p)
	}
}

func TestAppendPatch(t *testing.T) {
	p, err := appendPatch("42", "messages", 0, flowv1alpha1.Message{ID: "m-1", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"replace","path":"/metadata/resourceVersion","value":"42"},{"op":"add","path":"/spec/messages","value":[{"id":"m-1","text":"hi"}]}]`
	if string(p) != want {
		t.Errorf("first append:\n got  %s\n want %s", p, want)
	}
	p, _ = appendPatch("43", "outcomes", 2, map[string]int{"iteration": 1})
	want = `[{"op":"replace","path":"/metadata/resourceVersion","value":"43"},{"op":"add","path":"/spec/outcomes/-","value":{"iteration":1}}]`
	if string(p) != want {
		t.Errorf("later append:\n got  %s\n want %s", p, want)
	}
}

func TestPrintHistory(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC))
	h := []flowv1alpha1.HistoryEntry{
		{Time: at, Step: 1, To: "intake", Action: "Advance", Source: "Next", Iteration: 1, Transition: "entry"},
		{Time: metav1.NewTime(at.Add(90 * time.Second)), Step: 4, From: "booking", To: "escalation", Action: "Advance", Source: "Agent",
			Transition: "onPartialSuccess", Confidence: "0.82", Iteration: 1, MessageID: "m-3", Reason: "3 failures,\nretry is unlikely to help"},
	}
	var b bytes.Buffer
	if err := PrintHistory(&b, h, false); err != nil {
		t.Fatal(err)
	}
	want := `TIME                   FROM      TO           ACTION    SOURCE   CONFIDENCE   REASON
2026-11-22T09:30:00Z   <none>    intake       Advance   Next     <none>       <none>
2026-11-22T09:31:30Z   booking   escalation   Advance   Agent    0.82         3 failures, retry is unlikely to help
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := PrintHistory(&b, h, true); err != nil {
		t.Fatal(err)
	}
	want = `TIME                   FROM      TO           ACTION    SOURCE   CONFIDENCE   STEP   ITERATION   TRANSITION         MESSAGE   REASON
2026-11-22T09:30:00Z   <none>    intake       Advance   Next     <none>       1      1           entry              <none>    <none>
2026-11-22T09:31:30Z   booking   escalation   Advance   Agent    0.82         4      1           onPartialSuccess   m-3       3 failures, retry is unlikely to help
`
	if b.String() != want {
		t.Errorf("wide table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestReplyReadyAndPrintReply(t *testing.T) {
	s := &flowv1alpha1.Session{
		ObjectMeta: metav1.ObjectMeta{Name: "p-1", Generation: 3},
		Spec:       flowv1alpha1.SessionSpec{Messages: []flowv1alpha1.Message{{ID: "m-1", Text: "hi"}, {ID: "m-2", Text: "what is a referral"}}},
		Status: flowv1alpha1.SessionStatus{
			Phase: flowv1alpha1.PhaseRunning, CurrentPathway: "faq", ProcessedMessages: 1, ObservedGeneration: 3,
		},
	}
	if replyReady(s, "m-2", 3) {
		t.Fatal("ready before the message was processed")
	}
	s.Status.ProcessedMessages = 2
	if replyReady(s, "m-2", 3) {
		t.Fatal("ready while still Running")
	}
	s.Status.Phase = flowv1alpha1.PhaseWaitingForInput
	s.Status.LastTurn = &flowv1alpha1.TurnOutcome{MessageID: "m-2", Pathway: "faq", AssistantText: "A referral is\na letter."}
	s.Status.History = []flowv1alpha1.HistoryEntry{
		{From: "intake", To: "intake", MessageID: "m-1", Action: "Retry"},
		{From: "intake", To: "faq", MessageID: "m-2", Transition: "faq-detour", Action: "Advance", Source: "Transition", Confidence: "1"},
	}
	if !replyReady(s, "m-2", 3) {
		t.Fatal("not ready after processing")
	}
	var b bytes.Buffer
	if err := printReply(&b, s, "m-2"); err != nil {
		t.Fatal(err)
	}
	want := `Reply:      A referral is
            a letter.
Pathway:    faq
Transition: intake -> faq (via faq-detour, Advance, by Transition, confidence 1)
Phase:      WaitingForInput
`
	if b.String() != want {
		t.Errorf("reply:\n%s\nwant:\n%s", b.String(), want)
	}

	// A stalled Session ends the wait with an error naming the reason.
	s.Status.Phase = flowv1alpha1.PhaseRunning
	s.Status.ProcessedMessages = 1
	s.Status.Conditions = []metav1.Condition{{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "TurnLimit", Message: "maxTurns 1 reached"}}
	if !replyReady(s, "m-2", 3) {
		t.Fatal("a stalled Session keeps the wait going")
	}
	if replyReady(s, "m-2", 4) {
		t.Fatal("a stall the controller reported before seeing the message ends the wait")
	}
	b.Reset()
	err := printReply(&b, s, "m-2")
	if err == nil || !strings.Contains(err.Error(), "stalled (TurnLimit)") || !strings.Contains(b.String(), "Stalled:    TurnLimit: maxTurns 1 reached") {
		t.Errorf("stalled: err %v, output:\n%s", err, b.String())
	}
}

// A message that moves the Session into a pathway that runs on entry gets that turn's
// reply: it is what the person sees next.
func TestPrintReplyAfterEntryTurn(t *testing.T) {
	s := &flowv1alpha1.Session{}
	s.Status.Phase = flowv1alpha1.PhaseCompleted
	s.Status.CurrentPathway = "confirmation"
	s.Status.LastTurn = &flowv1alpha1.TurnOutcome{Trigger: flowv1alpha1.TurnEntry, Pathway: "confirmation", AssistantText: "You're booked."}
	s.Status.History = []flowv1alpha1.HistoryEntry{{From: "booking", To: "confirmation", MessageID: "m-5", Transition: "next", Action: "Advance", Source: "Next", Confidence: "1"}}
	var b bytes.Buffer
	if err := printReply(&b, s, "m-5"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "Reply:      You're booked.\n") {
		t.Errorf("reply:\n%s", b.String())
	}
	// Another message's entry turn is not this message's reply.
	b.Reset()
	if err := printReply(&b, s, "m-4"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "Reply:      <none>\n") {
		t.Errorf("reply for an unrelated message:\n%s", b.String())
	}
}

// A message that went through several pathways prints every reply of its turn, in
// order, with every transition it caused.
func TestPrintReplyOfAMultiPathwayTurn(t *testing.T) {
	s := &flowv1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Name: "help-1"}}
	s.Spec.Messages = []flowv1alpha1.Message{{ID: "m-1", Text: "my printer is broken"}}
	s.Status.Phase = flowv1alpha1.PhaseWaitingForInput
	s.Status.CurrentPathway = "resolved"
	s.Status.LastTurn = &flowv1alpha1.TurnOutcome{Trigger: flowv1alpha1.TurnMessage, MessageID: "m-1", Pathway: "resolved", FinishReason: flowv1alpha1.FinishSuccess,
		AssistantText: "Fixed.", Replies: []flowv1alpha1.TurnReply{{Pathway: "greet", Text: "Hi."}, {Pathway: "diagnose", Text: "Looking into it."}, {Pathway: "resolved", Text: "Fixed."}}}
	s.Status.History = []flowv1alpha1.HistoryEntry{
		{From: "greet", To: "diagnose", MessageID: "m-1", Transition: "next", Action: "Advance", Source: "Next", Confidence: "1"},
		{From: "diagnose", To: "resolved", MessageID: "m-1", Transition: "next", Action: "Advance", Source: "Next", Confidence: "1"},
	}
	var b bytes.Buffer
	if err := printReply(&b, s, "m-1"); err != nil {
		t.Fatal(err)
	}
	want := `Reply:      [greet] Hi.
Reply:      [diagnose] Looking into it.
Reply:      [resolved] Fixed.
Pathway:    resolved
Transition: greet -> diagnose (via next, Advance, by Next, confidence 1)
Transition: diagnose -> resolved (via next, Advance, by Next, confidence 1)
Phase:      WaitingForInput
`
	if b.String() != want {
		t.Errorf("reply:\n%s\nwant:\n%s", b.String(), want)
	}
}

// A failed turn prints its fallback reply and its failure, and exits 2: the Session
// goes on, but the turn did not do what was asked.
func TestPrintReplyOfAFailedTurn(t *testing.T) {
	s := &flowv1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Name: "help-1"}}
	s.Spec.Messages = []flowv1alpha1.Message{{ID: "m-1", Text: "boom"}}
	s.Status.Phase = flowv1alpha1.PhaseWaitingForInput
	s.Status.CurrentPathway = "chat"
	s.Status.LastTurn = &flowv1alpha1.TurnOutcome{Trigger: flowv1alpha1.TurnMessage, MessageID: "m-1", Pathway: "chat", FinishReason: flowv1alpha1.FinishError,
		AssistantText: "Sorry.", Replies: []flowv1alpha1.TurnReply{{Pathway: "chat", Text: "Sorry.", Fallback: true}},
		Failures: []flowv1alpha1.Failure{{Source: flowv1alpha1.FailureSystem, Kind: flowv1alpha1.FailureValidation, Component: "chat", Message: "output x: no such key"}}}
	s.Status.Conditions = []metav1.Condition{{Type: flowv1alpha1.ConditionTurnFailed, Status: metav1.ConditionTrue, Reason: "SystemValidation"}}
	var b bytes.Buffer
	err := printReply(&b, s, "m-1")
	want := `Reply:      Sorry.
Pathway:    chat
Failure:    System/Validation in chat: output x: no such key
Phase:      WaitingForInput
`
	if b.String() != want {
		t.Errorf("reply:\n%s\nwant:\n%s", b.String(), want)
	}
	if ExitCode(err) != ExitTurnFailed || !strings.Contains(err.Error(), "the turn of message m-1 in session/help-1 failed (SystemValidation)") {
		t.Errorf("err %v, exit code %d", err, ExitCode(err))
	}
	// A good turn exits 0; any other error 1.
	if ExitCode(nil) != 0 || ExitCode(errors.New("x")) != 1 {
		t.Error("exit codes of nil and a plain error")
	}
}
