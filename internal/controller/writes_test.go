package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// Writes per turn, counted from a watch on the Session as the API server stores them:
// a turn with no model call is one status write; a turn with k model calls is k
// status writes, whatever its tool calls.

// writeLog watches one Session and sorts what the API server stored: spec changes
// (a user's message) and status writes.
type writeLog struct {
	mu     sync.Mutex
	events []bool // true: a spec change; false: a status write
	seen   *flowv1.Session
}

func watchWrites(t *testing.T, ns, name string) *writeLog {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := wc.Watch(ctx, &flowv1.SessionList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	l := &writeLog{}
	go func() {
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*flowv1.Session)
			if !ok || s.Name != name || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			l.mu.Lock()
			if prev := l.seen; prev != nil {
				l.events = append(l.events, s.Generation != prev.Generation)
			}
			l.seen = s
			l.mu.Unlock()
		}
	}()
	return l
}

// statusWritesPerTurn are the status writes between each spec change and the next,
// from the first spec change on: the writes each message caused.
func (l *writeLog) statusWritesPerTurn() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var turns []int
	for _, spec := range l.events {
		switch {
		case spec:
			turns = append(turns, 0)
		case len(turns) > 0:
			turns[len(turns)-1]++
		}
	}
	return turns
}

// converse sends n messages to Session name, each once the previous one's turn is
// over, then one more whose writes are not counted (it closes the count of the last
// turn), and returns the status writes of each of the n turns.
func converse(t *testing.T, ns, name string, n int, log *writeLog) []int {
	t.Helper()
	for i := 1; i <= n+1; i++ {
		send(t, ns, name, fmt.Sprintf("m%d", i), fmt.Sprintf("message %d", i))
		if i == n+1 {
			break
		}
		eventually(t, 60*time.Second, func() error {
			s := get(t, ns, name, &flowv1.Session{})
			if s.Status.ProcessedMessages < int32(i) || s.Status.Turn != nil || s.Status.Phase == flowv1.PhaseRunning {
				return fmt.Errorf("turn %d: processed %d, phase %s", i, s.Status.ProcessedMessages, s.Status.Phase)
			}
			return nil
		})
	}
	turns := log.statusWritesPerTurn()
	if len(turns) < n {
		t.Fatalf("the watch saw %d of %d messages: %v", len(turns), n, turns)
	}
	return turns[:n]
}

// chatAnswer is a pathway turn's structured answer that keeps the pathway waiting
// for the next message, or completes it with success.
func chatAnswer(reply string, complete bool) testenv.Reply {
	b, _ := json.Marshal(map[string]any{"reply": reply, "outcome": "success", "complete": complete})
	return testenv.Answer(string(b))
}

func TestWritesPerTurn(t *testing.T) {
	t.Parallel()
	const turns = 10
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	model := testenv.NewChatServer(t, func(r testenv.ChatRequest) testenv.Reply {
		last := r.Messages[len(r.Messages)-1].Role
		switch {
		case r.Schema == "decision":
			to := "ask"
			if sessionPathway(r) == "ask" {
				to = "answer"
			}
			b, _ := json.Marshal(map[string]any{"destination": to, "confidence": 0.95, "reasoning": "the next step"})
			return testenv.Answer(string(b))
		case len(r.Functions()) > 0 && last != "tool":
			return testenv.CallTools(testenv.ToolCall{ID: fmt.Sprintf("call_%d", r.N), Name: "find_doctors", Arguments: `{"specialty":"cardiology"}`})
		case len(r.Functions()) > 0:
			return chatAnswer("found them", false)
		case sessionPathway(r) == "llm-chat":
			return chatAnswer("hello", false)
		}
		return chatAnswer("done", true)
	})
	srv := httptest.NewServer(clinic.New().Handler())
	t.Cleanup(srv.Close)

	gpt := flowv1.AgentSpec{Name: "gpt", Provider: flowv1.ProviderOpenAI, Model: "test-model", BaseURL: model.BaseURL(), MaxRetries: ptr.To[int32](0)}
	lenient := flowv1.LoopPrevention{Window: 100, MaxCycleRepeats: 50}

	// builtin: a chat whose builtin agent replies to every message.
	chat := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"},
		Spec: flowv1.PathwaySpec{Builtin: &flowv1.BuiltinPathway{Reply: "ok", Complete: "false"}}}
	create(t, chat, journeyOf(ns, "builtin", chat))

	// llm: the same chat answered by a model.
	llmChat := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm-chat"},
		Spec: flowv1.PathwaySpec{Agents: []flowv1.Name{"gpt"}, Signature: flowv1.Signature{Instructions: "Chat."}}}
	llm := journeyOf(ns, "llm", llmChat)
	llm.Spec.Agents = []flowv1.AgentSpec{gpt}
	create(t, llmChat, llm)

	// decide: each message's pathway answers, then a decision agent picks the next one.
	decided := func(name, other string) *flowv1.Pathway {
		return &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: flowv1.PathwaySpec{
			Agents: []flowv1.Name{"gpt"}, Signature: flowv1.Signature{Instructions: "Answer."},
			Transitions: &flowv1.OutcomeTransitions{OnSuccess: &flowv1.OutcomeTransition{Decision: &flowv1.Decision{
				Agent: "gpt", AllowedDestinations: []flowv1.Name{flowv1.Name(other)}}}},
		}}
	}
	ask, answer := decided("ask", "answer"), decided("answer", "ask")
	decide := journeyOf(ns, "decide", ask, answer)
	decide.Spec.Agents = []flowv1.AgentSpec{gpt}
	decide.Spec.LoopPrevention = lenient
	create(t, ask, answer, decide)

	// react: each message's turn makes one MCP tool call, so asks the model twice.
	rj, rp := reactJourney(ns, srv.URL, model.BaseURL(), func(j *flowv1.Journey, p *flowv1.Pathway) {
		j.Name = "react-journey"
		j.Spec.Tools = j.Spec.Tools[:1]
		p.Spec.Tools = p.Spec.Tools[:1]
	})
	create(t, rp, rj)

	for _, tc := range []struct {
		journey string
		want    int
	}{
		{"builtin", 1},
		{"llm", 1},
		{"decide", 2},
		{"react-journey", 2},
	} {
		t.Run(tc.journey, func(t *testing.T) {
			waitJourneyReady(t, ns, tc.journey)
			name := tc.journey
			if name == "react-journey" {
				name = "react"
			}
			log := watchWrites(t, ns, name)
			create(t, sessionOf(ns, name, tc.journey))
			eventually(t, 30*time.Second, func() error {
				if s := get(t, ns, name, &flowv1.Session{}); s.Status.Phase != flowv1.PhaseWaitingForInput {
					return fmt.Errorf("phase %s", s.Status.Phase)
				}
				return nil
			})
			got := converse(t, ns, name, turns, log)
			for i, n := range got {
				if n != tc.want {
					t.Errorf("status writes per turn %v: turn %d took %d, want %d", got, i+1, n, tc.want)
					break
				}
			}
		})
	}
}

var pathwayName = regexp.MustCompile(`"session":\{(?:"name":"[^"]*",)?"pathway":"([^"]+)"`)

// sessionPathway is the pathway a chat request is about, from the session info the
// openai provider sends.
func sessionPathway(r testenv.ChatRequest) string {
	if m := pathwayName.FindStringSubmatch(r.User()); m != nil {
		return m[1]
	}
	return ""
}

// A message sent while a model call is in flight does not cost a second call: the
// step's status write is conditioned on the status it read, not on the spec the
// message changed, so the model's answer is written and applied, and the new message
// is the next turn. Each call is held open until the test has sent the next message.
func TestMessagesDuringAModelCallCostNoSecondCall(t *testing.T) {
	t.Parallel()
	const turns = 3
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	inflight, release := make(chan int, 16), make(chan struct{})
	done := make(chan struct{})
	model := testenv.NewChatServer(t, func(r testenv.ChatRequest) testenv.Reply {
		t.Logf("call %d: %q", r.N, r.User())
		inflight <- r.N
		select {
		case <-release:
		case <-done:
		}
		return chatAnswer("hello", false)
	})
	t.Cleanup(func() { close(done) }) // before the server closes: cleanups run last first
	p := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"},
		Spec: flowv1.PathwaySpec{Agents: []flowv1.Name{"gpt"}, Signature: flowv1.Signature{Instructions: "Chat."}}}
	j := journeyOf(ns, "slow", p)
	j.Spec.Agents = []flowv1.AgentSpec{{Name: "gpt", Provider: flowv1.ProviderOpenAI, Model: "test-model", BaseURL: model.BaseURL(), MaxRetries: ptr.To[int32](0)}}
	create(t, p, j)
	waitJourneyReady(t, ns, "slow")
	// Created with its first message: the first call's write is the Session's first
	// status write, the one made under the resourceVersion lock.
	s := sessionOf(ns, "s", "slow")
	s.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "first"}}
	create(t, s)

	called := func() int {
		select {
		case n := <-inflight:
			return n
		case <-time.After(60 * time.Second):
			t.Fatal("no model call within 60s")
		}
		return 0
	}
	for i := 1; i <= turns; i++ {
		called()
		if i < turns {
			send(t, ns, "s", fmt.Sprintf("m%d", i+1), "typed while the model thinks")
		}
		release <- struct{}{}
	}
	eventually(t, 60*time.Second, func() error {
		select {
		case n := <-inflight:
			close(release)
			t.Fatalf("call %d: %d turns cost more than %d model calls", n, turns, turns)
		default:
		}
		s := get(t, ns, "s", &flowv1.Session{})
		if s.Status.ProcessedMessages != turns || s.Status.Turn != nil {
			return fmt.Errorf("processed %d, phase %s", s.Status.ProcessedMessages, s.Status.Phase)
		}
		return nil
	})
	select {
	case n := <-inflight:
		close(release)
		t.Fatalf("call %d: %d turns cost more than %d model calls", n, turns, turns)
	default:
	}
	if n := model.Calls(); n != turns {
		t.Errorf("%d turns cost %d model calls", turns, n)
	}
}
