package budget

// Leases: how several manager shards share one Budget.
//
// Each shard (a manager with its own --shard-selector, or the one manager without
// one, named "*") keeps an entry in the Budget's status.shards: the slice of each
// limit it was granted, what its Sessions spent and hold, and when it last renewed
// the entry. A shard reserves its calls in memory, as a single manager does, but only
// within its granted slice, and it writes a larger grant before it reserves against
// it. A grant is taken only from what no other shard holds (the limit less, for each
// other shard whose lease is current, the larger of its grant and what it spent and
// holds), and the write carries the resourceVersion it was computed from, so two
// shards cannot both take the same room, and a shard's write never drops another
// shard's entry: a write from a stale read fails and is made again on a fresh one.
//
// A shard alone takes the whole remainder at once. Beside other shards, it grows its
// slice by a share of what no one holds, when what is left of it runs below the
// largest call it has seen or a sixteenth of the limit, so grants are rare; it gives
// back half of its unused slice when another shard's Sessions wait, and all of it
// when its own Sessions are idle.
//
// A lease holds for Lease after it is renewed. A shard renews it every third of that
// while it holds an unspent slice, and makes no new call once two thirds have passed
// without a renewal; once the lease has expired, other shards may take the part of
// its grant it did not spend (its settled spend stays counted). So the settled spend
// never passes a limit, except by what the calls in flight of a shard whose lease
// expired cost: at most that shard's granted slice, reported in its entry's reserved
// until it renews or its calls settle. Shards' clocks must agree to within a third of
// the lease: the lease is renewed by the holder's clock and expired by the others'.

import (
	"context"
	"math"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
)

// DefaultLease is how long a shard's lease of a Budget holds after it is renewed.
const DefaultLease = time.Minute

// maxLeaseWrites bounds the writes of one lease change that each found the Budget
// changed by another shard.
const maxLeaseWrites = 4

// lease is a shard's lease of a Budget in the current window, and what the other
// shards' entries hold.
type lease struct {
	// granted is this shard's slice of the limits, as last written (or, while a
	// smaller one is being written, that one).
	granted engine.Spend
	// renewed is when this shard last wrote its entry in this window; zero: not since
	// the manager started or the window began.
	renewed time.Time
	// held is what the other shards' entries hold; current counts those whose lease
	// is current, and othersWaiting their Sessions waiting for room.
	held                   engine.Spend
	current, othersWaiting int
	// maxNeed is the largest call reserved or waited for, each amount.
	maxNeed engine.Spend
	// lastUse is when a call was last reserved.
	lastUse time.Time
	// writing serializes this shard's writes of its entry from the steps.
	writing sync.Mutex
}

// ShardName is the entry in status.shards of the manager of shard: its selector, or
// "*" for a manager that runs every Session.
func ShardName(shard labels.Selector) string {
	if shard == nil || shard.Empty() {
		return "*"
	}
	return shard.String()
}

// entryOf is shard's entry in st, nil when it has none.
func entryOf(st *flowv1.BudgetStatus, shard string) *flowv1.BudgetShard {
	for i := range st.Shards {
		if st.Shards[i].Shard == shard {
			return &st.Shards[i]
		}
	}
	return nil
}

// Expired reports whether entry e's lease has run out at now.
func Expired(e *flowv1.BudgetShard, now time.Time) bool {
	return !now.Before(e.RenewTime.Add(time.Duration(e.LeaseSeconds) * time.Second))
}

// Others is what the entries of the shards other than self hold in the window from
// start, at now.
type Others struct {
	// Held is, summed over those shards, the larger of each one's grant and what it
	// spent and holds when its lease is current, and what it spent when its lease
	// expired: the grant it did not spend is free again.
	Held engine.Spend
	// Current counts the shards whose lease is current, Waiting their Sessions
	// waiting for room.
	Current, Waiting int
}

// OthersOf reads the entries of st other than self's.
func OthersOf(st *flowv1.BudgetStatus, self string, start, now time.Time) Others {
	var o Others
	for i := range st.Shards {
		e := &st.Shards[i]
		if e.Shard == self || !e.WindowStart.Time.Equal(start) {
			continue
		}
		spent := Amounts(e.Spent)
		if Expired(e, now) {
			o.Held = o.Held.Add(spent)
			continue
		}
		o.Current++
		o.Waiting += int(e.Waiting)
		o.Held = o.Held.Add(maxSpend(Amounts(e.Granted), spent.Add(Amounts(e.Reserved))))
	}
	return o
}

// observeLocked reads the other shards' entries of b into a. It reports whether
// they now hold less.
func (l *Ledger) observeLocked(a *account, b *flowv1.Budget, now time.Time) bool {
	o := OthersOf(&b.Status, l.ShardName(), a.start, now)
	less := o.Held != a.held && !fits(a.held, o.Held, a.limit)
	a.held, a.current, a.othersWaiting = o.Held, o.Current, o.Waiting
	return less
}

// fits reports whether every limited amount of s is at most that of t.
func fits(s, t, limit engine.Spend) bool {
	_, ok := engine.Fits(s, t, limit)
	return ok
}

// usable reports whether the lease is current enough to reserve against at now:
// written, and renewed within two thirds of its duration.
func (a *lease) usable(now time.Time, d time.Duration) bool {
	return !a.renewed.IsZero() && now.Sub(a.renewed) < d*2/3
}

func (a *lease) noteNeed(need engine.Spend) { a.maxNeed = maxSpend(a.maxNeed, need) }

// lowWater is what a's slice should keep free for the next calls: the largest call
// seen, a sixteenth of the limit, at least one of each limited amount.
func (a *account) lowWater() engine.Spend {
	low := maxSpend(a.maxNeed, div(a.limit, 16))
	return mask(maxSpend(low, engine.Spend{CostNano: 1, Tokens: 1, ToolCalls: 1, ModelCalls: 1}), a.limit)
}

// Want is the grant a shard asks for, from what it has and what the others hold.
type Want struct {
	// Limit is the Budget's limits; Held what the other shards hold (Others.Held).
	Limit, Held engine.Spend
	// Granted is the shard's grant; Used what its Sessions spent and hold; Low what
	// its slice should keep free for the next calls.
	Granted, Used, Low engine.Spend
	// Current counts the other shards whose lease is current, OthersWaiting their
	// Sessions that wait for room.
	Current, OthersWaiting int
	// Idle: the shard holds no call and none waits, and none was reserved since a
	// third of the lease (or since the lease was taken).
	Idle bool
	// Flush: the periodic write, which may give back; a call's step only takes.
	Flush bool
}

// Grant is the grant w asks for: at most what the others do not hold, never less
// than what the shard used (only what is free is given back).
func Grant(w Want) engine.Spend {
	free := positive(w.Limit.Sub(w.Held))
	unused := positive(w.Granted.Sub(w.Used))
	var want engine.Spend
	switch {
	case w.Flush && w.Idle:
		want = w.Used
	case w.Flush && w.OthersWaiting > 0:
		want = w.Used.Add(div(unused, 2))
	case w.Current == 0:
		// Alone: the whole remainder.
		want = w.Limit
	case !fits(w.Low, w.Granted.Sub(w.Used), w.Limit):
		// Short: a share of what no one holds, split among the current shards.
		share := div(positive(free.Sub(w.Used)), int64(w.Current+1))
		want = w.Used.Add(maxSpend(w.Low, share))
	default:
		want = w.Granted
	}
	return mask(positive(minSpend(want, free)), w.Limit)
}

// wantLocked is the grant a asks for at now.
func (l *Ledger) wantLocked(a *account, now time.Time, flush bool) engine.Spend {
	return Grant(Want{Limit: a.limit, Held: a.held, Granted: a.granted, Used: a.used(), Low: a.lowWater(),
		Current: a.current, OthersWaiting: a.othersWaiting, Flush: flush,
		Idle: len(a.holds) == 0 && len(a.waiting) == 0 && now.Sub(latest(a.lastUse, a.renewed)) >= l.RenewEvery()})
}

// RenewEvery is how often a lease is renewed while it holds an unspent slice: the
// Budget's status should be written at least that often.
func (l *Ledger) RenewEvery() time.Duration { return l.leaseDuration() / 3 }

// renewalDue reports whether a's lease should be renewed at now: a third of its
// duration has passed since it was written.
func (l *Ledger) renewalDue(a *account, now time.Time) bool {
	return now.Sub(a.renewed) >= l.RenewEvery()
}

// ensure takes, renews or grows this shard's lease of Budget b before a call:
// written when there is none yet, its renewal is due or its grant should grow.
func (l *Ledger) ensure(ctx context.Context, b *flowv1.Budget, a *account, now time.Time) error {
	l.mu.Lock()
	due := a.renewed.IsZero() || l.renewalDue(a, now) || mask(l.wantLocked(a, now, false), a.limit) != mask(a.granted, a.limit)
	l.mu.Unlock()
	if !due {
		return nil
	}
	a.writing.Lock()
	defer a.writing.Unlock()
	key := client.ObjectKeyFromObject(b)
	for attempt := 1; ; attempt++ {
		l.mu.Lock()
		l.observeLocked(a, b, now)
		if !a.renewed.IsZero() && !l.renewalDue(a, now) && mask(l.wantLocked(a, now, false), a.limit) == mask(a.granted, a.limit) {
			l.mu.Unlock()
			return nil // another step wrote it meanwhile
		}
		e, commit := l.entryLocked(a, b, now, false)
		snap := Snapshot{Start: a.start, End: a.end, Limit: a.limit}
		l.mu.Unlock()
		before := b.DeepCopy()
		SetShard(b, e, snap)
		err := l.Client.Status().Patch(ctx, b, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			commit()
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == maxLeaseWrites {
			return err
		}
		r := l.APIReader
		if r == nil {
			r = l.Reader
		}
		if err := r.Get(ctx, key, b); err != nil {
			return err
		}
	}
}

// Entry is this shard's entry for Budget b's status at now, as the periodic write
// makes it (taking, renewing, growing or giving back its grant), and done, to call
// with whether it was written: until then no other write of the entry starts, so
// what the ledger holds follows the writes in their order. b must be the Budget the
// entry is written to: the grant is taken from what its other entries do not hold.
func (l *Ledger) Entry(b *flowv1.Budget, now time.Time) (e flowv1.BudgetShard, done func(written bool), ok bool) {
	l.mu.Lock()
	a := l.accounts[client.ObjectKeyFromObject(b)]
	l.mu.Unlock()
	if a == nil {
		return flowv1.BudgetShard{}, func(bool) {}, false
	}
	a.writing.Lock()
	l.mu.Lock()
	l.observeLocked(a, b, now)
	e, commit := l.entryLocked(a, b, now, true)
	l.mu.Unlock()
	return e, func(written bool) {
		if written {
			commit()
		}
		a.writing.Unlock()
	}, true
}

// entryLocked builds a's entry at now. A smaller grant applies at once (what is given
// back is not reserved meanwhile); a larger one, and the renewal, once commit is
// called after the entry was written.
func (l *Ledger) entryLocked(a *account, b *flowv1.Budget, now time.Time, flush bool) (flowv1.BudgetShard, func()) {
	granted := l.wantLocked(a, now, flush)
	used := a.base.Add(a.sum)
	e := flowv1.BudgetShard{Shard: l.ShardName(), WindowStart: metav1.NewTime(a.start),
		Granted: AmountsOf(granted, a.limit), Spent: AmountsOf(used, engine.Spend{}), Reserved: AmountsOf(a.reserved, engine.Spend{}),
		Sessions: int32(a.sessionCount()), Holding: int32(len(a.holds)), Waiting: int32(len(a.waiting)),
		LeaseSeconds: int32(math.Ceil(l.leaseDuration().Seconds()))}
	renew := a.renewed.IsZero() || mask(granted, a.limit) != mask(a.granted, a.limit) ||
		(l.renewalDue(a, now) && (!flush || !fits(granted, used, a.limit)))
	old := entryOf(&b.Status, e.Shard)
	switch {
	case renew || old == nil || !old.WindowStart.Time.Equal(a.start):
		e.RenewTime, renew = metav1.NewMicroTime(now), true
	default:
		e.RenewTime = old.RenewTime
	}
	a.granted = minSpend(a.granted, granted)
	return e, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if renew {
			a.granted, a.renewed = granted, now
		}
		l.wakeLocked(a)
	}
}

func (a *account) sessionCount() int {
	n := 0
	for _, c := range a.charged {
		if !c.IsZero() {
			n++
		}
	}
	return n
}

// SetShard writes entry e into Budget b's status (replacing the shard's entry) and
// sets the window of snap and the sums of the window's entries: spent, reserved,
// remaining and the counts. It returns those sums as a Snapshot of the whole Budget.
func SetShard(b *flowv1.Budget, e flowv1.BudgetShard, snap Snapshot) Snapshot {
	st := &b.Status
	if old := entryOf(st, e.Shard); old != nil {
		*old = e
	} else {
		st.Shards = append(st.Shards, e)
		sort.Slice(st.Shards, func(i, j int) bool { return st.Shards[i].Shard < st.Shards[j].Shard })
	}
	total := Snapshot{Start: snap.Start, End: snap.End, Limit: snap.Limit, Denials: snap.Denials}
	for i := range st.Shards {
		s := &st.Shards[i]
		if !s.WindowStart.Time.Equal(snap.Start) {
			continue
		}
		total.Spent = total.Spent.Add(Amounts(s.Spent))
		total.Reserved = total.Reserved.Add(Amounts(s.Reserved))
		total.Sessions += int(s.Sessions)
		total.Holding += int(s.Holding)
		total.Waits += int(s.Waiting)
	}
	start, end := metav1.NewTime(snap.Start), metav1.NewTime(snap.End)
	st.WindowStart, st.WindowEnd = &start, &end
	st.Spent = AmountsOf(total.Spent, total.Limit)
	st.Reserved = AmountsOf(total.Reserved, total.Limit)
	st.Remaining = AmountsOf(total.Limit.Sub(total.Spent).Sub(total.Reserved), total.Limit)
	st.Sessions, st.Holding, st.Waiting = int32(total.Sessions), int32(total.Holding), int32(total.Waits)
	return total
}

func latest(t, u time.Time) time.Time {
	if t.After(u) {
		return t
	}
	return u
}

func minSpend(s, t engine.Spend) engine.Spend {
	return engine.Spend{CostNano: min(s.CostNano, t.CostNano), Tokens: min(s.Tokens, t.Tokens), ToolCalls: min(s.ToolCalls, t.ToolCalls), ModelCalls: min(s.ModelCalls, t.ModelCalls)}
}

func maxSpend(s, t engine.Spend) engine.Spend {
	return engine.Spend{CostNano: max(s.CostNano, t.CostNano), Tokens: max(s.Tokens, t.Tokens), ToolCalls: max(s.ToolCalls, t.ToolCalls), ModelCalls: max(s.ModelCalls, t.ModelCalls)}
}

func div(s engine.Spend, n int64) engine.Spend {
	return engine.Spend{CostNano: s.CostNano / n, Tokens: s.Tokens / n, ToolCalls: s.ToolCalls / n, ModelCalls: s.ModelCalls / n}
}

// mask keeps the amounts of s that limit limits.
func mask(s, limit engine.Spend) engine.Spend {
	keep := func(v, l int64) int64 {
		if l > 0 {
			return v
		}
		return 0
	}
	return engine.Spend{CostNano: keep(s.CostNano, limit.CostNano), Tokens: keep(s.Tokens, limit.Tokens),
		ToolCalls: keep(s.ToolCalls, limit.ToolCalls), ModelCalls: keep(s.ModelCalls, limit.ModelCalls)}
}
