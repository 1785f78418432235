package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// Elicitation. A server may ask the user for input during a call (MCP elicitation:
// a form, or a URL to visit). The Session's user answers in their own time, across
// manager restarts, so the call is not held open while they do: a request with no
// recorded answer ends the attempt (the server's request fails and the call is
// cancelled), the Session shows what was asked and waits, and once the user answered
// the call is made again with the same idempotency key; the server's request, asked
// again, is given the recorded answer at once.

// errAwaitingAnswer is what a server's request for input the user has not answered
// yet gets: the call it belongs to is abandoned and made again later.
var errAwaitingAnswer = errors.New("the user has not answered yet: the call is abandoned and made again, with the same idempotency key, once they have")

// elicitationModes is what the client says it can ask the user: forms and URLs.
func elicitationModes() *mcp.ElicitationCapabilities {
	return &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}
}

// elicitor answers the requests for input of one call attempt: from given, the
// answers recorded for the call, or by abandoning the attempt.
type elicitor struct {
	given   []flowv1.ToolElicitation
	abandon context.CancelFunc

	mu    sync.Mutex
	used  []bool
	asked *flowv1.ToolElicitation
}

// handle answers request req with the recorded answer to the same question, or
// records it and abandons the call.
func (e *elicitor) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	q := question(req.Params)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.used == nil {
		e.used = make([]bool, len(e.given))
	}
	for i := range e.given {
		g := &e.given[i]
		if e.used[i] || g.Answer == "" || !sameQuestion(g, q) {
			continue
		}
		e.used[i] = true
		res := &mcp.ElicitResult{Action: strings.ToLower(string(g.Answer))}
		if g.Answer == flowv1.AnswerAccept && g.Content != nil {
			if err := json.Unmarshal(g.Content.Raw, &res.Content); err != nil {
				return nil, err
			}
		}
		return res, nil
	}
	if e.asked == nil {
		e.asked = q
	}
	e.abandon()
	return nil, errAwaitingAnswer
}

// pending is the request for input the attempt ended on, nil for none.
func (e *elicitor) pending() *flowv1.ToolElicitation {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.asked
}

// question is request p as the Session records it.
func question(p *mcp.ElicitParams) *flowv1.ToolElicitation {
	q := &flowv1.ToolElicitation{Mode: flowv1.ElicitationForm, Message: truncate.Bytes(p.Message, flowv1.MaxElicitationMessageBytes, "…")}
	if p.Mode == "url" || (p.Mode == "" && p.URL != "") {
		q.Mode, q.URL, q.ElicitationID = flowv1.ElicitationURL, p.URL, p.ElicitationID
	}
	if p.RequestedSchema != nil {
		if raw, err := json.Marshal(p.RequestedSchema); err == nil {
			q.RequestedSchema = &apiextensionsv1.JSON{Raw: raw}
		}
	}
	return q
}

// sameQuestion reports whether a and b ask the same: mode, message, URL and schema.
func sameQuestion(a, b *flowv1.ToolElicitation) bool {
	if a.Mode != b.Mode || a.Message != b.Message || a.URL != b.URL {
		return false
	}
	return canonical(a.RequestedSchema) == canonical(b.RequestedSchema)
}

func canonical(j *apiextensionsv1.JSON) string {
	if j == nil {
		return ""
	}
	var v any
	if json.Unmarshal(j.Raw, &v) != nil {
		return string(j.Raw)
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}
