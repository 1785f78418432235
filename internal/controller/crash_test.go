package controller

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/step"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// A crash at every point of a side-effecting call's life. The model asks to pay an
// order; the call's life is: the model's answer planning it is journaled, the write
// carrying its write-ahead record, (for a server without idempotency keys) the write
// marking it sent, the request, the answer, the answer journaled, the answer applied
// (the model asked again with it), the write carrying all that. The manager stops at
// one of those points for each Session (a fault hook holds the step there until the
// manager stops, so nothing after that point is done or written), and a new manager
// takes over.

// crashPoint is where a Session's first manager stops.
type crashPoint struct {
	name string
	// at and tool say the fault point that stops the step: at point at of the tool
	// call (tool) or of a model call; answered says the model call carries the tool's
	// result (the second one). at "" stops it elsewhere: held (the shop holds the
	// answer of the request), or not at all (written: the manager stops once the
	// turn is written).
	at             step.FaultPoint
	tool, answered bool
	held, written  bool
	// unkeyedOnly: the point exists only for a server without idempotency keys.
	unkeyedOnly bool
	// unknown says the outcome cannot be known after the restart, for a server
	// without idempotency keys; effects is how many payments it made then.
	unknown bool
	effects int
}

var crashPoints = []crashPoint{
	{name: "before-record", at: step.FaultAfterJournal, effects: 1},
	{name: "after-record", at: step.FaultBeforeCall, tool: true, effects: 1},
	{name: "after-marked-sent", at: step.FaultAfterMarkedSent, tool: true, unkeyedOnly: true, unknown: true, effects: 0},
	{name: "after-send", held: true, unknown: true, effects: 1},
	{name: "after-answer", at: step.FaultAfterAnswer, tool: true, unknown: true, effects: 1},
	{name: "after-journal", at: step.FaultAfterJournal, tool: true, unknown: true, effects: 1},
	{name: "after-apply", at: step.FaultBeforeCall, answered: true, unknown: true, effects: 1},
	{name: "after-write", written: true, effects: 1},
}

// stops reports whether the fault at point at of eff is where p stops.
func (p crashPoint) stops(at step.FaultPoint, eff *engine.Effect) bool {
	if p.at != at {
		return false
	}
	if eff.Kind == flowv1.EffectCallTool {
		return p.tool && !eff.ReadOnly
	}
	return !p.tool && eff.Pathway != nil && (len(eff.Pathway.ToolExchanges) > 0) == p.answered
}

// errStopped is what a step held at its crash point returns once the manager stops.
var errStopped = errors.New("the manager stopped here")

// crashes holds each Session at its crash point until the manager stops.
type crashes struct {
	points  map[string]crashPoint // by Session name
	reached chan string

	mu      sync.Mutex
	stopped map[string]bool
}

// reach marks Session name stopped at its point, once.
func (c *crashes) reach(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped[name] {
		c.stopped[name] = true
		c.reached <- name
	}
}

func (c *crashes) isStopped(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped[name]
}

// fault is the manager's fault hook: a Session reaching its crash point stays there
// until the manager stops; once stopped, or once the manager stops, every step fails
// at its next point, so nothing more is written.
func (c *crashes) fault(ctx context.Context, key client.ObjectKey, at step.FaultPoint, eff *engine.Effect) error {
	if c.isStopped(key.Name) || ctx.Err() != nil {
		return errStopped
	}
	if p, ok := c.points[key.Name]; ok && p.stops(at, eff) {
		c.reach(key.Name)
		<-ctx.Done()
		return errStopped
	}
	return nil
}

// hold is the shop's Hold: the first delivery for a Session whose point is held
// stops it there, the payment made and its answer kept until the manager stops.
func (c *crashes) hold(ctx context.Context, _, order string) {
	name := order[len("o-"):]
	if p := c.points[name]; !p.held || c.isStopped(name) {
		return
	}
	c.reach(name)
	<-ctx.Done()
}

// TestCrashAtEveryPoint stops the manager at each point of a payment's life, for a
// shop that honours idempotency keys (Keyed) and one that does not (None), and checks
// what a new manager makes of it, counting the shop's payments by key: Keyed pays
// exactly once at every point, and the Session completes; None pays at most once and
// never sends a call again, and the call's outcome is unknown exactly where the
// manager stopped between marking it sent and writing its answer.
func TestCrashAtEveryPoint(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	c := &crashes{points: map[string]crashPoint{}, reached: make(chan string, 64), stopped: map[string]bool{}}
	keyed := testenv.NewEffectServer(t, testenv.EffectOptions{Keyed: true, Hold: c.hold})
	unkeyed := testenv.NewEffectServer(t, testenv.EffectOptions{Hold: c.hold})
	scripts := map[string]modelScript{}
	type row struct {
		crashPoint
		session string
		shop    *testenv.EffectServer
		keyed   bool
	}
	var rows []row
	for _, p := range crashPoints {
		for _, k := range []bool{true, false} {
			if k && p.unkeyedOnly {
				continue
			}
			r := row{crashPoint: p, session: "none-" + p.name, shop: unkeyed, keyed: k}
			if k {
				r.session, r.shop = "keyed-"+p.name, keyed
			}
			rows = append(rows, r)
			c.points[r.session] = p
			scripts[r.session] = payScript("pay_ask", r.session)
		}
	}
	model := newReactModel(t, scripts)

	first := env.StartManager(t, managerOptions(ns, Options{fault: c.fault}))
	startShop(t, ns, "keyed", keyed.URL, model.BaseURL(), flowv1.ToolIdempotencyKeyed)
	startShop(t, ns, "none", unkeyed.URL, model.BaseURL(), flowv1.ToolIdempotencyNone)
	for _, r := range rows {
		journey := "none"
		if r.keyed {
			journey = "keyed"
		}
		create(t, sessionOf(ns, r.session, journey))
		send(t, ns, r.session, "m1", "Please pay my order.")
	}
	want := 0
	for _, r := range rows {
		if r.written {
			finished(t, ns, r.session)
		} else {
			want++
		}
	}
	for range want {
		select {
		case <-c.reached:
		case <-time.After(60 * time.Second):
			var missing []string
			for _, r := range rows {
				if !r.written && !c.isStopped(r.session) {
					missing = append(missing, r.session)
				}
			}
			t.Fatalf("Sessions %v never reached their crash point", missing)
		}
	}
	if err := first.Stop(); err != nil {
		t.Fatalf("stopping the manager: %v", err)
	}

	startManager(t, ns, Options{})
	for _, r := range rows {
		t.Run(r.session, func(t *testing.T) {
			var s *flowv1.Session
			if !r.keyed && r.unknown {
				s = stalledOnUnknown(t, ns, r.session)
				if c := s.Status.Turn.ToolCalls[0]; c.State != flowv1.ToolCallOutcomeUnknown || c.SentAt == nil {
					t.Errorf("call %s is %s (sent at %v), want OutcomeUnknown and marked sent", c.ID, c.State, c.SentAt)
				}
			} else {
				s = finished(t, ns, r.session)
				if s.Status.Phase != flowv1.PhaseCompleted || len(s.Status.LastTurn.ToolCalls) != 1 || s.Status.LastTurn.ToolCalls[0].State != flowv1.ToolCallDone {
					t.Errorf("phase %s, last turn %+v: want Completed with the call Done", s.Status.Phase, s.Status.LastTurn)
				}
				if n := len(model.asked(r.session)); n < 2 {
					t.Errorf("the model was asked %d times, want the call and its result", n)
				}
			}
			effects, deliveries, keys := r.shop.Order("o-" + r.session)
			switch {
			case r.keyed && effects != 1:
				t.Errorf("a shop with keys paid %d times, want exactly once (deliveries %d)", effects, deliveries)
			case !r.keyed && (effects != r.effects || deliveries != r.effects):
				t.Errorf("a shop without keys paid %d times for %d requests, want %d: a call is never sent again", effects, deliveries, r.effects)
			}
			if len(keys) > 1 {
				t.Errorf("the call was sent with keys %v, want one", keys)
			}
			if r.keyed && deliveries > 1 && !slices.Contains([]string{"after-send", "after-answer", "after-journal", "after-apply"}, r.name) {
				t.Errorf("delivered %d times, though the manager stopped before the request or after its answer was written", deliveries)
			}
		})
	}
	if t.Failed() {
		t.Logf("keyed shop effects %v, none shop effects %v", keyed.Effects(), unkeyed.Effects())
	}
}
