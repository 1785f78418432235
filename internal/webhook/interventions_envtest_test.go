package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/plugin"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// builtinJourney creates, in ns, journey name whose pathways run builtin (no agents).
func builtinJourney(t *testing.T, ns, name, entry string, pathways map[string]flowv1.PathwaySpec, mod func(*flowv1.JourneySpec)) {
	t.Helper()
	ctx := context.Background()
	j := &flowv1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: flowv1.JourneySpec{EntryPathway: flowv1.Name(entry)}}
	for local, spec := range pathways {
		p := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + local}, Spec: spec}
		if err := admin.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		j.Spec.Pathways = append(j.Spec.Pathways, flowv1.PathwayEntry{Name: flowv1.Name(local), PathwayRef: p.Name})
	}
	if mod != nil {
		mod(&j.Spec)
	}
	if err := admin.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ns, name, func(context.Context) error {
		var got flowv1.Journey
		if err := admin.Get(ctx, client.ObjectKeyFromObject(j), &got); err != nil {
			return err
		}
		if got.Status.ReadyRevision == "" {
			return fmt.Errorf("journey %s not ready: %v", name, got.Status.Issues)
		}
		return nil
	})
}

func waitFor(t *testing.T, ns, name string, check func(context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check(context.Background())
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s: %v", ns, name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sendMessages appends messages to the Session as admin.
func sendMessages(t *testing.T, s *flowv1.Session, texts ...string) {
	t.Helper()
	ctx := context.Background()
	var cur flowv1.Session
	if err := admin.Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	for _, text := range texts {
		cur.Spec.Messages = append(cur.Spec.Messages, flowv1.Message{ID: fmt.Sprintf("m%d", cur.Spec.MessageCount()+1), Text: text})
	}
	if err := admin.Patch(ctx, &cur, patch); err != nil {
		t.Fatal(err)
	}
}

// intervene appends an intervention with a JSON patch, as user, the way a client
// that reads nothing back would.
func intervene(user string, s *flowv1.Session, iv string) error {
	var cur flowv1.Session
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(s), &cur); err != nil {
		return err
	}
	op := `{"op":"add","path":"/spec/interventions/-","value":` + iv + `}`
	if len(cur.Spec.Interventions) == 0 {
		op = `{"op":"add","path":"/spec/interventions","value":[` + iv + `]}`
	}
	return users[user].Patch(context.Background(), &cur, client.RawPatch(types.JSONPatchType, []byte("["+op+"]")))
}

// stopped waits until the Session is stopped as want says (a Stalled reason, or
// Failed) and returns it.
func stopped(t *testing.T, s *flowv1.Session, want string) *flowv1.Session {
	t.Helper()
	var got flowv1.Session
	waitFor(t, s.Namespace, s.Name, func(ctx context.Context) error {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(s), &got); err != nil {
			return err
		}
		reason, blocked := engine.Blocked(&got.Status)
		if want == flowv1.ReasonFailed && got.Status.Phase == flowv1.PhaseFailed || blocked && reason == want {
			return nil
		}
		return fmt.Errorf("phase %s, blocked %q", got.Status.Phase, reason)
	})
	return &got
}

// TestResumeAnswersTheNextMessage: the real controllers and webhooks. A Session stuck
// on loop prevention, the retry limit, the idle timeout or a failure is resumed by
// alice with `kubectl journey resume`, the command its Stalled condition names; the
// intervention carries her name, and the Session answers the next message.
//
// It runs alone, before the parallel tests: its idle case stops after one second
// without a message, real time that tests competing for the CPU could use up between
// the resume and the next message.
func TestResumeAnswersTheNextMessage(t *testing.T) {
	ns := testEnv.Namespace(t)
	// alice edits journeys in this namespace too.
	if err := admin.Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "journey-editor"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
	}); err != nil {
		t.Fatal(err)
	}
	testEnv.StartManager(t, testenv.ManagerOptions{
		Namespaces: []string{ns},
		Setup:      func(mgr ctrl.Manager) error { return controller.Setup(mgr, controller.Options{}) },
	})
	aliceConfig := testEnv.Kubeconfig(t, envtest.User{Name: "alice"})
	reply := func(next string, mod func(*flowv1.PathwaySpec)) flowv1.PathwaySpec {
		p := flowv1.PathwaySpec{Next: flowv1.Name(next), Builtin: &flowv1.BuiltinPathway{Reply: "noted"}}
		if mod != nil {
			mod(&p)
		}
		return p
	}
	// ping and pong hand each message to the other: the fourth move closes a second
	// ping>pong cycle within the window, and loop prevention refuses it.
	builtinJourney(t, ns, "pingpong", "ping", map[string]flowv1.PathwaySpec{"ping": reply("pong", nil), "pong": reply("ping", nil)},
		func(j *flowv1.JourneySpec) { j.LoopPrevention = flowv1.LoopPrevention{Window: 4, MaxCycleRepeats: 1} })
	// again retries itself after every message, once at most.
	builtinJourney(t, ns, "again", "again", map[string]flowv1.PathwaySpec{"again": reply("", func(p *flowv1.PathwaySpec) {
		p.Transitions = &flowv1.OutcomeTransitions{OnSuccess: &flowv1.OutcomeTransition{To: "again"}}
		p.Retry = &flowv1.RetryPolicy{Limit: 1}
	})}, nil)
	// chat forgets nothing and stops after a second without a message.
	builtinJourney(t, ns, "idle", "chat", map[string]flowv1.PathwaySpec{"chat": reply("", func(p *flowv1.PathwaySpec) {
		p.Builtin.Complete = "false"
	})}, func(j *flowv1.JourneySpec) { j.Limits.IdleTimeout = &metav1.Duration{Duration: time.Second} })
	// notes keeps every message in a 1 KiB context, and fails past it.
	builtinJourney(t, ns, "notes", "notes", map[string]flowv1.PathwaySpec{"notes": reply("", func(p *flowv1.PathwaySpec) {
		p.Builtin.Complete = "false"
		p.Accumulate = []string{"notes"}
		p.Builtin.Outputs = []flowv1.BuiltinOutput{{Name: "notes", Expression: "[message]"}}
	})}, func(j *flowv1.JourneySpec) {
		j.Limits.MaxContextBytes = 1024
		j.ErrorRecovery = flowv1.ErrorRecoveryFailFast
	})

	for _, c := range []struct {
		journey, block string
		messages       []string
	}{
		{"pingpong", flowv1.ReasonLoopDetected, []string{"one", "two", "three", "four"}},
		{"again", flowv1.ReasonRetryLimit, []string{"one", "two"}},
		{"idle", flowv1.ReasonIdleTimeout, []string{"one"}},
		{"notes", flowv1.ReasonFailed, []string{strings.Repeat("z", 1100)}},
	} {
		t.Run(c.block, func(t *testing.T) {
			s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.journey}, Spec: flowv1.SessionSpec{
				JourneyRef: flowv1.JourneyReference{Name: c.journey}}}
			if err := admin.Create(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			sendMessages(t, s, c.messages...)
			got := stopped(t, s, c.block)
			cond := apimeta.FindStatusCondition(got.Status.Conditions, flowv1.ConditionStalled)
			if cond == nil || !strings.Contains(cond.Message, "kubectl journey resume "+c.journey) {
				t.Errorf("Stalled %+v does not name the command that gets the session going", cond)
			}
			var out, errOut bytes.Buffer
			cmd := plugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			cmd.SetArgs([]string{"resume", s.Name, "-n", ns, "--reason", "checked by hand", "--kubeconfig", aliceConfig})
			if err := cmd.ExecuteContext(context.Background()); err != nil {
				t.Fatalf("kubectl journey resume as alice: %v: %s", err, errOut.String())
			}
			if want := "intervention i-1 (Resume) sent to session/" + s.Name + "\n"; out.String() != want {
				t.Errorf("kubectl journey resume printed %q, want %q", out.String(), want)
			}
			sent := int32(len(c.messages)) + 1
			sendMessages(t, s, "hello again")
			waitFor(t, ns, s.Name, func(ctx context.Context) error {
				var cur flowv1.Session
				if err := admin.Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
					return err
				}
				lt := cur.Status.LastTurn
				if cur.Status.ProcessedMessages != sent || lt == nil || lt.MessageID != fmt.Sprintf("m%d", sent) || lt.FinishReason != flowv1.FinishSuccess {
					return fmt.Errorf("phase %s, processed %d, last turn %+v", cur.Status.Phase, cur.Status.ProcessedMessages, lt)
				}
				if iv := cur.Spec.Interventions[0]; iv.By != "alice" || iv.Action != flowv1.InterventionResume || iv.Reason != "checked by hand" {
					return fmt.Errorf("intervention %+v, want a Resume by alice with her reason", iv)
				}
				if cur.Status.ProcessedInterventions != 1 {
					return fmt.Errorf("processedInterventions %d", cur.Status.ProcessedInterventions)
				}
				return nil
			})
		})
	}
}

// TestInterventionsAdmission: by is stamped with the caller and a forged one is
// refused; what cannot apply and the object tells is refused, naming the field.
func TestInterventionsAdmission(t *testing.T) {
	t.Parallel()
	s := newSession(t, draftDecision())
	if err := intervene("alice", s, `{"id":"i-1","action":"Goto","pathway":"review","reason":"skip ahead"}`); err != nil {
		t.Fatalf("alice going to review: %v", err)
	}
	var got flowv1.Session
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	if by := got.Spec.Interventions[0].By; by != "alice" {
		t.Errorf("by = %q, want alice", by)
	}
	err := intervene("alice", s, `{"id":"i-2","action":"Retry","by":"bob"}`)
	wantDenied(t, err, "spec.interventions[1].by", `intervention forged: by is "bob" but the request was made by "alice"`)

	err = intervene("bob", s, `{"id":"i-2","action":"Goto","pathway":"nowhere"}`)
	wantDenied(t, err, "spec.interventions[1].pathway", `cannot go to pathway "nowhere"`)

	// Resume and Rewind meet the stored status once the Goto is processed.
	got.Status.ProcessedInterventions = 1
	got.Status.Step = 3
	if err := admin.Status().Update(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
	err = intervene("bob", &got, `{"id":"i-2","action":"Resume"}`)
	wantDenied(t, err, "spec.interventions[1].action", "nothing stops session/")
	err = intervene("bob", &got, `{"id":"i-2","action":"Rewind","step":7}`)
	wantDenied(t, err, "spec.interventions[1].step", "step 7 is not before the current step 3")

	got.Status.Phase = flowv1.PhaseCompleted
	if err := admin.Status().Update(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
	err = intervene("bob", &got, `{"id":"i-2","action":"Retry"}`)
	wantDenied(t, err, "spec.interventions[1].action", "is Completed, which is final")
}

// TestElicitationAnswerAdmission: an Answer to a tool call whose server asked the
// user for a form is refused at admission when its fields do not fill in the form,
// the error naming the field, and stamped with who answered when they do.
func TestElicitationAnswerAdmission(t *testing.T) {
	t.Parallel()
	s := newSession(t, nil)
	s.Status.Phase = flowv1.PhaseWaitingForInput
	s.Status.Turn = &flowv1.TurnProgress{Trigger: flowv1.TurnEntry, Stage: flowv1.StageRun, Pathway: "draft",
		ToolCalls: []flowv1.ToolCallProgress{{
			ToolCallRecord: flowv1.ToolCallRecord{ID: "t-4-0", Tool: "register", State: flowv1.ToolCallAwaitingInput},
			IdempotencyKey: "u-4-0", Elicitations: []flowv1.ToolElicitation{{Mode: flowv1.ElicitationForm, Message: "Who is it for?",
				RequestedSchema: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"age":{"type":"integer"}}}`)}}},
		}}}
	if err := admin.Status().Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	err := intervene("alice", s, `{"id":"i-1","action":"Answer","call":"t-4-0","outcome":"Accept","content":{"age":"old"}}`)
	wantDenied(t, err, "spec.interventions[0].content", `field "name" is required by the form`)
	err = intervene("alice", s, `{"id":"i-1","action":"Answer","call":"t-4-0","outcome":"Done","result":"ok"}`)
	wantDenied(t, err, "spec.interventions[0].outcome", "answer it Accept, Decline or Cancel, not Done")
	if err := intervene("alice", s, `{"id":"i-1","action":"Answer","call":"t-4-0","outcome":"Accept","content":{"name":"Ada","age":36}}`); err != nil {
		t.Fatalf("a filled-in form: %v", err)
	}
	var got flowv1.Session
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	if iv := got.Spec.Interventions[0]; iv.By != "alice" || iv.Outcome != flowv1.AnswerAccept {
		t.Errorf("intervention %+v", iv)
	}
}
