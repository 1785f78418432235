package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// serverError is an error answer as the endpoint wrote it. OpenAI-compatible servers
// disagree on the shape:
//
//   - {"error": {"message", "type", "param", "code"}}: OpenAI, Azure (code may be a
//     string such as "429" or "content_filter", with innererror), Groq, LiteLLM (code
//     a string such as "400"), llama.cpp and LocalAI (code a number), Ollama's /v1,
//     OpenRouter (code a number, metadata for moderation);
//   - {"error": "<text>"} with an optional "error_type": TGI, LM Studio, Ollama's
//     native API;
//   - {"object": "error", "message", "type", "code"} at the top level: vLLM before it
//     adopted the OpenAI shape;
//   - [{"error": {...}}]: Gemini's OpenAI endpoint;
//   - {"detail": "<text>"}: FastAPI-based proxies;
//   - anything else (plain text, an HTML page from a proxy): its text.
type serverError struct {
	status  int
	message string
	// code, typ and param are the provider's error code, type and parameter, as text.
	code, typ, param string
	// inner is Azure's innererror.code.
	inner string
	// flagged reports OpenRouter's moderation metadata (reasons, flagged_input).
	flagged bool
	// inBody marks an error carried by a 200 answer (OpenRouter).
	inBody bool
}

// parseServerError reads an error answer's body, whatever its shape.
func parseServerError(status int, body []byte) serverError {
	se := serverError{status: status}
	var v any
	if json.Unmarshal(body, &v) != nil {
		se.message = strings.TrimSpace(string(body))
		if se.message == "" {
			se.message = http.StatusText(status)
		}
		return se
	}
	if list, ok := v.([]any); ok && len(list) > 0 {
		v = list[0]
	}
	m, ok := v.(map[string]any)
	if !ok {
		se.message = strings.TrimSpace(string(body))
		return se
	}
	switch e := m["error"].(type) {
	case string:
		se.message, se.typ = e, scalar(m["error_type"])
		return se
	case map[string]any:
		m = e
	}
	se.message = text(m["message"])
	if se.message == "" {
		se.message = text(m["detail"])
	}
	if se.message == "" {
		se.message = strings.TrimSpace(string(body))
	}
	se.code, se.typ, se.param = scalar(m["code"]), scalar(m["type"]), scalar(m["param"])
	if inner, ok := m["innererror"].(map[string]any); ok {
		se.inner = scalar(inner["code"])
	}
	if meta, ok := m["metadata"].(map[string]any); ok {
		_, reasons := meta["reasons"]
		_, input := meta["flagged_input"]
		se.flagged = reasons || input
	}
	return se
}

// errorInBody finds an error in a 200 answer: an error field beside no choices.
func errorInBody(body []byte) (serverError, bool) {
	if !bytes.Contains(body, []byte(`"error"`)) {
		return serverError{}, false
	}
	var probe struct {
		Error   json.RawMessage   `json:"error"`
		Choices []json.RawMessage `json:"choices"`
	}
	if json.Unmarshal(body, &probe) != nil || len(probe.Choices) > 0 ||
		len(probe.Error) == 0 || string(probe.Error) == "null" {
		return serverError{}, false
	}
	se := parseServerError(http.StatusOK, body)
	se.inBody = true
	if c, err := strconv.Atoi(se.code); err == nil && c >= 400 && c < 600 {
		se.status = c
	} else {
		se.status = http.StatusBadGateway
	}
	return se, true
}

// describe is the message with the provider's code, for status and logs.
func (se serverError) describe() string {
	code := se.code
	if code == "" || code == strconv.Itoa(se.status) {
		code = se.typ
	}
	if code == "" || code == "None" || strings.Contains(se.message, code) {
		return se.message
	}
	return se.message + " (" + code + ")"
}

// refusalCodes are the error codes of a prompt or an answer the provider refused: a
// content filter (Azure content_filter, LiteLLM content_policy_violation), a prompt
// flagged by policy (OpenAI invalid_prompt), an answer that failed the provider's own
// JSON validation (Groq json_validate_failed).
var refusalCodes = []string{"content_filter", "content_policy_violation", "invalid_prompt", "json_validate_failed", "moderation"}

var moderation = regexp.MustCompile(`(?i)moderation|flagged|content (management )?polic|ContentPolicyViolation`)

// refusal reports a refused prompt or answer and its failure kind.
func (se serverError) refusal() (flowv1.FailureKind, bool) {
	if se.status < 400 || se.status >= 500 {
		return "", false
	}
	switch {
	case se.code == "json_validate_failed":
		return flowv1.FailureValidation, true
	case slices.Contains(refusalCodes, se.code), se.inner == "ResponsibleAIPolicyViolation",
		se.status == http.StatusForbidden && (se.flagged || moderation.MatchString(se.message)),
		se.status == http.StatusBadRequest && moderation.MatchString(se.message):
		return flowv1.FailurePolicyKind, true
	}
	return "", false
}

// outOfCredit reports a 429 that means the quota is used up, not a rate limit.
func (se serverError) outOfCredit() bool {
	return se.code == "insufficient_quota" || se.typ == "insufficient_quota"
}

var tryAgain = regexp.MustCompile(`(?i)try again|retry|overload|temporar|unavailable|busy|capacity|timed? ?out`)

// saysTryLater reports a server failure whose message says it will pass (OpenAI's
// "You can retry your request", "overloaded", "busy"): it is never ended early.
func (se serverError) saysTryLater() bool { return tryAgain.MatchString(se.message) }

var formatWords = regexp.MustCompile(`(?i)response_format|response format|json_schema|json schema|json_object|` +
	`structured output|guided_json|grammar`)

// refusesFormat reports an answer saying the response format (or the schema in it) is
// not supported: a client or server error naming it. Servers say so with 400 (OpenAI,
// Groq, LiteLLM without drop_params, vLLM), 422 (TGI), 404 (OpenRouter: no provider
// for the parameter) or 500 (llama.cpp, schema to grammar conversion).
func (se serverError) refusesFormat() bool {
	switch se.status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity,
		http.StatusInternalServerError, http.StatusNotImplemented:
	default:
		return false
	}
	return se.param == "response_format" || formatWords.MatchString(se.message)
}

var toolWords = regexp.MustCompile(`(?i)does not support tools|tool[- ]choice|tool use|tool calling|function calling|` +
	`tools? param|enable-auto-tool-choice|tool-call-parser|'tools'|"tools"|\btools\b.*not supported|not support.*\btools\b`)

// refusesTools reports an answer saying native tools are not supported: a client or
// server error naming them. vLLM without --enable-auto-tool-choice answers 400
// "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be
// set";
// Ollama 400 "<model> does not support tools"; llama.cpp without --jinja "tools param
// requires --jinja flag"; OpenRouter 404 "No endpoints found that support tool use";
// LiteLLM 400 "... does not support parameters: ['tools', ...]".
func (se serverError) refusesTools() bool {
	switch se.status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity,
		http.StatusInternalServerError, http.StatusNotImplemented:
	default:
		return false
	}
	return se.param == "tools" || se.param == "tool_choice" || toolWords.MatchString(se.message)
}

// scalar is a JSON string, number or boolean as text; "" for anything else.
func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int:
		return strconv.Itoa(x)
	case bool:
		return strconv.FormatBool(x)
	}
	return ""
}

// text is a JSON string, or a list of strings joined.
func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		parts := make([]string, 0, len(x))
		for _, p := range x {
			if s := scalar(p); s != "" {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, ", ")
	}
	return ""
}
