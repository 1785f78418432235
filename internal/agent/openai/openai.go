// Package openai is the agent provider for OpenAI and any OpenAI-compatible endpoint
// (vLLM, Ollama, LocalAI, ...), through github.com/sashabaranov/go-openai.
//
// Every call has a deadline (spec.timeout, default 30s) and is retried with jittered
// exponential backoff on 429, 5xx and transport failures (spec.maxRetries, default 2),
// honouring Retry-After. Answers are requested as strict JSON schemas built at run
// time (the destination and intent are enums) and validated again here; failures come
// back as *agent.Error with a class the controller acts on. The API key never appears
// in an error or a log line.
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
	name        string
	model       string
	temperature float32 // 0 = not sent
	timeout     time.Duration
	maxRetries  int
	pricing     *flowv1.Pricing
	apiKey      string
	client      *goopenai.Client
	opts        options
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
		name:       string(spec.Name),
		model:      spec.Model,
		timeout:    DefaultTimeout,
		maxRetries: DefaultMaxRetries,
		pricing:    spec.Pricing,
		apiKey:     apiKey,
		opts:       o,
	}
	if spec.Temperature != "" {
		t, err := strconv.ParseFloat(string(spec.Temperature), 32)
		if err != nil || t < 0 || t > 2 {
			return nil, fmt.Errorf("agent %s: temperature %q is not a number in [0,2]", spec.Name, spec.Temperature)
		}
		a.temperature = float32(t)
		if t == 0 {
			// go-openai omits a zero temperature (the server default, often 1, would
			// apply); the smallest positive float32 is sent instead and means 0.
			a.temperature = math.SmallestNonzeroFloat32
		}
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
	cfg.HTTPClient = o.httpClient
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

// complete sends req, retrying transient failures. On success the response has at
// least one choice.
func (a *Agent) complete(ctx context.Context, req goopenai.ChatCompletionRequest) (goopenai.ChatCompletionResponse, error) {
	req.Model = a.model
	req.Temperature = a.temperature
	for attempt := 0; ; attempt++ {
		resp, timedOut, err := a.attempt(ctx, req)
		if err == nil {
			if len(resp.Choices) == 0 {
				return resp, a.invalid(flowv1.FailureValidation, errors.New("the answer has no choices"))
			}
			return resp, nil
		}
		ae := a.classify(ctx, err, timedOut, resp.Header())
		if ae.Class != agent.Transient || attempt >= a.maxRetries || ctx.Err() != nil {
			return resp, ae
		}
		wait := a.backoff(attempt)
		if ae.RetryAfter > 0 {
			if ae.RetryAfter > a.opts.maxRetryWait {
				return resp, ae
			}
			wait = ae.RetryAfter
		}
		log.FromContext(ctx).V(4).Info("Retrying agent call", "agent", a.name, "attempt", attempt+1,
			"delay", wait.String(), "kind", string(ae.Kind), "error", ae.Err.Error())
		if err := a.opts.sleep(ctx, wait); err != nil {
			return resp, ae
		}
	}
}

// attempt is one HTTP call under the per-call deadline. timedOut reports that the
// deadline (not the caller's context) ended it.
func (a *Agent) attempt(ctx context.Context, req goopenai.ChatCompletionRequest) (goopenai.ChatCompletionResponse, bool, error) {
	cctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	resp, err := a.client.CreateChatCompletion(cctx, req)
	timedOut := err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded)
	return resp, timedOut, err
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

// usage converts the response's usage block, with cost.
func (a *Agent) usage(resp goopenai.ChatCompletionResponse) agent.Usage {
	u := agent.Usage{PromptTokens: int64(resp.Usage.PromptTokens), CompletionTokens: int64(resp.Usage.CompletionTokens)}
	u.CostUSD = agent.Cost(a.pricing, u)
	return u
}
