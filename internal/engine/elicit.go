package engine

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// Elicitation. A tool server may ask the user for input during a call (MCP
// elicitation: a form described by a schema, or a URL to visit). The call is not held
// open while the user answers: its attempt ends with the request journaled as the
// call's answer (AgentResult.elicitation), and applying it makes the call
// AwaitingInput with what was asked (toolCalls[].elicitations). The Session is
// WaitingForInput, its AwaitingInput condition True with reason InputRequested, the
// message showing the question and the kubectl journey answer command. It waits
// across restarts: the wait is status.
//
// An Answer intervention (Accept with a form's fields, Decline or Cancel) records the
// answer on the call and makes it Pending: it is sent again with the same idempotency
// key, and the tool caller gives the server's request, asked again, the recorded
// answer at once. What the server then answers (its result for an Accept, whatever it
// makes of a Decline or a Cancel) goes back to the model as the tool's result. No
// answer within the tool's elicitationTimeout (1h by default) answers Cancel for the
// user. A call may ask at most maxElicitations times.

// maxElicitations bounds the requests for input of one call.
const maxElicitations = 4

// askedForInput applies q, the request for input a call's attempt ended on, to call c:
// c waits for the user's answer, or fails when the request cannot be kept (too large,
// or one request too many).
func (r *run) askedForInput(c *flowv1.ToolCallProgress, q *flowv1.ToolElicitation) {
	why := ""
	switch {
	case len(c.Elicitations) >= maxElicitations:
		why = fmt.Sprintf("the server asked the user for input %d times in one call, more than the %d a call may ask", len(c.Elicitations)+1, maxElicitations)
	case q.RequestedSchema != nil && len(q.RequestedSchema.Raw) > flowv1.MaxElicitationSchemaBytes:
		why = fmt.Sprintf("the server asked for input with a form schema of %d bytes, over the limit of %d", len(q.RequestedSchema.Raw), flowv1.MaxElicitationSchemaBytes)
	case len(q.URL) > 2048:
		why = fmt.Sprintf("the server asked the user to visit a URL of %d bytes, over the limit of 2048", len(q.URL))
	}
	if why != "" {
		c.State, c.Error = flowv1.ToolCallFailed, truncate.Bytes("tool "+c.Tool+": "+why, 1024, "")
		return
	}
	e := q.DeepCopy()
	e.Message = truncate.Bytes(e.Message, flowv1.MaxElicitationMessageBytes, "…")
	e.AskedAt, e.Answer, e.Content, e.AnsweredBy = &r.now, "", nil, ""
	c.Elicitations = append(c.Elicitations, *e)
	// The server asked before it answered: the call is made again once the user has
	// answered (marked sent anew when its server has no idempotency keys).
	c.State, c.Error, c.SentAt = flowv1.ToolCallAwaitingInput, "", nil
}

// awaitInput holds the turn on call c while it waits for the user's answer to its
// server's request for input. wait is false when c does not wait (any more): once its
// elicitationTimeout passed, the request is answered Cancel for the user and c is
// Pending, to be sent again.
func (r *run) awaitInput(c *flowv1.ToolCallProgress) (res stageResult, wait bool) {
	e := c.WaitingElicitation()
	if e == nil {
		return turnOver, false
	}
	if at, ok := r.snap.inputDeadline(c); ok && r.in.Now.After(at) {
		e.Answer, e.AnsweredBy = flowv1.AnswerCancel, "the system"
		c.State = flowv1.ToolCallPending
		r.addFailure(flowv1.Failure{Source: flowv1.FailurePolicy, Component: c.Tool, Kind: flowv1.FailureTimeout,
			Message: fmt.Sprintf("tool call %s: no one answered the input its server asked for within %s; the server was answered Cancel", c.ID, r.snap.elicitationWait(c))})
		return turnOver, false
	}
	return stageResult{pause: true}, true
}

// elicitationWait is how long call c waits for the user's answer.
func (s *Snapshot) elicitationWait(c *flowv1.ToolCallProgress) time.Duration {
	t, _ := s.tool(c.Tool)
	return t.ElicitationWait()
}

// inputDeadline is when call c stops waiting for the user's answer; ok is false when
// it waits for none.
func (s *Snapshot) inputDeadline(c *flowv1.ToolCallProgress) (time.Time, bool) {
	e := c.WaitingElicitation()
	if e == nil || e.AskedAt == nil {
		return time.Time{}, false
	}
	return e.AskedAt.Add(s.elicitationWait(c)), true
}

// earliestInputDeadline is the first time a call of the turn in progress stops waiting
// for the user's answer.
func (s *Snapshot) earliestInputDeadline(st *flowv1.SessionStatus) (time.Time, bool) {
	var first time.Time
	if st.Turn == nil {
		return first, false
	}
	for i := range st.Turn.ToolCalls {
		if at, ok := s.inputDeadline(&st.Turn.ToolCalls[i]); ok && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first, !first.IsZero()
}

// answerInput applies an Answer intervention to call c, which waits for the input its
// server asked for: the answer is recorded on the request, and c is sent again.
func (r *run) answerInput(c *flowv1.ToolCallProgress, iv *flowv1.Intervention) {
	e := c.WaitingElicitation()
	e.Answer, e.AnsweredBy = iv.Outcome, iv.By
	e.Content = nil
	if iv.Outcome == flowv1.AnswerAccept {
		e.Content = iv.Content.DeepCopy()
	}
	c.State = flowv1.ToolCallPending
	r.syncToolCall(c)
	r.recordIntervention(iv, r.st.CurrentPathway, "", fmt.Sprintf("answered tool call %s: %s, sent again", c.ID, strings.ToLower(string(iv.Outcome))))
}

// answeredInput are the requests for input of call c the user answered, for the call
// made again.
func answeredInput(c *flowv1.ToolCallProgress) []flowv1.ToolElicitation {
	var out []flowv1.ToolElicitation
	for i := range c.Elicitations {
		if c.Elicitations[i].Answer != "" {
			out = append(out, *c.Elicitations[i].DeepCopy())
		}
	}
	return out
}

// inputWaiter is the call of the turn in progress that waits for the user's input,
// nil for none.
func inputWaiter(st *flowv1.SessionStatus) *flowv1.ToolCallProgress {
	if st.Turn == nil {
		return nil
	}
	for i := range st.Turn.ToolCalls {
		if st.Turn.ToolCalls[i].WaitingElicitation() != nil {
			return &st.Turn.ToolCalls[i]
		}
	}
	return nil
}

// inputMessage is the AwaitingInput message of call c, which waits for the user: what
// the server asked and how to answer.
func (r *run) inputMessage(c *flowv1.ToolCallProgress) string {
	e := c.WaitingElicitation()
	name := cmp.Or(r.in.SessionName, "SESSION")
	var b strings.Builder
	fmt.Fprintf(&b, "Tool call %s (%s) in pathway %s asks the user for input: %q", c.ID, c.Tool, r.st.CurrentPathway, e.Message)
	if e.Mode == flowv1.ElicitationURL {
		fmt.Fprintf(&b, "; visit %s, then say it is done: kubectl journey answer %s %s --accept (or --decline, --cancel)", e.URL, name, c.ID)
	} else {
		if fields := e.Fields(); len(fields) > 0 {
			fmt.Fprintf(&b, "; fields (* required): %s", strings.Join(fields, ", "))
		}
		fmt.Fprintf(&b, "; answer: kubectl journey answer %s %s --accept FIELD=VALUE... (or --content JSON, --decline, --cancel)", name, c.ID)
	}
	if at, ok := r.snap.inputDeadline(c); ok {
		fmt.Fprintf(&b, "; without an answer by %s it is answered Cancel", at.UTC().Format(time.RFC3339))
	}
	return b.String()
}
