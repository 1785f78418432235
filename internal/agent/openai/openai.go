// Package openai is the agent provider for OpenAI and any OpenAI-compatible endpoint
// (vLLM, Ollama, LocalAI, ...), through github.com/sashabaranov/go-openai.
//
// Every call has a deadline (spec.timeout, default 30s) and is retried with jittered
// exponential backoff on 429, 5xx and transport failures (spec.maxRetries, default 2),
// honouring Retry-After; a 500 that gives the same answer on every attempt ends as
// Terminal. Error answers are read in every shape the common servers use (see
// serverError) and classified: Transient (retried), Invalid (a refused prompt or
// answer, which the journey routes like a bad answer) or Terminal (credentials, an
// unknown model). Answers are requested as strict JSON schemas built at run time (the
// destination and intent are enums), stepping down to json_object and to the schema
// in the instructions when the endpoint does not support them (see rung), and are
// validated again here whatever the format. Requests are portable: a real
// temperature 0, no two consecutive messages of the same role, a token cap in the
// field the endpoint expects, schema properties in the answer's order. The API key
// never appears in an error or a log line.
package openai

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	goopenai "github.com/sashabaranov/go-openai"
	"sigs.k8s.io/controller-runtime/pkg/log"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

const (
	// DefaultTimeout bounds one call when spec.timeout is not set.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxRetries is the number of retries when spec.maxRetries is not set.
	DefaultMaxRetries = 2
	// DefaultBackoffBase is the first retry's nominal delay; it doubles per retry.
	DefaultBackoffBase = 500 * time.Millisecond
	// DefaultBackoffMax caps the backoff delay.
	DefaultBackoffMax = 10 * time.Second
	// DefaultMaxRetryWait is the longest Retry-After waited in process. A longer one
	// ends the call with a Transient error carrying RetryAfter, for the controller to
	// requeue after it.
	DefaultMaxRetryWait = 30 * time.Second
)

// Option configures an Agent.
type Option func(*options)

type options struct {
	httpClient   *http.Client
	now          func() time.Time
	sleep        func(context.Context, time.Duration) error
	jitter       func() float64
	backoffBase  time.Duration
	backoffMax   time.Duration
	maxRetryWait time.Duration
}

// WithHTTPClient sets the HTTP client. Its own Timeout, if any, applies on top of the
// per-call deadline.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithClock sets the clock used to read Retry-After dates.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithSleep sets how the agent waits between retries. sleep must return early with an
// error when ctx is done.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(o *options) { o.sleep = sleep }
}

// WithJitter sets the jitter source: a number in [0,1). A backoff delay d becomes
// d/2 + jitter()*d/2.
func WithJitter(jitter func() float64) Option { return func(o *options) { o.jitter = jitter } }

// defaultTransport is shared by agents without their own client, so connections to the
// same endpoint are pooled across Sessions.
var defaultTransport = func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 32
	return t
}()

// Agent is an agent.Agent backed by an OpenAI-compatible chat completions endpoint.
type Agent struct {
	name string
	// instructions are the agent's own system prompt (its role in a pipeline).
	instructions string
	model        string
	baseURL      string
	// temperature is sent when set; zeroTemperature sends a real 0 (see transport).
	temperature     float32
	zeroTemperature bool
	timeout         time.Duration
	maxRetries      int
	format          flowv1.ResponseFormat
	toolCalling     flowv1.ToolCalling
	maxTokens       int
	// completionTokensField sends the cap as max_completion_tokens, not max_tokens.
	completionTokensField bool
	pricing               *flowv1.Pricing
	apiKey                string
	client                *goopenai.Client
	opts                  options
}

var _ agent.Agent = (*Agent)(nil)

// New returns an agent for spec. apiKey may be empty for endpoints without
// authentication (a local Ollama or vLLM).
func New(spec flowv1.AgentSpec, apiKey string, opts ...Option) (*Agent, error) {
	if spec.Model == "" {
		return nil, fmt.Errorf("agent %s: model is required for provider openai", spec.Name)
	}
	o := options{
		now:          time.Now,
		sleep:        sleepContext,
		jitter:       rand.Float64,
		backoffBase:  DefaultBackoffBase,
		backoffMax:   DefaultBackoffMax,
		maxRetryWait: DefaultMaxRetryWait,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.httpClient == nil {
		o.httpClient = &http.Client{Transport: defaultTransport}
	}
	a := &Agent{
		name:                  string(spec.Name),
		instructions:          spec.Instructions,
		model:                 spec.Model,
		baseURL:               spec.BaseURL,
		timeout:               DefaultTimeout,
		maxRetries:            DefaultMaxRetries,
		format:                spec.ResponseFormat,
		toolCalling:           spec.ToolCalling,
		maxTokens:             int(agent.MaxTokens(spec)),
		completionTokensField: UsesMaxCompletionTokens(spec.BaseURL, spec.Model),
		pricing:               spec.Pricing,
		apiKey:                apiKey,
		opts:                  o,
	}
	if a.format == "" {
		a.format = flowv1.ResponseFormatAuto
	}
	if a.toolCalling == "" {
		a.toolCalling = flowv1.ToolCallingAuto
	}
	if spec.Temperature != "" {
		t, err := strconv.ParseFloat(string(spec.Temperature), 32)
		if err != nil || t < 0 || t > 2 {
			return nil, fmt.Errorf("agent %s: temperature %q is not a number in [0,2]", spec.Name, spec.Temperature)
		}
		a.temperature = float32(t)
		// go-openai omits a zero temperature (the server default, often 1, would
		// apply): the transport writes it into the body.
		a.zeroTemperature = t == 0
	}
	if spec.Timeout != nil && spec.Timeout.Duration > 0 {
		a.timeout = spec.Timeout.Duration
	}
	if spec.MaxRetries != nil {
		a.maxRetries = max(0, int(*spec.MaxRetries))
	}
	cfg := goopenai.DefaultConfig(apiKey)
	if spec.BaseURL != "" {
		cfg.BaseURL = spec.BaseURL
	}
	cfg.HTTPClient = withTransport(o.httpClient)
	a.client = goopenai.NewClientWithConfig(cfg)
	return a, nil
}

// Name is the agent's name in the Journey.
func (a *Agent) Name() string { return a.name }

// Model is the model the agent asks for.
func (a *Agent) Model() string { return a.model }

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// completeLadder asks c, retrying transient failures and, for an Auto agent, stepping
// down the response-format ladder when the endpoint refuses a format. An endpoint
// that refuses the native tools c offers ends the call with a toolsRefusedError (see
// toolcalling.go). On success the response has at least one choice.
func (a *Agent) completeLadder(ctx context.Context, c call) (goopenai.ChatCompletionResponse, error) {
	r := rungOf(a.format)
	if a.format == flowv1.ResponseFormatAuto {
		r = learned.get(endpointKey(a.baseURL, a.model))
	}
	var (
		first   string
		started bool
		same    = true
	)
	for retries := 0; ; {
		resp, f := a.try(ctx, a.request(c, r))
		if f == nil {
			return resp, nil
		}
		if f.toolsRefused && len(c.tools) > 0 {
			// Not retried: the caller steps down the tool ladder, or stalls.
			return resp, a.toolsRefused(f.err)
		}
		if f.formatRefused && a.format == flowv1.ResponseFormatAuto && r < rungPrompt {
			r = a.stepDown(ctx, r, f.err.Err)
			started, same = false, true
			continue
		}
		switch {
		case !started:
			first, started = f.sig, true
		case f.sig != first:
			same = false
		}
		ae := f.err
		if ae.Class != agent.Transient || ctx.Err() != nil {
			return resp, ae
		}
		if retries >= a.maxRetries {
			if f.repeatable && same && f.sig != "" && retries > 0 {
				return resp, a.repeated(retries+1, ae)
			}
			return resp, ae
		}
		wait := a.backoff(retries)
		if ae.RetryAfter > 0 {
			if ae.RetryAfter > a.opts.maxRetryWait {
				return resp, ae
			}
			wait = ae.RetryAfter
		}
		retries++
		log.FromContext(ctx).V(4).Info("Retrying agent call", "agent", a.name, "attempt", retries,
			"delay", wait.String(), "kind", string(ae.Kind), "error", ae.Err.Error())
		if err := a.opts.sleep(ctx, wait); err != nil {
			return resp, ae
		}
	}
}

// try is one HTTP call under the per-call deadline, classified when it fails.
func (a *Agent) try(ctx context.Context, req goopenai.ChatCompletionRequest) (goopenai.ChatCompletionResponse, *failure) {
	ex := &exchange{zeroTemperature: a.zeroTemperature}
	cctx, cancel := context.WithTimeout(context.WithValue(ctx, exchangeKey{}, ex), a.timeout)
	defer cancel()
	resp, err := a.client.CreateChatCompletion(cctx, req)
	if err != nil {
		timedOut := ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded)
		f := a.classify(ctx, err, timedOut, ex, resp.Header())
		return resp, &f
	}
	if se, ok := errorInBody(ex.body.Bytes()); ok {
		// OpenRouter answers 200 with an error body when the provider failed.
		f := a.serverFailure(se, resp.Header())
		return resp, &f
	}
	if len(resp.Choices) == 0 {
		return resp, &failure{err: a.invalid(flowv1.FailureValidation, errors.New("the answer has no choices"))}
	}
	if resp.Choices[0].FinishReason == "error" {
		// OpenRouter's finish reason when the provider failed during generation.
		f := a.serverFailure(serverError{status: 200, inBody: true, message: "the provider failed during generation (finish_reason error)"}, resp.Header())
		return resp, &f
	}
	return resp, nil
}

// backoff is the jittered exponential delay before retry number attempt+1.
func (a *Agent) backoff(attempt int) time.Duration {
	d := a.opts.backoffBase << min(attempt, 30)
	if d <= 0 || d > a.opts.backoffMax {
		d = a.opts.backoffMax
	}
	j := a.opts.jitter()
	if j < 0 || j >= 1 || math.IsNaN(j) {
		j = 0
	}
	return d/2 + time.Duration(j*float64(d/2))
}
