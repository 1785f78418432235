package tools

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	testingclock "k8s.io/utils/clock/testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// sessionServer serves a stateful MCP server (a new session on each initialize) with
// two tools: "echo", which records the idempotency key of each call it runs and, while
// hold is non-nil, says so on it and waits for it to be closed; "ask", which asks the
// user which day. restart replaces the handler by a new
// one, which knows none of the earlier sessions (a server restarted).
type sessionServer struct {
	server *flowv1.ToolServer
	hold   atomic.Pointer[hold]

	mu       sync.Mutex
	inits    int      // initialize requests
	deletes  int      // DELETE requests (sessions closed by the client)
	headers  []string // the Idempotency-Key header of each tools/call request
	ran      []string // the idempotency keys of the calls the tool ran
	handler  http.Handler
	newMCP   func() http.Handler
	notFound int // requests answered 404
}

func newSessionServer(t *testing.T) *sessionServer {
	ss := &sessionServer{}
	ss.newMCP = func() http.Handler {
		s := mcp.NewServer(&mcp.Implementation{Name: "echo"}, nil)
		s.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				key, _ := req.Params.Meta[IdempotencyKeyMeta].(string)
				ss.mu.Lock()
				ss.ran = append(ss.ran, key)
				ss.mu.Unlock()
				if h := ss.hold.Load(); h != nil {
					h.arrived <- key
					select {
					case <-h.release:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				return &mcp.CallToolResult{StructuredContent: map[string]any{"key": key}}, nil
			})
		s.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Which day?", RequestedSchema: map[string]any{"type": "object",
					"properties": map[string]any{"day": map[string]any{"type": "string"}}}})
				if err != nil {
					return nil, err
				}
				return &mcp.CallToolResult{StructuredContent: map[string]any{"day": res.Content["day"]}}, nil
			})
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	}
	ss.handler = ss.newMCP()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		ss.mu.Lock()
		switch {
		case r.Method == http.MethodDelete:
			ss.deletes++
		case bytes.Contains(body, []byte(`"method":"initialize"`)):
			ss.inits++
		case bytes.Contains(body, []byte(`"method":"tools/call"`)):
			ss.headers = append(ss.headers, r.Header.Get(IdempotencyKeyHeader))
		}
		h := ss.handler
		ss.mu.Unlock()
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.status == http.StatusNotFound {
			ss.mu.Lock()
			ss.notFound++
			ss.mu.Unlock()
		}
	}))
	t.Cleanup(srv.Close)
	ss.server = &flowv1.ToolServer{Name: "echo", URL: srv.URL}
	return ss
}

func (ss *sessionServer) restart() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.handler = ss.newMCP()
}

// hold holds the echo tool's calls: each says so on arrived and waits for release.
type hold struct {
	arrived chan string
	release chan struct{}
}

type serverCounts struct {
	inits, deletes, notFound int
	headers, ran             []string
}

func (ss *sessionServer) counts() serverCounts {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return serverCounts{ss.inits, ss.deletes, ss.notFound, slices.Clone(ss.headers), slices.Clone(ss.ran)}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func echo(server *flowv1.ToolServer, key string) agent.ToolRequest {
	return agent.ToolRequest{ID: "t-" + key, Tool: "echo", ServerTool: "echo", Server: server, IdempotencyKey: key}
}

func callEcho(t *testing.T, c *Caller, server *flowv1.ToolServer, key string) {
	t.Helper()
	res, err := c.CallTool(context.Background(), "ns", echo(server, key))
	if err != nil || res.Error != "" {
		t.Fatalf("call %s: %v %q", key, err, res.Error)
	}
	if got := res.Result.(map[string]any)["key"]; got != key {
		t.Fatalf("call %s answered for %v", key, got)
	}
}

// TestSessionsAreReused: calls to one server one after the other are made on one MCP
// session, each with its own idempotency key (in _meta and the header); calls in
// flight at the same time take a session each, both kept for the calls after them;
// a server with other headers, or a call from another namespace, gets a session of
// its own; Close closes the idle ones.
func TestSessionsAreReused(t *testing.T) {
	ss := newSessionServer(t)
	c := &Caller{}
	for _, key := range []string{"k-1", "k-2", "k-3"} {
		callEcho(t, c, ss.server, key)
	}
	got := ss.counts()
	if got.inits != 1 || got.deletes != 0 {
		t.Fatalf("3 calls in a row: %d sessions opened, %d closed; want 1 and 0", got.inits, got.deletes)
	}
	if want := []string{"k-1", "k-2", "k-3"}; !slices.Equal(got.headers, want) || !slices.Equal(got.ran, want) {
		t.Fatalf("Idempotency-Key headers %v, keys run %v; want %v", got.headers, got.ran, want)
	}

	// Two calls at once: the second cannot wait for the first's session.
	h := &hold{arrived: make(chan string), release: make(chan struct{})}
	ss.hold.Store(h)
	var wg sync.WaitGroup
	for _, key := range []string{"k-4", "k-5"} {
		wg.Go(func() { callEcho(t, c, ss.server, key) })
	}
	<-h.arrived
	<-h.arrived // both calls are in the tool
	ss.hold.Store(nil)
	close(h.release)
	wg.Wait()
	if got := ss.counts(); got.inits != 2 {
		t.Fatalf("two calls at once: %d sessions opened in all, want 2", got.inits)
	}
	callEcho(t, c, ss.server, "k-6")
	callEcho(t, c, ss.server, "k-7")
	if got := ss.counts(); got.inits != 2 {
		t.Fatalf("after two calls at once, both sessions are kept: %d opened in all, want 2", got.inits)
	}

	// Other headers (another Secret value, another user) are another session.
	other := *ss.server
	other.Headers = []flowv1.ToolServerHeader{{Name: "Authorization", Value: "Bearer other"}}
	callEcho(t, c, &other, "k-8")
	callEcho(t, c, &other, "k-9")
	if got := ss.counts(); got.inits != 3 {
		t.Fatalf("a server with other headers: %d sessions opened in all, want 3", got.inits)
	}
	// Another namespace never shares a session.
	if res, err := c.CallTool(context.Background(), "other-ns", echo(ss.server, "k-10")); err != nil || res.Error != "" {
		t.Fatalf("call from another namespace: %v %q", err, res.Error)
	}
	if got := ss.counts(); got.inits != 4 {
		t.Fatalf("a call from another namespace: %d sessions opened in all, want 4", got.inits)
	}

	c.Close()
	if got := ss.counts(); got.deletes != 4 {
		t.Fatalf("Close closed %d sessions, want the 4 idle ones", got.deletes)
	}
	callEcho(t, c, ss.server, "k-11")
	if got := ss.counts(); got.inits != 5 {
		t.Fatalf("a call after Close: %d sessions opened in all, want 5", got.inits)
	}
}

// TestSessionsAfterFailures: a session whose call was abandoned for the user's answer,
// or failed, is closed and never reused; a reused session the server no longer knows
// (it restarted) is replaced at once and the call made on the new one with the same
// key, the tool running it once.
func TestSessionsAfterFailures(t *testing.T) {
	ss := newSessionServer(t)
	c := &Caller{}
	callEcho(t, c, ss.server, "k-1")

	// Abandoned: the server asks for input the user has not given.
	res, err := c.CallTool(context.Background(), "ns", agent.ToolRequest{ID: "t-ask", Tool: "ask", ServerTool: "ask", Server: ss.server, IdempotencyKey: "k-ask"})
	if err != nil || res.Elicitation == nil || res.Elicitation.Message != "Which day?" {
		t.Fatalf("ask: %v %+v", err, res)
	}
	callEcho(t, c, ss.server, "k-2")
	if got := ss.counts(); got.inits != 2 || got.deletes != 1 {
		t.Fatalf("after an abandoned call: %d sessions opened, %d closed; want 2 and 1", got.inits, got.deletes)
	}

	// Failed: the server has no such tool.
	if _, err := c.CallTool(context.Background(), "ns", agent.ToolRequest{ID: "t-x", Tool: "x", ServerTool: "nothing", Server: ss.server, IdempotencyKey: "k-x"}); err == nil {
		t.Fatal("a call of a tool the server does not have succeeded")
	}
	callEcho(t, c, ss.server, "k-3")
	if got := ss.counts(); got.inits != 3 || got.deletes != 2 {
		t.Fatalf("after a failed call: %d sessions opened, %d closed; want 3 and 2", got.inits, got.deletes)
	}

	// Restarted: the idle session is unknown to the new server.
	ss.restart()
	callEcho(t, c, ss.server, "k-4")
	got := ss.counts()
	if got.notFound != 1 || got.inits != 4 {
		t.Fatalf("after a restart: %d requests answered 404, %d sessions opened; want 1 and 4", got.notFound, got.inits)
	}
	if want := []string{"k-1", "k-2", "k-3", "k-4"}; !slices.Equal(got.ran, want) {
		t.Fatalf("the tool ran %v, want %v (k-4 once)", got.ran, want)
	}
	if n := len(got.headers); n < 2 || got.headers[n-2] != "k-4" || got.headers[n-1] != "k-4" {
		t.Fatalf("Idempotency-Key headers %v: want k-4 on the refused request and on the one made again", got.headers)
	}
}

// TestIdleSessionsExpire: a session idle for IdleTimeout is closed, and the next call
// opens a new one; one idle for less is reused.
func TestIdleSessionsExpire(t *testing.T) {
	ss := newSessionServer(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	c := &Caller{IdleTimeout: time.Minute, clk: clk}
	callEcho(t, c, ss.server, "k-1")
	clk.Step(59 * time.Second)
	callEcho(t, c, ss.server, "k-2")
	if got := ss.counts(); got.inits != 1 {
		t.Fatalf("a session idle 59s of 1m: %d sessions opened, want 1", got.inits)
	}
	clk.Step(time.Minute)
	waitDeletes(t, ss, 1)
	callEcho(t, c, ss.server, "k-3")
	if got := ss.counts(); got.inits != 2 || got.deletes != 1 {
		t.Fatalf("a session idle 1m of 1m: %d sessions opened, %d closed; want 2 and 1", got.inits, got.deletes)
	}
}

// TestIdleSessionsCloseOnTime: an idle session is closed when its idle time is up,
// with no further call; sessions idle since different times are closed each at its
// own time, and none is closed early.
func TestIdleSessionsCloseOnTime(t *testing.T) {
	ss := newSessionServer(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	c := &Caller{IdleTimeout: time.Minute, clk: clk}
	callEcho(t, c, ss.server, "k-1") // idle since 9:00:00
	clk.Step(30 * time.Second)
	if res, err := c.CallTool(context.Background(), "other-ns", echo(ss.server, "k-2")); err != nil || res.Error != "" {
		t.Fatalf("call from another namespace: %v %q", err, res.Error)
	} // another session, idle since 9:00:30
	clk.Step(29 * time.Second) // 9:00:59
	if got := ss.counts(); got.deletes != 0 {
		t.Fatalf("at 59s of idle: %d sessions closed, want 0", got.deletes)
	}
	clk.Step(time.Second) // 9:01:00
	waitDeletes(t, ss, 1)
	clk.Step(29 * time.Second) // 9:01:29
	if got := ss.counts(); got.deletes != 1 {
		t.Fatalf("the second session at 59s of idle: %d sessions closed in all, want 1", got.deletes)
	}
	clk.Step(time.Second) // 9:01:30
	waitDeletes(t, ss, 2)
	if clk.HasWaiters() {
		t.Fatal("a timer is still set with no idle session")
	}
}

// TestCallerClosesSessionsWhenTheManagerStops: run as a manager Runnable, a Caller
// closes its idle sessions when the manager stops.
func TestCallerClosesSessionsWhenTheManagerStops(t *testing.T) {
	ss := newSessionServer(t)
	c := &Caller{}
	callEcho(t, c, ss.server, "k-1")
	if res, err := c.CallTool(context.Background(), "other-ns", echo(ss.server, "k-2")); err != nil || res.Error != "" {
		t.Fatalf("call from another namespace: %v %q", err, res.Error)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Start(ctx) }()
	if got := ss.counts(); got.deletes != 0 {
		t.Fatalf("while the manager runs: %d sessions closed, want 0", got.deletes)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := ss.counts(); got.inits != 2 || got.deletes != 2 {
		t.Fatalf("after the manager stopped: %d sessions opened, %d closed; want 2 and 2", got.inits, got.deletes)
	}
	if c.NeedLeaderElection() {
		t.Fatal("a Caller waits for leader election: a replica that is not the leader would keep its sessions")
	}
}

// waitDeletes waits until the server has been told of n closed sessions: a timer
// closes them in a goroutine of its own.
func waitDeletes(t *testing.T, ss *sessionServer, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ss.counts().deletes < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions closed, want %d", ss.counts().deletes, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := ss.counts().deletes; got != n {
		t.Fatalf("%d sessions closed, want %d", got, n)
	}
}
