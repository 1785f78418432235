// Package budget is the manager's ledger of Budget objects: what the Sessions each
// Budget selects spent in its current window, and what the calls being made now
// hold. It reserves in memory, so a model call writes nothing but the Session's own
// status; Budget status is written in batches by the Budget controller.
//
// The guarantee: a call is made only when its worst case fits in what is left of
// every Budget that selects its Session, counting the worst cases of the calls in
// flight; the answer's real usage, never more than its worst case, is charged in
// the Session's status.budgets in the write that journals it, and the reservation
// is then released. So the settled spend of a window never passes a limit. After a
// restart the ledger is rebuilt from the Sessions' status.budgets entries of the
// current window (and the shard's last written spend, for Sessions deleted since):
// nothing is counted twice, because a call's spend lives in exactly one journaled
// status write. What is at risk is only a call made but never journaled (the manager
// died during it): at most one call per Session in flight, which the Session makes
// again after the restart; the ledger counts the repeated one.
//
// Shards (lease.go): several managers (--shard-selector) may run Sessions of one
// Budget. Each leases a slice of the limits in the Budget's status.shards and
// reserves only within it, so together they stay within the limits; see lease.go
// for what an expired lease puts at risk.
package budget

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
)

// Ledger counts every Budget the manager sees.
type Ledger struct {
	// Reader lists Budgets and Sessions (the manager's cache).
	Reader client.Reader
	// Client writes this shard's lease entry in a Budget's status.
	Client client.Client
	// APIReader reads a Budget afresh after a write found it changed (nil: Reader).
	APIReader client.Reader
	// Shard is this manager's shard: its Sessions are those it matches (nil or
	// empty: every Session).
	Shard labels.Selector
	// Clock times leases (nil: the real clock).
	Clock clock.PassiveClock
	// Lease is how long a lease holds after it is renewed (zero: DefaultLease).
	Lease time.Duration
	// Wake, when set, asks for a step of a Session that waited for room and may now
	// find it.
	Wake func(types.NamespacedName)

	mu       sync.Mutex
	accounts map[types.NamespacedName]*account
	// sessions are the Budgets of each Session, as its last Rooms found them.
	sessions map[types.UID][]types.NamespacedName
}

// account is one Budget's ledger in its current window.
type account struct {
	generation int64
	limit      engine.Spend
	// degradeTo is the agent of onExhausted: Degrade, empty for Stall.
	degradeTo  string
	start, end time.Time
	// charged is what each Session's status.budgets says it spent in the window.
	charged map[types.UID]engine.Spend
	// base is spend the Budget's status recorded beyond the Sessions found at the
	// rebuild (Sessions deleted since), never negative.
	base, sum engine.Spend
	// holds are the worst cases of the calls in flight, by Session and call.
	holds    map[types.UID]map[string]engine.Spend
	reserved engine.Spend
	// waiting are the Sessions waiting for room, with what their call needs.
	waiting map[types.NamespacedName]engine.Spend
	denials int64

	// lease is this shard's lease of the Budget (lease.go).
	lease
}

// used is what this shard's Sessions spent and hold.
func (a *account) used() engine.Spend { return a.base.Add(a.sum).Add(a.reserved) }

// left is what this shard may still reserve: its granted slice, within what the
// other shards do not hold, less what it used.
func (a *account) left() engine.Spend {
	return minSpend(a.granted, positive(a.limit.Sub(a.held))).Sub(a.used())
}

// grantable is what this shard could reserve once its grant grows to everything no
// other shard holds.
func (a *account) grantable() engine.Spend { return a.limit.Sub(a.held).Sub(a.used()) }

// room is the account of Budget name as the step sees it at now: nothing is left
// while the lease is not current.
func (a *account) room(name string, now time.Time, lease time.Duration) engine.BudgetRoom {
	left := a.left()
	if !a.usable(now, lease) {
		left = minSpend(left, engine.Spend{})
	}
	return engine.BudgetRoom{Name: name, WindowStart: a.start, WindowEnd: a.end, Limit: a.limit, Left: left, DegradeTo: a.degradeTo}
}

// degradeTo is the agent Budget b degrades calls to, empty when it stalls them.
func degradeTo(b *flowv1.Budget) string {
	if b.Spec.OnExhausted != flowv1.ExhaustedDegrade || b.Spec.DegradeTo == nil {
		return ""
	}
	return string(b.Spec.DegradeTo.Agent)
}

// NewLedger returns an empty ledger of the Sessions shard selects (nil: all), reading
// and writing with c.
func NewLedger(c client.Client, shard labels.Selector) *Ledger {
	return &Ledger{Reader: c, Client: c, Shard: shard, accounts: map[types.NamespacedName]*account{}, sessions: map[types.UID][]types.NamespacedName{}}
}

func (l *Ledger) now() time.Time {
	if l.Clock == nil {
		return time.Now()
	}
	return l.Clock.Now()
}

// leaseDuration is how long a lease holds.
func (l *Ledger) leaseDuration() time.Duration {
	if l.Lease <= 0 {
		return DefaultLease
	}
	return l.Lease
}

// ShardName is this ledger's entry in a Budget's status.shards: its shard selector,
// or "*" when it counts every Session.
func (l *Ledger) ShardName() string { return ShardName(l.Shard) }

// inShard reports whether Session s is one of this shard's.
func (l *Ledger) inShard(s *flowv1.Session) bool {
	return l.Shard == nil || l.Shard.Matches(labels.Set(s.Labels))
}

// Rooms returns the Budgets that select s at now, with the room each has left,
// rebuilding a Budget's ledger from its Sessions when it is new to this manager or
// its window rolled over.
func (l *Ledger) Rooms(ctx context.Context, s *flowv1.Session, now time.Time) ([]engine.BudgetRoom, error) {
	var list flowv1.BudgetList
	if err := l.Reader.List(ctx, &list, client.InNamespace(s.Namespace)); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	var rooms []engine.BudgetRoom
	var keys []types.NamespacedName
	for i := range list.Items {
		b := &list.Items[i]
		if !Selects(b, s) {
			continue
		}
		a, err := l.account(ctx, b, now)
		if err != nil {
			continue // an invalid Budget (its Ready condition says why) limits nothing
		}
		// A call may follow: the lease is taken, renewed or grown first.
		if err := l.ensure(ctx, b, a, now); err != nil {
			return nil, fmt.Errorf("leasing a slice of Budget %s: %w", b.Name, err)
		}
		key := client.ObjectKeyFromObject(b)
		l.mu.Lock()
		rooms = append(rooms, a.room(b.Name, now, l.leaseDuration()))
		l.mu.Unlock()
		keys = append(keys, key)
	}
	l.mu.Lock()
	l.sessions[s.UID] = keys
	l.mu.Unlock()
	return rooms, nil
}

// account returns Budget b's account at now, built or rolled over when needed.
func (l *Ledger) account(ctx context.Context, b *flowv1.Budget, now time.Time) (*account, error) {
	start, end, err := Window(&b.Spec, now)
	if err != nil {
		return nil, err
	}
	limit, err := Limits(&b.Spec.Limits)
	if err != nil {
		return nil, err
	}
	key := client.ObjectKeyFromObject(b)
	l.mu.Lock()
	a := l.accounts[key]
	if a != nil && a.start.Equal(start) {
		changed := l.observeLocked(a, b, now)
		if a.generation != b.Generation {
			a.generation, a.limit, a.degradeTo = b.Generation, limit, degradeTo(b)
			changed = true
		}
		if changed {
			l.wakeLocked(a)
		}
		l.mu.Unlock()
		return a, nil
	}
	l.mu.Unlock()
	// New to this manager, or a new window: rebuilt from the Sessions.
	fresh, err := l.rebuild(ctx, b, start, end, limit)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.accounts[key]; cur != nil && cur.start.Equal(start) {
		return cur, nil // another worker rebuilt it first
	} else if cur != nil {
		for s := range cur.waiting {
			fresh.waiting[s] = engine.Spend{} // a new window: every waiter tries again
		}
	}
	l.observeLocked(fresh, b, now)
	l.accounts[key] = fresh
	l.wakeLocked(fresh)
	return fresh, nil
}

// rebuild counts Budget b's window [start, end) from the Sessions of its namespace.
func (l *Ledger) rebuild(ctx context.Context, b *flowv1.Budget, start, end time.Time, limit engine.Spend) (*account, error) {
	var sessions flowv1.SessionList
	if err := l.Reader.List(ctx, &sessions, client.InNamespace(b.Namespace)); err != nil {
		return nil, err
	}
	a := &account{generation: b.Generation, limit: limit, degradeTo: degradeTo(b), start: start, end: end, charged: map[types.UID]engine.Spend{},
		holds: map[types.UID]map[string]engine.Spend{}, waiting: map[types.NamespacedName]engine.Spend{}}
	for i := range sessions.Items {
		s := &sessions.Items[i]
		if !l.inShard(s) {
			continue
		}
		if c, ok := chargeIn(s, b.Name, start); ok {
			a.charged[s.UID] = c
			a.sum = a.sum.Add(c)
		}
	}
	// What this shard last wrote: its spend (for Sessions deleted since) and its grant,
	// which it reserves against again once it renewed the lease.
	if e := entryOf(&b.Status, l.ShardName()); e != nil && e.WindowStart.Time.Equal(start) {
		a.base = positive(Amounts(e.Spent).Sub(a.sum))
		a.granted = Amounts(e.Granted)
	} else if w := b.Status.WindowStart; len(b.Status.Shards) == 0 && w != nil && w.Time.Equal(start) {
		// Written before Budgets had shard entries: one manager counted everything.
		a.base = positive(Amounts(b.Status.Spent).Sub(a.sum))
	}
	return a, nil
}

// chargeIn is what Session s's status says it spent in Budget name's window start.
func chargeIn(s *flowv1.Session, name string, start time.Time) (engine.Spend, bool) {
	for _, c := range s.Status.Budgets {
		if c.Name == name && c.WindowStart.Time.Equal(start) {
			return engine.ChargeSpend(c), true
		}
	}
	return engine.Spend{}, false
}

func positive(s engine.Spend) engine.Spend {
	return engine.Spend{CostNano: max(s.CostNano, 0), Tokens: max(s.Tokens, 0), ToolCalls: max(s.ToolCalls, 0), ModelCalls: max(s.ModelCalls, 0)}
}

// Reserve holds need for call key of Session uid in every Budget its last Rooms
// found, when it fits in all of them. Reserving a key again replaces its hold. When
// one has no room, nothing is held, and the rooms as they are now come back, for the
// engine to say why. A refusal is no denial by itself: the step takes its turn again
// on those rooms and either makes a call that fits or waits, and Wait counts that.
func (l *Ledger) Reserve(uid types.UID, key string, need engine.Spend) ([]engine.BudgetRoom, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := l.sessions[uid]
	ok := true
	for _, k := range keys {
		a := l.accounts[k]
		if a == nil {
			continue
		}
		left := a.left().Add(a.holds[uid][key])
		a.noteNeed(need)
		if _, fits := engine.Fits(need, left, a.limit); !fits || !a.usable(now, l.leaseDuration()) {
			ok = false
		}
	}
	if !ok {
		rooms := make([]engine.BudgetRoom, 0, len(keys))
		for _, k := range keys {
			if a := l.accounts[k]; a != nil {
				rooms = append(rooms, a.room(k.Name, now, l.leaseDuration()))
			}
		}
		return rooms, false
	}
	for _, k := range keys {
		a := l.accounts[k]
		if a == nil {
			continue
		}
		if a.holds[uid] == nil {
			a.holds[uid] = map[string]engine.Spend{}
		}
		a.reserved = a.reserved.Sub(a.holds[uid][key]).Add(need)
		a.holds[uid][key] = need
		a.lastUse = now
	}
	return nil, true
}

// Wait records that Session s waits for room for a call needing need (zero when not
// known), a denial when it did not wait already: it is woken when that fits.
func (l *Ledger) Wait(s *flowv1.Session, need engine.Spend) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := client.ObjectKeyFromObject(s)
	for _, k := range l.sessions[s.UID] {
		if a := l.accounts[k]; a != nil {
			if _, already := a.waiting[key]; !already {
				a.denials++
			}
			a.waiting[key] = need
			a.noteNeed(need)
		}
	}
}

// Settle (nil-safe) takes what Session s's written status says it spent, and releases the
// holds of its calls: their answers are in that status, or were never journaled.
func (l *Ledger) Settle(s *flowv1.Session) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	waiting := engine.IsWaitingForBudget(&s.Status)
	for _, k := range l.sessions[s.UID] {
		a := l.accounts[k]
		if a == nil {
			continue
		}
		if c, ok := chargeIn(s, k.Name, a.start); ok {
			a.sum = a.sum.Sub(a.charged[s.UID]).Add(c)
			a.charged[s.UID] = c
		}
		freed := l.releaseLocked(a, s.UID)
		if !waiting {
			delete(a.waiting, client.ObjectKeyFromObject(s))
		}
		if freed {
			l.wakeLocked(a)
		}
	}
}

// Release (nil-safe) drops the holds of Session uid's calls whose answers were not written.
func (l *Ledger) Release(uid types.UID) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.sessions[uid] {
		if a := l.accounts[k]; a != nil && l.releaseLocked(a, uid) {
			l.wakeLocked(a)
		}
	}
}

func (l *Ledger) releaseLocked(a *account, uid types.UID) bool {
	h := a.holds[uid]
	if len(h) == 0 {
		return false
	}
	for _, need := range h {
		a.reserved = a.reserved.Sub(need)
	}
	delete(a.holds, uid)
	return true
}

// wakeLocked wakes the waiters of a whose call now fits in what this shard holds or
// could be granted: the step of a woken Session grows the grant first.
func (l *Ledger) wakeLocked(a *account) {
	if l.Wake == nil || len(a.waiting) == 0 {
		return
	}
	left := a.grantable()
	for s, need := range a.waiting {
		if _, ok := engine.Fits(need, left, a.limit); ok {
			delete(a.waiting, s)
			l.Wake(s)
		}
	}
}

// Forget drops Budget key's account (the Budget is gone).
func (l *Ledger) Forget(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.accounts, key)
}

// Snapshot is a Budget's ledger at a moment: this shard's part of it.
type Snapshot struct {
	Start, End               time.Time
	Limit, Spent, Reserved   engine.Spend
	Sessions, Holding, Waits int
	Denials                  int64
}

// Snapshot returns Budget b's ledger at now, building it when needed.
func (l *Ledger) Snapshot(ctx context.Context, b *flowv1.Budget, now time.Time) (Snapshot, error) {
	a, err := l.account(ctx, b, now)
	if err != nil {
		return Snapshot{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range a.charged {
		if !c.IsZero() {
			n++
		}
	}
	return Snapshot{Start: a.start, End: a.end, Limit: a.limit, Spent: a.base.Add(a.sum), Reserved: a.reserved,
		Sessions: n, Holding: len(a.holds), Waits: len(a.waiting), Denials: a.denials}, nil
}

// Selects reports whether Budget b covers Session s: one of its journeys (any when
// none is named) and all of its matchLabels.
func Selects(b *flowv1.Budget, s *flowv1.Session) bool {
	if b.Namespace != s.Namespace {
		return false
	}
	sel := b.Spec.Selector
	if len(sel.Journeys) > 0 {
		found := false
		for _, j := range sel.Journeys {
			found = found || j == s.Spec.JourneyRef.Name
		}
		if !found {
			return false
		}
	}
	return labels.SelectorFromSet(sel.MatchLabels).Matches(labels.Set(s.Labels))
}

// Window returns the window of spec that holds now: [start, end).
func Window(spec *flowv1.BudgetSpec, now time.Time) (start, end time.Time, err error) {
	loc := time.UTC
	if spec.TimeZone != "" {
		if loc, err = time.LoadLocation(spec.TimeZone); err != nil {
			return start, end, fmt.Errorf("spec.timeZone %q is not a known IANA time zone: %w", spec.TimeZone, err)
		}
	}
	t := now.In(loc)
	switch spec.Window {
	case "", "Day":
		start = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		end = start.AddDate(0, 0, 1)
	case "Month":
		start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
		end = start.AddDate(0, 1, 0)
	default:
		d, perr := time.ParseDuration(spec.Window)
		if perr != nil || d < time.Minute {
			return start, end, fmt.Errorf("spec.window %q must be Day, Month or a duration of at least 1m", spec.Window)
		}
		start = now.UTC().Truncate(d)
		end = start.Add(d)
	}
	return start.UTC(), end.UTC(), nil
}

// Limits reads a Budget's limits.
func Limits(l *flowv1.BudgetLimits) (engine.Spend, error) {
	s := engine.Spend{Tokens: l.Tokens, ToolCalls: l.ToolCalls, ModelCalls: l.ModelCalls}
	if l.CostUSD != "" {
		c, ok := engine.ParseCost(string(l.CostUSD))
		if !ok {
			return s, fmt.Errorf("spec.limits.costUSD %q is not a decimal", l.CostUSD)
		}
		s.CostNano = c
	}
	return s, nil
}

// Amounts reads amounts written by AmountsOf.
func Amounts(a flowv1.BudgetAmounts) engine.Spend {
	var s engine.Spend
	s.CostNano, _ = engine.ParseCost(a.CostUSD)
	if a.Tokens != nil {
		s.Tokens = *a.Tokens
	}
	if a.ToolCalls != nil {
		s.ToolCalls = *a.ToolCalls
	}
	if a.ModelCalls != nil {
		s.ModelCalls = *a.ModelCalls
	}
	return s
}

// AmountsOf writes the amounts of s that limit limits (all of them when limit is
// zero).
func AmountsOf(s, limit engine.Spend) flowv1.BudgetAmounts {
	var a flowv1.BudgetAmounts
	all := limit.IsZero()
	if all || limit.CostNano > 0 {
		a.CostUSD = engine.FormatCost(max(s.CostNano, 0))
	}
	if all || limit.Tokens > 0 {
		a.Tokens = ptr(max(s.Tokens, 0))
	}
	if all || limit.ToolCalls > 0 {
		a.ToolCalls = ptr(max(s.ToolCalls, 0))
	}
	if all || limit.ModelCalls > 0 {
		a.ModelCalls = ptr(max(s.ModelCalls, 0))
	}
	return a
}

func ptr(v int64) *int64 { return &v }

// Percent is the largest share of a limit s has used, in percent.
func Percent(s, limit engine.Spend) int64 {
	var p int64
	for _, c := range [][2]int64{{s.CostNano, limit.CostNano}, {s.Tokens, limit.Tokens}, {s.ToolCalls, limit.ToolCalls}, {s.ModelCalls, limit.ModelCalls}} {
		if c[1] > 0 {
			p = max(p, c[0]*100/c[1])
		}
	}
	return p
}

// Key is the reservation key of a call: the Session, and the call as its journal
// names it.
func Key(uid types.UID, step int64, kind flowv1.EffectKind, id string) string {
	return string(uid) + "/" + strconv.FormatInt(step, 10) + "/" + string(kind) + "/" + id
}
