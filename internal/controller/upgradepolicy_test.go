package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// sessionEvent waits for an Event of Session name with reason whose note contains
// contains.
func sessionEvent(t *testing.T, ns, name, reason, contains string) {
	t.Helper()
	eventually(t, 10*time.Second, func() error {
		var list eventsv1.EventList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Session" && e.Regarding.Name == name && e.Reason == reason && strings.Contains(e.Note, contains) {
				return nil
			}
			seen = append(seen, e.Regarding.Name+" "+e.Reason+": "+e.Note)
		}
		return fmt.Errorf("no %s event of %s with %q; events %q", reason, name, contains, seen)
	})
}

// waitTurn waits until Session name processed n messages and waits for the next.
func waitTurn(t *testing.T, ns, name string, n int32) *flowv1.Session {
	t.Helper()
	var s *flowv1.Session
	eventually(t, 60*time.Second, func() error {
		s = get(t, ns, name, &flowv1.Session{})
		if s.Status.ProcessedMessages != n || s.Status.Turn != nil || s.Status.Phase != flowv1.PhaseWaitingForInput {
			return fmt.Errorf("processed %d messages, phase %s, turn %+v", s.Status.ProcessedMessages, s.Status.Phase, s.Status.Turn)
		}
		return nil
	})
	return s
}

// upgradeCondition waits until Session name's UpgradeBlocked condition has status and
// a message containing contains, and returns the Session.
func upgradeCondition(t *testing.T, ns, name string, status metav1.ConditionStatus, contains string) *flowv1.Session {
	t.Helper()
	var s *flowv1.Session
	eventually(t, 60*time.Second, func() error {
		s = get(t, ns, name, &flowv1.Session{})
		c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionUpgradeBlocked)
		if c == nil || c.Status != status || !strings.Contains(c.Message, contains) {
			return fmt.Errorf("revision %s, UpgradeBlocked %+v; want %s with %q", s.Status.JourneyRevision, c, status, contains)
		}
		return nil
	})
	return s
}

// unwritten checks that nothing writes Session name (resourceVersion rv) when its
// Journey changes in a way that moves no Session (an annotation).
func unwritten(t *testing.T, ns, name, rv, journey string) {
	t.Helper()
	j := get(t, ns, journey, &flowv1.Journey{})
	patch := client.MergeFrom(j.DeepCopy())
	metav1.SetMetaDataAnnotation(&j.ObjectMeta, "test/poke", rv)
	if err := k8sClient.Patch(context.Background(), j, patch); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // nothing to see: the Session is not written again
	if s := get(t, ns, name, &flowv1.Session{}); s.ResourceVersion != rv {
		t.Errorf("session %s was written again: resourceVersion %s, was %s; conditions %+v", name, s.ResourceVersion, rv, s.Status.Conditions)
	}
}

// With upgradePolicy ReplayCompatible, a running Session moves by itself to each new
// ready revision its journal replays the same on, with no request to the chat server
// and no step of its own; on a revision whose questions differ it stays, UpgradeBlocked
// names the first divergent step, it is replayed once (not at every change of its
// Journey), and it goes on answering on its own revision.
func TestUpgradePolicyReplayCompatible(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	chat := testenv.NewChatServer(t, func(r testenv.ChatRequest) testenv.Reply {
		return testenv.Answer(`{"reply": "Noted.", "outcome": "success", "complete": false}`)
	})
	startManager(t, ns, Options{})
	first := replayCompatibleChat(t, ns, chat.BaseURL())
	create(t, sessionOf(ns, "s1", "chat"))
	send(t, ns, "s1", "m1", "First.")
	s := waitTurn(t, ns, "s1", 1)
	if s.Status.JourneyRevision != first || len(s.Status.Journal) != 1 {
		t.Fatalf("revision %s, journal %+v", s.Status.JourneyRevision, s.Status.Journal)
	}
	asked, step := s.Status.Journal[0].Step, s.Status.Step

	// A new fallback reply changes no question: the Session moves, with no call.
	before := chat.Calls()
	compatible := editJourney(t, ns, "chat", func(j *flowv1.Journey) { j.Spec.FallbackReply = "Sorry, try again." })
	s = upgradeCondition(t, ns, "s1", metav1.ConditionFalse, "Upgraded from revision "+first+" to "+compatible+" by the journey's upgradePolicy ReplayCompatible")
	if s.Status.JourneyRevision != compatible || s.Status.Step != step {
		t.Errorf("revision %s at step %d; want %s at step %d (a move is no step)", s.Status.JourneyRevision, s.Status.Step, compatible, step)
	}
	if got := chat.Calls() - before; got != 0 {
		t.Errorf("the upgrade made %d requests to the chat server, want 0", got)
	}
	sessionEvent(t, ns, "s1", flowv1.ReasonUpgraded, "Moved from journey revision "+first+" to "+compatible)

	// New instructions change the question it asked: it stays, blocked at that step.
	eventually(t, 30*time.Second, func() error {
		pw := get(t, ns, "talk", &flowv1.Pathway{})
		pw.Spec.Signature.Instructions = "Answer the user in French."
		return env.Client.Update(context.Background(), pw)
	})
	var french string
	eventually(t, 30*time.Second, func() error {
		if french = get(t, ns, "chat", &flowv1.Journey{}).Status.ReadyRevision; french == compatible || french == "" {
			return fmt.Errorf("ready revision %q", french)
		}
		return nil
	})
	s = upgradeCondition(t, ns, "s1", metav1.ConditionTrue,
		fmt.Sprintf("Upgrade to %s blocked: step %d replays differently on revision %s: journal", french, asked, french))
	if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionUpgradeBlocked); c.Reason != flowv1.ReasonReplayDiverged ||
		!strings.Contains(c.Message, "kubectl journey upgrade s1 --to-revision "+french+" --force") || s.Status.JourneyRevision != compatible {
		t.Errorf("revision %s, UpgradeBlocked %+v", s.Status.JourneyRevision, c)
	}
	if got := chat.Calls() - before; got != 0 {
		t.Errorf("the blocked upgrade made %d requests to the chat server, want 0", got)
	}
	sessionEvent(t, ns, "s1", flowv1.ReasonReplayDiverged, "Upgrade by the journey's upgradePolicy ReplayCompatible blocked: step")
	unwritten(t, ns, "s1", s.ResourceVersion, "chat")

	// It goes on on its own revision, and stays there.
	send(t, ns, "s1", "m2", "Second.")
	s = waitTurn(t, ns, "s1", 2)
	if s.Status.JourneyRevision != compatible || s.Status.LastTurn.AssistantText != "Noted." || chat.Calls()-before != 1 {
		t.Errorf("revision %s, last turn %+v, %d chat requests", s.Status.JourneyRevision, s.Status.LastTurn, chat.Calls()-before)
	}
}

// With upgradePolicy ReplayCompatible, a Session that refused interventions (a Goto to
// a pathway its journey lacks, an Upgrade to a revision that does not exist), which
// the manager's cache then drops from spec.interventions, still moves by itself to a
// compatible revision: its replay refuses them again at their steps.
func TestUpgradePolicyAfterRefusedInterventions(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	chat := testenv.NewChatServer(t, func(r testenv.ChatRequest) testenv.Reply {
		return testenv.Answer(`{"reply": "Noted.", "outcome": "success", "complete": false}`)
	})
	opts := managerOptions(ns, Options{})
	opts.Cache = CacheOptions(nil) // the manager's cache: it drops processed interventions
	env.StartManager(t, opts)
	first := replayCompatibleChat(t, ns, chat.BaseURL())
	create(t, sessionOf(ns, "s1", "chat"))
	send(t, ns, "s1", "m1", "First.")
	waitTurn(t, ns, "s1", 1)
	intervene(t, ns, "s1", flowv1.Intervention{Action: flowv1.InterventionGoto, Pathway: "nowhere"})
	intervene(t, ns, "s1", flowv1.Intervention{Action: flowv1.InterventionUpgrade, Revision: "chat-0000000000"})
	s := processedInterventions(t, ns, "s1", 2)
	for _, id := range []string{"i-1", "i-2"} {
		if rec := s.Status.InterventionRecord(id); rec == nil || rec.Result != flowv1.InterventionRefused {
			t.Fatalf("intervention %s: record %+v, want refused", id, rec)
		}
	}
	if s.Status.JourneyRevision != first {
		t.Fatalf("revision %s, want %s", s.Status.JourneyRevision, first)
	}

	before := chat.Calls()
	compatible := editJourney(t, ns, "chat", func(j *flowv1.Journey) { j.Spec.FallbackReply = "Sorry, try again." })
	s = upgradeCondition(t, ns, "s1", metav1.ConditionFalse, "Upgraded from revision "+first+" to "+compatible+" by the journey's upgradePolicy ReplayCompatible")
	if s.Status.JourneyRevision != compatible {
		t.Errorf("revision %s, want %s", s.Status.JourneyRevision, compatible)
	}
	if got := chat.Calls() - before; got != 0 {
		t.Errorf("the upgrade made %d requests to the chat server, want 0", got)
	}
}

// Under a rollout with upgradePolicy ReplayCompatible, a running canary's Sessions stay
// on it; once it is aborted, those whose journal replays the same on the stable
// revision move back to it, and the others stay pinned with UpgradeBlocked.
func TestUpgradePolicyAfterAbortedCanary(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	one := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one"},
		Spec: flowv1.PathwaySpec{Builtin: &flowv1.BuiltinPathway{Reply: "v1", Complete: "false"}}}
	create(t, one)
	j := journeyOf(ns, "canary", one)
	j.Spec.UpgradePolicy = flowv1.UpgradeReplayCompatible
	j.Spec.Rollout = &flowv1.Rollout{Canary: flowv1.CanaryStrategy{Steps: []flowv1.CanaryStep{{Weight: 100}}}}
	create(t, j)
	var stable string
	eventually(t, 30*time.Second, func() error {
		j := get(t, ns, "canary", &flowv1.Journey{})
		if stable = j.Status.StableRevision; stable == "" {
			return fmt.Errorf("no stable revision: %+v", j.Status)
		}
		return nil
	})
	talkTo := func(name string) *flowv1.Session {
		t.Helper()
		create(t, sessionOf(ns, name, "canary"))
		send(t, ns, name, "m1", "Hello.")
		return waitTurn(t, ns, name, 1)
	}
	abort := func(canary string) {
		t.Helper()
		j := get(t, ns, "canary", &flowv1.Journey{})
		patch := client.MergeFrom(j.DeepCopy())
		metav1.SetMetaDataAnnotation(&j.ObjectMeta, flowv1.AnnotationRolloutAbort, canary)
		if err := k8sClient.Patch(context.Background(), j, patch); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, func() error {
			if r := get(t, ns, "canary", &flowv1.Journey{}).Status.Rollout; r == nil || r.Revision != canary || r.Phase != flowv1.RolloutAborted {
				return fmt.Errorf("rollout %+v", r)
			}
			return nil
		})
	}
	if s := talkTo("old"); s.Status.JourneyRevision != stable {
		t.Fatalf("session old on %s, want %s", s.Status.JourneyRevision, stable)
	}

	// A canary that changes nothing these Sessions did: aborted, they move back.
	compatible := func() string {
		before := get(t, ns, "canary", &flowv1.Journey{}).Status.ReadyRevision
		editJourney(t, ns, "canary", func(j *flowv1.Journey) { j.Spec.FallbackReply = "Sorry." })
		var canary string
		eventually(t, 30*time.Second, func() error {
			j := get(t, ns, "canary", &flowv1.Journey{})
			if canary = j.Status.CanaryRevision; canary == "" || canary == before {
				return fmt.Errorf("canary %q", canary)
			}
			return nil
		})
		return canary
	}()
	for _, name := range []string{"c-0", "c-1"} {
		if s := talkTo(name); s.Status.JourneyRevision != compatible {
			t.Fatalf("session %s on %s, want the canary %s", name, s.Status.JourneyRevision, compatible)
		}
	}
	if s := get(t, ns, "old", &flowv1.Session{}); s.Status.JourneyRevision != stable || apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionUpgradeBlocked) != nil {
		t.Errorf("during the canary session old is on %s, conditions %+v; want %s", s.Status.JourneyRevision, s.Status.Conditions, stable)
	}
	abort(compatible)
	for _, name := range []string{"c-0", "c-1"} {
		s := upgradeCondition(t, ns, name, metav1.ConditionFalse, "Upgraded from revision "+compatible+" to "+stable)
		if s.Status.JourneyRevision != stable {
			t.Errorf("session %s on %s after the abort, want %s", name, s.Status.JourneyRevision, stable)
		}
	}
	if c := canaryCondition(t, ns); c == nil || !strings.Contains(c.Message, "its running Sessions move back to "+stable+" when their journal replays the same there") {
		t.Errorf("Canary condition %+v", c)
	}

	// A canary that replies otherwise: aborted, its Session stays on it.
	changed := editPathway(t, ns, func(p *flowv1.PathwaySpec) { p.Builtin.Reply = "v2" })
	s := talkTo("d-0")
	if s.Status.JourneyRevision != changed || s.Status.LastTurn.AssistantText != "v2" {
		t.Fatalf("session d-0 on %s replied %q", s.Status.JourneyRevision, s.Status.LastTurn.AssistantText)
	}
	replied := s.Status.Transcript[0].Step
	abort(changed)
	s = upgradeCondition(t, ns, "d-0", metav1.ConditionTrue,
		fmt.Sprintf("Upgrade to %s blocked: step %d replays differently on revision %s: transcript[step %d].assistant", stable, replied, stable, replied))
	if s.Status.JourneyRevision != changed {
		t.Errorf("session d-0 moved to %s", s.Status.JourneyRevision)
	}
	unwritten(t, ns, "d-0", s.ResourceVersion, "canary")
	for _, name := range []string{"old", "c-0"} {
		if s := get(t, ns, name, &flowv1.Session{}); s.Status.JourneyRevision != stable {
			t.Errorf("session %s on %s, want %s", name, s.Status.JourneyRevision, stable)
		}
	}
}

// replayCompatibleChat creates the Journey "chat" (upgradePolicy ReplayCompatible) of one
// pathway "talk" answered by an openai agent at baseURL, and returns the Journey's
// first ready revision.
func replayCompatibleChat(t *testing.T, ns, baseURL string) string {
	t.Helper()
	p := &flowv1.Pathway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "talk"},
		Spec:       flowv1.PathwaySpec{Agents: []flowv1.Name{"gpt"}, Signature: flowv1.Signature{Instructions: "Answer the user."}},
	}
	j := journeyOf(ns, "chat", p)
	j.Spec.UpgradePolicy = flowv1.UpgradeReplayCompatible
	j.Spec.Agents = []flowv1.AgentSpec{{Name: "gpt", Provider: flowv1.ProviderOpenAI, Model: "test-model", BaseURL: baseURL, MaxRetries: ptr.To[int32](0)}}
	create(t, p, j)
	var first string
	eventually(t, 30*time.Second, func() error {
		if first = get(t, ns, "chat", &flowv1.Journey{}).Status.ReadyRevision; first == "" {
			return fmt.Errorf("no ready revision")
		}
		return nil
	})
	return first
}
