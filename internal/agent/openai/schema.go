package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// Strict structured outputs need every property required and additionalProperties
// false on every object, so a free-form object (or an array of unknown items) cannot
// be described. Such signature outputs are asked for as a JSON-encoded string and
// decoded here.
//
// Schemas are ordered objects: a model writes its answer's keys in the order of the
// schema's properties, and it should commit to a destination before it explains it
// (and write the reply before the outputs), so the order is the one written here, not
// the alphabetical order of a Go map.

// member is one key of an ordered JSON object.
type member struct {
	key   string
	value any
}

// object is a JSON object marshaled with its keys in order.
type object []member

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// keys are the object's keys, in order.
func (o object) keys() []string {
	out := make([]string, len(o))
	for i, m := range o {
		out[i] = m.key
	}
	return out
}

// strictObject is a strict schema of an object with the properties props, all
// required, in their order.
func strictObject(props object) object {
	return object{
		{"type", "object"},
		{"properties", props},
		{"required", props.keys()},
		{"additionalProperties", false},
	}
}

// schemaCache holds marshaled schemas, one per distinct key (the enum or signature it
// was built from). Keys come from Journey and Pathway specs, so there are few; the
// cache is emptied if it ever grows past maxSchemas.
type schemaCache struct {
	mu sync.Mutex
	m  map[string]json.RawMessage
}

const maxSchemas = 512

var schemas = &schemaCache{m: map[string]json.RawMessage{}}

func (c *schemaCache) get(key string, build func() object) json.RawMessage {
	c.mu.Lock()
	raw, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return raw
	}
	raw, err := json.Marshal(build())
	if err != nil {
		// Schemas are built from strings, booleans and lists and objects of them only.
		panic(fmt.Sprintf("marshal schema: %v", err))
	}
	c.mu.Lock()
	if len(c.m) >= maxSchemas {
		clear(c.m)
	}
	c.m[key] = raw
	c.mu.Unlock()
	return raw
}

// enumKey identifies a list of names.
func enumKey(names []string) string { return strings.Join(names, "\x00") }

// fieldsKey identifies a signature's outputs.
func fieldsKey(fields []flowv1.SignatureField) string {
	var b strings.Builder
	for _, f := range fields {
		b.WriteString(f.Name)
		b.WriteByte(0)
		b.WriteString(string(f.Type))
		b.WriteByte(0)
		b.WriteString(f.Description)
		b.WriteByte(0)
	}
	return b.String()
}

var confidenceSchema = object{{"type", "number"}, {"description", "How sure you are, from 0 to 1."}}

// decisionSchema: {destination: enum, confidence, reasoning}, in that order.
func decisionSchema(destinations []string) object {
	return strictObject(object{
		{"destination", object{{"type", "string"}, {"enum", destinations}, {"description", "The next step: one of the allowed destinations."}}},
		{"confidence", confidenceSchema},
		{"reasoning", object{{"type", "string"}, {"description", "Why, in one or two sentences."}}},
	})
}

// intentSchema: {intent: enum of names + "none", confidence, reasoning}, in that order.
func intentSchema(names []string) object {
	return strictObject(object{
		{"intent", object{{"type", "string"}, {"enum", names}, {"description", `The intent the message expresses, or "none".`}}},
		{"confidence", confidenceSchema},
		{"reasoning", object{{"type", "string"}, {"description", "Why, in one or two sentences."}}},
	})
}

var resultTypes = []string{
	string(flowv1.ResultSuccess), string(flowv1.ResultFailure),
	string(flowv1.ResultPartialSuccess), string(flowv1.ResultUnclear),
}

// pathwaySchema: {reply, outputs: {the signature's outputs}, outcome: enum, complete},
// in that order. A signature without outputs has no outputs property: an object
// without properties is refused by strict validators (Gemini's).
func pathwaySchema(outputs []flowv1.SignatureField) object {
	return strictObject(pathwayProperties(outputs))
}

// promptedPathwaySchema is the pathway schema with tool_calls first: the calls to make
// before answering, in prompted tool mode.
func promptedPathwaySchema(outputs []flowv1.SignatureField, tools []string) object {
	return strictObject(append(object{{"tool_calls", toolCallsSchema(tools)}}, pathwayProperties(outputs)...))
}

// pathwayProperties are the pathway answer's properties, in order.
func pathwayProperties(outputs []flowv1.SignatureField) object {
	props := object{{"reply", object{{"type", "string"}, {"description", "What to tell the user."}}}}
	if len(outputs) > 0 {
		fields := make(object, 0, len(outputs))
		for _, f := range outputs {
			fields = append(fields, member{f.Name, fieldSchema(f)})
		}
		props = append(props, member{"outputs", strictObject(fields)})
	}
	props = append(props,
		member{"outcome", object{{"type", "string"}, {"enum", resultTypes}, {"description", "How the turn went."}}},
		member{"complete", object{{"type", "boolean"}, {"description", "false while more input from the user is needed."}}},
	)
	return props
}

func fieldSchema(f flowv1.SignatureField) object {
	switch t := fieldType(f); t {
	case "number", "integer", "boolean":
		return withDescription(object{{"type", string(t)}}, f.Description)
	case "array", "object":
		return object{{"type", "string"}, {"description", strings.TrimSpace(fmt.Sprintf("A JSON %s, encoded as a string. %s", t, f.Description))}}
	default:
		return withDescription(object{{"type", "string"}}, f.Description)
	}
}

func withDescription(o object, description string) object {
	if description != "" {
		o = append(o, member{"description", description})
	}
	return o
}

func fieldType(f flowv1.SignatureField) flowv1.FieldType {
	if f.Type == "" {
		return "string"
	}
	return f.Type
}

// decodeStrict decodes content into v, refusing unknown fields and trailing data.
func decodeStrict(content string, v any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(content)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

func checkConfidence(c *float64) error {
	switch {
	case c == nil:
		return errors.New("confidence is missing")
	case math.IsNaN(*c) || *c < 0 || *c > 1:
		return fmt.Errorf("confidence %v is outside [0,1]", *c)
	}
	return nil
}

type decisionAnswer struct {
	Destination *string  `json:"destination"`
	Confidence  *float64 `json:"confidence"`
	Reasoning   string   `json:"reasoning"`
}

// parseDecision validates a decision answer against the allowed destinations.
func parseDecision(content string, allowed []string) (agent.DecisionResponse, error) {
	var ans decisionAnswer
	if err := decodeStrict(content, &ans); err != nil {
		return agent.DecisionResponse{}, fmt.Errorf("the answer is not the decision JSON: %w", err)
	}
	if ans.Destination == nil {
		return agent.DecisionResponse{}, errors.New("destination is missing")
	}
	if !slices.Contains(allowed, *ans.Destination) {
		return agent.DecisionResponse{}, fmt.Errorf("destination %q is not an allowed destination", truncate.Runes(*ans.Destination, maxQuotedRunes, "..."))
	}
	if err := checkConfidence(ans.Confidence); err != nil {
		return agent.DecisionResponse{}, err
	}
	return agent.DecisionResponse{Destination: *ans.Destination, Confidence: *ans.Confidence, Reasoning: ans.Reasoning}, nil
}

type intentAnswer struct {
	Intent     *string  `json:"intent"`
	Confidence *float64 `json:"confidence"`
	Reasoning  string   `json:"reasoning"`
}

// parseIntent validates an intent answer against the known intent names.
func parseIntent(content string, names []string) (agent.IntentResponse, error) {
	var ans intentAnswer
	if err := decodeStrict(content, &ans); err != nil {
		return agent.IntentResponse{}, fmt.Errorf("the answer is not the intent JSON: %w", err)
	}
	if ans.Intent == nil {
		return agent.IntentResponse{}, errors.New("intent is missing")
	}
	if !slices.Contains(names, *ans.Intent) {
		return agent.IntentResponse{}, fmt.Errorf("intent %q is not a known intent", truncate.Runes(*ans.Intent, maxQuotedRunes, "..."))
	}
	if err := checkConfidence(ans.Confidence); err != nil {
		return agent.IntentResponse{}, err
	}
	return agent.IntentResponse{Intent: *ans.Intent, Confidence: *ans.Confidence, Reasoning: ans.Reasoning}, nil
}

type pathwayAnswer struct {
	Reply    *string                    `json:"reply"`
	Outputs  map[string]json.RawMessage `json:"outputs"`
	Outcome  *string                    `json:"outcome"`
	Complete *bool                      `json:"complete"`
}

// parsePathway validates a pathway answer against the signature's outputs.
func parsePathway(content string, outputs []flowv1.SignatureField) (agent.PathwayResponse, error) {
	var ans pathwayAnswer
	if err := decodeStrict(content, &ans); err != nil {
		return agent.PathwayResponse{}, fmt.Errorf("the answer is not the pathway JSON: %w", err)
	}
	switch {
	case ans.Reply == nil:
		return agent.PathwayResponse{}, errors.New("reply is missing")
	case ans.Outcome == nil:
		return agent.PathwayResponse{}, errors.New("outcome is missing")
	case !slices.Contains(resultTypes, *ans.Outcome):
		return agent.PathwayResponse{}, fmt.Errorf("outcome %q is not a result type", truncate.Runes(*ans.Outcome, maxQuotedRunes, "..."))
	case ans.Complete == nil:
		return agent.PathwayResponse{}, errors.New("complete is missing")
	}
	resp := agent.PathwayResponse{
		Reply:      *ans.Reply,
		Outputs:    make(map[string]any, len(outputs)),
		ResultType: flowv1.ResultType(*ans.Outcome),
		Complete:   *ans.Complete,
	}
	for name := range ans.Outputs {
		if !slices.ContainsFunc(outputs, func(f flowv1.SignatureField) bool { return f.Name == name }) {
			return agent.PathwayResponse{}, fmt.Errorf("output %q is not in the signature", truncate.Runes(name, maxQuotedRunes, "..."))
		}
	}
	for _, f := range outputs {
		raw, ok := ans.Outputs[f.Name]
		if !ok {
			return agent.PathwayResponse{}, fmt.Errorf("output %q is missing", f.Name)
		}
		v, err := decodeField(f, raw)
		if err != nil {
			return agent.PathwayResponse{}, fmt.Errorf("output %q: %w", f.Name, err)
		}
		resp.Outputs[f.Name] = v
	}
	return resp, nil
}

func decodeField(f flowv1.SignatureField, raw json.RawMessage) (any, error) {
	if string(bytes.TrimSpace(raw)) == "null" {
		return nil, errors.New("is null")
	}
	switch t := fieldType(f); t {
	case "number":
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, errors.New("not a number")
		}
		return v, nil
	case "integer":
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil || v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return nil, errors.New("not an integer")
		}
		return int64(v), nil
	case "boolean":
		var v bool
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, errors.New("not a boolean")
		}
		return v, nil
	case "array", "object":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("not a JSON-encoded %s", t)
		}
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return nil, fmt.Errorf("not a JSON-encoded %s", t)
		}
		if _, isArray := v.([]any); t == "array" && !isArray {
			return nil, errors.New("not an array")
		}
		if _, isObject := v.(map[string]any); t == "object" && !isObject {
			return nil, errors.New("not an object")
		}
		return v, nil
	default:
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, errors.New("not a string")
		}
		return v, nil
	}
}

// maxQuotedRunes bounds a value of the model's answer quoted in an error: 64 runes
// and "...".
const maxQuotedRunes = 64 + len("...")
