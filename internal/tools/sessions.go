package tools

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/utils/clock"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// Sessions. Opening an MCP session costs a new client, the initialize request, its
// notification and, with a stateful server, a DELETE when it is closed: three
// requests around each call. A Caller keeps the session of a call that went well open
// and makes the next call to the same server on it: same namespace, same URL, same
// headers (Secret values are still read for each call; a changed value is another
// session), same timeout, same capabilities.
//
// A session carries one call at a time, so what the server sends during a call
// (requests for input, sampling requests, progress) belongs to that call; calls made
// at the same time take sessions of their own. A session whose call failed, or was
// abandoned for an answer of the user, is closed, never reused. A session idle for
// IdleTimeout is closed then, by a timer the Caller keeps for its oldest idle session
// (or earlier, by Close, which the manager calls when it stops). A call whose reused
// session the server no longer knows (it expired it, or restarted) is made again at once on a new session,
// with the same idempotency key: the server never ran it, as it answered 404 to the
// request.

const (
	// DefaultIdleTimeout is how long a Caller reuses an idle session.
	DefaultIdleTimeout = 30 * time.Second
	// maxIdleSessions bounds the idle sessions kept for one server: a manager's
	// workers each make at most one call at a time.
	maxIdleSessions = 32
)

// errNoCall answers a server's request that arrives between two calls of a session:
// there is nobody to ask.
var errNoCall = errors.New("no tool call in flight on this session")

// sessionKey is what a session is reused for: the namespace of the calling Session
// (a session never serves two namespaces), the server's URL, its headers as resolved
// (hashed: no Secret value is kept in the key), the HTTP timeout, and whether the
// client says it can answer sampling requests.
type sessionKey struct {
	namespace string
	url       string
	headers   [sha256.Size]byte
	timeout   time.Duration
	sampling  bool
}

func keyOf(namespace string, server *flowv1.ToolServer, headers http.Header, timeout time.Duration, sampling bool) sessionKey {
	h := sha256.New()
	names := make([]string, 0, len(headers))
	for name := range headers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		h.Write([]byte(name))
		for _, v := range headers[name] {
			h.Write([]byte{0})
			h.Write([]byte(v))
		}
		h.Write([]byte{0, 0})
	}
	k := sessionKey{namespace: namespace, url: server.URL, timeout: timeout, sampling: sampling}
	h.Sum(k.headers[:0])
	return k
}

// session is an MCP client session the Caller may reuse.
type session struct {
	key  sessionKey
	mcp  *mcp.ClientSession
	idle time.Time // since when it waits for a call

	// handlers is held for reading by a handler of the server's requests and
	// notifications while it runs, and for writing to change call: when a call
	// ends, the handlers running for it have returned, and those that start later
	// find no call. A progress notification still queued when the call's result
	// arrives is dropped (the result supersedes it), never told after the call.
	handlers sync.RWMutex
	call     *callState // the call in flight, nil between calls

	idempotency atomic.Pointer[string] // the key of the call in flight
}

// callState is one call attempt, as the handlers of its session see it.
type callState struct {
	ctx     context.Context
	tool    string // the journey's name of the tool
	key     string // idempotency key
	hooks   *agent.ToolHooks
	el      *elicitor
	sampled *sampledUsage
}

// carry makes call (nil: none) the call in flight on s.
func (s *session) carry(call *callState) {
	s.handlers.Lock()
	defer s.handlers.Unlock()
	s.call = call
	if call == nil {
		s.idempotency.Store(nil)
	} else {
		s.idempotency.Store(&call.key)
	}
}

// idempotencyKey is the key of the call in flight, for the Idempotency-Key header.
func (s *session) idempotencyKey() string {
	if k := s.idempotency.Load(); k != nil {
		return *k
	}
	return ""
}

// callTool makes call on s.
func (s *session) callTool(ctx context.Context, call *callState, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	s.carry(call)
	defer s.carry(nil)
	return s.mcp.CallTool(ctx, params)
}

// options are the client options of s: its handlers answer for the call in flight.
func (s *session) options(sampling bool) *mcp.ClientOptions {
	opts := &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: elicitationModes()},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			s.handlers.RLock()
			defer s.handlers.RUnlock()
			if s.call == nil {
				return nil, errNoCall
			}
			return s.call.el.handle(ctx, req)
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			s.handlers.RLock()
			defer s.handlers.RUnlock()
			call := s.call
			if call == nil || call.hooks == nil || call.hooks.Progress == nil || req.Params.ProgressToken != any(call.key) {
				return
			}
			p := req.Params
			call.hooks.Progress(agent.ToolProgress{Progress: p.Progress, Total: p.Total, Message: p.Message})
		},
	}
	if sampling {
		opts.CreateMessageHandler = func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) { //nolint:staticcheck // sampling is deprecated from protocol 2026-07-28 and still served; servers use it
			s.handlers.RLock()
			defer s.handlers.RUnlock()
			call := s.call
			if call == nil || call.hooks == nil || call.hooks.Sample == nil {
				return nil, errNoCall
			}
			// The model is asked in the call's context (its trace, its deadline),
			// and stops when the server cancels its request.
			callCtx, cancel := context.WithCancel(call.ctx)
			defer cancel()
			defer context.AfterFunc(ctx, cancel)()
			return sample(callCtx, call.hooks.Sample, req.Params, call.sampled)
		}
	}
	return opts
}

// take is an idle session for key, nil for none.
func (c *Caller) take(key sessionKey) *session {
	c.mu.Lock()
	expired := c.expire()
	idle := c.idle[key]
	var s *session
	if n := len(idle); n > 0 {
		s, c.idle[key] = idle[n-1], idle[:n-1]
	}
	c.mu.Unlock()
	closeAll(expired)
	return s
}

// put keeps s for the next call to its server.
func (c *Caller) put(s *session) {
	c.mu.Lock()
	s.idle = c.clock().Now()
	var drop []*session
	if len(c.idle[s.key]) < maxIdleSessions {
		if c.idle == nil {
			c.idle = map[sessionKey][]*session{}
		}
		c.idle[s.key] = append(c.idle[s.key], s)
	} else {
		drop = append(drop, s)
	}
	drop = append(drop, c.expire()...)
	c.arm()
	c.mu.Unlock()
	closeAll(drop)
}

// arm sets the timer to the time the oldest idle session is up, or stops it when none
// is idle (c.mu held).
func (c *Caller) arm() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	var oldest time.Time
	for _, idle := range c.idle {
		if len(idle) > 0 && (oldest.IsZero() || idle[0].idle.Before(oldest)) {
			oldest = idle[0].idle
		}
	}
	if oldest.IsZero() {
		return
	}
	// As time.AfterFunc does, the timer runs expireIdle in a goroutine of its own (a
	// fake clock of tests calls its functions while it holds its lock).
	c.timer = c.clock().AfterFunc(c.idleTimeout()-c.clock().Since(oldest), func() { go c.expireIdle() })
}

// expireIdle closes the sessions whose idle time is up, and sets the timer for the
// next one.
func (c *Caller) expireIdle() {
	c.mu.Lock()
	expired := c.expire()
	c.arm()
	c.mu.Unlock()
	closeAll(expired)
}

func (c *Caller) idleTimeout() time.Duration {
	if c.IdleTimeout <= 0 {
		return DefaultIdleTimeout
	}
	return c.IdleTimeout
}

// expire takes out the sessions idle for longer than the idle timeout (c.mu held).
// Each list is in the order its sessions became idle, oldest first.
func (c *Caller) expire() []*session {
	timeout := c.idleTimeout()
	now := c.clock().Now()
	var out []*session
	for key, idle := range c.idle {
		n := 0
		for n < len(idle) && now.Sub(idle[n].idle) >= timeout {
			n++
		}
		if n == 0 {
			continue
		}
		out = append(out, idle[:n]...)
		if n == len(idle) {
			delete(c.idle, key)
		} else {
			c.idle[key] = slices.Clone(idle[n:])
		}
	}
	return out
}

// Close closes the idle sessions. The Caller may still be used: the next call opens
// a new session.
func (c *Caller) Close() {
	c.mu.Lock()
	var all []*session
	for _, idle := range c.idle {
		all = append(all, idle...)
	}
	c.idle = nil
	c.arm()
	c.mu.Unlock()
	closeAll(all)
}

// Start makes a Caller a manager Runnable: it waits for the manager to stop, then
// closes the idle sessions, so the servers are told (a DELETE each) instead of keeping
// them until their own timeout. A session whose call ends after that is closed by its
// idle timer, or with the process.
func (c *Caller) Start(ctx context.Context) error {
	<-ctx.Done()
	c.Close()
	return nil
}

// NeedLeaderElection is false: every replica closes its own sessions when it stops.
func (c *Caller) NeedLeaderElection() bool { return false }

func (c *Caller) clock() clock.WithDelayedExecution {
	if c.clk != nil {
		return c.clk
	}
	return clock.RealClock{}
}

func closeAll(sessions []*session) {
	for _, s := range sessions {
		_ = s.mcp.Close()
	}
}

// stale reports whether err says the server no longer knows the session (it answered
// the call's request with 404): the call did not reach the tool, and may be made again
// on a new session.
func stale(err error) bool {
	return errors.Is(err, mcp.ErrSessionMissing)
}
