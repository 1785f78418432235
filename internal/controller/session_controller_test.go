package controller

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// withOpenAITriage loads the healthcare sample with its intent classifier pointed at a
// local chat completions server, the API key in a Secret.
func withOpenAITriage(t *testing.T, ns string, cs *testenv.ChatServer) *flowv1.Session {
	t.Helper()
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm"},
		StringData: map[string]string{"apiKey": "sk-test-123"},
	})
	// The Journey is created with the openai agent, so every Session starts on it.
	s, _ := loadSample(t, ns, "healthcare-referral.yaml", func(o client.Object) {
		j, ok := o.(*flowv1.Journey)
		if !ok {
			return
		}
		for i := range j.Spec.Agents {
			if j.Spec.Agents[i].Name == "triage" {
				j.Spec.Agents[i] = flowv1.AgentSpec{
					Name: "triage", Provider: flowv1.ProviderOpenAI, Model: "test-model", BaseURL: cs.URL + "/v1",
					APIKeySecretRef: &flowv1.SecretKeyRef{Name: "llm", Key: "apiKey"},
					Pricing:         &flowv1.Pricing{PromptPerMTok: "0.15", CompletionPerMTok: "0.60"},
				}
			}
		}
	})
	return s
}

// faqClassifier routes "wondering" to the FAQ detour, everything else to no intent.
func faqClassifier(kind, user string) string {
	if kind != "intent" {
		return `{}`
	}
	if strings.Contains(user, "wondering") {
		return `{"intent":"faq-detour","confidence":0.9,"reasoning":"asks about the process"}`
	}
	return `{"intent":"none","confidence":0.95,"reasoning":"no listed intent"}`
}

func TestHealthcareWithOpenAIClassifier(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cs := newChatServer(t, faqClassifier)
	startManager(t, ns, Options{})
	s := withOpenAITriage(t, ns, cs)
	create(t, s)

	send(t, ns, s.Name, "m1", "Hi, I need to book an appointment with a cardiologist. Here's my referral.")
	got := settled(t, ns, s.Name, func(s *flowv1.Session) error {
		if s.Status.ProcessedMessages < 1 {
			return fmt.Errorf("processed %d", s.Status.ProcessedMessages)
		}
		return nil
	})
	if got.Status.CurrentPathway != "booking" {
		t.Fatalf("after m1: pathway %s, want booking (history %s)", got.Status.CurrentPathway, path(got))
	}

	// An ambiguous message matches no pattern: the LLM classifier routes it to the FAQ.
	send(t, ns, s.Name, "m2", "I'm wondering about the process")
	got = settled(t, ns, s.Name, func(s *flowv1.Session) error {
		if s.Status.ProcessedMessages < 2 {
			return fmt.Errorf("processed %d", s.Status.ProcessedMessages)
		}
		return nil
	})
	var viaLLM bool
	for _, h := range got.Status.History {
		viaLLM = viaLLM || (h.MessageID == "m2" && h.Transition == "faq-detour" && h.To == "faq")
	}
	if !viaLLM || got.Status.CurrentPathway != "booking" {
		t.Fatalf("after m2: pathway %s, history %+v: want the faq detour via the classifier and the return", got.Status.CurrentPathway, got.Status.History)
	}
	if cs.Calls() < 2 {
		t.Errorf("the classifier was called %d times, want at least 2", cs.Calls())
	}
	for _, r := range cs.Requests() {
		h := r.Bearer()
		if h != "Bearer sk-test-123" {
			t.Errorf("Authorization %q: want the key from the Secret", h)
		}
	}
	if got.Status.Usage.PromptTokens < 240 || got.Status.Usage.CostUSD == "" {
		t.Errorf("usage %+v: want the tokens of two calls and a cost", got.Status.Usage)
	}
	if c := apimeta.FindStatusCondition(got.Status.Conditions, flowv1.ConditionAgentAvailable); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("AgentAvailable = %+v", c)
	}
	// Every answer is journaled, in order, for record and replay.
	var intents []string
	for _, e := range got.Status.Journal {
		if e.Kind != flowv1.EffectClassifyIntent {
			t.Errorf("journal entry %+v: want ClassifyIntent", e)
		}
		intents = append(intents, e.Result.Intent)
	}
	if fmt.Sprint(intents) != "[none faq-detour]" {
		t.Errorf("journaled intents %v, want [none faq-detour]", intents)
	}
}

func TestCrashWhileAgentCallIsBlocked(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cs := newChatServer(t, faqClassifier)
	cs.Script(testenv.Reply{Hang: true}) // the first call never answers
	first := startManager(t, ns, Options{})
	s := withOpenAITriage(t, ns, cs)
	create(t, s)
	send(t, ns, s.Name, "m1", "Hi, I need to book an appointment with a cardiologist. Here's my referral.")
	eventually(t, 20*time.Second, func() error {
		if cs.Calls() < 1 {
			return fmt.Errorf("no call yet")
		}
		return nil
	})
	if err := first.Stop(); err != nil { // the manager dies with the call in flight
		t.Errorf("manager: %v", err)
	}

	if s := get(t, ns, s.Name, &flowv1.Session{}); s.Status.ProcessedMessages != 0 || s.Status.PendingEffect != nil {
		t.Fatalf("before the restart: processed %d, journal %+v; want nothing applied", s.Status.ProcessedMessages, s.Status.PendingEffect)
	}

	startManager(t, ns, Options{})
	got := settled(t, ns, s.Name, func(s *flowv1.Session) error {
		if s.Status.ProcessedMessages < 1 {
			return fmt.Errorf("processed %d", s.Status.ProcessedMessages)
		}
		return nil
	})
	var moves int
	for _, h := range got.Status.History {
		if h.From == "intake" && h.To == "booking" {
			moves++
		}
	}
	if moves != 1 || got.Status.CurrentPathway != "booking" || got.Status.Turns != 1 {
		t.Errorf("intake>booking applied %d times, pathway %s, turns %d: want once, booking, 1", moves, got.Status.CurrentPathway, got.Status.Turns)
	}
	if n := cs.Calls(); n > 2 {
		t.Errorf("agent called %d times, want at most 2", n)
	}
}

// echoJourney has one conversational pathway that never completes and records, in
// context, how many messages it saw and in what order.
func echoJourney(t *testing.T, ns, reply string) {
	t.Helper()
	create(t, &flowv1.Pathway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"},
		Spec: flowv1.PathwaySpec{
			Accumulate: []string{"count", "log"},
			Builtin: &flowv1.BuiltinPathway{
				Reply: reply,
				Outputs: []flowv1.BuiltinOutput{
					{Name: "count", Expression: "(has(context.count) ? context.count : 0) + 1"},
					{Name: "log", Expression: "(has(context.log) ? context.log : '') + message + ','"},
				},
				Complete: "false",
			},
		},
	})
	create(t, journeyOf(ns, "echo", &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Name: "echo"}}))
	waitJourneyReady(t, ns, "echo")
}

func TestMessagesInOrderOnceUnderConflicts(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	echoJourney(t, ns, "got {{ .message }}")
	create(t, sessionOf(ns, "chatty", "echo"))

	// A concurrent writer keeps changing the object, so status patches built on a read
	// a moment old conflict.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var writes atomic.Int64
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for i := 0; ctx.Err() == nil; i++ {
			s := &flowv1.Session{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "chatty"}, s); err == nil {
				patch := client.MergeFrom(s.DeepCopy())
				s.Labels = map[string]string{"noise": fmt.Sprint(i)}
				if k8sClient.Patch(ctx, s, patch) == nil {
					writes.Add(1)
				}
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()

	var want strings.Builder
	for i := 1; i <= 20; i++ {
		send(t, ns, "chatty", fmt.Sprintf("m%d", i), fmt.Sprintf("m%d", i))
		fmt.Fprintf(&want, "m%d,", i)
	}
	got := settled(t, ns, "chatty", func(s *flowv1.Session) error {
		if s.Status.ProcessedMessages < 20 {
			return fmt.Errorf("processed %d", s.Status.ProcessedMessages)
		}
		return nil
	})
	cancel()
	<-writerDone
	c := contextOf(t, got)
	if c["log"] != want.String() || c["count"] != float64(20) {
		t.Errorf("log %v count %v: want each of 20 messages once, in order (%s)", c["log"], c["count"], want.String())
	}
	if got.Status.LastTurn.MessageID != "m20" || got.Status.Turns != 20 {
		t.Errorf("last turn %s, turns %d", got.Status.LastTurn.MessageID, got.Status.Turns)
	}
	t.Logf("concurrent writes: %d", writes.Load())
}

func TestEditedJourneyKeepsRunningSessionsOnTheirRevision(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	echoJourney(t, ns, "v1 {{ .message }}")
	create(t, sessionOf(ns, "old", "echo"))
	send(t, ns, "old", "m1", "hello")
	reply := func(name string, n int32) string {
		s := settled(t, ns, name, func(s *flowv1.Session) error {
			if s.Status.ProcessedMessages < n {
				return fmt.Errorf("processed %d", s.Status.ProcessedMessages)
			}
			return nil
		})
		return s.Status.LastTurn.AssistantText
	}
	if r := reply("old", 1); r != "v1 hello" {
		t.Fatalf("reply %q", r)
	}
	pinned := get(t, ns, "old", &flowv1.Session{}).Status.JourneyRevision

	p := get(t, ns, "echo", &flowv1.Pathway{})
	p.Spec.Builtin.Reply = "v2 {{ .message }}"
	if err := k8sClient.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() error {
		if get(t, ns, "echo", &flowv1.Journey{}).Status.ReadyRevision == pinned {
			return fmt.Errorf("no new revision")
		}
		return nil
	})

	send(t, ns, "old", "m2", "again")
	if r := reply("old", 2); r != "v1 again" {
		t.Errorf("running Session replied %q after the edit, want the pinned revision's v1", r)
	}
	create(t, sessionOf(ns, "new", "echo"))
	send(t, ns, "new", "m1", "hello")
	if r := reply("new", 1); r != "v2 hello" {
		t.Errorf("new Session replied %q, want v2", r)
	}
}

func TestSuspendCancelAndTTL(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	echoJourney(t, ns, "ok")
	create(t, sessionOf(ns, "s", "echo"))
	send(t, ns, "s", "m1", "one")
	settled(t, ns, "s", func(s *flowv1.Session) error {
		if s.Status.ProcessedMessages < 1 {
			return fmt.Errorf("processed %d", s.Status.ProcessedMessages)
		}
		return nil
	})

	update := func(fn func(*flowv1.Session)) {
		s := get(t, ns, "s", &flowv1.Session{})
		patch := client.MergeFrom(s.DeepCopy())
		fn(s)
		if err := k8sClient.Patch(context.Background(), s, patch); err != nil {
			t.Fatal(err)
		}
	}
	update(func(s *flowv1.Session) { s.Spec.Suspend = true })
	send(t, ns, "s", "m2", "two")
	eventually(t, 10*time.Second, func() error {
		s := get(t, ns, "s", &flowv1.Session{})
		if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionReady); c == nil || c.Reason != flowv1.ReasonSuspended {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	if s := get(t, ns, "s", &flowv1.Session{}); s.Status.ProcessedMessages != 1 {
		t.Fatalf("a suspended Session processed message %d", s.Status.ProcessedMessages)
	}
	update(func(s *flowv1.Session) { s.Spec.Suspend = false })
	settled(t, ns, "s", func(s *flowv1.Session) error {
		if s.Status.ProcessedMessages < 2 {
			return fmt.Errorf("processed %d", s.Status.ProcessedMessages)
		}
		return nil
	})

	// Long enough for the test to see the cancelled Session before it is deleted,
	// also on a loaded machine.
	ttl := int32(5)
	update(func(s *flowv1.Session) { s.Spec.Cancel = true; s.Spec.TTLSecondsAfterFinished = &ttl })
	got := settled(t, ns, "s", func(s *flowv1.Session) error {
		if s.Status.Phase != flowv1.PhaseCancelled {
			return fmt.Errorf("phase %s", s.Status.Phase)
		}
		return nil
	})
	if got.Status.CompletionTime == nil {
		t.Error("no completionTime on a cancelled Session")
	}
	eventually(t, 30*time.Second, func() error {
		err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "s"}, &flowv1.Session{})
		if err == nil {
			return fmt.Errorf("still there")
		}
		return client.IgnoreNotFound(err)
	})
}

// waitingHealthcare runs the healthcare sample with its Journey's limits changed by
// limits, sends its first message, and returns the Session once it waits for the next
// one, not blocked.
func waitingHealthcare(t *testing.T, limits func(*flowv1.Limits)) (string, *flowv1.Session) {
	t.Helper()
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	s, _ := loadSample(t, ns, "healthcare-referral.yaml", func(o client.Object) {
		if j, ok := o.(*flowv1.Journey); ok {
			limits(&j.Spec.Limits)
		}
	})
	create(t, s)
	send(t, ns, s.Name, "m1", "Hi, I need to book an appointment with a cardiologist. Here's my referral.")
	waiting := settled(t, ns, s.Name, func(s *flowv1.Session) error {
		if s.Status.Phase != flowv1.PhaseWaitingForInput || s.Status.ProcessedMessages != 1 {
			return fmt.Errorf("phase %s, processed %d", s.Status.Phase, s.Status.ProcessedMessages)
		}
		return nil
	})
	if reason, blocked := engine.Blocked(&waiting.Status); blocked {
		t.Fatalf("blocked before the deadline: %s", reason)
	}
	return ns, waiting
}

// A Session waiting for input times out at its deadline with no edit and no restart:
// the reconcile that leaves it waiting is requeued at limits.sessionTimeout.
func TestSessionTimesOutWhileWaiting(t *testing.T) {
	t.Parallel()
	ns, waiting := waitingHealthcare(t, func(l *flowv1.Limits) {
		l.SessionTimeout = &metav1.Duration{Duration: 3 * time.Second}
	})

	got := settled(t, ns, waiting.Name, func(s *flowv1.Session) error {
		if reason, blocked := engine.Blocked(&s.Status); !blocked || reason != flowv1.ReasonSessionTimeout {
			return fmt.Errorf("not timed out yet (blocked %v, %q)", blocked, reason)
		}
		return nil
	})
	if got.Generation != waiting.Generation {
		t.Errorf("the Session was edited: generation %d, then %d", waiting.Generation, got.Generation)
	}
}
