package engine

import (
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

func TestSameToolCall(t *testing.T) {
	args := map[string]any{"doctor_id": "dr-lee", "slot": "09:00"}
	live := agent.ToolRequest{ID: "t-3-1", Tool: "book_slot", Args: args, IdempotencyKey: "uid-1-3-1"}
	rec := newEffect(flowv1.EffectCallTool, nil, "", live).Record("uid-1", 4, agent.ToolResponse{Result: "ok"}, nil)
	replayed := agent.ToolRequest{ID: "t-7-1", Tool: "book_slot", Args: map[string]any{"slot": "09:00", "doctor_id": "dr-lee"}, IdempotencyKey: "uid-1-7-1"}
	if !SameToolCall(rec, "uid-1", replayed) {
		t.Fatal("the same call under other step numbers is not recognised")
	}
	for name, change := range map[string]func(r *agent.ToolRequest, uid *string, rec *flowv1.EffectRecord){
		"other arguments": func(r *agent.ToolRequest, _ *string, _ *flowv1.EffectRecord) {
			r.Args = map[string]any{"doctor_id": "dr-okafor", "slot": "09:00"}
		},
		"other tool":       func(r *agent.ToolRequest, _ *string, _ *flowv1.EffectRecord) { r.Tool = "find_doctors" },
		"other Session":    func(_ *agent.ToolRequest, uid *string, _ *flowv1.EffectRecord) { *uid = "uid-2" },
		"other kind":       func(_ *agent.ToolRequest, _ *string, rec *flowv1.EffectRecord) { rec.Kind = flowv1.EffectRunPathway },
		"malformed callId": func(_ *agent.ToolRequest, _ *string, rec *flowv1.EffectRecord) { rec.ToolCall = "t-3-1x" },
	} {
		r, uid, rc := replayed, "uid-1", rec.DeepCopy()
		change(&r, &uid, rc)
		if SameToolCall(rc, uid, r) {
			t.Errorf("%s: recognised as the same call", name)
		}
	}
}

func TestSameQuestion(t *testing.T) {
	agents := []flowv1.AgentSpec{{Name: "triage", Provider: flowv1.ProviderOpenAI, Model: "m"}}
	ask := func(callID, result string) *Effect {
		return newEffect(flowv1.EffectRunPathway, agents, "", agent.PathwayRequest{Pathway: "book", Message: "a cardiologist, please",
			ToolExchanges: []agent.ToolExchange{{Round: 1, ID: callID, Tool: "find_doctors", Arguments: `{"specialty":"cardiology"}`, Result: result}}})
	}
	rec := ask("t-2-0", `{"doctors":["dr-lee"]}`).Record("uid-1", 3, &agent.PathwayResponse{Reply: "Found dr-lee"}, nil)
	replayed := ask("t-3-0", `{"doctors":["dr-lee"]}`)
	if replayed.InputHash == rec.InputHash {
		t.Fatal("the call's name is not part of the question: nothing to rename")
	}
	if !SameQuestion(rec, replayed, map[string]string{"t-3-0": "t-2-0"}) {
		t.Fatal("the same question under other call names is not recognised")
	}
	for name, tc := range map[string]struct {
		eff *Effect
		ids map[string]string
	}{
		"no names known":     {replayed, nil},
		"another name":       {replayed, map[string]string{"t-3-0": "t-4-0"}},
		"another result":     {ask("t-3-0", `{"doctors":[]}`), map[string]string{"t-3-0": "t-2-0"}},
		"no tool calls told": {newEffect(flowv1.EffectRunPathway, agents, "", agent.PathwayRequest{Pathway: "book"}), map[string]string{"t-3-0": "t-2-0"}},
	} {
		if SameQuestion(rec, tc.eff, tc.ids) {
			t.Errorf("%s: recognised as the same question", name)
		}
	}
}
