package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// This file holds the predicates that the engine, the webhooks, the controllers and
// the kubectl plugin all need, so that each is written once, next to the types it
// reads.

// The names of the four outcome transitions, as in the API (spec.transitions.<name>)
// and in status (lastDecision.transition, history[].transition).
const (
	TransitionOnSuccess        = "onSuccess"
	TransitionOnFailure        = "onFailure"
	TransitionOnPartialSuccess = "onPartialSuccess"
	TransitionOnUnclear        = "onUnclear"
)

// ReturnNone is the ReturnBehavior type of a pathway that is not a detour.
const ReturnNone = "None"

// HasStarted reports whether the Session has taken its first step: the phase is set
// and not Pending.
func (p Phase) HasStarted() bool {
	return p != "" && p != PhasePending
}

// AwaitsApproval reports whether the Session waits on a person for a decision:
// AwaitingApproval, or Escalated (an approval naming the decision still moves it on).
func (p Phase) AwaitsApproval() bool {
	return p == PhaseAwaitingApproval || p == PhaseEscalated
}

// All yields the transitions that are set with their names, in the order onSuccess,
// onFailure, onPartialSuccess, onUnclear. It yields nothing for a nil receiver.
func (t *OutcomeTransitions) All() iter.Seq2[string, *OutcomeTransition] {
	return func(yield func(string, *OutcomeTransition) bool) {
		if t == nil {
			return
		}
		for _, o := range [...]struct {
			name string
			t    *OutcomeTransition
		}{
			{TransitionOnSuccess, t.OnSuccess},
			{TransitionOnFailure, t.OnFailure},
			{TransitionOnPartialSuccess, t.OnPartialSuccess},
			{TransitionOnUnclear, t.OnUnclear},
		} {
			if o.t != nil && !yield(o.name, o.t) {
				return
			}
		}
	}
}

// Named returns the transition called name (onSuccess, ...), or nil when it is not set
// or name is not one of the four. It is nil for a nil receiver.
func (t *OutcomeTransitions) Named(name string) *OutcomeTransition {
	for n, o := range t.All() {
		if n == name {
			return o
		}
	}
	return nil
}

// ForResult returns the transition that a complete turn with result type rt takes,
// and its name: on<Result>, where a partial success without onPartialSuccess takes
// onSuccess. It returns nil and "" when that transition is not set, and for a nil
// receiver.
func (t *OutcomeTransitions) ForResult(rt ResultType) (*OutcomeTransition, string) {
	if t == nil {
		return nil, ""
	}
	switch rt {
	case ResultSuccess:
		return t.OnSuccess, TransitionOnSuccess
	case ResultFailure:
		return t.OnFailure, TransitionOnFailure
	case ResultPartialSuccess:
		if t.OnPartialSuccess != nil {
			return t.OnPartialSuccess, TransitionOnPartialSuccess
		}
		return t.OnSuccess, TransitionOnSuccess
	case ResultUnclear:
		return t.OnUnclear, TransitionOnUnclear
	}
	return nil, ""
}

// IsDetour reports whether entering the pathway from another one pushes that one, to
// return to it when the pathway completes: returnBehavior is set with type
// ReturnToPrevious (or empty, its default). It is false for a nil receiver.
func (p *PathwaySpec) IsDetour() bool {
	return p != nil && p.ReturnBehavior != nil && (p.ReturnBehavior.Type == "" || p.ReturnBehavior.Type == ReturnToPrevious)
}

// IsExternal reports whether the pathway's results come from spec.outcomes rather
// than from agents. It is false for a nil receiver.
func (p *PathwaySpec) IsExternal() bool {
	return p != nil && p.Executor == ExecutorExternal
}

// FromAny reports whether the transition applies in every pathway (from empty or "*").
func (t *GlobalTransition) FromAny() bool {
	return t.From == "" || t.From == "*"
}

// AppliesIn reports whether the transition applies while the Session is in pathway.
func (t *GlobalTransition) AppliesIn(pathway string) bool {
	return t.FromAny() || t.From == pathway
}

// Waiting reports whether the decision waits for an approval: Pending, or Escalated
// without an escalation pathway.
func (d *DecisionRecord) Waiting() bool {
	return d != nil && (d.State == DecisionPending || d.State == DecisionEscalated)
}

// PendingDecision returns the decision the Session waits on for an approval (its last
// decision, when that has an id and is Pending or Escalated), or nil.
func (s *SessionStatus) PendingDecision() *DecisionRecord {
	if d := s.LastDecision; d != nil && d.ID != "" && d.Waiting() {
		return d
	}
	return nil
}

// ApprovalIndex returns the index in spec.approvals of the first approval or
// rejection of decisionID (the one that counts), or -1 when there is none.
func (s *SessionSpec) ApprovalIndex(decisionID string) int {
	for i := range s.Approvals {
		if s.Approvals[i].DecisionID == decisionID {
			return i
		}
	}
	return -1
}

// Approves reports whether the approval accepts its decision: approve is set and true.
func (a *Approval) Approves() bool {
	return a.Approve != nil && *a.Approve
}

// toolDecisionPrefix starts the transition of a decision record that stands for a
// tool call waiting for approval: "tool:<tool>".
const toolDecisionPrefix = "tool:"

// ToolDecisionTransition is the transition of the decision record that stands for a
// call of tool waiting for approval.
func ToolDecisionTransition(tool string) string {
	return toolDecisionPrefix + tool
}

// ToolCall returns the tool of d when d stands for a tool call waiting for approval
// (shown like a decision), and whether it does.
func (d *DecisionRecord) ToolCall() (tool string, ok bool) {
	if d == nil {
		return "", false
	}
	return strings.CutPrefix(d.Transition, toolDecisionPrefix)
}

// Failed reports whether a turn that ended with this finish reason failed: it ended on
// an error, a cap or a policy, not by answering (Success), waiting for a person
// (AwaitingApproval, Escalated) or being cancelled. Empty (in progress) is not failed.
func (f FinishReason) Failed() bool {
	switch f {
	case "", FinishSuccess, FinishAwaitingApproval, FinishEscalated, FinishCancelled:
		return false
	}
	return true
}

// Failed reports whether the turn failed: it ended on a failure finish reason or
// recorded failures. A nil turn did not.
func (t *TurnOutcome) Failed() bool {
	return t != nil && (t.FinishReason.Failed() || len(t.Failures) > 0)
}

// Summary is the failure in one line: "<source>/<kind> in <component>: <message>".
func (f Failure) Summary() string {
	s := string(f.Source) + "/" + string(f.Kind)
	if f.Component != "" {
		s += " in " + f.Component
	}
	if f.Message != "" {
		s += ": " + strings.Join(strings.Fields(f.Message), " ")
	}
	return s
}

// Unkeyed reports whether the server does not honour idempotency keys (idempotency
// None): a call sent to it is never sent again on its own.
func (s *ToolServer) Unkeyed() bool {
	return s != nil && s.Idempotency == ToolIdempotencyNone
}

// UnknownAction is the tool's onUnknown: AskHuman when it is not set.
func (t *Tool) UnknownAction() OnUnknownAction {
	if t == nil || t.OnUnknown == "" {
		return OnUnknownAskHuman
	}
	return t.OnUnknown
}

// TurnToolCall returns the tool call of the turn in progress with id, nil when the
// turn has none.
func (s *SessionStatus) TurnToolCall(id string) *ToolCallProgress {
	if s == nil || s.Turn == nil {
		return nil
	}
	for i := range s.Turn.ToolCalls {
		if s.Turn.ToolCalls[i].ID == id {
			return &s.Turn.ToolCalls[i]
		}
	}
	return nil
}

// DefaultElicitationTimeout is how long a call waits for the user's answer to its
// server's request for input when the tool sets no elicitationTimeout.
const DefaultElicitationTimeout = time.Hour

// ElicitationWait is the tool's elicitationTimeout, DefaultElicitationTimeout when
// it is not set.
func (t *Tool) ElicitationWait() time.Duration {
	if t == nil || t.ElicitationTimeout == nil || t.ElicitationTimeout.Duration <= 0 {
		return DefaultElicitationTimeout
	}
	return t.ElicitationTimeout.Duration
}

// AnswersElicitation reports whether o answers a server's request for input
// (Accept, Decline or Cancel), as opposed to a call whose outcome is unknown.
func (o AnswerOutcome) AnswersElicitation() bool {
	return o == AnswerAccept || o == AnswerDecline || o == AnswerCancel
}

// WaitingElicitation is what call c waits for the user to answer: its last
// elicitation, while c is AwaitingInput; nil otherwise.
func (c *ToolCallProgress) WaitingElicitation() *ToolElicitation {
	if c == nil || c.State != ToolCallAwaitingInput || len(c.Elicitations) == 0 {
		return nil
	}
	e := &c.Elicitations[len(c.Elicitations)-1]
	if e.Answer != "" {
		return nil
	}
	return e
}

// AnswerableToolCalls yields the tool calls of the turn in progress that wait for an
// Answer intervention: those whose outcome is unknown and those whose server asked
// for input.
func (s *SessionStatus) AnswerableToolCalls() iter.Seq[*ToolCallProgress] {
	return func(yield func(*ToolCallProgress) bool) {
		if s == nil || s.Turn == nil {
			return
		}
		for i := range s.Turn.ToolCalls {
			c := &s.Turn.ToolCalls[i]
			if (c.State == ToolCallOutcomeUnknown || c.WaitingElicitation() != nil) && !yield(c) {
				return
			}
		}
	}
}

// AnswerFits says why outcome does not answer call c, "" when it does: Done, NotDone
// and Fail answer a call whose outcome is unknown; Accept, Decline and Cancel a call
// whose server asked for input, and Accept of a form carries content that fills in
// its fields (see CheckContent).
func (c *ToolCallProgress) AnswerFits(outcome AnswerOutcome, content *apiextensionsv1.JSON) string {
	switch {
	case c.State == ToolCallOutcomeUnknown && outcome.AnswersElicitation():
		return fmt.Sprintf("tool call %s has an unknown outcome: answer it Done, NotDone or Fail, not %s", c.ID, outcome)
	case c.State == ToolCallOutcomeUnknown:
		return ""
	case c.WaitingElicitation() == nil:
		return fmt.Sprintf("tool call %s is %s: it waits for no answer", c.ID, c.State)
	case !outcome.AnswersElicitation():
		return fmt.Sprintf("tool call %s waits for input its server asked for: answer it Accept, Decline or Cancel, not %s", c.ID, outcome)
	case outcome != AnswerAccept:
		if content != nil {
			return "content goes with Accept: it holds the fields the user gives"
		}
		return ""
	}
	if err := c.WaitingElicitation().CheckContent(content); err != nil {
		return err.Error()
	}
	return ""
}

// formSchema is the part of a form's requested schema that its fields are checked
// against.
type formSchema struct {
	Properties map[string]struct {
		Type string `json:"type"`
		Enum []any  `json:"enum"`
	} `json:"properties"`
	Required []string `json:"required"`
}

func (e *ToolElicitation) schema() formSchema {
	var f formSchema
	if e.RequestedSchema != nil {
		_ = json.Unmarshal(e.RequestedSchema.Raw, &f)
	}
	return f
}

// FormField is one field a form asks for.
// +kubebuilder:object:generate=false
type FormField struct {
	// Name is the field's name, Type its JSON type ("" when the schema gives none).
	Name, Type string
	// Required says the form requires it.
	Required bool
	// Enum is the values it may take, as a person types them (a string as it is,
	// anything else as JSON); empty for any.
	Enum []string
}

// FormFields are the fields a form asks for, by name.
func (e *ToolElicitation) FormFields() []FormField {
	f := e.schema()
	out := make([]FormField, 0, len(f.Properties))
	for _, name := range slices.Sorted(maps.Keys(f.Properties)) {
		p := f.Properties[name]
		ff := FormField{Name: name, Type: p.Type, Required: slices.Contains(f.Required, name)}
		for _, x := range p.Enum {
			if str, ok := x.(string); ok {
				ff.Enum = append(ff.Enum, str)
			} else {
				ff.Enum = append(ff.Enum, jsonText(x))
			}
		}
		out = append(out, ff)
	}
	return out
}

// Fields names the fields a form asks for, in order, required ones marked with "*".
func (e *ToolElicitation) Fields() []string {
	fields := e.FormFields()
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		s := f.Name
		if f.Type != "" {
			s += " (" + f.Type + ")"
		}
		if f.Required {
			s += "*"
		}
		out = append(out, s)
	}
	return out
}

// CheckContent checks content, the answer to form e, against e's requested schema:
// a JSON object with every required field, no field the form does not ask for, and
// each field of its type (string, number, integer, boolean) and among its enum. The
// error names the field. A URL request takes no content.
func (e *ToolElicitation) CheckContent(content *apiextensionsv1.JSON) error {
	if e.Mode == ElicitationURL {
		if content != nil {
			return errors.New("a URL request takes no content: accept it once the page was visited")
		}
		return nil
	}
	fields := map[string]any{}
	if content != nil {
		if err := json.Unmarshal(content.Raw, &fields); err != nil || fields == nil {
			return errors.New("content must be a JSON object of the form's fields")
		}
	}
	f := e.schema()
	names := slices.Sorted(maps.Keys(f.Properties))
	for _, name := range f.Required {
		if v, ok := fields[name]; !ok || v == nil {
			return fmt.Errorf("field %q is required by the form (it asks for %s)", name, strings.Join(names, ", "))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		p, ok := f.Properties[name]
		if !ok {
			return fmt.Errorf("field %q is not one the form asks for (%s)", name, strings.Join(names, ", "))
		}
		v := fields[name]
		if !typeFits(p.Type, v) {
			return fmt.Errorf("field %q must be %s, got %s", name, article(p.Type), jsonText(v))
		}
		if len(p.Enum) > 0 && !slices.ContainsFunc(p.Enum, func(x any) bool { return jsonText(x) == jsonText(v) }) {
			opts := make([]string, len(p.Enum))
			for i, x := range p.Enum {
				opts[i] = jsonText(x)
			}
			return fmt.Errorf("field %q must be one of %s, got %s", name, strings.Join(opts, ", "), jsonText(v))
		}
	}
	return nil
}

// ParseField is value, given as text for field name of form e, as the JSON value its
// type asks for: a number, an integer or a boolean parsed, anything else a string.
func (e *ToolElicitation) ParseField(name, value string) (any, error) {
	p, ok := e.schema().Properties[name]
	if !ok {
		return value, nil // CheckContent names it
	}
	switch p.Type {
	case "number", "integer":
		n, err := strconv.ParseFloat(value, 64)
		if err != nil || (p.Type == "integer" && n != float64(int64(n))) {
			return nil, fmt.Errorf("field %q must be %s, got %q", name, article(p.Type), value)
		}
		return n, nil
	case "boolean":
		b, err := strconv.ParseBool(value)
		if err != nil {
			return nil, fmt.Errorf("field %q must be a boolean (true or false), got %q", name, value)
		}
		return b, nil
	}
	return value, nil
}

func typeFits(typ string, v any) bool {
	switch typ {
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		n, ok := v.(float64)
		return ok && n == float64(int64(n))
	case "boolean":
		_, ok := v.(bool)
		return ok
	}
	return true
}

func article(typ string) string {
	switch typ {
	case "integer":
		return "an integer"
	case "":
		return "a value"
	}
	return "a " + typ
}

func jsonText(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}
