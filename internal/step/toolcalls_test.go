package step

import (
	"encoding/json"
	"reflect"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// TestRecordedPathwayAnswerKeepsToolCalls: a model's answer with tool calls, as
// journaled, is recorded and read back with its calls.
func TestRecordedPathwayAnswerKeepsToolCalls(t *testing.T) {
	k, _ := KindOf(flowv1.EffectRunPathway)
	res := &flowv1.AgentResult{ToolCalls: []flowv1.ModelToolCall{{ID: "call_1", Name: "find_doctors", Arguments: `{"specialty":"cardiology"}`}}}
	recorded := k.Encode(res, agent.Usage{PromptTokens: 10})
	raw, err := json.Marshal(recorded)
	if err != nil {
		t.Fatal(err)
	}
	got, err := k.Decode(raw)
	if err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	want := []agent.ToolCall{{ID: "call_1", Name: "find_doctors", Arguments: `{"specialty":"cardiology"}`}}
	if r := got.(agent.PathwayResponse); !reflect.DeepEqual(r.ToolCalls, want) || r.Usage.PromptTokens != 10 {
		t.Errorf("read back %+v", r)
	}
}
