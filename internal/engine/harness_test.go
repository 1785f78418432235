package engine

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// session drives a Session through Step like the controller does, checking on every
// step that Step is pure (its inputs are unchanged), deterministic (the same inputs
// give the same outputs) and a no-op when it has nothing to do.
type session struct {
	t    testing.TB
	snap *Snapshot
	spec flowv1.SessionSpec
	st   *flowv1.SessionStatus
	now  time.Time
	// answer performs a remote effect (the fake LLM). Nil fails the test on an effect.
	answer func(*Effect) (any, error)
	// effects are the effects performed, in order.
	effects []*Effect
	steps   int
	// budgets are the Budgets that select the Session, as the ledger sees them.
	budgets []BudgetRoom
}

// def is a journey and its pathways.
type def struct {
	j *flowv1.JourneySpec
	p map[string]*flowv1.PathwaySpec
}

func newSession(t testing.TB, d def) *session {
	t.Helper()
	snap, err := NewSnapshot("rev-1", d.j, d.p)
	if err != nil {
		t.Fatalf("NewSnapshot: %v", err)
	}
	return &session{t: t, snap: snap, st: &flowv1.SessionStatus{}, now: t0}
}

func (s *session) input() Input {
	return Input{Spec: &s.spec, Status: s.st, Now: s.now, SessionName: "patient-12345", SessionUID: "uid-1", CreationTime: t0, Budgets: s.budgets}
}

// step takes one step and returns its effect (not performed).
func (s *session) step() *Effect {
	s.t.Helper()
	in := s.input()
	specBefore := s.spec.DeepCopy()
	stBefore := s.st.DeepCopy()
	st, eff := Step(s.snap, in)
	if !equality.Semantic.DeepEqual(specBefore, &s.spec) || !equality.Semantic.DeepEqual(stBefore, s.st) {
		s.t.Fatalf("Step modified its input")
	}
	st2, eff2 := Step(s.snap, s.input())
	if !equality.Semantic.DeepEqual(st, st2) || !reflect.DeepEqual(eff, eff2) {
		s.t.Fatalf("Step is not deterministic:\n%s\n%s", dump(st), dump(st2))
	}
	if st == s.st {
		s.t.Fatalf("Step returned its input status")
	}
	if eff == nil && equality.Semantic.DeepEqual(st, s.st) && st.Step != s.st.Step {
		s.t.Fatalf("a no-op step changed status.step")
	}
	if !equality.Semantic.DeepEqual(st, s.st) && st.Step != s.st.Step+1 {
		s.t.Fatalf("a changing step must increment status.step: %d -> %d", s.st.Step, st.Step)
	}
	s.st = st
	s.steps++
	return eff
}

// perform answers an effect like the controller: journal, then write status.
func (s *session) perform(eff *Effect) {
	s.t.Helper()
	if s.answer == nil {
		s.t.Fatalf("unexpected effect %s (pathway %s)", eff.Kind, s.st.CurrentPathway)
	}
	s.effects = append(s.effects, eff)
	resp, err := s.answer(eff)
	s.st.PendingEffect = eff.Record("uid-1", s.st.Step, resp, err)
}

// settle steps, performing effects, until a step changes nothing. It returns the
// number of steps that changed something.
func (s *session) settle() int {
	s.t.Helper()
	for i := 0; i < 200; i++ {
		before := s.st.DeepCopy()
		eff := s.step()
		if eff != nil {
			s.perform(eff)
			continue
		}
		if equality.Semantic.DeepEqual(before, s.st) {
			// Blocked: one more step is still a no-op.
			again := s.step()
			if again != nil || !equality.Semantic.DeepEqual(before, s.st) {
				s.t.Fatalf("a blocked step is not a no-op")
			}
			return i
		}
	}
	s.t.Fatalf("the session did not settle in 200 steps")
	return 0
}

func (s *session) say(id, text string) *session {
	s.spec.Messages = append(s.spec.Messages, flowv1.Message{ID: id, Text: text})
	return s
}

func (s *session) post(pathway string, iteration int32, rt flowv1.ResultType, data string) *session {
	o := flowv1.ExternalOutcome{Pathway: flowv1.Name(pathway), Iteration: iteration, ResultType: rt}
	if data != "" {
		o.Data = &apiextensionsv1.JSON{Raw: []byte(data)}
	}
	s.spec.Outcomes = append(s.spec.Outcomes, o)
	return s
}

func (s *session) approve(id string, ok bool, dest string) *session {
	s.spec.Approvals = append(s.spec.Approvals, flowv1.Approval{DecisionID: id, Approve: ptr.To(ok), Destination: flowv1.Name(dest), By: "alice"})
	return s
}

func (s *session) context() map[string]any {
	s.t.Helper()
	m, err := decodeJSON(s.st.Context)
	if err != nil {
		s.t.Fatalf("context: %v", err)
	}
	return m
}

func (s *session) expect(phase flowv1.Phase, pathway string) {
	s.t.Helper()
	if s.st.Phase != phase || s.st.CurrentPathway != pathway {
		s.t.Fatalf("want %s in %s, got %s in %s\n%s", phase, pathway, s.st.Phase, s.st.CurrentPathway, dump(s.st))
	}
}

func (s *session) condition(typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(s.st.Conditions, typ)
}

func (s *session) stalled() string {
	if c := s.condition(flowv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason
	}
	return ""
}

// path is the pathways moved through, from history: "a>b>c".
func (s *session) path() string {
	var parts []string
	for _, h := range s.st.History {
		if h.Action == flowv1.ActionBlock || h.Action == flowv1.ActionClose {
			continue
		}
		if len(parts) == 0 {
			parts = append(parts, h.From)
		}
		parts = append(parts, h.To)
	}
	return strings.Join(parts, ">")
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func raw(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

// pathways builds a journey's pathway list and spec map from name/spec pairs.
func journeyOf(entry string, specs map[string]*flowv1.PathwaySpec, mods ...func(*flowv1.JourneySpec)) def {
	j := &flowv1.JourneySpec{EntryPathway: flowv1.Name(entry)}
	names := make([]string, 0, len(specs))
	for n := range specs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		j.Pathways = append(j.Pathways, flowv1.PathwayEntry{Name: flowv1.Name(n), PathwayRef: n})
	}
	for _, m := range mods {
		m(j)
	}
	return def{j, specs}
}

// llm is a fake remote agent: it answers every effect with the builtin provider's
// answer unless a hook says otherwise.
type llm struct {
	intent   func(agent.IntentRequest) (agent.IntentResponse, error)
	decide   func(agent.DecisionRequest) (agent.DecisionResponse, error)
	pathway  func(agent.PathwayRequest) (agent.PathwayResponse, error)
	calls    map[flowv1.EffectKind]int
	usage    agent.Usage
	lastReqs []any
}

func (l *llm) answer(e *Effect) (any, error) {
	if l.calls == nil {
		l.calls = map[flowv1.EffectKind]int{}
	}
	l.calls[e.Kind]++
	switch e.Kind {
	case flowv1.EffectClassifyIntent:
		l.lastReqs = append(l.lastReqs, *e.Intent)
		if l.intent == nil {
			return agent.IntentResponse{Intent: agent.NoIntent, Confidence: 1, Usage: l.usage}, nil
		}
		r, err := l.intent(*e.Intent)
		r.Usage = l.usage
		return r, err
	case flowv1.EffectDecide:
		l.lastReqs = append(l.lastReqs, *e.Decision)
		if l.decide == nil {
			return agent.DecisionResponse{Destination: string(e.Decision.Decision.AllowedDestinations[0]), Confidence: 1, Usage: l.usage}, nil
		}
		r, err := l.decide(*e.Decision)
		r.Usage = l.usage
		return r, err
	case flowv1.EffectRunPathway:
		l.lastReqs = append(l.lastReqs, *e.Pathway)
		if l.pathway == nil {
			return nil, fmt.Errorf("no pathway hook")
		}
		r, err := l.pathway(*e.Pathway)
		r.Usage = l.usage
		return r, err
	}
	return nil, fmt.Errorf("unknown effect %s", e.Kind)
}

var openai = flowv1.AgentSpec{Name: "gpt", Provider: flowv1.ProviderOpenAI, Model: "gpt-4o-mini"}

type (
	intentReq   = agent.IntentRequest
	intentResp  = agent.IntentResponse
	pathwayReq  = agent.PathwayRequest
	pathwayResp = agent.PathwayResponse
)
