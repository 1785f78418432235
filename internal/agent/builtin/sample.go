package builtin

import (
	"context"
	"fmt"
	"strings"

	"github.com/journeyops/journey-operator/internal/agent"
)

var _ agent.Sampler = (*Agent)(nil)

// Sample answers a tool server's sampling request offline: the agent's
// builtin.reply, a text/template over .messages (each {role, text}), .systemPrompt
// and .last (the text of the last message), when set; else the last message's
// text, as an echo. It costs nothing.
func (a *Agent) Sample(_ context.Context, req agent.SampleRequest) (agent.SampleResponse, error) {
	last := ""
	if n := len(req.Messages); n > 0 {
		last = req.Messages[n-1].Text
	}
	resp := agent.SampleResponse{Text: last, Model: "builtin", StopReason: "endTurn"}
	if a.own == nil || a.own.Reply == "" {
		return resp, nil
	}
	t, err := Parse(a.own.Reply)
	if err != nil {
		return agent.SampleResponse{}, a.failed(err)
	}
	msgs := make([]map[string]any, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = map[string]any{"role": m.Role, "text": m.Text}
	}
	var b strings.Builder
	if err := t.Execute(&b, map[string]any{"messages": msgs, "systemPrompt": req.SystemPrompt, "last": last}); err != nil {
		return agent.SampleResponse{}, a.failed(err)
	}
	resp.Text = b.String()
	return resp, nil
}

// failed is the error of a reply template that does not work for a sampling request.
func (a *Agent) failed(err error) error {
	return &agent.Error{Class: agent.Invalid, Agent: a.name, Err: fmt.Errorf("builtin.reply for a sampling request: %w", err)}
}
