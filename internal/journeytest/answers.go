package journeytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/engine"
	protocol "github.com/journeyops/journey-operator/internal/step"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// response decodes the answer into what the agent returns: a response, or an error.
func (a *Answer) response() (reply, error) {
	if a.Error != nil {
		e := &agent.Error{Class: agent.Invalid, Kind: a.Error.Kind, Source: a.Error.Source, Err: errors.New(a.Error.Message)}
		if a.Error.Class == string(agent.Terminal) {
			e.Class = agent.Terminal
		}
		if e.Kind == "" {
			e.Kind = flowv1.FailureValidation
		}
		if e.Source == "" {
			e.Source = flowv1.FailureLLM
		}
		return reply{err: e}, nil
	}
	if a.Answer == nil {
		return reply{}, errors.New("no answer")
	}
	k, ok := protocol.KindOf(a.Kind)
	if !ok {
		return reply{}, fmt.Errorf("unknown kind %q", a.Kind)
	}
	resp, err := k.Decode(a.Answer)
	if err != nil {
		return reply{}, fmt.Errorf("a %s answer has %s: %w", a.Kind, k.Fields, err)
	}
	return reply{resp: resp}, nil
}

// MissingAnswerError says that the engine called a remote agent the test has no
// recorded answer for.
type MissingAnswerError struct {
	Step   int // 1-based
	Effect string
	Kind   flowv1.EffectKind
	Given  int
	// Journal says the answer was looked for in a live Session's journal; Complete that
	// the journal holds every answer the Session was given.
	Journal, Complete bool
}

func (e *MissingAnswerError) Error() string {
	switch {
	case e.Journal && e.Complete && e.Kind == flowv1.EffectCallTool:
		return fmt.Sprintf("today's engine makes a tool call (%s) the Session never made: status.journal holds no answer to a call of that tool with the same arguments", e.Effect)
	case e.Journal && e.Complete:
		return fmt.Sprintf("today's engine calls an LLM agent (%s) with a question the Session never asked: status.journal holds no answer with its kind and input hash", e.Effect)
	case e.Journal:
		return fmt.Sprintf("the engine called an LLM agent (%s) and the Session no longer holds an answer to that question (status.journal is empty or dropped its oldest answers)", e.Effect)
	}
	have := "it has none"
	if e.Given > 0 {
		have = fmt.Sprintf("its %d answers are used up", e.Given)
	}
	return fmt.Sprintf("the engine called an LLM agent (%s) and the step has no recorded answer for it (%s): add one under steps[%d].answers, for example {kind: %s, answer: %s}",
		e.Effect, have, e.Step-1, e.Kind, exampleAnswer(e.Kind))
}

func exampleAnswer(k flowv1.EffectKind) string {
	kind, ok := protocol.KindOf(k)
	if !ok {
		kind, _ = protocol.KindOf(flowv1.EffectClassifyIntent)
	}
	return kind.Example
}

// script answers the effects of one step from its recorded answers, in order.
type script struct {
	step    int // 1-based
	answers []Answer
	used    int
	// tools and caseTools are the scripted results of server tools: the step's and
	// the test's.
	tools, caseTools []ToolResult
}

func (s *script) answer(eff *engine.Effect) (reply, error) {
	if isBuiltinTool(eff) {
		// A builtin tool is pure: it is computed, as the controller computes it.
		r := computeTool(eff)
		return r, s.recordedBuiltin(eff, r)
	}
	if eff.Kind == flowv1.EffectCallTool && eff.Tool != nil && !s.nextIsToolAnswer(eff) {
		if r, ok := s.scriptedTool(eff); ok {
			return r, nil
		}
		return reply{}, &MissingToolResultError{Step: s.step, Tool: eff.Tool.Tool, Args: eff.Tool.Args}
	}
	if s.used >= len(s.answers) {
		return reply{}, &MissingAnswerError{Step: s.step, Effect: protocol.Describe(eff), Kind: eff.Kind, Given: len(s.answers)}
	}
	a := &s.answers[s.used]
	where := fmt.Sprintf("answers[%d]", s.used)
	s.used++
	if a.Kind != eff.Kind {
		return reply{}, fmt.Errorf("the engine called an LLM agent (%s) but %s is a %s answer", protocol.Describe(eff), where, a.Kind)
	}
	agentName := ""
	switch {
	case len(eff.Agents) > 0:
		agentName = string(eff.Agents[0].Name)
	case eff.Tool != nil:
		agentName = eff.Tool.Tool // a tool call's answer names the tool
	}
	if a.Agent != "" && a.Agent != agentName {
		return reply{}, fmt.Errorf("the engine called %s but %s is for agent %s", protocol.Describe(eff), where, a.Agent)
	}
	if a.Pathway != "" {
		if k, _ := protocol.KindOf(eff.Kind); k == nil || a.Pathway != k.Pathway(eff) {
			return reply{}, fmt.Errorf("the engine called %s but %s is for pathway %s", protocol.Describe(eff), where, a.Pathway)
		}
	}
	if a.InputHash != "" && !strings.HasPrefix(eff.InputHash, a.InputHash) {
		return reply{}, fmt.Errorf("the engine called %s with a question (input hash %.12s) other than the recorded one of %s (input hash %.12s)",
			protocol.Describe(eff), eff.InputHash, where, a.InputHash)
	}
	r, err := a.response()
	if err != nil {
		return reply{}, fmt.Errorf("%s: %w", where, err)
	}
	var ae *agent.Error
	if errors.As(r.err, &ae) {
		ae.Agent = agentName
	}
	return r, nil
}

// isBuiltinTool reports whether eff calls a builtin tool.
func isBuiltinTool(eff *engine.Effect) bool {
	return eff.Kind == flowv1.EffectCallTool && eff.Tool != nil && eff.Tool.Builtin != ""
}

// computeTool computes the builtin tool call eff, as the controller does.
func computeTool(eff *engine.Effect) reply {
	resp, err := protocol.Call(context.Background(), nil, eff)
	return reply{resp: resp, err: err}
}

// recordedBuiltin uses up the step's next recorded answer when it answers the builtin
// tool call eff (tests recorded by an older kubectl journey record carry them): it must
// be what the tool computes, r.
func (s *script) recordedBuiltin(eff *engine.Effect, r reply) error {
	if s.used >= len(s.answers) {
		return nil
	}
	a := &s.answers[s.used]
	if a.Kind != flowv1.EffectCallTool || a.Agent != eff.Tool.Tool {
		return nil
	}
	where := fmt.Sprintf("answers[%d]", s.used)
	s.used++
	rec, err := a.response()
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	got, _ := r.resp.(agent.ToolResponse)
	want, _ := rec.resp.(agent.ToolResponse)
	if rec.err != nil || r.err != nil || !equalJSON(got.Result, want.Result) || got.Error != want.Error {
		return fmt.Errorf("%s answers builtin tool %s with %s, today's engine computes %s: builtin tools need no recorded answer, remove it",
			where, eff.Tool.Tool, describeToolAnswer(rec), describeToolAnswer(r))
	}
	return nil
}

// describeToolAnswer is a tool's answer as JSON, or its error.
func describeToolAnswer(r reply) string {
	if r.err != nil {
		return "error " + strconv.Quote(r.err.Error())
	}
	t, _ := r.resp.(agent.ToolResponse)
	if t.Error != "" {
		return "error " + strconv.Quote(t.Error)
	}
	return truncate.Line(compactJSON(t.Result), 200)
}

// unused reports answers the step did not need.
func (s *script) unused() []string {
	var out []string
	for i := s.used; i < len(s.answers); i++ {
		out = append(out, fmt.Sprintf("answers[%d] (%s) was not used: the engine made fewer LLM calls than recorded", i, s.answers[i].Kind))
	}
	return out
}

// answerOf turns a journaled agent result back into a recorded answer.
func answerOf(rec *flowv1.EffectRecord) Answer {
	a := Answer{Kind: rec.Kind, Agent: rec.Agent, InputHash: rec.InputHash}
	res := rec.Result
	if f := res.Failure; f != nil {
		msg := f.Message
		// Strip the "agent <name>: <class> <kind>: " prefix agent errors add.
		if rest, ok := strings.CutPrefix(msg, "agent "+rec.Agent+": "); ok {
			if _, tail, ok := strings.Cut(rest, ": "); ok {
				msg = tail
			}
		}
		a.Error = &AnswerError{Kind: f.Kind, Source: f.Source, Message: msg}
		return a
	}
	usage := agent.Usage{PromptTokens: res.Usage.PromptTokens, CompletionTokens: res.Usage.CompletionTokens}
	if res.Usage.CostUSD != "" {
		fmt.Sscan(res.Usage.CostUSD, &usage.CostUSD)
	}
	var v any
	if k, ok := protocol.KindOf(rec.Kind); ok {
		v = k.Encode(&res, usage)
	}
	raw, _ := json.Marshal(v)
	a.Answer = bytes.TrimSpace(raw)
	return a
}
