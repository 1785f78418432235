package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// editJourney changes Journey name with mod and waits until the new generation is its
// ready revision, which it returns.
func editJourney(t *testing.T, ns, name string, mod func(*flowv1.Journey)) string {
	t.Helper()
	old := get(t, ns, name, &flowv1.Journey{}).Status.ReadyRevision
	eventually(t, 30*time.Second, func() error {
		j := get(t, ns, name, &flowv1.Journey{})
		mod(j)
		return env.Client.Update(context.Background(), j)
	})
	var rev string
	eventually(t, 30*time.Second, func() error {
		j := get(t, ns, name, &flowv1.Journey{})
		if j.Status.ObservedGeneration != j.Generation || j.Status.ReadyRevision == old {
			return fmt.Errorf("ready revision %q (was %q), observed generation %d of %d", j.Status.ReadyRevision, old, j.Status.ObservedGeneration, j.Generation)
		}
		rev = j.Status.ReadyRevision
		return nil
	})
	return rev
}

// intervene appends iv to Session name's interventions.
func intervene(t *testing.T, ns, name string, iv flowv1.Intervention) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		s := get(t, ns, name, &flowv1.Session{})
		iv.ID = fmt.Sprintf("i-%d", s.Spec.InterventionCount()+1)
		s.Spec.Interventions = append(s.Spec.Interventions, iv)
		return env.Client.Update(context.Background(), s)
	})
}

// processedInterventions waits until Session name has processed n interventions and settled.
func processedInterventions(t *testing.T, ns, name string, n int32) *flowv1.Session {
	t.Helper()
	var s *flowv1.Session
	eventually(t, 60*time.Second, func() error {
		s = get(t, ns, name, &flowv1.Session{})
		if s.Status.ProcessedInterventions < n || s.Status.Phase == flowv1.PhaseRunning {
			return fmt.Errorf("processed %d interventions, phase %s", s.Status.ProcessedInterventions, s.Status.Phase)
		}
		return nil
	})
	return s
}

// TestUpgradeByReplay: a Session stuck on a revision whose model does not exist moves
// to the fixed revision by an Upgrade and answers the message it was stuck on; a
// Session whose journal replays the same on a new revision moves with no request to
// the chat server; one whose questions change on the target revision stays, and
// UpgradeBlocked names the first step that diverges; force moves it anyway.
func TestUpgradeByReplay(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	chat := testenv.NewChatServer(t, func(r testenv.ChatRequest) testenv.Reply {
		if r.Model != "test-model" {
			return testenv.APIError(404, "The model "+r.Model+" does not exist", "not_found_error")
		}
		return testenv.Answer(`{"reply": "Noted.", "outcome": "success", "complete": false}`)
	})
	startManager(t, ns, Options{})
	p := &flowv1.Pathway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "talk"},
		Spec:       flowv1.PathwaySpec{Agents: []flowv1.Name{"gpt"}, Signature: flowv1.Signature{Instructions: "Answer the user."}},
	}
	j := journeyOf(ns, "chat", p)
	j.Spec.Agents = []flowv1.AgentSpec{{Name: "gpt", Provider: flowv1.ProviderOpenAI, Model: "no-such-model", BaseURL: chat.BaseURL(), MaxRetries: ptr.To[int32](0)}}
	create(t, p, j)
	eventually(t, 30*time.Second, func() error {
		if get(t, ns, "chat", &flowv1.Journey{}).Status.ReadyRevision == "" {
			return fmt.Errorf("no ready revision")
		}
		return nil
	})
	broken := get(t, ns, "chat", &flowv1.Journey{}).Status.ReadyRevision

	t.Run("a Session stuck on a broken revision is upgraded to the fixed one and answers", func(t *testing.T) {
		create(t, sessionOf(ns, "stuck", "chat"))
		send(t, ns, "stuck", "m1", "Hello?")
		eventually(t, 60*time.Second, func() error {
			s := get(t, ns, "stuck", &flowv1.Session{})
			if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionStalled); c == nil || c.Reason != flowv1.ReasonAgentTerminalError {
				return fmt.Errorf("not stalled by the agent: %+v", s.Status.Conditions)
			}
			return nil
		})
		fixed := editJourney(t, ns, "chat", func(j *flowv1.Journey) { j.Spec.Agents[0].Model = "test-model" })
		if s := get(t, ns, "stuck", &flowv1.Session{}); s.Status.JourneyRevision != broken {
			t.Fatalf("the Session left revision %s before the upgrade: %s", broken, s.Status.JourneyRevision)
		}
		intervene(t, ns, "stuck", flowv1.Intervention{Action: flowv1.InterventionUpgrade, Revision: fixed, Reason: "the model name was wrong"})
		var s *flowv1.Session
		eventually(t, 60*time.Second, func() error {
			s = get(t, ns, "stuck", &flowv1.Session{})
			if s.Status.JourneyRevision != fixed || s.Status.LastTurn == nil || s.Status.LastTurn.AssistantText != "Noted." || s.Status.Turn != nil {
				return fmt.Errorf("revision %s, turn %+v, last turn %+v, conditions %+v", s.Status.JourneyRevision, s.Status.Turn, s.Status.LastTurn, s.Status.Conditions)
			}
			return nil
		})
		c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionUpgradeBlocked)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != flowv1.ReasonUpgraded || !strings.Contains(c.Message, "every step replays the same") {
			t.Errorf("UpgradeBlocked %+v", c)
		}
		if apimeta.IsStatusConditionTrue(s.Status.Conditions, flowv1.ConditionStalled) {
			t.Errorf("still stalled: %+v", s.Status.Conditions)
		}
		var entry *flowv1.HistoryEntry
		for i := range s.Status.History {
			if s.Status.History[i].Intervention == flowv1.InterventionUpgrade {
				entry = &s.Status.History[i]
			}
		}
		if entry == nil || !strings.Contains(entry.Reason, "upgraded from revision "+broken+" to "+fixed) {
			t.Errorf("history has no Upgrade entry with who and what: %+v", s.Status.History)
		}
		send(t, ns, "stuck", "m2", "And now?")
		eventually(t, 60*time.Second, func() error {
			s := get(t, ns, "stuck", &flowv1.Session{})
			if s.Status.ProcessedMessages != 2 || s.Status.Turn != nil || s.Status.LastTurn.MessageID != "m2" || s.Status.LastTurn.AssistantText != "Noted." {
				return fmt.Errorf("processed %d, last turn %+v", s.Status.ProcessedMessages, s.Status.LastTurn)
			}
			return nil
		})
	})

	t.Run("compatible moves with no request, incompatible is blocked at the divergent step, force moves", func(t *testing.T) {
		create(t, sessionOf(ns, "s2", "chat"))
		send(t, ns, "s2", "m1", "First.")
		eventually(t, 60*time.Second, func() error {
			if s := get(t, ns, "s2", &flowv1.Session{}); s.Status.ProcessedMessages != 1 || s.Status.Turn != nil || s.Status.Phase != flowv1.PhaseWaitingForInput {
				return fmt.Errorf("phase %s, turn %+v", s.Status.Phase, s.Status.Turn)
			}
			return nil
		})
		send(t, ns, "s2", "m2", "Second.")
		var s *flowv1.Session
		eventually(t, 60*time.Second, func() error {
			s = get(t, ns, "s2", &flowv1.Session{})
			if s.Status.ProcessedMessages != 2 || s.Status.Turn != nil || s.Status.Phase != flowv1.PhaseWaitingForInput {
				return fmt.Errorf("phase %s, turn %+v", s.Status.Phase, s.Status.Turn)
			}
			return nil
		})
		if len(s.Status.Journal) != 2 {
			t.Fatalf("journal %+v", s.Status.Journal)
		}
		firstAsk := s.Status.Journal[0].Step

		// A new fallback reply changes no question: the journal replays as it is.
		compatible := editJourney(t, ns, "chat", func(j *flowv1.Journey) { j.Spec.FallbackReply = "Sorry, try again." })
		before := chat.Calls()
		intervene(t, ns, "s2", flowv1.Intervention{Action: flowv1.InterventionUpgrade, Revision: compatible})
		s = processedInterventions(t, ns, "s2", 1)
		if got := chat.Calls() - before; got != 0 {
			t.Errorf("the upgrade made %d requests to the chat server, want 0", got)
		}
		if s.Status.JourneyRevision != compatible {
			t.Fatalf("not upgraded to %s: revision %s, last turn %+v, conditions %+v", compatible, s.Status.JourneyRevision, s.Status.LastTurn, s.Status.Conditions)
		}

		// New instructions change every question of the pathway: the first one diverges.
		eventually(t, 30*time.Second, func() error {
			pw := get(t, ns, "talk", &flowv1.Pathway{})
			pw.Spec.Signature.Instructions = "Answer the user in French."
			return env.Client.Update(context.Background(), pw)
		})
		var target string
		eventually(t, 30*time.Second, func() error {
			j := get(t, ns, "chat", &flowv1.Journey{})
			if j.Status.ReadyRevision == compatible || j.Status.ReadyRevision == "" {
				return fmt.Errorf("ready revision %q", j.Status.ReadyRevision)
			}
			target = j.Status.ReadyRevision
			return nil
		})
		before = chat.Calls()
		intervene(t, ns, "s2", flowv1.Intervention{Action: flowv1.InterventionUpgrade, Revision: target})
		s = processedInterventions(t, ns, "s2", 2)
		if got := chat.Calls() - before; got != 0 {
			t.Errorf("the blocked upgrade made %d requests to the chat server, want 0", got)
		}
		if s.Status.JourneyRevision != compatible {
			t.Fatalf("moved to %s although its questions differ there", s.Status.JourneyRevision)
		}
		c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionUpgradeBlocked)
		want := fmt.Sprintf("step %d replays differently on revision %s: journal", firstAsk, target)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != flowv1.ReasonReplayDiverged || !strings.Contains(c.Message, want) ||
			!strings.Contains(c.Message, "kubectl journey upgrade s2 --to-revision "+target+" --force") {
			t.Fatalf("UpgradeBlocked %+v, want a message with %q", c, want)
		}

		intervene(t, ns, "s2", flowv1.Intervention{Action: flowv1.InterventionUpgrade, Revision: target, Force: true, Reason: "French it is"})
		s = processedInterventions(t, ns, "s2", 3)
		if s.Status.JourneyRevision != target {
			t.Fatalf("force did not move it: revision %s, last turn %+v", s.Status.JourneyRevision, s.Status.LastTurn)
		}
		h := s.Status.History[len(s.Status.History)-1]
		// The reason is the divergence of the question (the refused Upgrade before it
		// replays as refused), not a complaint about the refused Upgrade.
		if h.Intervention != flowv1.InterventionUpgrade || !strings.Contains(h.Reason, "forced; "+want) || !strings.Contains(h.Reason, "French it is") {
			t.Errorf("the forced upgrade's history entry %+v", h)
		}
	})
}

// TestUpgradeTwiceFromTheCache: with the cache the manager runs with
// (CacheOptions), the Session a step reads has its processed interventions dropped
// from spec.interventions. A Session created with its first message is upgraded, then
// upgraded again: the second replay rebuilds the first Upgrade from its history, and
// neither makes a request to the chat server.
func TestUpgradeTwiceFromTheCache(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	chat := testenv.NewChatServer(t, func(testenv.ChatRequest) testenv.Reply {
		return testenv.Answer(`{"reply": "Noted.", "outcome": "success", "complete": false}`)
	})
	opts := managerOptions(ns, Options{})
	opts.Cache = CacheOptions(nil)
	env.StartManager(t, opts)
	p := &flowv1.Pathway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "talk"},
		Spec:       flowv1.PathwaySpec{Agents: []flowv1.Name{"gpt"}, Signature: flowv1.Signature{Instructions: "Answer the user."}},
	}
	j := journeyOf(ns, "chat", p)
	j.Spec.Agents = []flowv1.AgentSpec{{Name: "gpt", Provider: flowv1.ProviderOpenAI, Model: "test-model", BaseURL: chat.BaseURL(), MaxRetries: ptr.To[int32](0)}}
	create(t, p, j)
	eventually(t, 30*time.Second, func() error {
		if get(t, ns, "chat", &flowv1.Journey{}).Status.ReadyRevision == "" {
			return fmt.Errorf("no ready revision")
		}
		return nil
	})
	s := sessionOf(ns, "s", "chat")
	s.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "First."}}
	create(t, s)
	eventually(t, 60*time.Second, func() error {
		if s := get(t, ns, "s", &flowv1.Session{}); s.Status.ProcessedMessages != 1 || s.Status.Turn != nil || s.Status.Phase != flowv1.PhaseWaitingForInput {
			return fmt.Errorf("phase %s, turn %+v", s.Status.Phase, s.Status.Turn)
		}
		return nil
	})
	before := chat.Calls()
	for i, reply := range []string{"Sorry, try again.", "Sorry, say it again."} {
		to := editJourney(t, ns, "chat", func(j *flowv1.Journey) { j.Spec.FallbackReply = reply })
		intervene(t, ns, "s", flowv1.Intervention{Action: flowv1.InterventionUpgrade, Revision: to})
		s := processedInterventions(t, ns, "s", int32(i+1))
		if s.Status.JourneyRevision != to {
			t.Fatalf("upgrade %d: on %s, want %s; conditions %+v", i+1, s.Status.JourneyRevision, to, s.Status.Conditions)
		}
	}
	if got := chat.Calls() - before; got != 0 {
		t.Errorf("the upgrades made %d requests to the chat server, want 0", got)
	}
}

// TestForkRebuildsFromTheJournal: a Session whose turn called an LLM, which called the
// clinic's MCP tools, and whose outcome a decision rule advanced, is forked after a
// step past those calls: the fork's status is rebuilt with no request to the chat
// server or the clinic, its history and journal up to that step are the source's, the
// source is not written, and the fork runs live from there. A fork onto a revision
// whose threshold asks approval for that decision says ForkDiverged at its step.
func TestForkRebuildsFromTheJournal(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cl := clinic.New()
	srv := httptest.NewServer(cl.Handler())
	defer srv.Close()
	script := func(results []testenv.ToolResult) testenv.Reply {
		switch len(results) {
		case 0:
			return callTool("find_doctors", `{"specialty":"cardiology"}`)
		case 1:
			return callTool("book_slot", `{"doctor_id":"d-1","slot":"2026-12-01T09:00"}`)
		}
		return finalAnswer("Booked.", "b-1")
	}
	model := newReactModel(t, map[string]modelScript{"src": script, "fork": script, "fork2": script})
	startManager(t, ns, Options{})
	done := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "done"},
		Spec: flowv1.PathwaySpec{Builtin: &flowv1.BuiltinPathway{Reply: "Anything else?"}}}
	rule := func(autoAdvance string) func(*flowv1.Journey, *flowv1.Pathway) {
		return func(j *flowv1.Journey, p *flowv1.Pathway) {
			j.Spec.Pathways = append(j.Spec.Pathways, flowv1.PathwayEntry{Name: "done", PathwayRef: "done"})
			p.Spec.Transitions = &flowv1.OutcomeTransitions{OnSuccess: &flowv1.OutcomeTransition{Decision: &flowv1.Decision{
				AllowedDestinations:  []flowv1.Name{"done"},
				Rules:                []flowv1.DecisionRule{{When: "true", To: "done", Confidence: "0.9"}},
				ConfidenceThresholds: &flowv1.ConfidenceThresholds{AutoAdvance: flowv1.Confidence(autoAdvance), RequireApproval: "0.5"},
			}}}
		}
	}
	create(t, done)
	startReact(t, ns, srv.URL, model.BaseURL(), rule("0.8"))
	talk(t, ns, "src")
	var src *flowv1.Session
	eventually(t, 60*time.Second, func() error {
		src = get(t, ns, "src", &flowv1.Session{})
		if src.Status.CurrentPathway != "done" || src.Status.Turn != nil || src.Status.Phase != flowv1.PhaseWaitingForInput {
			return fmt.Errorf("pathway %s, phase %s, turn %+v", src.Status.CurrentPathway, src.Status.Phase, src.Status.Turn)
		}
		return nil
	})
	var decided int64
	for _, h := range src.Status.History {
		if h.To == "done" {
			decided = h.Step
		}
	}
	const at = 4
	calledBy := func(step int64) (model, tools int) {
		for _, r := range src.Status.Journal {
			if r.Step <= step {
				if r.Kind == flowv1.EffectCallTool {
					tools++
				} else {
					model++
				}
			}
		}
		return
	}
	if m, tl := calledBy(at); m < 1 || tl < 1 || decided <= at {
		t.Fatalf("steps up to %d made %d model and %d tool calls, the decision is at step %d; want both kinds of call before it: journal %+v, history %+v",
			at, m, tl, decided, src.Status.Journal, src.Status.History)
	}
	srcRV := src.ResourceVersion
	chatBefore, findBefore, bookBefore := model.Calls(), cl.Calls("find_doctors"), cl.Calls("book_slot")

	// The fork is created suspended: what its first write holds is the rebuild alone.
	fork := sessionOf(ns, "fork", "react")
	fork.Spec.Suspend = true
	fork.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "Please book me a cardiologist."}}
	fork.Spec.ForkOf = &flowv1.ForkSource{Session: "src", UID: string(src.UID), Step: at}
	create(t, fork)
	var f *flowv1.Session
	eventually(t, 60*time.Second, func() error {
		f = get(t, ns, "fork", &flowv1.Session{})
		if f.Status.Step != at {
			return fmt.Errorf("fork at step %d, conditions %+v", f.Status.Step, f.Status.Conditions)
		}
		return nil
	})
	// Its first write says it is suspended too: no later write moves it past the fork
	// step before it is resumed.
	if c := apimeta.FindStatusCondition(f.Status.Conditions, flowv1.ConditionReady); c == nil || c.Reason != flowv1.ReasonSuspended {
		t.Errorf("the fork's first status: Ready %+v, want reason %s", c, flowv1.ReasonSuspended)
	}
	if got := model.Calls() - chatBefore; got != 0 {
		t.Errorf("the rebuild made %d chat requests, want 0", got)
	}
	if f, b := cl.Calls("find_doctors")-findBefore, cl.Calls("book_slot")-bookBefore; f != 0 || b != 0 {
		t.Errorf("the rebuild called the clinic's tools %d+%d times, want 0", f, b)
	}
	upTo := func(h []flowv1.HistoryEntry) []flowv1.HistoryEntry {
		var out []flowv1.HistoryEntry
		for _, e := range h {
			if e.Step <= at {
				out = append(out, e)
			}
		}
		return out
	}
	journalUpTo := func(j []flowv1.EffectRecord) []flowv1.EffectRecord {
		var out []flowv1.EffectRecord
		for _, r := range j {
			if r.Step <= at {
				out = append(out, r)
			}
		}
		return out
	}
	if got, want := upTo(f.Status.History), upTo(src.Status.History); !jsonEqual(got, want) {
		t.Errorf("the fork's history up to step %d\n%s\nthe source's\n%s", at, toJSON(got), toJSON(want))
	}
	if got, want := f.Status.Journal, journalUpTo(src.Status.Journal); !jsonEqual(got, want) || len(got) == 0 {
		t.Errorf("the fork's journal\n%s\nthe source's up to step %d\n%s", toJSON(got), at, toJSON(want))
	}
	if f.Status.JourneyRevision != src.Status.JourneyRevision || apimeta.FindStatusCondition(f.Status.Conditions, flowv1.ConditionForkDiverged) != nil {
		t.Errorf("fork on revision %s (source %s), conditions %+v", f.Status.JourneyRevision, src.Status.JourneyRevision, f.Status.Conditions)
	}

	// Unsuspended, it runs live from step at on: it reaches where the source is.
	eventually(t, 30*time.Second, func() error {
		f := get(t, ns, "fork", &flowv1.Session{})
		f.Spec.Suspend = false
		return env.Client.Update(context.Background(), f)
	})
	eventually(t, 60*time.Second, func() error {
		f = get(t, ns, "fork", &flowv1.Session{})
		if f.Status.CurrentPathway != "done" || f.Status.Turn != nil || f.Status.Phase != flowv1.PhaseWaitingForInput {
			return fmt.Errorf("fork in pathway %s, phase %s, turn %+v", f.Status.CurrentPathway, f.Status.Phase, f.Status.Turn)
		}
		return nil
	})
	if s := get(t, ns, "src", &flowv1.Session{}); s.ResourceVersion != srcRV {
		t.Errorf("the source was written: resourceVersion %s, was %s", s.ResourceVersion, srcRV)
	}

	// A revision that asks approval at confidence 0.9 diverges at the decision.
	eventually(t, 30*time.Second, func() error {
		p := get(t, ns, "book", &flowv1.Pathway{})
		p.Spec.Transitions.OnSuccess.Decision.ConfidenceThresholds.AutoAdvance = "0.95"
		return env.Client.Update(context.Background(), p)
	})
	var stricter string
	eventually(t, 30*time.Second, func() error {
		j := get(t, ns, "react", &flowv1.Journey{})
		if j.Status.ReadyRevision == src.Status.JourneyRevision || j.Status.ReadyRevision == "" {
			return fmt.Errorf("ready revision %q", j.Status.ReadyRevision)
		}
		stricter = j.Status.ReadyRevision
		return nil
	})
	fork2 := sessionOf(ns, "fork2", "react")
	fork2.Spec.Suspend = true
	fork2.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "Please book me a cardiologist."}}
	fork2.Spec.ForkOf = &flowv1.ForkSource{Session: "src", UID: string(src.UID), Step: decided, Revision: stricter}
	create(t, fork2)
	eventually(t, 60*time.Second, func() error {
		f := get(t, ns, "fork2", &flowv1.Session{})
		c := apimeta.FindStatusCondition(f.Status.Conditions, flowv1.ConditionForkDiverged)
		if c == nil {
			return fmt.Errorf("no ForkDiverged: step %d, conditions %+v", f.Status.Step, f.Status.Conditions)
		}
		if want := fmt.Sprintf("Step %d of the source replays differently on revision %s: history[step %d]", decided, stricter, decided); c.Status != metav1.ConditionTrue || !strings.HasPrefix(c.Message, want) {
			t.Fatalf("ForkDiverged %+v, want a message starting %q", c, want)
		}
		if f.Status.JourneyRevision != stricter || f.Status.Step != decided {
			t.Errorf("fork2 on %s at step %d", f.Status.JourneyRevision, f.Status.Step)
		}
		return nil
	})
}

func jsonEqual(a, b any) bool {
	var x, y any
	_ = json.Unmarshal([]byte(toJSON(a)), &x)
	_ = json.Unmarshal([]byte(toJSON(b)), &y)
	return reflect.DeepEqual(x, y)
}

func toJSON(v any) string {
	raw, _ := json.MarshalIndent(v, "", "  ")
	return string(raw)
}
