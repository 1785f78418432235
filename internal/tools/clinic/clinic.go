// Package clinic is a small MCP server for demos and tests, built on the official MCP
// Go SDK: a clinic's doctors, their free slots, and booking. Booking is the side
// effect: it is done once per idempotency key (from the request's _meta, else the
// Idempotency-Key header), and a retried delivery gets the first booking back.
package clinic

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Idempotency keys, as journey-operator sends them.
const (
	idempotencyKeyMeta   = "journey.dev/idempotency-key"
	idempotencyKeyHeader = "Idempotency-Key"
)

// Doctor is one of the clinic's doctors.
type Doctor struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Specialty string   `json:"specialty"`
	Slots     []string `json:"slots"`
}

// Booking is a booked slot.
type Booking struct {
	ID       string `json:"booking_id"`
	DoctorID string `json:"doctor_id"`
	Slot     string `json:"slot"`
	Patient  string `json:"patient,omitempty"`
}

// Clinic is the server's state. Hold, when set, runs before book_slot answers (after
// the booking is made): tests use it to hold the first response of a side effect.
type Clinic struct {
	Hold func(ctx context.Context, key string)

	mu         sync.Mutex
	doctors    []Doctor
	bookings   map[string]Booking // by idempotency key
	deliveries map[string]int     // book_slot requests by idempotency key
	keys       []string           // the key of every book_slot request, in order
	calls      map[string]int     // requests by tool
}

// New returns a clinic with three doctors.
func New() *Clinic {
	return &Clinic{
		doctors: []Doctor{
			{ID: "dr-lee", Name: "Dr. Lee", Specialty: "cardiology", Slots: []string{"2026-12-01T09:00", "2026-12-01T10:00"}},
			{ID: "dr-okafor", Name: "Dr. Okafor", Specialty: "dermatology", Slots: []string{"2026-12-02T14:00"}},
			{ID: "dr-silva", Name: "Dr. Silva", Specialty: "general", Slots: []string{"2026-12-03T08:30", "2026-12-03T11:00"}},
		},
		bookings:   map[string]Booking{},
		deliveries: map[string]int{},
		calls:      map[string]int{},
	}
}

// FindIn is find_doctors' input.
type FindIn struct {
	Specialty string `json:"specialty" jsonschema:"the medical specialty, for example cardiology"`
}

// FindOut is find_doctors' output.
type FindOut struct {
	Doctors []Doctor `json:"doctors"`
}

// BookIn is book_slot's input.
type BookIn struct {
	DoctorID string `json:"doctor_id" jsonschema:"the doctor's id"`
	Slot     string `json:"slot" jsonschema:"one of the doctor's free slots"`
	Patient  string `json:"patient,omitempty" jsonschema:"the patient's name"`
}

// Server returns the MCP server: find_doctors (read-only) and book_slot (destructive).
func (c *Clinic) Server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "clinic", Version: "v1"}, nil)
	no := false
	mcp.AddTool(s, &mcp.Tool{Name: "find_doctors", Description: "Find the clinic's doctors of a specialty, with their free slots.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no}}, c.find)
	yes := true
	mcp.AddTool(s, &mcp.Tool{Name: "book_slot", Description: "Book one of a doctor's free slots for a patient.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, c.book)
	return s
}

// Handler serves the MCP server over streamable HTTP.
func (c *Clinic) Handler() http.Handler {
	s := c.Server()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
}

func (c *Clinic) find(_ context.Context, _ *mcp.CallToolRequest, in FindIn) (*mcp.CallToolResult, FindOut, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls["find_doctors"]++
	out := FindOut{Doctors: []Doctor{}}
	for _, d := range c.doctors {
		if in.Specialty == "" || d.Specialty == in.Specialty {
			d.Slots = slices.Clone(d.Slots)
			out.Doctors = append(out.Doctors, d)
		}
	}
	return nil, out, nil
}

func (c *Clinic) book(ctx context.Context, req *mcp.CallToolRequest, in BookIn) (*mcp.CallToolResult, Booking, error) {
	key := ""
	if req.Params != nil {
		key, _ = req.Params.Meta[idempotencyKeyMeta].(string)
	}
	if key == "" && req.Extra != nil {
		key = req.Extra.Header.Get(idempotencyKeyHeader)
	}
	b, err := c.bookOnce(key, in)
	if err != nil {
		return nil, Booking{}, err
	}
	if c.Hold != nil {
		c.Hold(ctx, key)
	}
	return nil, b, nil
}

// bookOnce books in.Slot, once per key: a repeated key gets the first booking.
func (c *Clinic) bookOnce(key string, in BookIn) (Booking, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls["book_slot"]++
	c.deliveries[key]++
	c.keys = append(c.keys, key)
	if b, ok := c.bookings[key]; ok && key != "" {
		return b, nil
	}
	for i := range c.doctors {
		d := &c.doctors[i]
		if d.ID != in.DoctorID {
			continue
		}
		j := slices.Index(d.Slots, in.Slot)
		if j < 0 {
			return Booking{}, fmt.Errorf("slot %q of %s is not free", in.Slot, in.DoctorID)
		}
		d.Slots = slices.Delete(d.Slots, j, j+1)
		b := Booking{ID: fmt.Sprintf("b-%d", len(c.bookings)+1), DoctorID: d.ID, Slot: in.Slot, Patient: in.Patient}
		c.bookings[key] = b
		return b, nil
	}
	return Booking{}, fmt.Errorf("no doctor %q", in.DoctorID)
}

// Bookings returns how many bookings were made (effects, one per idempotency key).
func (c *Clinic) Bookings() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.bookings)
}

// BookingKeys returns the idempotency key of every book_slot request, in order.
func (c *Clinic) BookingKeys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.keys)
}

// Calls returns how many requests tool received.
func (c *Clinic) Calls(tool string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[tool]
}

// Address is where `go run ./hack/clinic` and `DEMO_KEEP=1 make demo` serve the
// clinic: the URL http://127.0.0.1:8766/mcp that docs/tools.md applies.
const Address = "127.0.0.1:8766"

// Listening is the clinic served over streamable HTTP: URL is its MCP endpoint.
type Listening struct {
	*Clinic
	URL string
	srv *http.Server
}

// Listen serves a new clinic on addr ("127.0.0.1:0" for a free port); when fallback is
// true and addr is taken, on a free port of 127.0.0.1 instead. Close stops it.
func Listen(addr string, fallback bool) (*Listening, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil && fallback {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return nil, err
	}
	c := New()
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &Listening{Clinic: c, URL: "http://" + ln.Addr().String() + "/mcp", srv: srv}, nil
}

// Close stops serving.
func (l *Listening) Close() error { return l.srv.Close() }
