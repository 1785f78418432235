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

	goopenai "github.com/sashabaranov/go-openai"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// Strict structured outputs need every property required and additionalProperties
// false on every object, so a free-form object (or an array of unknown items) cannot
// be described. Such signature outputs are asked for as a JSON-encoded string and
// decoded here.

type object = map[string]any

func strictObject(props object, order []string) object {
	return object{
		"type":                 "object",
		"properties":           props,
		"required":             order,
		"additionalProperties": false,
	}
}

// responseFormat is the strict json_schema response format for schema, marshaled
// once per distinct key (the enum or signature it was built from) and then reused.
func responseFormat(name, key string, build func() object) *goopenai.ChatCompletionResponseFormat {
	return &goopenai.ChatCompletionResponseFormat{
		Type: goopenai.ChatCompletionResponseFormatTypeJSONSchema,
		JSONSchema: &goopenai.ChatCompletionResponseFormatJSONSchema{
			Name:   name,
			Schema: schemas.get(name+"\x00"+key, build),
			Strict: true,
		},
	}
}

// schemaCache holds marshaled schemas. Keys come from Journey and Pathway specs, so
// there are few; the cache is emptied if it ever grows past maxSchemas.
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
		// Schemas are built from strings, booleans and maps of them only.
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

var confidenceSchema = object{"type": "number", "description": "How sure you are, from 0 to 1."}

// decisionSchema: {destination: enum, confidence, reasoning}.
func decisionSchema(destinations []string) object {
	return strictObject(object{
		"destination": object{"type": "string", "enum": destinations, "description": "The next step: one of the allowed destinations."},
		"confidence":  confidenceSchema,
		"reasoning":   object{"type": "string", "description": "Why, in one or two sentences."},
	}, []string{"destination", "confidence", "reasoning"})
}

// intentSchema: {intent: enum of names + "none", confidence, reasoning}.
func intentSchema(names []string) object {
	return strictObject(object{
		"intent":     object{"type": "string", "enum": names, "description": `The intent the message expresses, or "none".`},
		"confidence": confidenceSchema,
		"reasoning":  object{"type": "string", "description": "Why, in one or two sentences."},
	}, []string{"intent", "confidence", "reasoning"})
}

var resultTypes = []string{
	string(flowv1.ResultSuccess), string(flowv1.ResultFailure),
	string(flowv1.ResultPartialSuccess), string(flowv1.ResultUnclear),
}

// pathwaySchema: {reply, outputs: {the signature's outputs}, outcome: enum, complete}.
func pathwaySchema(outputs []flowv1.SignatureField) object {
	props := object{}
	order := make([]string, 0, len(outputs))
	for _, f := range outputs {
		props[f.Name] = fieldSchema(f)
		order = append(order, f.Name)
	}
	return strictObject(object{
		"reply":    object{"type": "string", "description": "What to tell the user."},
		"outputs":  strictObject(props, order),
		"outcome":  object{"type": "string", "enum": resultTypes, "description": "How the turn went."},
		"complete": object{"type": "boolean", "description": "false while more input from the user is needed."},
	}, []string{"reply", "outputs", "outcome", "complete"})
}

func fieldSchema(f flowv1.SignatureField) object {
	s := object{}
	switch fieldType(f) {
	case "number", "integer", "boolean":
		s["type"] = string(fieldType(f))
		if f.Description != "" {
			s["description"] = f.Description
		}
	case "array", "object":
		s["type"] = "string"
		s["description"] = fmt.Sprintf("A JSON %s, encoded as a string. %s", fieldType(f), f.Description)
	default:
		s["type"] = "string"
		if f.Description != "" {
			s["description"] = f.Description
		}
	}
	return s
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
		return agent.DecisionResponse{}, fmt.Errorf("destination %q is not an allowed destination", truncate(*ans.Destination))
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
		return agent.IntentResponse{}, fmt.Errorf("intent %q is not a known intent", truncate(*ans.Intent))
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
		return agent.PathwayResponse{}, fmt.Errorf("outcome %q is not a result type", truncate(*ans.Outcome))
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
			return agent.PathwayResponse{}, fmt.Errorf("output %q is not in the signature", truncate(name))
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

// truncate bounds model-produced text quoted in an error.
func truncate(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "..."
}
