// Package journeytest runs journey tests: YAML scripts of messages, External outcomes
// and approvals sent to a Session of a journey, with expectations on where the Session
// is after each of them. A test runs offline: it compiles the Journey and Pathway
// manifests into the snapshot the Journey controller would build, and drives the engine
// the way the Session controller does, with a fixed clock and recorded answers for the
// LLM agents. docs/testing-journeys.md describes the format.
package journeytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/revision"
	protocol "github.com/journeyops/journey-operator/internal/step"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// DefaultStart is the clock of a test that sets no start: the Session is created then,
// and every engine step that changes it takes one second.
var DefaultStart = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

// Case is one journey test file.
type Case struct {
	// Name names the test in reports; defaults to the file name without extension.
	Name string `json:"name,omitempty"`
	// Description says what the test shows.
	Description string `json:"description,omitempty"`
	// Journey names the Journey to run; optional when the manifests hold one Journey.
	Journey string `json:"journey,omitempty"`
	// Revision, when set, is the revision name the manifests must compile to (recorded
	// tests set it: the Session's status.journeyRevision).
	Revision string `json:"revision,omitempty"`
	// Session is the name and UID of the Session (visible to CEL as session.name).
	Session SessionMeta `json:"session,omitzero"`
	// Start is the Session's creation time (RFC 3339); defaults to DefaultStart.
	Start string `json:"start,omitempty"`
	// InitialContext is the Session's spec.initialContext.
	InitialContext *apiextensionsv1.JSON `json:"initialContext,omitempty"`
	// ServerTools pins the journey's server tools as their servers listed them (input
	// schema, read-only and destructive hints), by tool name, as the Journey
	// controller pins them in a revision: arguments are checked against the schemas.
	// Recorded tests set it; without it no schema is checked.
	ServerTools map[string]*revision.ToolSchema `json:"serverTools,omitempty"`
	// Tools are scripted results of the journey's server tools, for every step: a
	// tool call is answered by the first that matches it (a step's own tools first).
	Tools []ToolResult `json:"tools,omitempty"`
	// Steps are sent one after the other; the Session settles after each.
	Steps []Step `json:"steps"`
	// Manifests are the Journey and Pathway manifests: paths of multi-document YAML
	// files relative to the test file, or inline objects. Sessions and objects of
	// other kinds are ignored.
	Manifests []Manifest `json:"manifests"`

	// Path is the file the case was read from ("" for a case built in memory).
	Path string `json:"-"`
	// Data is the resolved revision (Journey spec and Pathway specs by local name),
	// filled by Load and Resolve. Tests may change it before Run.
	Data *RevisionData `json:"-"`
}

// SessionMeta identifies the Session of a test.
type SessionMeta struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// Manifest is a manifest file path or an inline manifest.
type Manifest struct {
	// Path is a file path relative to the test file.
	Path string
	// Object is an inline manifest, as JSON.
	Object json.RawMessage
}

func (m *Manifest) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &m.Path)
	}
	if len(b) > 0 && b[0] == '{' {
		m.Object = append(json.RawMessage(nil), b...)
		return nil
	}
	return fmt.Errorf("a manifest is a file path or an inline object, not %s", b)
}

func (m Manifest) MarshalJSON() ([]byte, error) {
	if m.Object != nil {
		return m.Object, nil
	}
	return json.Marshal(m.Path)
}

// Step is one input sent to the Session (at most one of Message, Outcome, Approval;
// none only checks the Session), the answers of the LLM agents it needs, and what to
// expect once the Session has settled.
type Step struct {
	// Name names the step in reports.
	Name string `json:"name,omitempty"`
	// After advances the clock before the step (a Go duration, for example 25h).
	After string `json:"after,omitempty"`
	// Message is a user message: its text, or {id, text}.
	Message *MessageInput `json:"message,omitempty"`
	// Outcome is an External outcome; pathway and iteration default to the Session's.
	Outcome *OutcomeInput `json:"outcome,omitempty"`
	// Approval answers a decision; decisionID defaults to status.lastDecision.id.
	Approval *ApprovalInput `json:"approval,omitempty"`
	// Suspend sets spec.suspend (true pauses the Session, false resumes it).
	Suspend *bool `json:"suspend,omitempty"`
	// Cancel sets spec.cancel: the Session ends as Cancelled.
	Cancel bool `json:"cancel,omitempty"`
	// Answers are the recorded answers of the remote (openai) agents the step calls,
	// in call order.
	Answers []Answer `json:"answers,omitempty"`
	// Tools are scripted results of server tools for this step, tried before the
	// test's tools.
	Tools []ToolResult `json:"tools,omitempty"`
	// Expect is checked once the Session has settled.
	Expect *Expect `json:"expect,omitempty"`
}

// MessageInput is a user message. In YAML it is its text, or {id, text}; the id
// defaults to m<n>, n counting the test's messages from 1.
type MessageInput struct {
	ID   string `json:"id,omitempty"`
	Text string `json:"text"`
}

func (m *MessageInput) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &m.Text)
	}
	type plain MessageInput
	var p plain
	if err := protocol.StrictJSON(b, &p); err != nil {
		return err
	}
	*m = MessageInput(p)
	return nil
}

func (m MessageInput) MarshalJSON() ([]byte, error) {
	if m.ID == "" {
		return json.Marshal(m.Text)
	}
	type plain MessageInput
	return json.Marshal(plain(m))
}

// OutcomeInput is an External outcome. Pathway and Iteration default to the Session's
// current pathway and iteration when the step runs.
type OutcomeInput struct {
	Pathway    string                `json:"pathway,omitempty"`
	Iteration  int32                 `json:"iteration,omitempty"`
	ResultType flowv1.ResultType     `json:"resultType"`
	Data       *apiextensionsv1.JSON `json:"data,omitempty"`
	Message    string                `json:"message,omitempty"`
}

// ApprovalInput answers a decision. DecisionID defaults to status.lastDecision.id.
type ApprovalInput struct {
	DecisionID  string `json:"decisionID,omitempty"`
	Approve     *bool  `json:"approve"`
	Destination string `json:"destination,omitempty"`
	By          string `json:"by,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

// Answer is the recorded answer of a remote agent to one effect.
type Answer struct {
	// Kind is the effect kind: ClassifyIntent, RunPathway, Decide or CallTool.
	Kind flowv1.EffectKind `json:"kind"`
	// Agent, when set, must be the (first) agent the engine asks.
	Agent string `json:"agent,omitempty"`
	// Pathway, when set, must be the pathway of a RunPathway or Decide effect.
	Pathway string `json:"pathway,omitempty"`
	// InputHash, when set, must be the effect's input hash: the question is exactly
	// the recorded one.
	InputHash string `json:"inputHash,omitempty"`
	// Answer is the agent's answer: a PathwayResponse (reply, outputs, resultType,
	// complete (default true), usage), a DecisionResponse (destination, confidence,
	// reasoning, usage) or an IntentResponse (intent, confidence, reasoning, usage).
	Answer json.RawMessage `json:"answer,omitempty"`
	// Error makes the call fail instead.
	Error *AnswerError `json:"error,omitempty"`
}

// AnswerError is a failed agent call.
type AnswerError struct {
	// Class is Invalid (journaled: an unclear decision, no intent, a failed turn; the
	// default) or Terminal (the controller stalls the Session).
	Class string `json:"class,omitempty"`
	// Kind is the failure kind (Exception, Timeout, Validation, Policy, RateLimit,
	// Unknown); defaults to Validation.
	Kind flowv1.FailureKind `json:"kind,omitempty"`
	// Source is the failure source; defaults to LLM.
	Source flowv1.FailureSource `json:"source,omitempty"`
	// Message says what went wrong.
	Message string `json:"message"`
}

// Expect is what a settled Session must look like. Unset fields are not checked.
type Expect struct {
	// Pathway is status.currentPathway.
	Pathway string `json:"pathway,omitempty"`
	// Phase is status.phase.
	Phase flowv1.Phase `json:"phase,omitempty"`
	// Iteration is status.iteration.
	Iteration *int32 `json:"iteration,omitempty"`
	// Confidence is status.confidence: a value ("0.9") or a range ({min, max}).
	Confidence *ConfidenceRange `json:"confidence,omitempty"`
	// Fields maps JSON paths into the Session status (context.rejected_doctors[0].name,
	// lastTurn.outputs.topic, pathwayStack) to their expected values; null expects the
	// field to be absent (or null).
	Fields map[string]any `json:"fields,omitempty"`
	// Reply must be contained in the replies (assistant texts) of the step's turns.
	Reply *TextMatch `json:"reply,omitempty"`
	// Transition must match one of the transitions (history entries) the step took.
	Transition *TransitionMatch `json:"transition,omitempty"`
	// Transitions must match the transitions the step took, in order; [] expects none.
	Transitions []TransitionMatch `json:"transitions,omitempty"`
	// FinishReason is status.lastTurn.finishReason.
	FinishReason flowv1.FinishReason `json:"finishReason,omitempty"`
	// Stalled is the reason of a true Stalled condition.
	Stalled string `json:"stalled,omitempty"`
}

// ConfidenceRange is an inclusive range of confidences. In YAML it is a value ("0.9",
// min = max) or {min, max}.
type ConfidenceRange struct {
	Min string `json:"min,omitempty"`
	Max string `json:"max,omitempty"`
}

func (c *ConfidenceRange) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '{' {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		s := fmt.Sprint(v)
		c.Min, c.Max = s, s
		return nil
	}
	type plain ConfidenceRange
	var p plain
	if err := protocol.StrictJSON(b, &p); err != nil {
		return err
	}
	*c = ConfidenceRange(p)
	return nil
}

func (c ConfidenceRange) MarshalJSON() ([]byte, error) {
	if c.Min == c.Max && c.Min != "" {
		return json.Marshal(c.Min)
	}
	type plain ConfidenceRange
	return json.Marshal(plain(c))
}

func (c ConfidenceRange) String() string {
	if c.Min == c.Max {
		return c.Min
	}
	return fmt.Sprintf("[%s, %s]", orDash(c.Min), orDash(c.Max))
}

// TextMatch matches text. In YAML it is a string (contains) or {contains: [...]}.
type TextMatch struct {
	Contains []string `json:"contains,omitempty"`
}

func (t *TextMatch) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		t.Contains = []string{s}
		return nil
	}
	var p struct {
		Contains json.RawMessage `json:"contains"`
	}
	if err := protocol.StrictJSON(b, &p); err != nil {
		return err
	}
	c := bytes.TrimSpace(p.Contains)
	if len(c) > 0 && c[0] == '"' {
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return err
		}
		t.Contains = []string{s}
		return nil
	}
	return json.Unmarshal(c, &t.Contains)
}

func (t TextMatch) MarshalJSON() ([]byte, error) {
	if len(t.Contains) == 1 {
		return json.Marshal(t.Contains[0])
	}
	return json.Marshal(struct {
		Contains []string `json:"contains"`
	}{t.Contains})
}

// TransitionMatch matches a history entry; unset fields match anything.
type TransitionMatch struct {
	// Name is the transition name: a global transition, on<Result>, next or return.
	Name   string                `json:"name,omitempty"`
	From   string                `json:"from,omitempty"`
	To     string                `json:"to,omitempty"`
	Action flowv1.Action         `json:"action,omitempty"`
	Source flowv1.DecisionSource `json:"source,omitempty"`
}

func (t TransitionMatch) String() string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("name", t.Name)
	add("from", t.From)
	add("to", t.To)
	add("action", string(t.Action))
	add("source", string(t.Source))
	return "{" + strings.Join(parts, " ") + "}"
}

func (t TransitionMatch) matches(h flowv1.HistoryEntry) bool {
	return (t.Name == "" || t.Name == h.Transition) &&
		(t.From == "" || t.From == h.From) &&
		(t.To == "" || t.To == h.To) &&
		(t.Action == "" || t.Action == h.Action) &&
		(t.Source == "" || t.Source == h.Source)
}

// Load reads a test file and resolves its manifests.
func Load(path string) (*Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.Path = path
	if c.Name == "" {
		c.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	if err := c.Resolve(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes a test file strictly (an unknown field is an error) and checks it. It
// does not read the manifests: see Resolve.
func Parse(data []byte) (*Case, error) {
	var c Case
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Marshal writes a case as YAML, its fields in the order of the format (steps before
// the manifests, a step's name first) rather than sorted.
func Marshal(c *Case) ([]byte, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	// JSON is YAML: parsing it keeps the order of the keys.
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	blockStyle(&doc)
	var buf bytes.Buffer
	enc := yamlv3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// flat reports whether n is a mapping of scalars.
func flat(n *yamlv3.Node) bool {
	if n.Kind != yamlv3.MappingNode {
		return false
	}
	for _, c := range n.Content {
		if c.Kind != yamlv3.ScalarNode {
			return false
		}
	}
	return true
}

// blockStyle drops the flow and quoting styles of parsed JSON; the encoder quotes the
// strings that need it.
func blockStyle(n *yamlv3.Node) {
	n.Style = 0
	for i, c := range n.Content {
		blockStyle(c)
		// Expected transitions read best one a line: {name: next, from: a, to: b}.
		if n.Kind == yamlv3.MappingNode && i%2 == 1 && (n.Content[i-1].Value == "transitions" || n.Content[i-1].Value == "transition") {
			if flat(c) {
				c.Style = yamlv3.FlowStyle
			}
			for _, e := range c.Content {
				if flat(e) {
					e.Style = yamlv3.FlowStyle
				}
			}
		}
	}
}

func (c *Case) check() error {
	if len(c.Manifests) == 0 {
		return fmt.Errorf("manifests: list the Journey and Pathway manifests")
	}
	if len(c.Steps) == 0 {
		return fmt.Errorf("steps: a test needs at least one step")
	}
	if c.Start != "" {
		if _, err := time.Parse(time.RFC3339, c.Start); err != nil {
			return fmt.Errorf("start: %w", err)
		}
	}
	if err := checkTools("tools", c.Tools); err != nil {
		return err
	}
	for i := range c.Steps {
		if err := c.Steps[i].check(fmt.Sprintf("steps[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

// check checks the step at where (steps[i]).
func (s *Step) check(where string) error {
	n := 0
	if s.Message != nil {
		n++
		if s.Message.Text == "" {
			return fmt.Errorf("%s.message: the text is empty", where)
		}
	}
	if s.Outcome != nil {
		n++
		switch s.Outcome.ResultType {
		case flowv1.ResultSuccess, flowv1.ResultFailure, flowv1.ResultPartialSuccess, flowv1.ResultUnclear:
		default:
			return fmt.Errorf("%s.outcome.resultType: %q is not success, failure, partial_success or unclear", where, s.Outcome.ResultType)
		}
	}
	if s.Approval != nil {
		n++
		if s.Approval.Approve == nil {
			return fmt.Errorf("%s.approval.approve: say true or false", where)
		}
	}
	if s.Suspend != nil {
		n++
	}
	if s.Cancel {
		n++
	}
	if n > 1 {
		return fmt.Errorf("%s: a step sends at most one of message, outcome, approval, suspend and cancel", where)
	}
	if s.After != "" {
		if d, err := time.ParseDuration(s.After); err != nil || d < 0 {
			return fmt.Errorf("%s.after: %q is not a positive duration such as 90s or 25h", where, s.After)
		}
	}
	for j := range s.Answers {
		if err := s.Answers[j].check(fmt.Sprintf("%s.answers[%d]", where, j)); err != nil {
			return err
		}
	}
	if err := checkTools(where+".tools", s.Tools); err != nil {
		return err
	}
	if s.Expect != nil {
		return s.Expect.checkFormat(where + ".expect")
	}
	return nil
}

// check checks the recorded answer at w.
func (a *Answer) check(w string) error {
	if _, ok := protocol.KindOf(a.Kind); !ok {
		return fmt.Errorf("%s.kind: %q is not %s", w, a.Kind, protocol.KindNames())
	}
	if (a.Answer == nil) == (a.Error == nil) {
		return fmt.Errorf("%s: give exactly one of answer and error", w)
	}
	if a.Error != nil && a.Error.Class != "" && a.Error.Class != "Invalid" && a.Error.Class != "Terminal" {
		return fmt.Errorf("%s.error.class: %q is not Invalid or Terminal", w, a.Error.Class)
	}
	if _, err := a.response(); err != nil {
		return fmt.Errorf("%s.answer: %w", w, err)
	}
	return nil
}

// checkFormat checks the expectations at where (steps[i].expect).
func (e *Expect) checkFormat(where string) error {
	if e.Confidence != nil {
		for _, v := range []string{e.Confidence.Min, e.Confidence.Max} {
			if v == "" {
				continue
			}
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return fmt.Errorf("%s.confidence: %q is not a number", where, v)
			}
		}
	}
	for p := range e.Fields {
		if _, err := parsePath(p); err != nil {
			return fmt.Errorf("%s.fields: %q: %w", where, p, err)
		}
	}
	return nil
}

// describe is a one-line description of the step's input.
func (s *Step) describe(msgID string) string {
	switch {
	case s.Message != nil:
		return fmt.Sprintf("message %s %q", msgID, truncate.Line(s.Message.Text, 48))
	case s.Outcome != nil:
		d := "outcome " + string(s.Outcome.ResultType)
		if s.Outcome.Pathway != "" {
			d += " for " + s.Outcome.Pathway
			if s.Outcome.Iteration > 0 {
				d += fmt.Sprintf("/%d", s.Outcome.Iteration)
			}
		}
		return d
	case s.Approval != nil:
		d := "approve"
		if !*s.Approval.Approve {
			d = "reject"
		}
		if s.Approval.DecisionID != "" {
			d += " " + s.Approval.DecisionID
		}
		if s.Approval.Destination != "" {
			d += " -> " + s.Approval.Destination
		}
		return d
	case s.Suspend != nil && *s.Suspend:
		return "suspend"
	case s.Suspend != nil:
		return "resume"
	case s.Cancel:
		return "cancel"
	}
	return "no input"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
