package agent

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// fakeAgent answers from functions; nil functions fail the test.
type fakeAgent struct {
	t        *testing.T
	run      func(ctx context.Context, req PathwayRequest) (PathwayResponse, error)
	decide   func(ctx context.Context, req DecisionRequest) (DecisionResponse, error)
	classify func(ctx context.Context, req IntentRequest) (IntentResponse, error)

	mu    sync.Mutex
	runs  []PathwayRequest
	asked []IntentRequest
}

func (f *fakeAgent) RunPathway(ctx context.Context, req PathwayRequest) (PathwayResponse, error) {
	f.mu.Lock()
	f.runs = append(f.runs, req)
	f.mu.Unlock()
	if f.run == nil {
		f.t.Error("unexpected RunPathway")
		return PathwayResponse{}, errors.New("unexpected")
	}
	return f.run(ctx, req)
}

func (f *fakeAgent) Decide(ctx context.Context, req DecisionRequest) (DecisionResponse, error) {
	if f.decide == nil {
		f.t.Error("unexpected Decide")
		return DecisionResponse{}, errors.New("unexpected")
	}
	return f.decide(ctx, req)
}

func (f *fakeAgent) ClassifyIntent(ctx context.Context, req IntentRequest) (IntentResponse, error) {
	f.mu.Lock()
	f.asked = append(f.asked, req)
	f.mu.Unlock()
	if f.classify == nil {
		f.t.Error("unexpected ClassifyIntent")
		return IntentResponse{Intent: NoIntent}, errors.New("unexpected")
	}
	return f.classify(ctx, req)
}

func replying(t *testing.T, resp PathwayResponse) *fakeAgent {
	return &fakeAgent{t: t, run: func(context.Context, PathwayRequest) (PathwayResponse, error) { return resp, nil }}
}

func tokens(n int64) Usage {
	return Usage{PromptTokens: n, CompletionTokens: n, CostUSD: float64(n) / 1000}
}

func TestSequentialChainsOutputs(t *testing.T) {
	first := replying(t, PathwayResponse{Reply: "found slots", Outputs: map[string]any{"slots": []any{"mon"}, "shared": 1},
		ResultType: flowv1.ResultSuccess, Complete: true, Usage: tokens(10)})
	second := replying(t, PathwayResponse{Reply: "booked Dr. Lee", Outputs: map[string]any{"doctor": "lee", "shared": 2},
		ResultType: flowv1.ResultPartialSuccess, Complete: false, Usage: tokens(5)})
	third := replying(t, PathwayResponse{Outputs: map[string]any{"checked": true}, ResultType: flowv1.ResultSuccess, Complete: true, Usage: tokens(1)})
	req := PathwayRequest{Pathway: "booking", Message: "hi", Inputs: map[string]any{"patient": "p"}, Context: map[string]any{"insurance": "i"}}

	got, err := RunPipeline(context.Background(), []Agent{first, second, third}, flowv1.PipelineSequential, req)
	if err != nil {
		t.Fatal(err)
	}
	want := PathwayResponse{
		Reply:      "booked Dr. Lee", // the last non-empty reply
		Outputs:    map[string]any{"slots": []any{"mon"}, "doctor": "lee", "shared": 2, "checked": true},
		ResultType: flowv1.ResultSuccess,
		Complete:   true,
		Usage:      tokens(16),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RunPipeline = %+v, want %+v", got, want)
	}
	if in := third.runs[0].Inputs; !reflect.DeepEqual(in, map[string]any{"patient": "p", "slots": []any{"mon"}, "shared": 2, "doctor": "lee"}) {
		t.Errorf("third agent's inputs = %v", in)
	}
	if c := second.runs[0].Context; !reflect.DeepEqual(c, map[string]any{"insurance": "i", "slots": []any{"mon"}, "shared": 1}) {
		t.Errorf("second agent's context = %v", c)
	}
	if len(req.Inputs) != 1 || len(req.Context) != 1 {
		t.Errorf("the caller's maps were modified: %v %v", req.Inputs, req.Context)
	}
}

func TestSequentialStopsAtFirstError(t *testing.T) {
	boom := &Error{Class: Transient, Err: errors.New("boom")}
	failing := &fakeAgent{t: t, run: func(context.Context, PathwayRequest) (PathwayResponse, error) {
		return PathwayResponse{Usage: tokens(3)}, boom
	}}
	never := &fakeAgent{t: t}
	got, err := RunPipeline(context.Background(), []Agent{replying(t, PathwayResponse{Usage: tokens(1)}), failing, never}, "", PathwayRequest{})
	if !errors.Is(err, boom) || got.Usage != tokens(4) || len(never.runs) != 0 {
		t.Errorf("RunPipeline = %+v, %v; want the error, usage 4 and no third call", got, err)
	}
}

// gatedAgents returns n agents that block until released; each answers its index.
func gatedAgents(t *testing.T, n int) ([]Agent, []chan struct{}, chan int) {
	gates := make([]chan struct{}, n)
	done := make(chan int, n)
	agents := make([]Agent, n)
	for i := range n {
		gates[i] = make(chan struct{})
		agents[i] = &fakeAgent{t: t, run: func(ctx context.Context, req PathwayRequest) (PathwayResponse, error) {
			defer func() { done <- i }()
			<-gates[i]
			return PathwayResponse{
				Reply:      fmt.Sprintf("reply %d", i),
				Outputs:    map[string]any{"shared": i, fmt.Sprintf("own%d", i): i},
				ResultType: flowv1.ResultSuccess,
				Complete:   true,
				Usage:      tokens(int64(i + 1)),
			}, nil
		}}
	}
	return agents, gates, done
}

func permutations(n int) [][]int {
	if n == 1 {
		return [][]int{{0}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for pos := 0; pos <= len(p); pos++ {
			q := append(append(append([]int{}, p[:pos]...), n-1), p[pos:]...)
			out = append(out, q)
		}
	}
	return out
}

// TestParallelIsDeterministic finishes the agents in every possible order: the
// merged answer is the same each time.
func TestParallelIsDeterministic(t *testing.T) {
	want := PathwayResponse{
		Reply:      "reply 0\n\nreply 1\n\nreply 2\n\nreply 3",
		Outputs:    map[string]any{"shared": 3, "own0": 0, "own1": 1, "own2": 2, "own3": 3},
		ResultType: flowv1.ResultSuccess,
		Complete:   true,
		Usage:      tokens(10),
	}
	perms := permutations(4)
	if len(perms) != 24 {
		t.Fatalf("%d permutations", len(perms))
	}
	for _, order := range perms {
		agents, gates, done := gatedAgents(t, 4)
		result := make(chan PathwayResponse, 1)
		go func() {
			resp, err := RunPipeline(context.Background(), agents, flowv1.PipelineParallel, PathwayRequest{})
			if err != nil {
				t.Error(err)
			}
			result <- resp
		}()
		for _, i := range order {
			close(gates[i])
			if finished := <-done; finished != i {
				t.Fatalf("agent %d finished, want %d", finished, i)
			}
		}
		if got := <-result; !reflect.DeepEqual(got, want) {
			t.Errorf("finish order %v: RunPipeline = %+v, want %+v", order, got, want)
		}
	}
}

func TestParallelCombinesResults(t *testing.T) {
	for _, tc := range []struct {
		results  []flowv1.ResultType
		complete []bool
		want     flowv1.ResultType
		wantDone bool
	}{
		{[]flowv1.ResultType{"success", "success"}, []bool{true, true}, "success", true},
		{[]flowv1.ResultType{"failure", "failure"}, []bool{true, false}, "failure", false},
		{[]flowv1.ResultType{"success", "failure"}, []bool{true, true}, "partial_success", true},
		{[]flowv1.ResultType{"success", "unclear", "failure"}, []bool{true, true, true}, "unclear", true},
	} {
		agents := make([]Agent, len(tc.results))
		for i := range tc.results {
			agents[i] = replying(t, PathwayResponse{ResultType: tc.results[i], Complete: tc.complete[i]})
		}
		got, err := RunPipeline(context.Background(), agents, flowv1.PipelineParallel, PathwayRequest{})
		if err != nil || got.ResultType != tc.want || got.Complete != tc.wantDone {
			t.Errorf("%v %v: got %s complete=%v (%v), want %s complete=%v", tc.results, tc.complete, got.ResultType, got.Complete, err, tc.want, tc.wantDone)
		}
	}
}

func TestParallelErrorCancelsOthers(t *testing.T) {
	terminal := &Error{Class: Terminal, Err: errors.New("401")}
	waiting := &fakeAgent{t: t, run: func(ctx context.Context, req PathwayRequest) (PathwayResponse, error) {
		<-ctx.Done()
		return PathwayResponse{}, ctx.Err()
	}}
	failing := &fakeAgent{t: t, run: func(context.Context, PathwayRequest) (PathwayResponse, error) {
		return PathwayResponse{}, terminal
	}}
	_, err := RunPipeline(context.Background(), []Agent{waiting, failing}, flowv1.PipelineParallel, PathwayRequest{})
	if !errors.Is(err, terminal) {
		t.Errorf("err = %v, want the agent's error rather than the cancellation", err)
	}
}

func TestRouter(t *testing.T) {
	spec := &flowv1.PathwaySpec{Agents: []flowv1.Name{"router", "billing", "clinical"}}
	for _, tc := range []struct {
		name    string
		intent  string
		err     error
		handler int // index of the agent that must run; -1 none
		wantErr bool
	}{
		{"routes to the chosen agent", "clinical", nil, 2, false},
		{"none falls back to the first handler", NoIntent, nil, 1, false},
		{"unknown name falls back", "router", nil, 1, false},
		{"invalid answer falls back", NoIntent, &Error{Class: Invalid, Err: errors.New("bad json")}, 1, false},
		{"transient error is returned", NoIntent, &Error{Class: Transient, Err: errors.New("503")}, -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			router := &fakeAgent{t: t, classify: func(context.Context, IntentRequest) (IntentResponse, error) {
				return IntentResponse{Intent: tc.intent, Confidence: 0.9, Usage: tokens(2)}, tc.err
			}}
			billing := replying(t, PathwayResponse{Reply: "billing", Usage: tokens(5)})
			clinical := replying(t, PathwayResponse{Reply: "clinical", Usage: tokens(7)})
			agents := []Agent{router, billing, clinical}
			got, err := RunPipeline(context.Background(), agents, flowv1.PipelineRouter, PathwayRequest{Spec: spec, Message: "my bill is wrong"})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			ran := -1
			for i, a := range agents[1:] {
				if len(a.(*fakeAgent).runs) > 0 {
					if ran >= 0 {
						t.Errorf("two handlers ran")
					}
					ran = i + 1
				}
			}
			if ran != tc.handler {
				t.Errorf("handler %d ran, want %d", ran, tc.handler)
			}
			if !tc.wantErr {
				if wantUsage := tokens(2).Add(tokens([]int64{0, 5, 7}[tc.handler])); got.Usage != wantUsage {
					t.Errorf("Usage = %+v, want %+v", got.Usage, wantUsage)
				}
			}
			asked := router.asked[0]
			if asked.Message != "my bill is wrong" || len(asked.Intents) != 2 || asked.Intents[0].Name != "billing" || asked.Intents[1].Name != "clinical" {
				t.Errorf("router asked %+v", asked)
			}
		})
	}
}

func TestEnsemblePathwayMajority(t *testing.T) {
	agents := []Agent{
		replying(t, PathwayResponse{Reply: "a", ResultType: flowv1.ResultFailure, Usage: tokens(1)}),
		replying(t, PathwayResponse{Reply: "b", ResultType: flowv1.ResultSuccess, Usage: tokens(1)}),
		replying(t, PathwayResponse{Reply: "c", ResultType: flowv1.ResultSuccess, Usage: tokens(1)}),
	}
	got, err := RunPipeline(context.Background(), agents, flowv1.PipelineEnsemble, PathwayRequest{})
	if err != nil || got.Reply != "b" || got.Usage != tokens(3) {
		t.Errorf("RunPipeline = %+v, %v; want b's answer with summed usage", got, err)
	}
	// A tie goes to the first agent in declared order.
	got, _ = RunPipeline(context.Background(), agents[:2], flowv1.PipelineEnsemble, PathwayRequest{})
	if got.Reply != "a" {
		t.Errorf("tie: reply %q, want a", got.Reply)
	}
}

func TestRunPipelineRejects(t *testing.T) {
	if _, err := RunPipeline(context.Background(), nil, flowv1.PipelineSequential, PathwayRequest{}); ClassOf(err) != Invalid {
		t.Errorf("no agents: err = %v", err)
	}
	if _, err := RunPipeline(context.Background(), []Agent{replying(t, PathwayResponse{})}, "Chain", PathwayRequest{}); ClassOf(err) != Terminal {
		t.Errorf("unknown pipeline: err = %v", err)
	}
}

func deciding(t *testing.T, dest string, confidence float64, err error) *fakeAgent {
	return &fakeAgent{t: t, decide: func(context.Context, DecisionRequest) (DecisionResponse, error) {
		if err != nil {
			return DecisionResponse{Usage: tokens(1)}, err
		}
		return DecisionResponse{Destination: dest, Confidence: confidence, Reasoning: "r-" + dest, Usage: tokens(1)}, nil
	}}
}

func TestDecideEnsemble(t *testing.T) {
	invalid := &Error{Class: Invalid, Err: errors.New("destination not allowed")}
	transient := &Error{Class: Transient, Err: errors.New("429")}
	for _, tc := range []struct {
		name       string
		agents     []*fakeAgent
		dest       string
		confidence float64
		class      ErrorClass
	}{
		{"majority", []*fakeAgent{deciding(t, "booking", 0.9, nil), deciding(t, "escalation", 0.99, nil), deciding(t, "booking", 0.7, nil)}, "booking", 0.8, ""},
		{"tie goes to the first voted", []*fakeAgent{deciding(t, "escalation", 0.6, nil), deciding(t, "booking", 0.9, nil)}, "escalation", 0.6, ""},
		{"tie among later votes", []*fakeAgent{deciding(t, "a", 0.5, nil), deciding(t, "b", 0.5, nil), deciding(t, "b", 0.7, nil), deciding(t, "a", 0.9, nil)}, "a", 0.7, ""},
		{"invalid answers abstain", []*fakeAgent{deciding(t, "", 0, invalid), deciding(t, "booking", 0.4, nil), deciding(t, "", 0, invalid)}, "booking", 0.4, ""},
		{"all invalid is unclear", []*fakeAgent{deciding(t, "", 0, invalid), deciding(t, "", 0, invalid)}, "", 0, Invalid},
		{"empty destinations are unclear", []*fakeAgent{deciding(t, "", 0, nil)}, "", 0, Invalid},
		{"a transient error retries the whole decision", []*fakeAgent{deciding(t, "booking", 0.9, nil), deciding(t, "", 0, transient)}, "", 0, Transient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agents := make([]Agent, len(tc.agents))
			for i, a := range tc.agents {
				a.t = t
				agents[i] = a
			}
			got, err := DecideEnsemble(context.Background(), agents, DecisionRequest{Pathway: "test"})
			if tc.class != "" {
				if ClassOf(err) != tc.class || got.Destination != "" {
					t.Errorf("DecideEnsemble = %+v, %v; want a %s error and no destination", got, err, tc.class)
				}
			} else if err != nil || got.Destination != tc.dest || abs(got.Confidence-tc.confidence) > 1e-9 || got.Reasoning != "r-"+tc.dest {
				t.Errorf("DecideEnsemble = %+v, %v; want %s at %v", got, err, tc.dest, tc.confidence)
			}
			if want := tokens(int64(len(agents))); abs(got.Usage.CostUSD-want.CostUSD) > 1e-12 || got.Usage.PromptTokens != want.PromptTokens {
				t.Errorf("Usage = %+v, want %+v", got.Usage, want)
			}
		})
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
