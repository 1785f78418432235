package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	goopenai "github.com/sashabaranov/go-openai"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// maxErrorText bounds the server text kept in an error (an HTML error page can be
// large, and status messages are for people).
const maxErrorText = 300

// classify turns a failed call into a classified agent error whose text is scrubbed.
func (a *Agent) classify(ctx context.Context, err error, timedOut bool, h http.Header) *agent.Error {
	switch {
	case timedOut:
		return a.fail(agent.Transient, flowv1.FailureTimeout, flowv1.FailureTransport,
			fmt.Errorf("no answer within %s: %w", a.timeout, context.DeadlineExceeded))
	case ctx.Err() != nil:
		kind := flowv1.FailureException
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			kind = flowv1.FailureTimeout
		}
		return a.fail(agent.Transient, kind, flowv1.FailureTransport, fmt.Errorf("call abandoned: %w", ctx.Err()))
	}

	var (
		apiErr *goopenai.APIError
		reqErr *goopenai.RequestError
		status int
		text   string
		code   string
	)
	switch {
	case errors.As(err, &apiErr):
		status, text = apiErr.HTTPStatusCode, apiErr.Message
		code = fmt.Sprint(apiErr.Code) + " " + apiErr.Type
	case errors.As(err, &reqErr):
		status, text = reqErr.HTTPStatusCode, string(reqErr.Body)
		if strings.TrimSpace(text) == "" {
			text = http.StatusText(status)
		}
	}
	if status != 0 {
		return a.statusError(status, text, code, h)
	}

	var (
		netErr net.Error
		urlErr *url.Error
		synErr *json.SyntaxError
		typErr *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &netErr) && netErr.Timeout():
		return a.fail(agent.Transient, flowv1.FailureTimeout, flowv1.FailureTransport, errors.New(a.scrub(err.Error())))
	case errors.As(err, &urlErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return a.fail(agent.Transient, flowv1.FailureException, flowv1.FailureTransport, errors.New(a.scrub(err.Error())))
	case errors.As(err, &synErr), errors.As(err, &typErr):
		return a.invalid(flowv1.FailureValidation, fmt.Errorf("the endpoint's answer is not a chat completion: %s", a.scrub(err.Error())))
	default:
		// go-openai refused to build the request (for example a temperature a
		// reasoning model does not accept): retrying cannot help.
		return a.fail(agent.Terminal, flowv1.FailureValidation, flowv1.FailureSystem,
			fmt.Errorf("request refused by the client: %s", a.scrub(err.Error())))
	}
}

func (a *Agent) statusError(status int, text, code string, h http.Header) *agent.Error {
	err := fmt.Errorf("HTTP %d: %s", status, a.scrub(text))
	switch {
	case status == http.StatusTooManyRequests && strings.Contains(code, "insufficient_quota"):
		// Out of credit, not rate limited: waiting will not help.
		return a.fail(agent.Terminal, flowv1.FailureRateLimit, flowv1.FailureLLM, err)
	case status == http.StatusTooManyRequests:
		e := a.fail(agent.Transient, flowv1.FailureRateLimit, flowv1.FailureLLM, err)
		e.RetryAfter = retryAfter(h, a.opts.now())
		return e
	case status == http.StatusRequestTimeout:
		return a.fail(agent.Transient, flowv1.FailureTimeout, flowv1.FailureLLM, err)
	case status >= 500:
		e := a.fail(agent.Transient, flowv1.FailureException, flowv1.FailureLLM, err)
		e.RetryAfter = retryAfter(h, a.opts.now())
		return e
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return a.fail(agent.Terminal, flowv1.FailurePolicyKind, flowv1.FailureLLM, err)
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		return a.fail(agent.Terminal, flowv1.FailureValidation, flowv1.FailureLLM, err)
	default: // 404 (unknown model or wrong baseURL) and every other status
		return a.fail(agent.Terminal, flowv1.FailureException, flowv1.FailureLLM, err)
	}
}

func (a *Agent) fail(class agent.ErrorClass, kind flowv1.FailureKind, source flowv1.FailureSource, err error) *agent.Error {
	return &agent.Error{Class: class, Kind: kind, Source: source, Agent: a.name, Err: err}
}

// invalid is a bad answer: journaled as an unclear decision or "no intent".
func (a *Agent) invalid(kind flowv1.FailureKind, err error) *agent.Error {
	return a.fail(agent.Invalid, kind, flowv1.FailureLLM, err)
}

var bearer = regexp.MustCompile(`(?i)(bearer\s+)\S+`)

// scrub removes the API key (and any bearer token) from text and bounds its length.
func (a *Agent) scrub(text string) string {
	if a.apiKey != "" {
		text = strings.ReplaceAll(text, a.apiKey, "[redacted]")
	}
	text = bearer.ReplaceAllString(text, "${1}[redacted]")
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > maxErrorText {
		cut := maxErrorText
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "..."
	}
	return text
}

// retryAfter reads the server's wait hint: retry-after-ms, or Retry-After in seconds
// or as an HTTP date. Zero when absent, unreadable or in the past.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e9 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < 1e6 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
