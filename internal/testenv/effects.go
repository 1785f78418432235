package testenv

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The idempotency key of a tool call, as journey-operator sends it: in the request's
// _meta, and as an HTTP header.
const (
	idempotencyKeyMeta   = "journey.dev/idempotency-key"
	idempotencyKeyHeader = "Idempotency-Key"
)

// EffectOptions configure an EffectServer.
type EffectOptions struct {
	// Keyed makes the server honour idempotency keys: a key's payment is made once
	// however often the call is delivered, and a delivery again gets the first
	// payment back. Otherwise every delivery pays again (a server whose
	// idempotency is None).
	Keyed bool
	// Fail, when set, is asked before each delivery of pay (with its key and the
	// delivery's number for that key, from 1): true answers a tool error and pays
	// nothing.
	Fail func(key string, delivery int) bool
	// Hold, when set, runs after a delivery of pay paid and before it answers (with
	// its key and order): tests hold an answer there past a manager's stop. It
	// should return when ctx is done (the client gave up, or the test ends).
	Hold func(ctx context.Context, key, order string)
}

// EffectServer is an MCP server on the official Go SDK, served over streamable HTTP
// on loopback, whose tool pay has a side effect it counts by idempotency key (a
// payment), and whose read-only tool pay_status tells whether a key was paid (the
// answer a probe of journey-operator expects). Tests count effects on it.
type EffectServer struct {
	// URL is the MCP endpoint.
	URL string
	o   EffectOptions
	// closing is done when the test ends: held answers are let go.
	closing context.Context

	mu         sync.Mutex
	payments   map[string]Payment // the first payment of each key
	effects    map[string]int     // payments made, by key
	deliveries map[string]int     // pay requests, by key
	orders     map[string]string  // the order of each key
	probes     int
}

// Payment is what pay answers.
type Payment struct {
	ID     string `json:"payment_id"`
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

// PayIn is pay's input.
type PayIn struct {
	Order  string `json:"order" jsonschema:"the order to pay"`
	Amount int    `json:"amount" jsonschema:"the amount, in cents"`
}

// PayStatusIn is pay_status's input: what journey-operator sends a probe.
type PayStatusIn struct {
	IdempotencyKey string `json:"idempotencyKey" jsonschema:"the idempotency key of the pay call"`
	Tool           string `json:"tool,omitempty" jsonschema:"the tool that was called"`
}

// PayStatus is pay_status's answer.
type PayStatus struct {
	Done   bool     `json:"done"`
	Result *Payment `json:"result,omitempty"`
}

// NewEffectServer starts an EffectServer until the test ends.
func NewEffectServer(t testing.TB, o EffectOptions) *EffectServer {
	t.Helper()
	e := &EffectServer{o: o, payments: map[string]Payment{}, effects: map[string]int{}, deliveries: map[string]int{}, orders: map[string]string{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v1"}, nil)
	yes, no := true, false
	mcp.AddTool(s, &mcp.Tool{Name: "pay", Description: "Pay an order.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, e.pay)
	mcp.AddTool(s, &mcp.Tool{Name: "pay_status", Description: "Whether the pay call of an idempotency key was done, and its payment.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no}}, e.status)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	closing, cancel := context.WithCancel(context.Background())
	e.closing = closing
	t.Cleanup(srv.Close)
	t.Cleanup(cancel) // runs first: held answers return, then the server closes
	e.URL = srv.URL + "/mcp"
	return e
}

func (e *EffectServer) pay(ctx context.Context, req *mcp.CallToolRequest, in PayIn) (*mcp.CallToolResult, Payment, error) {
	key := ""
	if req.Params != nil {
		key, _ = req.Params.Meta[idempotencyKeyMeta].(string)
	}
	if key == "" && req.Extra != nil {
		key = req.Extra.Header.Get(idempotencyKeyHeader)
	}
	e.mu.Lock()
	e.deliveries[key]++
	e.orders[key] = in.Order
	n := e.deliveries[key]
	fail := e.o.Fail != nil && e.o.Fail(key, n)
	p, paid := e.payments[key]
	if !fail && (!paid || !e.o.Keyed) {
		e.effects[key]++
		p = Payment{ID: fmt.Sprintf("p-%d", e.total()), Order: in.Order, Amount: in.Amount}
		if !paid {
			e.payments[key] = p
		}
	}
	e.mu.Unlock()
	if fail {
		return nil, Payment{}, fmt.Errorf("the payment provider is unavailable, try again later")
	}
	if e.o.Hold != nil {
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			select {
			case <-e.closing.Done():
				stop()
			case <-ctx.Done():
			}
		}()
		e.o.Hold(ctx, key, in.Order)
	}
	return nil, p, nil
}

// total is the payments made; e.mu is held.
func (e *EffectServer) total() int {
	n := 0
	for _, c := range e.effects {
		n += c
	}
	return n
}

func (e *EffectServer) status(_ context.Context, _ *mcp.CallToolRequest, in PayStatusIn) (*mcp.CallToolResult, PayStatus, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.probes++
	p, ok := e.payments[in.IdempotencyKey]
	if !ok {
		return nil, PayStatus{Done: false}, nil
	}
	return nil, PayStatus{Done: true, Result: &p}, nil
}

// Effects returns the payments made, by idempotency key.
func (e *EffectServer) Effects() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.effects)
}

// Deliveries returns the pay requests received, by idempotency key.
func (e *EffectServer) Deliveries() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.deliveries)
}

// Order returns what the server did for order: the payments it made, the pay
// requests it received, and the idempotency keys they carried (sorted).
func (e *EffectServer) Order(order string) (effects, deliveries int, keys []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for key, o := range e.orders {
		if o == order {
			effects += e.effects[key]
			deliveries += e.deliveries[key]
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return effects, deliveries, keys
}

// Probes returns how many pay_status requests the server received.
func (e *EffectServer) Probes() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.probes
}
