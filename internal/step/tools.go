package step

import (
	"context"
	"encoding/json"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
	"github.com/journeyops/journey-operator/internal/engine"
)

// callTool is the CallTool kind: one tool call made from its write-ahead record. Its
// Call computes a builtin tool (the one place that does); a server tool needs a
// ToolCaller (see Agents), or its result recorded in a journey test.
var callTool = &Kind{
	Name: flowv1.EffectCallTool,
	Call: func(_ context.Context, _ []agent.Agent, eff *engine.Effect) (any, error) {
		return builtin.CallTool(*eff.Tool)
	},
	Decode:  decodeInto[agent.ToolResponse],
	Fields:  "result, error and durationMs",
	Example: "{result: {slots: [...]}}",
	Encode: func(res *flowv1.AgentResult, _ agent.Usage) any {
		r := agent.ToolResponse{DurationMs: res.DurationMs}
		if res.ToolResult != nil {
			_ = json.Unmarshal(res.ToolResult.Raw, &r.Result)
		}
		if res.Failure != nil {
			r.Error = res.Failure.Message
		}
		return r
	},
	Describe: func(eff *engine.Effect) string { return "CallTool of tool " + eff.Tool.Tool },
	Pathway:  func(*engine.Effect) string { return "" },
}
