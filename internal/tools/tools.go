// Package tools calls the tools of journeys: builtin ones (CEL, offline) and those of
// MCP servers over streamable HTTP, through the official MCP Go SDK. Every call to a
// server carries the call's idempotency key twice: in the request's _meta (under
// IdempotencyKeyMeta) and as an Idempotency-Key HTTP header, so a server can answer a
// retried call without doing its work again.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/tracing"
)

const (
	// IdempotencyKeyHeader is the HTTP header carrying a call's idempotency key.
	IdempotencyKeyHeader = "Idempotency-Key"
	// IdempotencyKeyMeta is the _meta key carrying a call's idempotency key.
	IdempotencyKeyMeta = "journey.dev/idempotency-key"
	// DefaultTimeout bounds one request to a server without a timeout.
	DefaultTimeout = 30 * time.Second
)

// Caller calls tools. Secrets reads the Secrets of header values; HTTPClient, when set,
// is the base of the clients it makes (its Transport is kept). A Caller reuses the
// MCP sessions of its calls (sessions.go); IdleTimeout is how long it keeps an idle
// one open (zero: DefaultIdleTimeout). Close closes the idle sessions; as a manager
// Runnable (Start), a Caller closes them when the manager stops.
type Caller struct {
	Secrets     client.Reader
	HTTPClient  *http.Client
	IdleTimeout time.Duration

	mu    sync.Mutex
	idle  map[sessionKey][]*session  // idle sessions, oldest first
	timer clock.Timer                // closes the oldest idle session when its time is up; nil when none is idle
	clk   clock.WithDelayedExecution // tests: the clock of idle timeouts; nil: the real clock
}

// CallTool makes one tool call: a builtin tool is evaluated, a server tool is called
// over MCP with its idempotency key. A server that cannot be reached or does not
// answer in time is a Transient error (the call is retried with the same key); a
// result the server marks as an error is the tool's answer (ToolResponse.Error).
func (c *Caller) CallTool(ctx context.Context, namespace string, req agent.ToolRequest) (agent.ToolResponse, error) {
	if req.Server == nil {
		// Builtin tools are computed by the step protocol, never sent here.
		return agent.ToolResponse{}, &agent.Error{Class: agent.Terminal, Source: flowv1.FailureSystem, Kind: flowv1.FailureValidation, Agent: req.Tool,
			Err: fmt.Errorf("tool %s names no server", req.Tool)}
	}
	start := time.Now()
	// A request for input the user has not answered yet ends the attempt: the
	// call is abandoned (the server's request fails and the call is cancelled),
	// and made again, same key, once the user answered.
	ctx, abandon := context.WithCancel(ctx)
	defer abandon()
	el := &elicitor{given: req.Elicitations, abandon: abandon}
	call := &callState{ctx: ctx, tool: req.Tool, key: req.IdempotencyKey, hooks: req.Hooks, el: el, sampled: &sampledUsage{}}
	params := &mcp.CallToolParams{
		Meta:      mcp.Meta{IdempotencyKeyMeta: req.IdempotencyKey},
		Name:      req.ServerTool,
		Arguments: req.Args,
	}
	if req.Hooks != nil && req.Hooks.Progress != nil {
		// The server may report progress against the call's key.
		params.SetProgressToken(req.IdempotencyKey)
	}
	res, err := c.call(ctx, namespace, req.Server, call, params)
	if asked := el.pending(); asked != nil {
		return agent.ToolResponse{DurationMs: time.Since(start).Milliseconds(), Usage: call.sampled.get(), Elicitation: asked}, nil
	}
	if err != nil {
		return agent.ToolResponse{}, err
	}
	out := agent.ToolResponse{DurationMs: time.Since(start).Milliseconds(), Usage: call.sampled.get()}
	if res.IsError {
		out.Error = text(res)
		return out, nil
	}
	out.Result, err = result(res)
	if err != nil {
		return agent.ToolResponse{}, &agent.Error{Class: agent.Invalid, Source: flowv1.FailureTool, Kind: flowv1.FailureValidation, Agent: req.Tool, Err: err}
	}
	return out, nil
}

// call makes call on a session of server: an idle one when there is one, else a new
// one. A reused session the server no longer knows is closed and the call made again
// on a new one. The session is kept for the next call only when the call went well.
func (c *Caller) call(ctx context.Context, namespace string, server *flowv1.ToolServer, call *callState, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	headers, err := c.headers(ctx, namespace, server)
	if err != nil {
		return nil, err
	}
	key := keyOf(namespace, server, headers, timeoutOf(server), call.hooks != nil && call.hooks.Sample != nil)
	s := c.take(key)
	reused := s != nil
	if !reused {
		if s, err = c.open(ctx, server, headers, key, call); err != nil {
			return nil, err
		}
	}
	res, err := s.callTool(ctx, call, params)
	if err != nil && reused && stale(err) && call.el.pending() == nil && ctx.Err() == nil {
		_ = s.mcp.Close()
		if s, err = c.open(ctx, server, headers, key, call); err != nil {
			return nil, err
		}
		res, err = s.callTool(ctx, call, params)
	}
	if err != nil || call.el.pending() != nil {
		_ = s.mcp.Close()
		if err != nil {
			return nil, transient(call.tool, fmt.Errorf("calling tool %s on server %s: %w", params.Name, server.Name, err))
		}
		return res, nil
	}
	c.put(s)
	return res, nil
}

// List lists the tools of server (MCP tools/list, every page).
func (c *Caller) List(ctx context.Context, namespace string, server *flowv1.ToolServer) ([]*mcp.Tool, error) {
	// A server may offer some tools only to clients that can answer its sampling
	// requests: the listing client says it can when the journey answers them.
	// Every call can ask the user for input, so the listing client says it can.
	opts := &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{Elicitation: elicitationModes()}}
	if server.Sampling != nil {
		opts.Capabilities.Sampling = &mcp.SamplingCapabilities{} //nolint:staticcheck // sampling is deprecated from protocol 2026-07-28 and still served; servers use it
	}
	session, err := c.connect(ctx, namespace, server, opts)
	if err != nil {
		return nil, err
	}
	defer func() { _ = session.Close() }()
	var tools []*mcp.Tool
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// connect opens an MCP session with server for one listing.
func (c *Caller) connect(ctx context.Context, namespace string, server *flowv1.ToolServer, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	headers, err := c.headers(ctx, namespace, server)
	if err != nil {
		return nil, err
	}
	return c.dial(ctx, server, headers, nil, opts)
}

// open opens a session with server for call, and for the calls after it (see
// sessions.go). The session carries call from its first request.
func (c *Caller) open(ctx context.Context, server *flowv1.ToolServer, headers http.Header, key sessionKey, call *callState) (*session, error) {
	s := &session{key: key}
	s.carry(call)
	defer s.carry(nil)
	// The session outlives the call: it is opened without the call's context values
	// (its span), which the connection would keep for the calls after it; the
	// call's cancellation still stops the opening.
	octx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	cs, err := c.dial(octx, server, headers, s.idempotencyKey, s.options(key.sampling))
	if err != nil {
		return nil, err
	}
	s.mcp = cs
	return s, nil
}

// dial opens an MCP session with server, sending headers on every request, and
// key's answer, when key is set and answers, as the Idempotency-Key header.
func (c *Caller) dial(ctx context.Context, server *flowv1.ToolServer, headers http.Header, key func() string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	base := http.DefaultTransport
	if c.HTTPClient != nil && c.HTTPClient.Transport != nil {
		base = c.HTTPClient.Transport
	}
	// The server gets the traceparent of the call's span, when the step is traced.
	base = tracing.Transport(base)
	transport := &mcp.StreamableClientTransport{
		Endpoint:             server.URL,
		HTTPClient:           &http.Client{Timeout: timeoutOf(server), Transport: &withHeaders{base: base, headers: headers, key: key}},
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "journey-operator", Version: "v1alpha1"}, opts)
	session, err := cl.Connect(ctx, transport, nil)
	if err != nil {
		return nil, transient(string(server.Name), fmt.Errorf("connecting to tool server %s: %w", server.Name, err))
	}
	return session, nil
}

// timeoutOf bounds one request to server.
func timeoutOf(server *flowv1.ToolServer) time.Duration {
	if server.Timeout != nil && server.Timeout.Duration > 0 {
		return server.Timeout.Duration
	}
	return DefaultTimeout
}

// sample answers a server's sampling request with hook, adding what it used to
// sampled. Content other than text is given to the model as a placeholder.
func sample(ctx context.Context, hook func(context.Context, agent.SampleRequest) (agent.SampleResponse, error), p *mcp.CreateMessageParams, sampled *sampledUsage) (*mcp.CreateMessageResult, error) { //nolint:staticcheck // sampling is deprecated from protocol 2026-07-28 and still served; servers use it
	req := agent.SampleRequest{SystemPrompt: p.SystemPrompt, MaxTokens: int(p.MaxTokens)}
	for _, m := range p.Messages {
		text := "[non-text content]"
		if t, ok := m.Content.(*mcp.TextContent); ok {
			text = t.Text
		}
		req.Messages = append(req.Messages, agent.Exchange{Role: string(m.Role), Text: text})
	}
	resp, err := hook(ctx, req)
	sampled.add(resp.Usage)
	if err != nil {
		return nil, err
	}
	return &mcp.CreateMessageResult{Content: &mcp.TextContent{Text: resp.Text}, Model: resp.Model, Role: "assistant", StopReason: resp.StopReason}, nil //nolint:staticcheck // sampling is deprecated from protocol 2026-07-28 and still served; servers use it
}

// sampledUsage sums what the sampling requests of one call used.
type sampledUsage struct {
	mu sync.Mutex
	u  agent.Usage
}

func (s *sampledUsage) add(u agent.Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.u = s.u.Add(u)
}

func (s *sampledUsage) get() agent.Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.u
}

// headers resolves server's headers, reading Secret values now: never cached, never
// logged.
func (c *Caller) headers(ctx context.Context, namespace string, server *flowv1.ToolServer) (http.Header, error) {
	h := http.Header{}
	for _, hd := range server.Headers {
		if hd.ValueFrom == nil {
			h.Set(hd.Name, hd.Value)
			continue
		}
		ref := hd.ValueFrom.SecretKeyRef
		if c.Secrets == nil {
			return nil, terminal(string(server.Name), fmt.Errorf("header %s of tool server %s reads a Secret, and no Secret reader is set", hd.Name, server.Name))
		}
		var s corev1.Secret
		err := c.Secrets.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, &s)
		if apierrors.IsNotFound(err) {
			return nil, terminal(string(server.Name), fmt.Errorf("secret %q of tool server %s not found in namespace %q", ref.Name, server.Name, namespace))
		}
		if err != nil {
			return nil, transient(string(server.Name), err)
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			return nil, terminal(string(server.Name), fmt.Errorf("secret %q has no key %q", ref.Name, ref.Key))
		}
		h.Set(hd.Name, string(v))
	}
	return h, nil
}

// withHeaders adds headers to every request, and the key of the call in flight, if
// any, as the Idempotency-Key header.
type withHeaders struct {
	base    http.RoundTripper
	headers http.Header
	key     func() string
}

func (t *withHeaders) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header[k] = v
	}
	if t.key != nil {
		if key := t.key(); key != "" {
			req.Header.Set(IdempotencyKeyHeader, key)
		}
	}
	return t.base.RoundTrip(req)
}

// result is a tool's result: its structured content, else its text content (parsed as
// JSON when it is JSON).
func result(res *mcp.CallToolResult) (any, error) {
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, err
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		return v, nil
	}
	s := text(res)
	var v any
	if json.Unmarshal([]byte(s), &v) == nil {
		return v, nil
	}
	return s, nil
}

// text joins a result's text contents.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func transient(who string, err error) error {
	kind := flowv1.FailureException
	if errors.Is(err, context.DeadlineExceeded) {
		kind = flowv1.FailureTimeout
	}
	return &agent.Error{Class: agent.Transient, Source: flowv1.FailureTransport, Kind: kind, Agent: who, Err: err}
}

func terminal(who string, err error) error {
	return &agent.Error{Class: agent.Terminal, Source: flowv1.FailureTool, Kind: flowv1.FailureValidation, Agent: who, Err: err}
}
