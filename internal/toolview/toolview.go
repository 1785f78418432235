// Package toolview lists the tool calls of a Session as a person reads them, for
// `kubectl journey history` and the console: from the calls of the turn in progress
// (status.turn.toolCalls, with their arguments), the last turn's records
// (status.lastTurn.toolCalls) and the journaled answers of older calls
// (status.journal), each call once, in the order the Session made them.
package toolview

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// Call is one tool call of a Session.
type Call struct {
	flowv1.ToolCallRecord
	// Step is the step the call was planned at, Index its place in its turn.
	Step  int64
	Index int
	// Pathway is the pathway whose turn made the call, MessageID the message the turn
	// answered ("" when not known).
	Pathway, MessageID string
	// Args is the call's arguments as compact JSON, when the Session still holds them
	// (the turn in progress); "" otherwise.
	Args string
	// AwaitingApproval says the call waits for an approval naming its id.
	AwaitingApproval bool
	// Asks is what the tool's server asks the user while the call waits for an
	// answer (MCP elicitation): the form's message, or the page to visit; "" otherwise.
	Asks string
}

// ArgsPreview is the call's arguments cut to n runes, else "sha256:" and the start of
// their digest.
func (c *Call) ArgsPreview(n int) string {
	if c.Args != "" {
		return truncate.Runes(c.Args, n, "…")
	}
	if c.ArgsDigest != "" {
		return "sha256:" + c.ArgsDigest[:min(12, len(c.ArgsDigest))]
	}
	return ""
}

// askedRunes bounds the question StateText shows.
const askedRunes = 60

// StateText is the call's state, with "awaiting approval", what the server asks, or
// "cached" when so.
func (c *Call) StateText() string {
	s := string(c.State)
	switch {
	case c.Asks != "":
		s += " (asks: " + truncate.Runes(c.Asks, askedRunes, "…") + ")"
	case c.AwaitingApproval:
		s += " (awaiting approval)"
	case c.Cached:
		s += " (cached)"
	}
	return s
}

// Duration is the call's duration ("12ms"), "" when it has none.
func (c *Call) Duration() string {
	if c.DurationMs == 0 && c.State != flowv1.ToolCallDone {
		return ""
	}
	return fmt.Sprintf("%dms", c.DurationMs)
}

// Of lists the tool calls st holds, oldest first.
func Of(st *flowv1.SessionStatus) []Call {
	byID := map[string]*Call{}
	var order []string
	put := func(c Call) {
		if old, ok := byID[c.ID]; ok {
			// A later source knows more; keep what only the earlier one knew.
			c.Pathway, c.MessageID = cmp.Or(c.Pathway, old.Pathway), cmp.Or(c.MessageID, old.MessageID)
			c.ArgsDigest, c.Args = cmp.Or(c.ArgsDigest, old.ArgsDigest), cmp.Or(c.Args, old.Args)
			*old = c
			return
		}
		byID[c.ID] = &c
		order = append(order, c.ID)
	}
	for i := range st.Journal {
		if c, ok := journaled(&st.Journal[i]); ok {
			put(c)
		}
	}
	if lt := st.LastTurn; lt != nil {
		for _, r := range lt.ToolCalls {
			put(newCall(r, lt.Pathway, lt.MessageID))
		}
	}
	if t := st.Turn; t != nil {
		for _, p := range t.ToolCalls {
			c := newCall(p.ToolCallRecord, t.Pathway, t.MessageID)
			c.AwaitingApproval = p.AwaitingApproval
			if e := p.WaitingElicitation(); e != nil {
				c.Asks = asks(e)
			}
			if p.Args != nil {
				c.Args = strings.TrimSpace(string(p.Args.Raw))
			}
			put(c)
		}
	}
	out := make([]Call, 0, len(order))
	for _, id := range order {
		c := byID[id]
		if c.Pathway == "" {
			c.Pathway = pathwayAt(st, c.Step)
		}
		out = append(out, *c)
	}
	slices.SortStableFunc(out, func(a, b Call) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.Index, b.Index))
	})
	return out
}

// asks is what e asks the user, on one line: the form's message, or the page to visit.
func asks(e *flowv1.ToolElicitation) string {
	if e.Mode == flowv1.ElicitationURL {
		return strings.TrimSpace("visit " + e.URL + " " + strings.Join(strings.Fields(e.Message), " "))
	}
	return cmp.Or(strings.Join(strings.Fields(e.Message), " "), "a form")
}

// journaled is the call a journaled CallTool answer answers.
func journaled(rec *flowv1.EffectRecord) (Call, bool) {
	if rec.Kind != flowv1.EffectCallTool || rec.ToolCall == "" {
		return Call{}, false
	}
	r := flowv1.ToolCallRecord{ID: rec.ToolCall, Tool: rec.Agent, State: flowv1.ToolCallDone, DurationMs: rec.Result.DurationMs}
	if f := rec.Result.Failure; f != nil {
		r.State, r.Error = flowv1.ToolCallFailed, f.Message
	}
	return newCall(r, "", ""), true
}

func newCall(r flowv1.ToolCallRecord, pathway, message string) Call {
	c := Call{ToolCallRecord: r, Pathway: pathway, MessageID: message, Step: -1}
	var step int64
	var index int
	if n, err := fmt.Sscanf(r.ID, "t-%d-%d", &step, &index); err == nil && n == 2 {
		c.Step, c.Index = step, index
	}
	return c
}

// pathwayAt is the pathway the Session was in at step: where the last transition
// before it led, else where the first one left from, else the current pathway.
func pathwayAt(st *flowv1.SessionStatus, step int64) string {
	p := ""
	for _, h := range st.History {
		if h.Step >= step {
			if p == "" {
				p = h.From
			}
			break
		}
		p = cmp.Or(h.To, h.From)
	}
	return cmp.Or(p, st.CurrentPathway)
}
