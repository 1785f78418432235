package engine

import (
	"encoding/json"
	"strings"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// TestLargeToolResultIsCut: a tool's result over MaxToolResultBytes is journaled as
// a JSON string within the bound, its beginning then a note that says it was cut;
// a result within the bound is kept as it is.
func TestLargeToolResultIsCut(t *testing.T) {
	eff := newEffect(flowv1.EffectCallTool, nil, "", agent.ToolRequest{ID: "t-1-0", Tool: "export", IdempotencyKey: "k"})
	rows := make([]any, 0, 2000)
	for i := range 2000 {
		rows = append(rows, map[string]any{"row": i, "text": `a "quoted" value`})
	}
	big := map[string]any{"rows": rows}
	rec := eff.Record("uid", 1, agent.ToolResponse{Result: big}, nil)
	raw := rec.Result.ToolResult.Raw
	if len(raw) > flowv1.MaxToolResultBytes {
		t.Fatalf("journaled result is %d bytes, over %d", len(raw), flowv1.MaxToolResultBytes)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("a cut result is not a JSON string: %v: %.80s", err, raw)
	}
	full, _ := json.Marshal(big)
	if !strings.HasPrefix(s, string(full[:1000])) || !strings.Contains(s, "[cut: the tool's result was") || !strings.HasSuffix(s, "this is its beginning]") {
		t.Errorf("cut result does not start with the result and end with the note: %.120s … %s", s, s[max(0, len(s)-120):])
	}

	small := eff.Record("uid", 1, agent.ToolResponse{Result: map[string]any{"ok": true}}, nil)
	if got := string(small.Result.ToolResult.Raw); got != `{"ok":true}` {
		t.Errorf("small result journaled as %s", got)
	}
}
