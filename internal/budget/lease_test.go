package budget

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
)

func calls(n int64) engine.Spend { return engine.Spend{ModelCalls: n} }

func TestGrant(t *testing.T) {
	limit := calls(100)
	for _, tc := range []struct {
		name string
		w    Want
		want engine.Spend
	}{
		{"alone: the whole limit", Want{Granted: calls(0), Used: calls(0)}, calls(100)},
		{"alone beside an expired lease: all but its spend", Want{Held: calls(30), Granted: calls(10), Used: calls(5)}, calls(70)},
		{"alone, the periodic write keeps it while in use", Want{Granted: calls(100), Used: calls(5), Flush: true}, calls(100)},
		{"beside another, enough left: kept", Want{Held: calls(40), Granted: calls(30), Used: calls(10), Low: calls(6), Current: 1}, calls(30)},
		{"beside another, short: a share of what no one holds", Want{Held: calls(40), Granted: calls(12), Used: calls(10), Low: calls(6), Current: 1}, calls(35)},
		{"beside two, short: a third of it", Want{Held: calls(40), Granted: calls(12), Used: calls(10), Low: calls(6), Current: 2}, calls(26)},
		{"short near the end: the low water mark, within what is free", Want{Held: calls(88), Granted: calls(10), Used: calls(10), Low: calls(6), Current: 1}, calls(12)},
		{"others hold everything: nothing more", Want{Held: calls(100), Granted: calls(0), Used: calls(0), Low: calls(1), Current: 1}, calls(0)},
		{"others waiting: half of the unused slice given back", Want{Held: calls(10), Granted: calls(90), Used: calls(30), Low: calls(6), Current: 1, OthersWaiting: 3, Flush: true}, calls(60)},
		{"others waiting: a step does not give back", Want{Held: calls(10), Granted: calls(90), Used: calls(30), Low: calls(6), Current: 1, OthersWaiting: 3}, calls(90)},
		{"idle: all of the unused slice given back", Want{Held: calls(10), Granted: calls(90), Used: calls(30), Current: 1, Idle: true, Flush: true}, calls(30)},
		{"idle and alone: given back too", Want{Granted: calls(100), Used: calls(30), Idle: true, Flush: true}, calls(30)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.w.Limit = limit
			if got := Grant(tc.w); got != tc.want {
				t.Errorf("Grant(%+v) = %+v, want %+v", tc.w, got, tc.want)
			}
		})
	}
	// Amounts a Budget does not limit are not granted.
	if got := Grant(Want{Limit: calls(10), Granted: engine.Spend{Tokens: 5}}); got != calls(10) {
		t.Errorf("Grant with tokens unlimited = %+v", got)
	}
}

func TestOthersOf(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	start := t0.Truncate(24 * time.Hour)
	entry := func(shard string, renewed time.Time, granted, spent, reserved, waiting int64) flowv1.BudgetShard {
		return flowv1.BudgetShard{Shard: shard, WindowStart: metav1.NewTime(start), RenewTime: metav1.NewMicroTime(renewed), LeaseSeconds: 60,
			Granted: AmountsOf(calls(granted), calls(1)), Spent: AmountsOf(calls(spent), engine.Spend{}), Reserved: AmountsOf(calls(reserved), engine.Spend{}),
			Waiting: int32(waiting)}
	}
	old := entry("old-window", t0, 50, 50, 0, 0)
	old.WindowStart = metav1.NewTime(start.Add(-24 * time.Hour))
	st := &flowv1.BudgetStatus{Shards: []flowv1.BudgetShard{
		entry("self", t0, 99, 99, 0, 0),
		entry("current", t0.Add(-30*time.Second), 20, 5, 3, 2),  // its grant
		entry("overspent", t0.Add(-10*time.Second), 4, 5, 1, 0), // more than its grant: what it used
		entry("expired", t0.Add(-61*time.Second), 30, 7, 2, 4),  // its spend only
		old, // nothing
	}}
	got := OthersOf(st, "self", start, t0)
	if want := (Others{Held: calls(20 + 6 + 7), Current: 2, Waiting: 2}); got != want {
		t.Errorf("OthersOf = %+v, want %+v", got, want)
	}
}

// shardTest is one Budget in a fake API server, shared by the ledgers of shards a and b.
type shardTest struct {
	t     *testing.T
	c     client.Client
	clock *clocktesting.FakePassiveClock
	woken map[types.NamespacedName]int
}

const ns = "team"

func newShardTest(t *testing.T, limit int64) *shardTest {
	scheme := runtime.NewScheme()
	if err := flowv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := &flowv1.Budget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "calls", Generation: 1},
		Spec: flowv1.BudgetSpec{Window: "Day", Limits: flowv1.BudgetLimits{ModelCalls: limit}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(b).WithStatusSubresource(&flowv1.Budget{}, &flowv1.Session{}).Build()
	return &shardTest{t: t, c: c, clock: clocktesting.NewFakePassiveClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)), woken: map[types.NamespacedName]int{}}
}

func (st *shardTest) ledger(shard string) *Ledger {
	l := NewLedger(st.c, labels.SelectorFromSet(labels.Set{"shard": shard}))
	l.Clock, l.Lease = st.clock, time.Minute
	l.Wake = func(k types.NamespacedName) { st.woken[k]++ }
	return l
}

func (st *shardTest) session(name, shard string) *flowv1.Session {
	st.t.Helper()
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name), Labels: map[string]string{"shard": shard}}}
	if err := st.c.Create(context.Background(), s); err != nil {
		st.t.Fatal(err)
	}
	return s
}

func (st *shardTest) budget() *flowv1.Budget {
	st.t.Helper()
	var b flowv1.Budget
	if err := st.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "calls"}, &b); err != nil {
		st.t.Fatal(err)
	}
	return &b
}

// rooms is what a step of s sees, after its shard leased what it needs.
func (st *shardTest) rooms(l *Ledger, s *flowv1.Session) engine.BudgetRoom {
	st.t.Helper()
	rooms, err := l.Rooms(context.Background(), s, st.clock.Now())
	if err != nil || len(rooms) != 1 {
		st.t.Fatalf("Rooms: %v, %v", rooms, err)
	}
	return rooms[0]
}

// flush is the Budget controller's periodic write of l's entry.
func (st *shardTest) flush(l *Ledger) {
	st.t.Helper()
	b := st.budget()
	before := b.DeepCopy()
	snap, err := l.Snapshot(context.Background(), b, st.clock.Now())
	if err != nil {
		st.t.Fatal(err)
	}
	e, done, ok := l.Entry(b, st.clock.Now())
	if !ok {
		st.t.Fatal("no account")
	}
	SetShard(b, e, snap)
	err = st.c.Status().Patch(context.Background(), b, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	done(err == nil)
	if err != nil {
		st.t.Fatal(err)
	}
}

// granted is shard's grant as written.
func (st *shardTest) granted(shard string) int64 {
	st.t.Helper()
	e := entryOf(&st.budget().Status, "shard="+shard)
	if e == nil {
		st.t.Fatalf("no entry of shard %s in %+v", shard, st.budget().Status.Shards)
	}
	return Amounts(e.Granted).ModelCalls
}

// charge journals a settled call of s, as its status write does, and settles it.
func (st *shardTest) charge(l *Ledger, s *flowv1.Session, made int64) {
	st.t.Helper()
	start, _, _ := Window(&st.budget().Spec, st.clock.Now())
	s.Status.Budgets = []flowv1.BudgetCharge{{Name: "calls", WindowStart: metav1.NewTime(start), ModelCalls: made}}
	if err := st.c.Status().Update(context.Background(), s); err != nil {
		st.t.Fatal(err)
	}
	l.Settle(s)
}

// Two shards lease slices of one Budget of 10 model calls: the first alone takes
// everything, the second is denied until the first gives back for it; a shard that
// cannot renew stops reserving before its lease expires, and then the other takes
// what it did not spend; a restarted shard counts its Sessions' calls once.
func TestLedgerShards(t *testing.T) {
	st := newShardTest(t, 10)
	la, lb := st.ledger("a"), st.ledger("b")
	sa, sb := st.session("sa", "a"), st.session("sb", "b")

	// Alone: a takes the whole limit in one write, and reserves in memory.
	if r := st.rooms(la, sa); r.Left != calls(10) {
		t.Fatalf("a alone: left %+v, want all 10 calls", r.Left)
	}
	if g := st.granted("a"); g != 10 {
		t.Fatalf("a granted %d, want 10", g)
	}
	rv := st.budget().ResourceVersion
	for i := range 3 {
		st.rooms(la, sa)
		if _, ok := la.Reserve(sa.UID, string(rune('0'+i)), calls(1)); !ok {
			t.Fatalf("a: call %d denied", i)
		}
	}
	if got := st.budget().ResourceVersion; got != rv {
		t.Errorf("reserving within the grant wrote the Budget (resourceVersion %s, was %s)", got, rv)
	}

	// b: a holds everything, b is denied and waits; its entry says so.
	if r := st.rooms(lb, sb); r.Left != calls(0) {
		t.Fatalf("b beside a: left %+v, want nothing", r.Left)
	}
	if _, ok := lb.Reserve(sb.UID, "b0", calls(1)); ok {
		t.Fatal("b reserved while a holds every call")
	}
	lb.Wait(sb, calls(1))
	st.flush(lb)
	if g, w := st.granted("b"), st.budget().Status.Waiting; g != 0 || w != 1 {
		t.Fatalf("b granted %d with %d waiting, want 0 and 1", g, w)
	}

	// a gives back half of its unused slice for b's waiting Session; b is woken and
	// grows its grant by a share of what no one holds.
	st.flush(la)
	if g := st.granted("a"); g != 3+7/2 {
		t.Fatalf("a granted %d after b waited, want 6", g)
	}
	st.rooms(lb, sb) // b reads a's entry: room was given back
	if st.woken[types.NamespacedName{Namespace: ns, Name: "sb"}] != 1 {
		t.Fatalf("b's waiting Session not woken: %v", st.woken)
	}
	if _, ok := lb.Reserve(sb.UID, "b0", calls(1)); !ok {
		t.Fatal("b denied after a gave back")
	}
	if ga, gb := st.granted("a"), st.granted("b"); gb != 2 || ga+gb > 10 {
		t.Fatalf("granted a %d, b %d: want b 2 (half of the 4 free), at most 10 together", ga, gb)
	}
	// A settled call is charged once and frees its hold.
	st.charge(la, sa, 1)
	if snap, _ := la.Snapshot(context.Background(), st.budget(), st.clock.Now()); snap.Spent != calls(1) || snap.Reserved != calls(0) {
		t.Fatalf("a after settling: spent %+v, reserved %+v", snap.Spent, snap.Reserved)
	}
	st.flush(la)
	st.flush(lb)
	if b := st.budget(); Amounts(b.Status.Spent).ModelCalls != 1 || Amounts(b.Status.Reserved).ModelCalls != 1 {
		t.Fatalf("Budget status sums: spent %+v, reserved %+v, want 1 and 1 (b's call)", b.Status.Spent, b.Status.Reserved)
	}

	// a cannot write any more: past two thirds of its lease it reserves nothing.
	st.clock.SetTime(st.clock.Now().Add(41 * time.Second))
	if _, ok := la.Reserve(sa.UID, "a9", calls(1)); ok {
		t.Fatal("a reserved with a lease not renewed for 41s of 60s")
	}
	// Past the lease, b takes what a did not spend (a's one settled call stays).
	st.rooms(lb, sb) // renews b
	st.clock.SetTime(st.clock.Now().Add(20 * time.Second))
	lb.Reserve(sb.UID, "b1", calls(1)) // b's slice runs out: it grows at the next step
	if r := st.rooms(lb, sb); r.Left != calls(10-1-2) {
		t.Fatalf("b after a expired: left %+v, want all but a's spent call and b's 2 held", r.Left)
	}
	if g := st.granted("b"); g != 9 {
		t.Fatalf("b granted %d, want 9", g)
	}

	// a restarts: its ledger is rebuilt from its Sessions and its entry, each call
	// once, and it reserves only after renewing, within what b does not hold.
	la2 := st.ledger("a")
	if r := st.rooms(la2, sa); r.Left != calls(0) {
		t.Fatalf("a restarted: left %+v, want nothing (b holds the rest)", r.Left)
	}
	if snap, _ := la2.Snapshot(context.Background(), st.budget(), st.clock.Now()); snap.Spent != calls(1) || snap.Reserved != calls(0) {
		t.Fatalf("a restarted: spent %+v, reserved %+v, want its one call", snap.Spent, snap.Reserved)
	}
	if g := st.granted("a"); g != 1 {
		t.Fatalf("a restarted: granted %d, want 1 (its spent call, no more)", g)
	}
}

// A Session whose reservation is refused because another Session took the last room
// since both read it, and which then waits, is one denial, as is a Session that finds
// no room at once: journey_budget_denials counts the Sessions that started waiting,
// once each however many steps they wait.
func TestLedgerDenialCountsEachWaitOnce(t *testing.T) {
	st := newShardTest(t, 1)
	l := NewLedger(st.c, nil)
	l.Clock = st.clock
	first, second, third := st.session("first", ""), st.session("second", ""), st.session("third", "")
	denials := func() int64 {
		t.Helper()
		snap, err := l.Snapshot(context.Background(), st.budget(), st.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		return snap.Denials
	}

	// Both read one call of room; the first reserves it, the second is refused and waits.
	st.rooms(l, first)
	if r := st.rooms(l, second); r.Left != calls(1) {
		t.Fatalf("second: left %+v, want the one call", r.Left)
	}
	if _, ok := l.Reserve(first.UID, "c", calls(1)); !ok {
		t.Fatal("first: denied with the call free")
	}
	rooms, ok := l.Reserve(second.UID, "c", calls(1))
	if ok || len(rooms) != 1 || rooms[0].Left != calls(0) {
		t.Fatalf("second: reserved %v, rooms %+v: want refused with no room left", ok, rooms)
	}
	l.Wait(second, calls(1))
	if d := denials(); d != 1 {
		t.Fatalf("%d denials after one refused Session waited, want 1", d)
	}
	// It waits on at its next step: the same denial.
	st.rooms(l, second)
	l.Wait(second, calls(1))
	// A third finds no room at once and waits: one more.
	if r := st.rooms(l, third); r.Left != calls(0) {
		t.Fatalf("third: left %+v, want nothing", r.Left)
	}
	l.Wait(third, calls(1))
	if d := denials(); d != 2 {
		t.Fatalf("%d denials after two Sessions waited, want 2", d)
	}
}
