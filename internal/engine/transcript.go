package engine

import (
	"cmp"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// The transcript (status.transcript) is the conversation pathway agents see: each
// turn's user message with the reply that answered it, bounded by
// limits.maxTranscriptBytes, which it shares with lastTurn.replies (the replies of the
// last turn, often the transcript's newest exchanges too). Whole exchanges are dropped
// from the front to stay under the bound; a message is never cut. The bound counts the transcript as stored (its
// JSON, as status.history and status.journal count theirs), so it bounds the object's
// size whatever the messages are like: short messages cost their ids and field names
// too. At most MaxTranscriptExchanges are kept however small. The first drop sets the TranscriptTrimmed
// condition, which stays: the conversation agents see is no longer the whole one.
//
// The transcript also keeps the inputs that left the spec without a message: each
// External outcome with the exchange of the turn it started, and each approval in an
// exchange of its own. Agents do not see them; record and replay send them again.
//
// A turn that called tools also keeps, in its exchange, each call with a short
// preview of its arguments and of what came of it (the result, or why it failed or
// was refused or rejected), so later turns know what was looked up or booked.
// Previews are cut at a UTF-8 boundary and then say so; the calls of one exchange
// take at most maxExchangeToolBytes, and the calls past it are counted, not kept.
// Agents get the calls as lines of the turn's assistant message, before its reply:
//
//	[called find_doctors {"specialty":"cardiology"} -> {"doctors":["dr-lee"]}]
//
// They are text rather than replayed tool-call and tool messages: a cut preview is
// not valid JSON arguments, a later turn may run a pathway that offers no tools, and
// several OpenAI-compatible servers and chat templates refuse tool messages in either
// case.

const (
	// MaxTranscriptExchanges is the most exchanges status.transcript keeps (its
	// CRD's MaxItems), however few bytes they take.
	MaxTranscriptExchanges = 1000
	// maxToolArgsPreview and maxToolResultPreview bound one call's previews.
	maxToolArgsPreview   = 160
	maxToolResultPreview = 320
	// maxExchangeToolBytes bounds the tool calls kept in one exchange.
	maxExchangeToolBytes = 2048
)

// recordExchange appends the pathway run that just ended, started by trigger, to the
// transcript: its message (for a run the message started, not the entry runs it led
// into) or its External outcome, its tool calls and its reply. A run with none of
// them adds nothing.
func (r *run) recordExchange(trigger flowv1.TurnTrigger) {
	lt := r.st.LastTurn
	if lt == nil {
		return
	}
	ex := flowv1.Exchange{Pathway: lt.Pathway, Assistant: lt.AssistantText, Step: r.step}
	if trigger == flowv1.TurnMessage && lt.MessageID != "" {
		ex.MessageID = lt.MessageID
		ex.User, _ = r.message(lt.MessageID)
	}
	if r.st.Turn != nil {
		ex.ToolCalls, ex.ToolCallsOmitted = exchangeToolCalls(r.st.Turn.ToolCalls)
	}
	if trigger == flowv1.TurnExternalOutcome {
		// The outcome the turn applied (see startTurn). A client may have dropped it from
		// spec.outcomes while the turn waited on an agent: then only its number is kept.
		i := r.st.ProcessedOutcomes - 1
		ex.InputNumber = i + 1
		if o, ok := r.spec.OutcomeAt(i); ok {
			ex.Outcome = o.DeepCopy()
		}
	}
	if ex.User == "" && ex.Assistant == "" && len(ex.ToolCalls) == 0 && ex.InputNumber == 0 {
		return
	}
	r.appendExchange(ex)
}

// recordApproval appends approval a, the n-th the Session was sent, to the transcript
// as it was sent, with the pathway that waited on it, whether it applied or was
// denied: record and replay send it again.
func (r *run) recordApproval(a flowv1.Approval, n int32, pathway string) {
	r.appendExchange(flowv1.Exchange{Pathway: pathway, Step: r.step, Approval: a.DeepCopy(), InputNumber: n})
}

func (r *run) appendExchange(ex flowv1.Exchange) {
	r.st.Transcript = append(r.st.Transcript, ex)
	r.trimTranscript()
}

// trimTranscript drops the oldest exchanges past MaxTranscriptExchanges, or past
// limits.maxTranscriptBytes less what lastTurn.replies takes (they share the bound).
func (r *run) trimTranscript() {
	st := r.st
	budget := r.snap.lim.transcriptBytes
	if lt := st.LastTurn; lt != nil && len(lt.Replies) > 0 {
		budget -= StoredBytes(lt.Replies)
	}
	kept := keepNewest(st.Transcript, MaxTranscriptExchanges, budget, false)
	if drop := len(st.Transcript) - len(kept); drop > 0 {
		st.Transcript = kept
		st.TranscriptDropped += int32(drop)
		setCondition(st, flowv1.ConditionTranscriptTrimmed, metav1.ConditionTrue, flowv1.ReasonOldestExchangesDropped, fmt.Sprintf(
			"The oldest exchanges are dropped from status.transcript to keep it under %d bytes and %d exchanges (status.transcriptDropped counts them); pathway agents no longer see them",
			r.snap.lim.transcriptBytes, MaxTranscriptExchanges), r.now)
	}
	if len(st.Transcript) == 0 {
		st.Transcript = nil
	}
}

// exchangeToolCalls are a turn's tool calls as its exchange keeps them, and how many
// were left out to stay under maxExchangeToolBytes.
func exchangeToolCalls(calls []flowv1.ToolCallProgress) (out []flowv1.ExchangeToolCall, omitted int32) {
	size := 0
	for i, c := range calls {
		e := flowv1.ExchangeToolCall{Tool: truncate.Bytes(c.Tool, 256, ""), State: c.State, Result: preview(toolOutcome(c), maxToolResultPreview)}
		if c.Args != nil {
			e.Args = preview(string(c.Args.Raw), maxToolArgsPreview)
		}
		if size += toolCallBytes(e); size > maxExchangeToolBytes {
			return out, int32(len(calls) - i)
		}
		out = append(out, e)
	}
	return out, 0
}

// toolOutcome is what came of call c: its result, else why it has none.
func toolOutcome(c flowv1.ToolCallProgress) string {
	if c.State == flowv1.ToolCallDone && c.Result != nil {
		return string(c.Result.Raw)
	}
	return cmp.Or(c.Error, "tool call "+strings.ToLower(string(c.State)))
}

// preview is s when it fits in n bytes, else its first bytes (cut at a UTF-8
// boundary) followed by a note that says it was cut and how long it was.
func preview(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return truncate.Bytes(s, n, fmt.Sprintf("… (cut, %d bytes)", len(s)))
}

func toolCallBytes(e flowv1.ExchangeToolCall) int {
	return len(e.Tool) + len(e.Args) + len(e.Result) + len(e.State)
}

// history is the transcript as alternating user and assistant lines, oldest first;
// a turn's tool calls are lines of its assistant message, before its reply.
func (r *run) history() []agent.Exchange {
	var out []agent.Exchange
	for _, e := range r.st.Transcript {
		if e.Rewound {
			continue // undone by a Rewind: kept as what happened, not shown to agents
		}
		if e.User != "" {
			out = append(out, agent.Exchange{Role: "user", Text: e.User})
		}
		if text := assistantText(e); text != "" {
			out = append(out, agent.Exchange{Role: "assistant", Text: text})
		}
	}
	return out
}

// assistantText is exchange e's assistant message: its tool calls, then its reply.
func assistantText(e flowv1.Exchange) string {
	if len(e.ToolCalls) == 0 && e.ToolCallsOmitted == 0 {
		return e.Assistant
	}
	var b strings.Builder
	for _, c := range e.ToolCalls {
		fmt.Fprintf(&b, "[called %s %s -> ", c.Tool, cmp.Or(c.Args, "{}"))
		if c.State != "" && c.State != flowv1.ToolCallDone {
			fmt.Fprintf(&b, "%s: ", c.State)
		}
		fmt.Fprintf(&b, "%s]\n", c.Result)
	}
	if e.ToolCallsOmitted > 0 {
		fmt.Fprintf(&b, "[and %d more tool calls, not shown]\n", e.ToolCallsOmitted)
	}
	if e.Assistant != "" {
		b.WriteString("\n")
		b.WriteString(e.Assistant)
	}
	return strings.TrimRight(b.String(), "\n")
}
