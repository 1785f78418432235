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
	"slices"
	"strconv"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// maxErrorText bounds the server text kept in an error (an HTML error page can be
// large, and status messages are for people).
const maxErrorText = 300

// failure is a failed attempt, classified.
type failure struct {
	err *agent.Error
	// sig identifies the server's answer (status, code and message), to notice the
	// same one repeated; empty for failures that are not an answer.
	sig string
	// repeatable marks a server failure that may be deterministic (500, 424, an error
	// in a 200): retried, but the same answer on every attempt ends as Terminal.
	repeatable bool
	// formatRefused reports that the endpoint said it does not support the response
	// format asked for.
	formatRefused bool
	// toolsRefused reports that the endpoint said it does not take native tools.
	toolsRefused bool
}

// classify turns a failed call into a classified failure whose text is scrubbed. ex
// holds the answer's body as the transport captured it.
func (a *Agent) classify(ctx context.Context, err error, timedOut bool, ex *exchange, h http.Header) failure {
	switch {
	case timedOut:
		return failure{err: a.fail(agent.Transient, flowv1.FailureTimeout, flowv1.FailureTransport,
			fmt.Errorf("no answer within %s: %w", a.timeout, context.DeadlineExceeded))}
	case ctx.Err() != nil:
		kind := flowv1.FailureException
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			kind = flowv1.FailureTimeout
		}
		return failure{err: a.fail(agent.Transient, kind, flowv1.FailureTransport, fmt.Errorf("call abandoned: %w", ctx.Err()))}
	}

	// A body go-openai could not read as {"error": {...}} (a string error, a vLLM
	// top-level error, plain text) is a RequestError, possibly wrapping an empty
	// APIError: look at it first.
	var (
		reqErr *goopenai.RequestError
		apiErr *goopenai.APIError
	)
	switch {
	case errors.As(err, &reqErr) && reqErr.HTTPStatusCode != 0:
		return a.serverFailure(parseServerError(reqErr.HTTPStatusCode, reqErr.Body), h)
	case errors.As(err, &apiErr) && apiErr.HTTPStatusCode != 0:
		if ex.body.Len() > 0 {
			return a.serverFailure(parseServerError(apiErr.HTTPStatusCode, ex.body.Bytes()), h)
		}
		se := serverError{status: apiErr.HTTPStatusCode, message: apiErr.Message, typ: apiErr.Type, code: scalar(apiErr.Code)}
		if apiErr.Param != nil {
			se.param = *apiErr.Param
		}
		if apiErr.InnerError != nil {
			se.inner = apiErr.InnerError.Code
		}
		return a.serverFailure(se, h)
	}

	var (
		netErr net.Error
		urlErr *url.Error
		synErr *json.SyntaxError
		typErr *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &netErr) && netErr.Timeout():
		return failure{err: a.fail(agent.Transient, flowv1.FailureTimeout, flowv1.FailureTransport, errors.New(a.scrub(err.Error())))}
	case errors.As(err, &urlErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return failure{err: a.fail(agent.Transient, flowv1.FailureException, flowv1.FailureTransport, errors.New(a.scrub(err.Error())))}
	case errors.As(err, &synErr), errors.As(err, &typErr):
		return failure{err: a.invalid(flowv1.FailureValidation, fmt.Errorf("the endpoint's answer is not a chat completion: %s", a.scrub(err.Error())))}
	default:
		// go-openai refused to build the request (for example a temperature a
		// reasoning model does not accept): retrying cannot help.
		return failure{err: a.fail(agent.Terminal, flowv1.FailureValidation, flowv1.FailureSystem,
			fmt.Errorf("request refused by the client: %s", a.scrub(err.Error())))}
	}
}

// serverFailure classifies an error answer. In order: a refused prompt or answer
// (content filters, moderation, a provider's JSON validation) is Invalid, for the
// journey to route; an error in a 200 is Transient (repeatable unless it names a
// "try later" status); then by status: 429 (unless out
// of credit), 408 and the "try later" statuses 502, 503, 504 are Transient; 500 and
// the other server failures are Transient but repeatable, unless their message says
// to try again; 401, 402, 403, 404 and the other client errors are Terminal.
func (a *Agent) serverFailure(se serverError, h http.Header) failure {
	err := fmt.Errorf("HTTP %d: %s", se.status, a.scrub(se.describe()))
	if se.inBody {
		err = fmt.Errorf("an error in a 200 answer: %s", a.scrub(se.describe()))
	}
	f := failure{sig: fmt.Sprint(se.status, "|", se.code, "|", se.message), formatRefused: se.refusesFormat(), toolsRefused: se.refusesTools()}
	transient := func(kind flowv1.FailureKind) *agent.Error {
		e := a.fail(agent.Transient, kind, flowv1.FailureLLM, err)
		e.RetryAfter = retryAfter(h, a.opts.now())
		return e
	}
	status := se.status
	switch kind, refused := se.refusal(); {
	case refused:
		f.err = a.invalid(kind, fmt.Errorf("the endpoint refused the prompt or the answer: %w", err))
	case se.inBody:
		// Retried like the status it names (502 when it names none).
		f.err, f.repeatable = transient(flowv1.FailureException), !slices.Contains(tryLater, status) && !se.saysTryLater()
	case status == http.StatusTooManyRequests && se.outOfCredit(), status == http.StatusPaymentRequired:
		// Out of credit, not rate limited: waiting will not help.
		f.err = a.fail(agent.Terminal, flowv1.FailureRateLimit, flowv1.FailureLLM, err)
	case status == http.StatusTooManyRequests:
		f.err = transient(flowv1.FailureRateLimit)
	case status == http.StatusRequestTimeout:
		f.err = transient(flowv1.FailureTimeout)
	case slices.Contains(tryLater, status):
		f.err = transient(flowv1.FailureException)
	case status >= 500 || status == http.StatusFailedDependency:
		f.err, f.repeatable = transient(flowv1.FailureException), !se.saysTryLater()
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		f.err = a.fail(agent.Terminal, flowv1.FailurePolicyKind, flowv1.FailureLLM, err)
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity || status == http.StatusRequestEntityTooLarge:
		f.err = a.fail(agent.Terminal, flowv1.FailureValidation, flowv1.FailureLLM, err)
	default: // 404 (unknown model or wrong baseURL) and every other status
		f.err = a.fail(agent.Terminal, flowv1.FailureException, flowv1.FailureLLM, err)
	}
	if f.err.Class == agent.Invalid {
		f.formatRefused, f.toolsRefused = false, false
	}
	return f
}

// tryLater are the statuses that say "try again later" whatever the body: a gateway
// or an overloaded server (502, 503, 504, 529), too early (425) and Groq's flex
// tier at capacity (498). They are retried like a rate limit, never ended early.
var tryLater = []int{http.StatusTooEarly, 498, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, 529}

// repeated is the error of a repeatable failure that gave the same answer on every
// attempt: the server means it, and the Session stalls with its message.
func (a *Agent) repeated(attempts int, last *agent.Error) *agent.Error {
	return a.fail(agent.Terminal, flowv1.FailureException, flowv1.FailureLLM,
		fmt.Errorf("the endpoint gave the same error %d times: %w", attempts, last.Err))
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
	return truncate.Bytes(text, maxErrorText+len("..."), "...")
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
