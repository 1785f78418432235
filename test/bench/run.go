package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// result is what one run of the turn bench measured: one journey, n Sessions, one
// advance mode, on a control plane of its own.
type result struct {
	Journey     string  `json:"journey"`
	Sessions    int     `json:"sessions"`
	Advance     string  `json:"advance"`
	Concurrency int     `json:"concurrency"`
	QPS         float64 `json:"qps"`
	Burst       int     `json:"burst"`
	Transform   string  `json:"cacheTransform"`
	// ModelLatency is the chat server's fixed latency (journeys with model calls).
	ModelLatency float64 `json:"modelLatencyMs,omitempty"`
	// TurnsPerSession is how many turns each conversation takes in the closed loop,
	// and each plain Session in the plain pair.
	TurnsPerSession int `json:"turnsPerSession"`

	// Calibration: one Session alone, its writes per turn and its size at the end.
	CalibStatusWrites float64 `json:"calibrationStatusWritesPerTurn"`
	CalibBytes        int     `json:"calibrationSessionBytes"`

	// (a) the plain pair: a user write and one status write a turn; the better of
	// its passes, one before the operator's phases and one after.
	PlainSessions     int                `json:"plainSessions"`
	PlainRate         float64            `json:"plainTurnsPerSecond"`
	PlainCPU          map[string]float64 `json:"plainCPUmsPerTurn"`
	PlainStatusWrites float64            `json:"plainStatusWritesPerTurn"`
	PlainPasses       []plainPass        `json:"plainPasses"`

	// (b) the operator, closed loop: every conversation sends its next message when
	// the reply arrives.
	ClosedRate float64 `json:"closedTurnsPerSecond"`
	ClosedP50  float64 `json:"closedP50ms"`
	ClosedP99  float64 `json:"closedP99ms"`
	// ClosedQueue is what the closed loop's turns waited for in the manager.
	ClosedQueue *queueStats `json:"closedQueue,omitempty"`
	// (b) the operator, paced: the best probe under the limit, and every probe.
	PacedLimit float64       `json:"pacedP99LimitMs"`
	Paced      probeResult   `json:"paced"`
	Probes     []probeResult `json:"probes"`
	// PlainPaced is the plain pair paced as the operator was, on Sessions of its own,
	// at the operator's best paced rate; PlainPacedBest its own highest rate under the
	// same limit, searched as the operator's was, and PlainProbes every probe of that
	// search. They say whether a latency limit is the operator's or the machine's: the
	// plain pair's two writes a turn meet it, or not, at that rate.
	PlainPaced     []probeResult `json:"plainPaced,omitempty"`
	PlainPacedBest probeResult   `json:"plainPacedBest"`
	PlainProbes    []probeResult `json:"plainProbes,omitempty"`
	// (c) cluster CPU per turn of the closed loop.
	TurnCPU map[string]float64 `json:"turnCPUmsPerTurn"`
	// (d) writes per turn of the closed loop, counted by a watch.
	StatusWrites float64 `json:"statusWritesPerTurn"`
	SpecWrites   float64 `json:"specWritesPerTurn"`
	ModelCalls   float64 `json:"modelCallsPerTurn"`
	ToolCalls    float64 `json:"toolCallsPerTurn"`
	// (e) the manager's heap per cached Session at the end.
	CachedSessions int     `json:"cachedSessions"`
	HeapPerSession float64 `json:"heapBytesPerSession"`
	HeapBase       float64 `json:"heapBytesWithoutSessions"`
	SessionBytes   float64 `json:"meanSessionBytes"`
	TurnsAtHeap    float64 `json:"meanTurnsPerSessionAtHeap"`
	// EventsPerTurn is the Events the Sessions got, per turn they took.
	EventsPerTurn float64 `json:"eventsPerTurn"`

	Load    string `json:"loadAverage"`
	LoadEnd string `json:"loadAverageEnd"`
}

// plainPass is one pass of the plain pair.
type plainPass struct {
	Rate         float64            `json:"turnsPerSecond"`
	CPU          map[string]float64 `json:"cpuMsPerTurn"`
	StatusWrites float64            `json:"statusWritesPerTurn"`
	Load         string             `json:"loadAverage"`
}

func (r *result) closedRatio() float64 { return ratio(r.ClosedRate, r.PlainRate) }
func (r *result) pacedRatio() float64  { return ratio(r.Paced.Offered, r.PlainRate) }
func (r *result) cpuRatio() float64    { return ratio(total(r.TurnCPU), total(r.PlainCPU)) }

// cpuPerModelCall is the cluster CPU of a turn per model call it makes (per turn when
// it makes none).
func (r *result) cpuPerModelCall() float64 {
	return total(r.TurnCPU) / max(1, math.Round(r.ModelCalls))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

const (
	benchNamespace = "bench"
	plainNamespace = "plain"
)

// run is one run of the turn bench.
type run struct {
	opts *options
	kind string
	n    int
	mode controller.AdvanceMode
	res  *result

	env    *testenv.Environment
	c      client.Client // the harness's own client, not rate limited: it stands for many users
	mgr    *testenv.Manager
	tr     *tracker
	models *modelServers
	writes *writeCounter
	heap0  uint64
	// statuses are the calibration Session's, before its first turn and after each;
	// calibSpec its spec.
	statuses  []flowv1.SessionStatus
	calibSpec *flowv1.SessionSpec
}

// runOne measures journey kind with n Sessions in one advance mode, on a control plane
// of its own.
func runOne(ctx context.Context, opts *options, kind string, n int, mode controller.AdvanceMode) (*result, error) {
	r := &run{opts: opts, kind: kind, n: n, mode: mode, res: &result{Journey: kind, Sessions: n, Advance: string(mode),
		Concurrency: opts.concurrency, QPS: opts.qps, Burst: opts.burst, Transform: opts.transform,
		TurnsPerSession: turnsPerSession(n, opts.minTurns)}}
	logf("%s journey, %d sessions, advance %s: starting a control plane", kind, n, mode)
	env, err := testenv.Start()
	if err != nil {
		return nil, err
	}
	defer func() { _ = env.Stop() }()
	r.env = env
	if r.c, err = harnessClient(env.Config); err != nil {
		return nil, err
	}
	for _, ns := range []string{benchNamespace, plainNamespace} {
		if err := r.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
	}
	var ep endpoints
	if needsModels(kind) {
		if r.models, err = startModelServers(opts.modelLatency); err != nil {
			return nil, err
		}
		defer r.models.stop()
		ep = r.models.endpoints
		r.res.ModelLatency = ms(opts.modelLatency)
	}
	if err := r.startManager(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = r.mgr.Stop() }()
	if err := r.createJourney(ctx, ep); err != nil {
		return nil, err
	}
	r.heap0 = heapAlloc()
	if r.writes, err = countWrites(ctx, env.Config, benchNamespace); err != nil {
		return nil, err
	}
	defer func() {
		if r.writes != nil {
			r.writes.stop()
		}
	}()
	cv, err := r.sessions(ctx)
	if err != nil {
		return nil, err
	}
	for _, phase := range []func(context.Context, *conversations) error{r.calibrate, r.plain, r.closedLoop, r.paced, r.plainPaced, r.plain, r.heap} {
		if err := phase(ctx, cv); err != nil {
			return nil, err
		}
	}
	return r.res, nil
}

// startManager starts the manager, configured as cmd/manager configures it, watching
// the bench namespace, with the tracker on its Session informer.
func (r *run) startManager(ctx context.Context) error {
	cacheOpts := r.opts.cacheOptions()
	mgr, err := r.env.NewManager(testenv.ManagerOptions{
		Namespaces: []string{benchNamespace},
		Cache:      cacheOpts,
		QPS:        float32(r.opts.qps),
		Burst:      r.opts.burst,
		Setup: func(mgr ctrl.Manager) error {
			return controller.Setup(mgr, controller.Options{Advance: r.mode, MaxConcurrentReconciles: r.opts.concurrency})
		},
	})
	if err != nil {
		return err
	}
	r.tr = newTracker()
	inf, err := mgr.GetCache().GetInformer(ctx, &flowv1.Session{})
	if err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(r.tr.handler()); err != nil {
		return err
	}
	mgr.Start()
	r.mgr = mgr
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("cache did not sync")
	}
	return nil
}

// createJourney creates the journey's objects and waits until it is Ready.
func (r *run) createJourney(ctx context.Context, ep endpoints) error {
	pathways, j, err := journeyObjects(r.kind, benchNamespace, ep)
	if err != nil {
		return err
	}
	for _, p := range pathways {
		if err := r.c.Create(ctx, p); err != nil {
			return err
		}
	}
	if err := r.c.Create(ctx, j); err != nil {
		return err
	}
	deadline := time.Now().Add(r.opts.timeout)
	for {
		var got flowv1.Journey
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(j), &got); err != nil {
			return err
		}
		if journeyReady(&got) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("journey %s not ready: %+v", j.Name, got.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sessions creates the calibration Session and the n Sessions of the run and waits
// until each waits for its first message.
func (r *run) sessions(ctx context.Context) (*conversations, error) {
	if err := r.c.Create(ctx, r.session("calib")); err != nil {
		return nil, err
	}
	cv, err := r.newSessions(ctx, "s-")
	if err != nil {
		return nil, err
	}
	if err := r.tr.waitFor("calib", 1, r.opts.timeout, "calibration session waiting for input", waiting); err != nil {
		return nil, err
	}
	return cv, nil
}

// newSessions creates the n Sessions <prefix><number> and waits until each waits for
// its first message.
func (r *run) newSessions(ctx context.Context, prefix string) (*conversations, error) {
	names := make([]string, r.n)
	objs := make([]*flowv1.Session, r.n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%05d", prefix, i)
		objs[i] = r.session(names[i])
	}
	rate, err := createSessions(ctx, r.c, 16, objs)
	if err != nil {
		return nil, err
	}
	logf("created %d sessions %s* at %.0f/s", len(objs), prefix, rate)
	if err := r.tr.waitFor(prefix, r.n, r.opts.timeout, "sessions waiting for input", waiting); err != nil {
		return nil, err
	}
	return newConversations(r.c, r.tr, names, r.opts.senders, r.opts.timeout), nil
}

// deleteSessions deletes the named Sessions of the bench namespace.
func (r *run) deleteSessions(ctx context.Context, names []string) error {
	return testenv.Parallel(16, len(names), func(i int) error {
		return client.IgnoreNotFound(r.c.Delete(ctx, r.session(names[i])))
	})
}

func (r *run) session(name string) *flowv1.Session {
	return &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: name},
		Spec: flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: r.kind}}}
}

// calibrate has the calibration Session take the run's turns alone: its statuses are
// what the plain pair writes.
func (r *run) calibrate(ctx context.Context, _ *conversations) error {
	res, turns := r.res, r.res.TurnsPerSession
	w0 := r.writes.settle(200 * time.Millisecond)
	calib := newConversations(r.c, r.tr, []string{"calib"}, 1, r.opts.timeout)
	statuses, obj, err := calibrate(ctx, calib, turns)
	if err != nil {
		return fmt.Errorf("calibration: %w", err)
	}
	w1 := r.writes.settle(200 * time.Millisecond)
	res.CalibStatusWrites = float64(w1.sub(w0).Status) / float64(turns)
	res.CalibBytes = jsonSize(obj)
	r.statuses, r.calibSpec = statuses, &obj.Spec
	logf("calibration: %d turns alone, %.2f status writes a turn, the Session %d bytes at the end", turns, res.CalibStatusWrites, res.CalibBytes)
	return nil
}

// plain measures the plain pair on Sessions of its own, once before the operator's
// phases and once after them: on a shared machine the load drifts, and the better
// pass (the higher rate, the lower CPU) is the limit the operator is held to.
func (r *run) plain(ctx context.Context, _ *conversations) error {
	res, turns := r.res, r.res.TurnsPerSession
	pass := len(res.PlainPasses) + 1
	plainWrites, err := countWrites(ctx, r.env.Config, plainNamespace)
	if err != nil {
		return err
	}
	defer plainWrites.stop()
	res.PlainSessions = min(r.n, r.opts.plainSessions)
	plain, err := newPlainPair(ctx, r.c, plainNamespace, fmt.Sprintf("plain%d-", pass), r.calibSpec, r.statuses, res.PlainSessions)
	if err != nil {
		return fmt.Errorf("plain pair: %w", err)
	}
	p0, cpu0 := plainWrites.settle(200*time.Millisecond), readCPU()
	stopAPIProfile := apiserverProfile(ctx, r.env.Config, r.opts.apiProfile, r.name(fmt.Sprintf("plain%d", pass)))
	d, err := plain.run(ctx, turns, r.opts.concurrency)
	cpu := readCPU().sub(cpu0)
	stopAPIProfile()
	if err != nil {
		return err
	}
	pairs := float64(res.PlainSessions * turns)
	p1 := plainWrites.settle(200 * time.Millisecond)
	pp := plainPass{Rate: pairs / d.Seconds(), CPU: perUnit(cpu, pairs), StatusWrites: float64(p1.sub(p0).Status) / pairs, Load: loadAverage()}
	res.PlainPasses = append(res.PlainPasses, pp)
	if pp.Rate > res.PlainRate {
		res.PlainRate = pp.Rate
	}
	if res.PlainCPU == nil || total(pp.CPU) < total(res.PlainCPU) {
		res.PlainCPU = pp.CPU
	}
	res.PlainStatusWrites = max(res.PlainStatusWrites, pp.StatusWrites)
	logf("plain pair, pass %d: %d sessions x %d turns in %.1fs = %.1f turns/s with %d workers, %.2f ms cluster CPU a turn %v, %.2f status writes a turn, load %s",
		pass, res.PlainSessions, turns, d.Seconds(), pp.Rate, r.opts.concurrency, total(pp.CPU), pp.CPU, pp.StatusWrites, pp.Load)
	return nil
}

// closedLoop measures the operator's turns/s with every conversation sending its
// next message when the reply arrives, and what a turn costs.
func (r *run) closedLoop(ctx context.Context, cv *conversations) error {
	res, turns := r.res, r.res.TurnsPerSession
	if _, err := settleEvents(ctx, r.c, benchNamespace, r.opts.timeout); err != nil {
		return err
	}
	w0 := r.writes.settle(200 * time.Millisecond)
	s0, err := r.callStats()
	if err != nil {
		return err
	}
	cpu0 := readCPU()
	stopAPIProfile := apiserverProfile(ctx, r.env.Config, r.opts.apiProfile, r.name("operator"))
	stopProfile, err := startProfile(r.opts.cpuProfile, r.name("closed"))
	if err != nil {
		return err
	}
	m0 := snapshotMetrics()
	start := time.Now()
	lat, err := cv.closedLoop(ctx, turns)
	d := time.Since(start)
	res.ClosedQueue = sessionQueue(m0, snapshotMetrics())
	res.Load = loadAverage()
	stopProfile()
	stopAPIProfile()
	if err != nil {
		return fmt.Errorf("closed loop: %w", err)
	}
	// The CPU of a turn includes its Events, which the manager writes from a queue,
	// after the turn: the window ends when they are written.
	if _, err := settleEvents(ctx, r.c, benchNamespace, r.opts.timeout); err != nil {
		return err
	}
	cpu := readCPU().sub(cpu0)
	n := float64(len(lat))
	w := r.writes.settle(200 * time.Millisecond).sub(w0)
	s1, err := r.callStats()
	if err != nil {
		return err
	}
	res.ClosedRate = n / d.Seconds()
	res.ClosedP50, res.ClosedP99 = ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99))
	res.TurnCPU = perUnit(cpu, n)
	res.StatusWrites, res.SpecWrites = float64(w.Status)/n, float64(w.Spec)/n
	res.ModelCalls, res.ToolCalls = float64(s1.Model-s0.Model)/n, float64(s1.Tools-s0.Tools)/n
	logf("closed loop: %d sessions x %d turns in %.1fs = %.1f turns/s (%.2fx the plain pair), p50 %.1f ms p99 %.1f ms, %.2f ms cluster CPU a turn %v (%.2fx), %.2f status + %.2f spec writes a turn, %.2f model and %.2f tool calls a turn, load %s",
		r.n, turns, d.Seconds(), res.ClosedRate, res.closedRatio(), res.ClosedP50, res.ClosedP99, total(res.TurnCPU), res.TurnCPU, res.cpuRatio(),
		res.StatusWrites, res.SpecWrites, res.ModelCalls, res.ToolCalls, res.Load)
	logf("  manager: %s", res.ClosedQueue)
	return nil
}

// paced searches the highest paced rate whose turn p99 stays under the limit (plus
// the model's own latency for each model call of a turn). Each probe runs on n new
// Sessions, as each of the plain pair's paced probes does, so every probe's
// conversations are as long as the plain pair's (at most the run's turns a Session):
// on the closed loop's Sessions a search of 100 Sessions grew them to 75 to 89
// turns, which no plain probe pays for. Each new Session takes its first turn
// before the probe (its Started Event is written then), since the closed loop's
// Sessions had taken theirs too.
func (r *run) paced(ctx context.Context, _ *conversations) error {
	res := r.res
	limit := r.opts.p99 + time.Duration(math.Round(res.ModelCalls))*r.opts.modelLatency
	res.PacedLimit = ms(limit)
	// No paced rate the closed loop could not sustain passes: the closed loop keeps
	// every conversation busy.
	hi := 1.25 * res.ClosedRate
	logf("paced: searching (0, %.1f] turns/s for p99 < %s, %d steps of %s probes, each on %d new Sessions", hi, limit, r.opts.probes, r.opts.probeDuration, r.n)
	settle := func() error {
		// The Events of the turns before are written by then, and the machine had a
		// moment.
		m0 := snapshotMetrics()
		if _, err := settleEvents(ctx, r.c, benchNamespace, r.opts.timeout); err != nil {
			return err
		}
		waited := quiet(10 * time.Second)
		logf("  settled (quiet after %s more); the manager meanwhile: %s", waited.Round(time.Millisecond), sessionQueue(m0, snapshotMetrics()))
		return nil
	}
	probes := 0
	probe := func(rate float64) (probeResult, error) {
		probes++
		cv, err := r.newSessions(ctx, fmt.Sprintf("p%d-", probes))
		if err != nil {
			return probeResult{}, err
		}
		if _, err := cv.closedLoop(ctx, 1); err != nil {
			return probeResult{}, fmt.Errorf("first turns before probe %d: %w", probes, err)
		}
		if err := settle(); err != nil {
			return probeResult{}, err
		}
		pr, err := cv.paced(ctx, rate, r.probeLength(r.n, rate), limit)
		if err != nil {
			return pr, err
		}
		return pr, r.deleteSessions(ctx, cv.names)
	}
	best, all, err := searchRate(ctx, hi, r.opts.probes, settle, probe)
	if err != nil {
		return fmt.Errorf("paced: %w", err)
	}
	res.Paced, res.Probes = best, all
	res.LoadEnd = loadAverage()
	logf("paced: %.1f turns/s (%.2fx the plain pair) with p50 %.1f ms p99 %.1f ms", best.Offered, res.pacedRatio(), best.P50, best.P99)
	return nil
}

// probeLength is how long a paced probe of sessions Sessions offers turns at rate:
// -probe-duration, or less if that would take more than the run's turns a Session
// (the plain pair has statuses for no more).
func (r *run) probeLength(sessions int, rate float64) time.Duration {
	return min(r.opts.probeDuration, time.Duration(float64(sessions*r.res.TurnsPerSession)/rate*float64(time.Second)))
}

// plainPaced paces the plain pair, on Sessions of its own, under the same p99 limit:
// at the operator's best paced rate, then searching its own highest passing rate as
// the operator's was searched (each probe on new Sessions, so none runs out of
// turns). It says whether a latency limit is the operator's or the machine's.
func (r *run) plainPaced(ctx context.Context, _ *conversations) error {
	res := r.res
	limit := time.Duration(res.PacedLimit * float64(time.Millisecond))
	sessions := min(r.n, r.opts.plainSessions)
	probes := 0
	probe := func(rate float64) (probeResult, error) {
		probes++
		plain, err := newPlainPair(ctx, r.c, plainNamespace, fmt.Sprintf("paced%d-", probes), r.calibSpec, r.statuses, sessions)
		if err != nil {
			return probeResult{}, fmt.Errorf("paced plain pair: %w", err)
		}
		quiet(10 * time.Second)
		pr, err := plain.paced(ctx, rate, r.probeLength(len(plain.objs), rate), limit)
		if err != nil {
			return pr, fmt.Errorf("paced plain pair: %w", err)
		}
		return pr, plain.delete(ctx)
	}
	if rate := res.Paced.Offered; rate > 0 {
		pr, err := probe(rate)
		if err != nil {
			return err
		}
		res.PlainPaced = append(res.PlainPaced, pr)
		logf("paced plain pair at the operator's rate, %.1f turns/s: sent %.1f/s, %d turns, %d missed, p50 %.1f ms p99 %.1f ms: %s",
			rate, pr.Achieved, pr.Turns, pr.Missed, pr.P50, pr.P99, map[bool]string{true: "pass", false: "fail"}[pr.Pass])
	}
	hi := 1.25 * res.PlainRate
	logf("paced plain pair: searching (0, %.1f] turns/s for p99 < %s, %d steps", hi, limit, r.opts.probes)
	best, all, err := searchRate(ctx, hi, r.opts.probes, func() error { return nil }, probe)
	if err != nil {
		return err
	}
	res.PlainPacedBest, res.PlainProbes = best, all
	logf("paced plain pair: %.1f turns/s (%.2fx its closed rate) with p50 %.1f ms p99 %.1f ms; the operator's paced rate is %.2fx it",
		best.Offered, ratio(best.Offered, res.PlainRate), best.P50, best.P99, ratio(res.Paced.Offered, best.Offered))
	return nil
}

// quiet waits until the cluster (kube-apiserver, etcd and this process) used less
// than a tenth of a core over half a second, at most max, and returns how long it
// waited: a paced probe must not pay for work the phase before it left behind.
func quiet(maxWait time.Duration) time.Duration {
	const window = 500 * time.Millisecond
	start := time.Now()
	last := readCPU()
	for time.Since(start) < maxWait {
		time.Sleep(window)
		cur := readCPU()
		if total(cur.sub(last)) < 0.1*window.Seconds() {
			break
		}
		last = cur
	}
	return time.Since(start)
}

// heap measures the manager's heap per cached Session: everything the harness holds
// is dropped first.
func (r *run) heap(ctx context.Context, cv *conversations) error {
	res := r.res
	turns := 0
	for _, k := range cv.next {
		turns += k
	}
	res.TurnsAtHeap = float64(turns) / float64(len(cv.next))
	bytes, err := meanSize(ctx, r.c, cv.names, 100)
	if err != nil {
		return err
	}
	res.SessionBytes = bytes
	if _, err := settleEvents(ctx, r.c, benchNamespace, r.opts.timeout); err != nil {
		return err
	}
	// The Events of the closed loop's Sessions (named after them), not of the paced
	// probes' or the calibration Session's.
	events, err := countEvents(ctx, r.c, benchNamespace, "s-")
	if err != nil {
		return err
	}
	res.EventsPerTurn = float64(events) / float64(turns)
	r.writes.stop()
	r.writes = nil
	var list flowv1.SessionList
	if err := r.mgr.GetCache().List(ctx, &list, client.InNamespace(benchNamespace)); err != nil {
		return err
	}
	res.CachedSessions = len(list.Items)
	list = flowv1.SessionList{}
	r.tr.release()
	cv.names, cv.next = nil, nil
	heap1 := heapAlloc()
	if r.opts.memProfile != "" {
		if err := writeHeapProfile(r.opts.memProfile + "-" + r.name("heap")); err != nil {
			return err
		}
	}
	res.HeapPerSession = float64(int64(heap1)-int64(r.heap0)) / float64(res.CachedSessions)
	res.HeapBase = float64(r.heap0)
	logf("manager heap: %.1f KiB per session (%d sessions cached, %.1f turns, %.0f bytes and %.2f Events a turn each on average) over %.1f MiB without Sessions",
		res.HeapPerSession/1024, res.CachedSessions, res.TurnsAtHeap, res.SessionBytes, res.EventsPerTurn, res.HeapBase/(1<<20))
	return nil
}

// callStats are the model servers' counts (zero without them).
func (r *run) callStats() (callStats, error) {
	if r.models == nil {
		return callStats{}, nil
	}
	return r.models.stats()
}

// name names this run's profiles: <phase>-<journey>-<sessions>-<advance>.
func (r *run) name(phase string) string {
	return fmt.Sprintf("%s-%s-%d-%s", phase, r.kind, r.n, r.mode)
}

// meanSize is the mean JSON size, as stored, of up to sample of the Sessions.
func meanSize(ctx context.Context, c client.Client, names []string, sample int) (float64, error) {
	step := max(1, len(names)/sample)
	sum, n := 0, 0
	for i := 0; i < len(names); i += step {
		var s flowv1.Session
		if err := c.Get(ctx, types.NamespacedName{Namespace: benchNamespace, Name: names[i]}, &s); err != nil {
			return 0, err
		}
		sum += jsonSize(&s)
		n++
	}
	return float64(sum) / float64(max(n, 1)), nil
}

func waiting(t *tracked) bool { return t.phase == flowv1.PhaseWaitingForInput }

// loadAverage is the 1-minute load average of the machine, to show how busy it was.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(raw)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// startProfile writes a CPU profile of this process to path-<name>; without a path
// it does nothing.
func startProfile(path, name string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	return startCPUProfile(path + "-" + name)
}

// startCPUProfile starts a CPU profile of this process (the manager and the harness)
// to file; the returned function stops it.
func startCPUProfile(file string) (func(), error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("heap").WriteTo(f, 0)
}

// apiserverProfile starts a 15-second CPU profile of the kube-apiserver
// (/debug/pprof/profile) and returns a function that waits for it and writes it to
// <path>-<name>. It does nothing without a path.
func apiserverProfile(ctx context.Context, cfg *rest.Config, path, name string) func() {
	return apiserverProfileFor(ctx, cfg, path, name, 15)
}

// apiserverProfileFor is apiserverProfile over seconds seconds.
func apiserverProfileFor(ctx context.Context, cfg *rest.Config, path, name string, seconds int) func() {
	if path == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rc, err := rest.UnversionedRESTClientFor(withCodec(cfg))
		if err != nil {
			logf("apiserver profile: %v", err)
			return
		}
		raw, err := rc.Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(seconds)).
			Timeout(time.Duration(seconds+15) * time.Second).DoRaw(ctx)
		if err != nil {
			logf("apiserver profile: %v", err)
			return
		}
		_ = os.WriteFile(path+"-"+name, raw, 0o644)
	}()
	return func() { <-done }
}

// harnessClient is the client of the bench's users: unthrottled, and on a connection
// of its own. Users' writes reach the API server on their own connections, not on the
// manager's; client-go shares one transport, and so one HTTP/2 connection, between
// configs with the same TLS settings, and a dialer of its own gives the harness its own.
func harnessClient(cfg *rest.Config) (client.Client, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 10000, 20000
	c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return client.New(c, client.Options{Scheme: scheme})
}

func withCodec(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	return c
}

func perUnit(c cpuTimes, units float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range c {
		out[k] = float64(int(v/units*1e5)) / 100 // ms, two decimals
	}
	return out
}

func heapAlloc() uint64 {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// jsonSize is the size of o encoded as JSON: about its size as stored.
func jsonSize(o any) int {
	raw, err := json.Marshal(o)
	if err != nil {
		return 0
	}
	return len(raw)
}

// countEvents counts the Events of namespace whose name starts with prefix: the
// recorder names an Event after its object.
func countEvents(ctx context.Context, c client.Client, namespace, prefix string) (int, error) {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(eventsv1.SchemeGroupVersion.WithKind("EventList"))
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return 0, err
	}
	n := 0
	for _, e := range list.Items {
		if strings.HasPrefix(e.Name, prefix) {
			n++
		}
	}
	return n, nil
}

// settleEvents waits until the manager has written the Events it queued (its queue
// drains after the steps that emitted them, and would count as heap of the Sessions):
// until the Events of the namespace stop growing for two seconds, at most timeout.
func settleEvents(ctx context.Context, c client.Client, namespace string, timeout time.Duration) (int, error) {
	last := -1
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		n, err := countEvents(ctx, c, namespace, "")
		if err != nil {
			return 0, err
		}
		if n == last {
			return last, nil
		}
		last = n
		time.Sleep(2 * time.Second)
	}
	return last, nil
}
