package engine

import (
	"fmt"
	"slices"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// SameToolCall reports whether rec, a journaled CallTool answer of the Session with
// UID sessionUID, answers the call req made under other step numbers: the same tool
// with the same arguments, once req carries the id and idempotency key the Session
// gave the call. A Session replayed from its inputs numbers its steps anew (a message
// sent with the Session or later is taken at another step), so the ids and keys of its
// tool calls, and with them their input hashes, differ while the calls are the same.
func SameToolCall(rec *flowv1.EffectRecord, sessionUID string, req agent.ToolRequest) bool {
	if rec.Kind != flowv1.EffectCallTool || rec.Agent != req.Tool {
		return false
	}
	var step int64
	var index int
	if n, err := fmt.Sscanf(rec.ToolCall, "t-%d-%d", &step, &index); err != nil || n != 2 || fmt.Sprintf("t-%d-%d", step, index) != rec.ToolCall {
		return false
	}
	req.ID, req.IdempotencyKey = rec.ToolCall, fmt.Sprintf("%s-%d-%d", sessionUID, step, index)
	return newEffect(flowv1.EffectCallTool, nil, "", req).InputHash == rec.InputHash
}

// SameQuestion reports whether rec, a journaled answer of an LLM agent, answers eff
// asked under other step numbers: the tool calls a pathway's request tells the model
// of are named t-<step>-<index>, so a replay that numbers its steps anew asks the same
// question under other names. ids maps the names of eff's calls to the names the
// Session gave the same calls (see SameToolCall); rec answers eff when eff, with its
// calls renamed so, has rec's input hash.
func SameQuestion(rec *flowv1.EffectRecord, eff *Effect, ids map[string]string) bool {
	if rec.Kind != eff.Kind || eff.Pathway == nil || len(eff.Pathway.ToolExchanges) == 0 {
		return false
	}
	req := *eff.Pathway
	req.ToolExchanges = slices.Clone(req.ToolExchanges)
	renamed := false
	for i := range req.ToolExchanges {
		if id, ok := ids[req.ToolExchanges[i].ID]; ok && id != req.ToolExchanges[i].ID {
			req.ToolExchanges[i].ID, renamed = id, true
		}
	}
	return renamed && newEffect(eff.Kind, eff.Agents, eff.Pipeline, req).InputHash == rec.InputHash
}
