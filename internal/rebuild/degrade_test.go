package rebuild_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/rebuild"
)

var t0 = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC) // when the degraded Session runs

// degradable is a chat journey whose pathway runs on agent bot (a worst case of
// about USD 0.2 an answer) and may run on the much cheaper agent small (degrade:
// policy), compiled as revision.
func degradable(t *testing.T, revision string, policy flowv1.DegradePolicy) *engine.Snapshot {
	t.Helper()
	maxTokens := int32(200)
	j := &flowv1.JourneySpec{
		EntryPathway: "chat",
		Pathways:     []flowv1.PathwayEntry{{Name: "chat", PathwayRef: "chat"}},
		Agents: []flowv1.AgentSpec{
			{Name: "bot", Provider: flowv1.ProviderOpenAI, Model: "m", MaxTokens: &maxTokens,
				Pricing: &flowv1.Pricing{PromptPerMTok: "100", CompletionPerMTok: "1000"}},
			{Name: "small", Provider: flowv1.ProviderOpenAI, Model: "s", MaxTokens: &maxTokens,
				Pricing: &flowv1.Pricing{PromptPerMTok: "0.1", CompletionPerMTok: "1"}},
		},
	}
	p := map[string]*flowv1.PathwaySpec{"chat": {Agents: []flowv1.Name{"bot"}, Degrade: policy}}
	snap, err := engine.NewSnapshot(revision, j, p)
	if err != nil {
		t.Fatalf("NewSnapshot: %v", err)
	}
	return snap
}

// degradedSession runs a Session on snap as the controller does: its first message is
// answered by bot; for its second, Budget team (onExhausted: Degrade to small) has no
// room for bot's worst case but has for small's, so small answers it.
func degradedSession(t *testing.T, snap *engine.Snapshot) *flowv1.Session {
	t.Helper()
	s := &flowv1.Session{
		ObjectMeta: metav1.ObjectMeta{Name: "s", UID: types.UID("uid-1"), CreationTimestamp: metav1.NewTime(t0)},
		Spec:       flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "chat"}},
	}
	team := engine.BudgetRoom{Name: "team", WindowStart: t0, WindowEnd: t0.Add(24 * time.Hour),
		Limit: engine.Spend{CostNano: 1e8}, Left: engine.Spend{CostNano: 1e8}, DegradeTo: "small"}
	settle := func(rooms []engine.BudgetRoom) {
		for range 100 {
			in := engine.Input{Spec: &s.Spec, Status: &s.Status, Now: t0, SessionName: s.Name, SessionUID: string(s.UID),
				CreationTime: t0, Budgets: rooms}
			next, eff := engine.Step(snap, in)
			if eff == nil && equality.Semantic.DeepEqual(next, &s.Status) {
				return
			}
			if eff != nil {
				who := string(eff.Agents[0].Name)
				resp := agent.PathwayResponse{Reply: "re: " + eff.Pathway.Message + " (" + who + ")", ResultType: flowv1.ResultSuccess,
					Usage: agent.Usage{PromptTokens: 100, CompletionTokens: 20, CostUSD: map[string]float64{"bot": 0.03, "small": 0.00003}[who]}}
				engine.Journal(next, eff.Record(string(s.UID), next.Step, resp, nil), nil, t0)
			}
			s.Status = *next
		}
		t.Fatal("the session did not settle")
	}
	settle(nil) // started, waiting for a message
	s.Spec.Messages = append(s.Spec.Messages, flowv1.Message{ID: "m1", Text: "one"})
	settle(nil)
	s.Spec.Messages = append(s.Spec.Messages, flowv1.Message{ID: "m2", Text: "two"})
	settle([]engine.BudgetRoom{team})
	if d := s.Status.LastTurn.DegradedTo; d == nil || d.Budget != "team" || d.Agent != "small" || s.Status.LastTurn.AssistantText != "re: two (small)" {
		t.Fatalf("the live Session was not degraded: lastTurn %+v", s.Status.LastTurn)
	}
	return s
}

// degradedStep is the step whose call the Session made on the cheaper agent.
func degradedStep(t *testing.T, s *flowv1.Session) int64 {
	t.Helper()
	for _, rec := range s.Status.Journal {
		if rec.Agent == "small" {
			return rec.Step
		}
	}
	t.Fatalf("no call of agent small in the journal %+v", s.Status.Journal)
	return 0
}

// A Session that a Budget's onExhausted: Degrade moved to a cheaper agent replays as
// it ran: on a revision whose pathway still allows it, the replay reproduces and
// rebuilds the turn's degradedTo and the Degraded condition (what a fork starts
// from); on a revision whose pathway no longer allows it, the answer the cheaper
// agent gave does not apply, so the replay diverges at that step, naming the agent
// and the pathway.
func TestReplayRebuildsDegradation(t *testing.T) {
	own := degradable(t, "chat-1", flowv1.DegradeAllow)
	live := degradedSession(t, own)
	step := degradedStep(t, live)

	src, err := rebuild.SourceOf(live)
	if err != nil {
		t.Fatal(err)
	}
	src.Revision = own // as the controller gives it: the revision the Session runs on
	res, err := rebuild.Replay(degradable(t, "chat-2", flowv1.DegradeAllow), "chat-2", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Check.Reproduces {
		t.Fatalf("replay on a revision that allows degrade: %s", res.Check)
	}
	if got, want := res.Status.LastTurn.DegradedTo, live.Status.LastTurn.DegradedTo; got == nil || *got != *want {
		t.Errorf("replayed lastTurn.degradedTo %+v, want the Session's %+v", got, want)
	}
	got := apimeta.FindStatusCondition(res.Status.Conditions, flowv1.ConditionDegraded)
	want := apimeta.FindStatusCondition(live.Status.Conditions, flowv1.ConditionDegraded)
	if want == nil || got == nil || got.Status != want.Status || got.Reason != want.Reason || got.Message != want.Message {
		t.Errorf("replayed Degraded condition %+v, want the Session's %+v", got, want)
	}

	res, err = rebuild.Replay(degradable(t, "chat-3", flowv1.DegradeNever), "chat-3", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Check; c.Reproduces || c.Step != step || !strings.Contains(c.Message, "small") || !strings.Contains(c.Message, "pathway chat") {
		t.Errorf("replay on a revision whose pathway does not allow degrade: %s; want a divergence at step %d naming agent small and pathway chat", c, step)
	}

	// Up to the step before the degraded call, nothing is degraded.
	res, err = rebuild.Replay(degradable(t, "chat-1", flowv1.DegradeAllow), "chat-1", src, step-1)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Check.Reproduces || res.Status.LastTurn.DegradedTo != nil || apimeta.FindStatusCondition(res.Status.Conditions, flowv1.ConditionDegraded) != nil {
		t.Errorf("up to step %d: %s, lastTurn %+v, conditions %+v", step-1, res.Check, res.Status.LastTurn, res.Status.Conditions)
	}
}
