package openai

import (
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	goopenai "github.com/sashabaranov/go-openai"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// The response-format ladder. An answer is asked for, from the richest format down:
//
//  1. a strict json_schema response format (the server constrains the answer);
//  2. a json_object response format, with the schema in the instructions;
//  3. no response format, with the schema in the instructions.
//
// An Auto agent starts on the rung learned for its endpoint and model (the first one
// until the endpoint refuses it) and steps down, within the same call, when the
// endpoint answers that it does not support the format. Whatever the rung, the answer
// goes through the same strict validation: nothing outside the allowed destinations,
// intents or outcomes ever passes.

// rung is a step of the ladder.
type rung int

const (
	rungSchema rung = iota
	rungObject
	rungPrompt
)

func (r rung) format() flowv1.ResponseFormat {
	switch r {
	case rungSchema:
		return flowv1.ResponseFormatJSONSchema
	case rungObject:
		return flowv1.ResponseFormatJSONObject
	}
	return flowv1.ResponseFormatPrompt
}

func rungOf(f flowv1.ResponseFormat) rung {
	switch f {
	case flowv1.ResponseFormatJSONObject:
		return rungObject
	case flowv1.ResponseFormatPrompt:
		return rungPrompt
	}
	return rungSchema
}

// memory is what Auto agents learned of a ladder (the response format's, the tool
// calling's), per endpoint and model, for the life of the process. Agents are built
// for each call, so it is package state; keys come from Journey specs, and the memory
// is emptied if it ever grows past maxLearned.
type memory[R ~int] struct {
	mu sync.Mutex
	m  map[string]R
}

const maxLearned = 1024

var learned = &memory[rung]{m: map[string]rung{}}

func (m *memory[R]) get(key string) R {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[key]
}

// lower records r for key unless a lower rung is already known, and reports whether
// it did.
func (m *memory[R]) lower(key string, r R) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m[key] >= r {
		return false
	}
	if len(m.m) >= maxLearned {
		clear(m.m)
	}
	m.m[key] = r
	return true
}

// LearnedResponseFormat is the format Auto agents use for model at baseURL ("" for
// the OpenAI API) in this process: JSONSchema until the endpoint refused it.
func LearnedResponseFormat(baseURL, model string) flowv1.ResponseFormat {
	return learned.get(endpointKey(baseURL, model)).format()
}

func endpointKey(baseURL, model string) string {
	return strings.TrimSuffix(baseURL, "/") + "|" + model
}

var formatFallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "journey_agent_response_format_fallbacks_total",
	Help: "Times an endpoint refused a response format and an Auto agent stepped down, by endpoint host, model and the format stepped down to.",
}, []string{"host", "model", "format"})

var usageEstimated = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "journey_agent_usage_estimated_total",
	Help: "Answers without a usage block, whose tokens were estimated from their length, by endpoint host and model.",
}, []string{"host", "model"})

func init() { metrics.Registry.MustRegister(formatFallbacks, usageEstimated, toolFallbacks) }

// host is the endpoint's host name for metrics and logs: never a path, user or query.
func host(baseURL string) string {
	if baseURL == "" {
		return "api.openai.com"
	}
	u, err := url.Parse(baseURL)
	if err != nil || u.Hostname() == "" {
		return "invalid"
	}
	return strings.ToLower(u.Hostname())
}

// stepDown moves an Auto agent one rung down after the endpoint refused the format,
// and remembers it.
func (a *Agent) stepDown(ctx context.Context, from rung, why error) rung {
	to := from + 1
	learned.lower(endpointKey(a.baseURL, a.model), to)
	formatFallbacks.WithLabelValues(host(a.baseURL), a.model, string(to.format())).Inc()
	log.FromContext(ctx).Info("Endpoint refused the response format, stepping down", "agent", a.name,
		"host", host(a.baseURL), "model", a.model, "from", string(from.format()), "to", string(to.format()), "error", why.Error())
	return to
}

// schemaInstructions is what the system message says of the answer's format on the
// rungs where the server does not hold the schema.
func schemaInstructions(schema json.RawMessage) string {
	return "\n\nAnswer with only a JSON object, no other text, that matches this JSON schema:\n" + string(schema)
}

// responseFormat is the response_format of rung r.
func responseFormat(r rung, name string, schema json.RawMessage) *goopenai.ChatCompletionResponseFormat {
	switch r {
	case rungSchema:
		return &goopenai.ChatCompletionResponseFormat{
			Type:       goopenai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &goopenai.ChatCompletionResponseFormatJSONSchema{Name: name, Schema: schema, Strict: true},
		}
	case rungObject:
		return &goopenai.ChatCompletionResponseFormat{Type: goopenai.ChatCompletionResponseFormatTypeJSONObject}
	}
	return nil
}

var thinkBlock = regexp.MustCompile(`(?s)<think>.*?</think>`)

// clean removes what surrounds the JSON in answers from reasoning models and from
// models without a constrained format: <think> blocks (and everything before a lone
// </think>, when the template opened the block) and a Markdown code fence. The rest is
// validated strictly.
func clean(content string) string {
	s := thinkBlock.ReplaceAllString(content, "")
	if i := strings.LastIndex(s, "</think>"); i >= 0 {
		s = s[i+len("</think>"):]
	}
	s = strings.TrimSpace(s)
	if len(s) >= 6 && strings.HasPrefix(s, "```") && strings.HasSuffix(s, "```") {
		s = strings.TrimSpace(s[3 : len(s)-3])
		if len(s) >= 4 && strings.EqualFold(s[:4], "json") {
			s = strings.TrimSpace(s[4:])
		}
	}
	return s
}
