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
