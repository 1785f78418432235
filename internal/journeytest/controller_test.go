package journeytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// TestAgainstTheController runs the sample Sessions on a real API server with the
// controllers, then checks the offline runner against what they did: the sample's
// journey test compiles to the revision the Journey controller made, the Session
// replays without divergence, and the test recorded from it passes.
func TestAgainstTheController(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	env := testenv.New(t)
	k := env.Client
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartManager(t, testenv.ManagerOptions{
		Namespaces: []string{ns},
		Setup:      func(mgr ctrl.Manager) error { return controller.Setup(mgr, controller.Options{Agents: fakeLLM()}) },
	})

	for _, sample := range []string{"healthcare-referral.yaml", "review-loop.yaml", "planning.yaml", "delivery-pipeline.yaml"} {
		t.Run(sample, func(t *testing.T) {
			var session string
			objs := testenv.Manifests(t, filepath.Join(samplesDir(), sample))
			// Pathways first: a Journey created before its Pathways can stay not Ready when
			// its status write conflicts (the Journey controller drops conflicts without
			// a requeue); that is the controllers' business, not this test's.
			slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
				rank := map[string]int{"Pathway": 0, "Journey": 1, "Session": 2}
				return rank[a.GetKind()] - rank[b.GetKind()]
			})
			for _, obj := range objs {
				obj.SetNamespace(ns)
				if obj.GetKind() == "Session" {
					session = obj.GetName()
				}
				if err := k.Create(ctx, obj); err != nil {
					t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
				}
			}
			key := types.NamespacedName{Namespace: ns, Name: session}
			s := waitSettled(t, k, key)
			if s.Status.Phase == flowv1.PhaseAwaitingApproval {
				s.Spec.Approvals = append(s.Spec.Approvals, flowv1.Approval{DecisionID: s.Status.LastDecision.ID, Approve: ptr.To(true), By: "alice"})
				if err := k.Update(ctx, s); err != nil {
					t.Fatal(err)
				}
				s = waitSettled(t, k, key)
			}
			if s.Status.Phase != flowv1.PhaseCompleted {
				t.Fatalf("the sample Session ended %s in %s", s.Status.Phase, s.Status.CurrentPathway)
			}

			// The journey test's manifests compile to the controller's revision.
			c := sampleTest(t, sample)
			if r := Run(c); r.Failed() || r.Revision != s.Status.JourneyRevision {
				t.Fatalf("the journey test compiles to %s, the Session runs %s (%s)", r.Revision, s.Status.JourneyRevision, r.Error())
			}

			l, err := Fetch(ctx, k, key)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Replay(l)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			rep.Print(&out)
			if rep.Step != 0 || rep.Incomplete != nil {
				t.Fatalf("replay of the controller's Session:\n%s", out.String())
			}
			rc, notes, r := recordAndRun(t, l)
			if len(notes) > 0 || r.Failed() {
				raw, _ := Marshal(rc)
				t.Fatalf("recorded test: notes %q, %s\n%s", notes, r.Error(), raw)
			}
		})
	}

	// An LLM journey: the controller journals every answer in status.journal, and the
	// recorded test replays them.
	t.Run("llm-answers", func(t *testing.T) {
		c := load(t, filepath.Join("testdata", "llm-answers.yaml"))
		for _, m := range c.Manifests {
			u := &unstructured.Unstructured{}
			if err := json.Unmarshal(m.Object, &u.Object); err != nil {
				t.Fatal(err)
			}
			u.SetNamespace(ns)
			if err := k.Create(ctx, u); err != nil {
				t.Fatal(err)
			}
		}
		s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Name: "broken-order", Namespace: ns}, Spec: flowv1.SessionSpec{
			JourneyRef: flowv1.JourneyReference{Name: c.Journey},
			Messages:   []flowv1.Message{{ID: "m1", Text: c.Steps[0].Message.Text}, {ID: "m2", Text: c.Steps[1].Message.Text}},
		}}
		if err := k.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		key := client.ObjectKeyFromObject(s)
		s = waitSettled(t, k, key)
		if s.Status.Phase != flowv1.PhaseCompleted || len(s.Status.Journal) != 5 {
			t.Fatalf("the Session ended %s with %d journaled answers", s.Status.Phase, len(s.Status.Journal))
		}
		l, err := Fetch(ctx, k, key)
		if err != nil {
			t.Fatal(err)
		}
		if rep, err := Replay(l); err != nil || rep.Step != 0 || rep.Incomplete != nil {
			t.Fatalf("replay: %v, step %d: %s; %v", err, rep.Step, rep.Detail, rep.Incomplete)
		}
		rc, notes, r := recordAndRun(t, l)
		if len(notes) > 0 || r.Failed() {
			raw, _ := Marshal(rc)
			t.Fatalf("recorded test: notes %q, %s\n%s", notes, r.Error(), raw)
		}
	})
}

// fakeLLM answers for openai agents like the answers of testdata/llm-answers.yaml.
func fakeLLM() controller.AgentFactory {
	return controller.AgentFactoryFunc(func(_ context.Context, _ client.Reader, _ string, spec flowv1.AgentSpec) (agent.Agent, error) {
		if spec.Provider != flowv1.ProviderOpenAI {
			return builtin.New(spec), nil
		}
		return llm{}, nil
	})
}

type llm struct{}

func (llm) RunPathway(_ context.Context, req agent.PathwayRequest) (agent.PathwayResponse, error) {
	if strings.Contains(req.Message, "broken") {
		return agent.PathwayResponse{Reply: "Sorry to hear that! Can you send a photo of the damage?", Outputs: map[string]any{"problem": "broken on arrival"},
			Usage: agent.Usage{PromptTokens: 120, CompletionTokens: 30}}, nil
	}
	return agent.PathwayResponse{Reply: "Great, I have closed the case.", ResultType: flowv1.ResultSuccess, Complete: true}, nil
}

func (llm) Decide(context.Context, agent.DecisionRequest) (agent.DecisionResponse, error) {
	return agent.DecisionResponse{Destination: "done", Confidence: 0.92, Reasoning: "The customer confirmed the fix."}, nil
}

func (llm) ClassifyIntent(context.Context, agent.IntentRequest) (agent.IntentResponse, error) {
	return agent.IntentResponse{Intent: agent.NoIntent, Confidence: 0.9}, nil
}

// waitSettled waits until the Session is no longer Pending or Running.
func waitSettled(t *testing.T, k client.Client, key types.NamespacedName) *flowv1.Session {
	t.Helper()
	var s *flowv1.Session
	err := testenv.Poll(30*time.Second, func() error {
		s = &flowv1.Session{}
		if err := k.Get(context.Background(), key, s); err != nil {
			return err
		}
		if s.Status.ObservedGeneration != s.Generation {
			return fmt.Errorf("generation %d not observed yet", s.Generation)
		}
		switch s.Status.Phase {
		case "", flowv1.PhasePending, flowv1.PhaseRunning:
			return fmt.Errorf("phase %q", s.Status.Phase)
		}
		return nil
	})
	if err != nil {
		raw, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("session %s did not settle (%v):\n%s", key.Name, err, raw)
	}
	return s
}
