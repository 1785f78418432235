package main

import (
	"context"
	"encoding/json"
	"fmt"
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
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// result is what one run measured.
type result struct {
	Sessions    int     `json:"sessions"`
	Advance     string  `json:"advance"`
	Concurrency int     `json:"concurrency"`
	QPS         float64 `json:"qps"`
	Burst       int     `json:"burst"`
	StripFields bool    `json:"stripManagedFields"`

	CreateRate    float64 `json:"createPerSecond"`
	PlainRate     float64 `json:"plainStatusPatchesPerSecond"`
	PlainRateWide float64 `json:"plainStatusPatchesPerSecondWide"`
	PlainWide     int     `json:"plainWideWorkers"`
	Steps         int64   `json:"steps"`
	StepSeconds   float64 `json:"stepSeconds"`
	StepRate      float64 `json:"stepsPerSecond"`
	IdleP50       float64 `json:"idleP50ms"`
	IdleP99       float64 `json:"idleP99ms"`
	IdleCount     int     `json:"idleMessages"`
	IdleConflicts float64 `json:"idleConflicts"`
	LoadedRate    float64 `json:"loadedMessagesPerSecond"`
	LoadedP50     float64 `json:"loadedP50ms"`
	LoadedP99     float64 `json:"loadedP99ms"`
	LoadedCount   int     `json:"loadedMessages"`
	EventsPerStep float64 `json:"eventsPerStep"`
	EventsDropped float64 `json:"eventsDroppedInBurst"`
	ReconcilesPer float64 `json:"reconcilesPerStep"`
	// CPU milliseconds per write of the plain client and per step of the operator, by
	// process (apiserver, etcd, manager: this process).
	PlainCPU       map[string]float64 `json:"plainCPUmsPerWrite"`
	StepCPU        map[string]float64 `json:"stepCPUmsPerStep"`
	ConflictsPer   float64            `json:"conflictsPerStep"`
	Load           string             `json:"loadAverage"`
	CachedSessions int                `json:"cachedSessions"`
	HeapPerSession float64            `json:"heapBytesPerSession"`
	HeapBase       float64            `json:"heapBytesWithoutSessions"`
}

func (r *result) ratio() float64 {
	limit := max(r.PlainRate, r.PlainRateWide)
	if limit == 0 {
		return 0
	}
	return r.StepRate / limit
}

const benchNamespace = "bench"

// run is one bench run: n Sessions in one advance mode, on a control plane of its own.
type run struct {
	opts *options
	smp  *sample
	n    int
	mode controller.AdvanceMode
	res  *result

	env *testenv.Environment
	c   client.Client // the harness's own client, not rate limited: it stands for many users
	mgr *testenv.Manager
	tr  *tracker
	// heap0 is the manager's heap before any Session of the bench namespace.
	heap0 uint64
}

// runOne measures the operator with n Sessions in one advance mode, on a control plane
// of its own.
func runOne(ctx context.Context, opts *options, smp *sample, n int, mode controller.AdvanceMode) (*result, error) {
	r := &run{opts: opts, smp: smp, n: n, mode: mode,
		res: &result{Sessions: n, Advance: string(mode), Concurrency: opts.concurrency, QPS: opts.qps, Burst: opts.burst, StripFields: opts.strip}}
	logf("%d sessions, advance %s: starting a control plane", n, mode)
	env, err := testenv.Start()
	if err != nil {
		return nil, err
	}
	defer func() { _ = env.Stop() }()
	r.env = env
	harnessCfg := rest.CopyConfig(env.Config)
	harnessCfg.QPS, harnessCfg.Burst = 10000, 20000
	if r.c, err = client.New(harnessCfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	for _, ns := range []string{benchNamespace, "plain"} {
		if err := r.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
	}
	if err := r.plain(ctx); err != nil {
		return nil, err
	}
	if err := r.startManager(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = r.mgr.Stop() }()
	if opts.llmLatency > 0 {
		srv := slowLLM(opts.llmLatency)
		defer srv.Close()
		r.smp = r.smp.withJourney(func(j *flowv1.Journey) bool { return remoteClassifier(j, srv.BaseURL()) })
		if r.smp == nil {
			return nil, fmt.Errorf("the sample's journey has no intent classifier to make remote")
		}
	}
	r.heap0 = heapAlloc()
	for _, phase := range []func(context.Context) error{r.throughput, r.idle, r.loaded, r.heap} {
		if err := phase(ctx); err != nil {
			return nil, err
		}
	}
	return r.res, nil
}

// plain measures the physical limit: a plain client writing the statuses of the
// sample's steps (for at most 500 Sessions: the rate is per write).
func (r *run) plain(ctx context.Context) error {
	res := r.res
	plainN := min(r.n, 500)
	cpu0 := readCPU()
	stopAPIProfile := apiserverProfile(ctx, r.env.Config, r.opts.apiProfile, fmt.Sprintf("plain-%d-%s", r.n, r.mode))
	var err error
	res.PlainRate, err = plainStatusRate(ctx, r.c, r.smp, "plain", plainN, r.opts.concurrency)
	stopAPIProfile()
	if w := float64(plainN * plainWrites(r.smp)); w > 0 {
		res.PlainCPU = perUnit(readCPU().sub(cpu0), w)
	}
	if err != nil {
		return fmt.Errorf("plain client: %w", err)
	}
	res.PlainWide = max(16, 4*r.opts.concurrency)
	if err := r.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain-wide"}}); err != nil {
		return err
	}
	res.PlainRateWide, err = plainStatusRate(ctx, r.c, r.smp, "plain-wide", plainN, res.PlainWide)
	if err != nil {
		return fmt.Errorf("plain client: %w", err)
	}
	logf("plain client: %.0f status patches/s with %d workers, %.0f/s with %d", res.PlainRate, r.opts.concurrency, res.PlainRateWide, res.PlainWide)
	return nil
}

// startManager starts the manager, configured as cmd/manager configures it, watching
// the bench namespace, and creates the sample's Pathways there.
func (r *run) startManager(ctx context.Context) error {
	cacheOpts := controller.CacheOptions(nil)
	if !r.opts.strip {
		cacheOpts.DefaultTransform = nil
	}
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
	for _, p := range r.smp.pathways {
		p := p.DeepCopy()
		p.Namespace, p.ResourceVersion = benchNamespace, ""
		if err := r.c.Create(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// throughput: n Sessions, each with its whole conversation, wait for a Journey that
// does not exist yet; creating it releases them all at once.
func (r *run) throughput(ctx context.Context) error {
	res, tr, n := r.res, r.tr, r.n
	burst := make([]*flowv1.Session, n)
	for i := range burst {
		name := fmt.Sprintf("burst-%05d", i)
		burst[i] = newSession(r.smp, name, personal(r.smp.session.Spec.Messages, name, r.opts.llmLatency > 0))
	}
	var err error
	if res.CreateRate, err = createSessions(ctx, r.c, 16, burst); err != nil {
		return err
	}
	logf("created %d sessions at %.0f/s", n, res.CreateRate)
	if err := tr.waitFor("burst-", n, r.opts.timeout, "sessions waiting for their Journey", func(t *tracked) bool {
		return t.phase == flowv1.PhasePending && t.reason == flowv1.ReasonJourneyNotFound
	}); err != nil {
		return err
	}
	j := r.smp.journey.DeepCopy()
	j.Namespace, j.ResourceVersion = benchNamespace, ""
	before, cpuBefore := gather(), readCPU()
	stopAPIProfile := apiserverProfile(ctx, r.env.Config, r.opts.apiProfile, fmt.Sprintf("operator-%d-%s", n, r.mode))
	stopProfile, err := startProfile(r.opts.cpuProfile, n, r.mode)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := r.c.Create(ctx, j); err != nil {
		return err
	}
	if err := tr.waitFor("burst-", n, r.opts.timeout, "completed sessions", func(t *tracked) bool { return t.phase.IsTerminal() }); err != nil {
		return err
	}
	res.StepSeconds = time.Since(t0).Seconds()
	stopProfile()
	stopAPIProfile()
	if bad := tr.count("burst-", func(t *tracked) bool { return t.phase != flowv1.PhaseCompleted }); bad > 0 {
		return fmt.Errorf("%d sessions ended but did not complete: %s", bad, tr.phases("burst-"))
	}
	res.Steps = tr.steps("burst-")
	res.StepRate = float64(res.Steps) / res.StepSeconds
	res.Load = loadAverage()
	after := gather()
	if res.Steps > 0 {
		res.StepCPU = perUnit(readCPU().sub(cpuBefore), float64(res.Steps))
		res.ReconcilesPer = (after["reconciles"] - before["reconciles"]) / float64(res.Steps)
		res.ConflictsPer = (after["conflicts"] - before["conflicts"]) / float64(res.Steps)
		res.EventsDropped = after["eventsDropped"] - before["eventsDropped"]
	}
	logf("CPU ms per plain write %v, per operator step %v", res.PlainCPU, res.StepCPU)
	logf("operator: %d steps in %.1fs = %.0f steps/s (%.2fx the plain client), %.2f reconciles and %.2f conflicts per step, load average %s",
		res.Steps, res.StepSeconds, res.StepRate, res.ratio(), res.ReconcilesPer, res.ConflictsPer, res.Load)
	return nil
}

// idle measures turn latency with nothing else going on: one message at a time.
func (r *run) idle(ctx context.Context) error {
	res, tr, conversation := r.res, r.tr, r.smp.session.Spec.Messages
	idleBefore := gather()
	for i := range r.opts.idleSessions {
		name := fmt.Sprintf("idle-%03d", i)
		if err := r.c.Create(ctx, newSession(r.smp, name, nil)); err != nil {
			return err
		}
		if err := tr.waitFor(name, 1, r.opts.timeout, "idle session waiting for input", waiting); err != nil {
			return err
		}
		for k := range conversation {
			if err := send(ctx, r.c, tr, name, k, conversation[k]); err != nil {
				return err
			}
			if err := tr.waitFor(name, 1, r.opts.timeout, "idle message processed", func(t *tracked) bool { return int(t.processed) > k }); err != nil {
				return err
			}
		}
	}
	res.IdleConflicts = gather()["conflicts"] - idleBefore["conflicts"]
	idle := tr.latencies("idle-")
	res.IdleCount = len(idle)
	res.IdleP50, res.IdleP99 = ms(percentile(idle, 0.5)), ms(percentile(idle, 0.99))
	logf("idle turn latency: p50 %.1fms p99 %.1fms over %d messages, %.0f write conflicts", res.IdleP50, res.IdleP99, res.IdleCount, res.IdleConflicts)
	return nil
}

// loaded measures turn latency under load: conversations paced at a fraction of the
// measured step rate, each user sending the next message once the last one is
// processed. Events are written asynchronously: the burst's are counted after it.
func (r *run) loaded(ctx context.Context) error {
	if err := loaded(ctx, r.c, r.tr, r.smp, r.opts, r.n, r.res); err != nil {
		return err
	}
	if events, err := countEvents(ctx, r.c, "burst-"); err == nil && r.res.Steps > 0 {
		r.res.EventsPerStep = float64(events) / float64(r.res.Steps)
	}
	return nil
}

// heap measures the manager's heap per Session: everything the harness holds is
// dropped first.
func (r *run) heap(ctx context.Context) error {
	res := r.res
	var list flowv1.SessionList
	if err := r.mgr.GetCache().List(ctx, &list, client.InNamespace(benchNamespace)); err != nil {
		return err
	}
	res.CachedSessions = len(list.Items)
	list = flowv1.SessionList{}
	r.tr.release()
	heap1 := heapAlloc()
	if r.opts.memProfile != "" {
		if err := writeHeapProfile(fmt.Sprintf("%s-%d-%s", r.opts.memProfile, r.n, r.mode)); err != nil {
			return err
		}
	}
	res.HeapPerSession = float64(int64(heap1)-int64(r.heap0)) / float64(res.CachedSessions)
	res.HeapBase = float64(r.heap0)
	logf("manager heap: %.1f KiB per session (%d sessions cached) over %.1f MiB without Sessions", res.HeapPerSession/1024, res.CachedSessions, res.HeapBase/(1<<20))
	return nil
}

// gather reads the manager's metrics: Session reconciles and status conflicts.
func gather() map[string]float64 {
	out := map[string]float64{}
	families, err := metrics.Registry.Gather()
	if err != nil {
		return out
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case "controller_runtime_reconcile_total":
				if labels["controller"] == "session" {
					out["reconciles"] += m.GetCounter().GetValue()
				}
			case "journey_events_dropped_total":
				out["eventsDropped"] += m.GetCounter().GetValue()
			case "rest_client_requests_total":
				if labels["code"] == "409" {
					out["conflicts"] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// countEvents counts the Events about Sessions whose name starts with prefix (Events
// are named <object>.<timestamp>), reading metadata only.
func countEvents(ctx context.Context, c client.Client, prefix string) (int, error) {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(eventsv1.SchemeGroupVersion.WithKind("EventList"))
	if err := c.List(ctx, &list, client.InNamespace(benchNamespace)); err != nil {
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

// startProfile writes a CPU profile of the throughput phase to path-<n>-<mode>.
func startProfile(path string, n int, mode controller.AdvanceMode) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	return startCPUProfile(fmt.Sprintf("%s-%d-%s", path, n, mode))
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

// personal makes the messages of a Session its own when a remote agent answers them,
// so the intent cache does not answer for it.
func personal(msgs []flowv1.Message, name string, on bool) []flowv1.Message {
	if !on {
		return msgs
	}
	out := make([]flowv1.Message, len(msgs))
	for i, m := range msgs {
		out[i] = flowv1.Message{ID: m.ID, Text: m.Text + " (" + name + ")"}
	}
	return out
}

func waiting(t *tracked) bool { return t.phase == flowv1.PhaseWaitingForInput }

// waitingSessions creates users Sessions load-00000... and waits until they wait for
// input.
func waitingSessions(ctx context.Context, c client.Client, tr *tracker, smp *sample, users int, timeout time.Duration) ([]*flowv1.Session, error) {
	sessions := make([]*flowv1.Session, users)
	for i := range sessions {
		sessions[i] = newSession(smp, fmt.Sprintf("load-%05d", i), nil)
	}
	if _, err := createSessions(ctx, c, 16, sessions); err != nil {
		return nil, err
	}
	return sessions, tr.waitFor("load-", users, timeout, "loaded sessions waiting for input", waiting)
}

// loaded sends messages at opts.load times the measured step rate.
func loaded(ctx context.Context, c client.Client, tr *tracker, smp *sample, opts *options, n int, res *result) error {
	conversation := smp.session.Spec.Messages
	total := min(opts.loadedMessages, n*len(conversation))
	users := (total + len(conversation) - 1) / len(conversation)
	rate := opts.load * res.StepRate
	if rate <= 0 || users == 0 {
		return nil
	}
	sessions, err := waitingSessions(ctx, c, tr, smp, users, opts.timeout)
	if err != nil {
		return err
	}
	// ready holds users whose last message has been processed.
	ready := make(chan int, users)
	for i := range users {
		ready <- i
	}
	sent := make([]int, users)
	inflight := make(map[int]bool)
	interval := time.Duration(float64(time.Second) / rate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	errs := make(chan error, 1)
	start := time.Now()
	deadline := start.Add(opts.timeout)
	count := 0
	for count < total {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errs:
			return err
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("loaded phase: %d of %d messages sent after %s", count, total, opts.timeout)
		}
		// Return users whose message was processed to the ready queue.
		for u := range inflight {
			if int(tr.processed(sessions[u].Name)) >= sent[u] {
				delete(inflight, u)
				if sent[u] < len(conversation) {
					ready <- u
				}
			}
		}
		select {
		case u := <-ready:
			k := sent[u]
			sent[u]++
			inflight[u] = true
			count++
			go func() {
				if err := send(ctx, c, tr, sessions[u].Name, k, conversation[k]); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}()
		default: // every user is waiting for a reply: the operator is behind
		}
	}
	res.LoadedRate = float64(count) / time.Since(start).Seconds()
	if err := tr.waitFor("load-", users, opts.timeout, "loaded messages processed", func(t *tracked) bool {
		return t.processed > 0 && len(t.sent) == int(t.processed)
	}); err != nil {
		return err
	}
	lat := tr.latencies("load-")
	res.LoadedCount = len(lat)
	res.LoadedP50, res.LoadedP99 = ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99))
	logf("loaded turn latency at %.0f messages/s: p50 %.1fms p99 %.1fms over %d messages", res.LoadedRate, res.LoadedP50, res.LoadedP99, res.LoadedCount)
	return nil
}

// send appends message k to the Session, as kubectl journey say does.
func send(ctx context.Context, c client.Client, tr *tracker, name string, k int, m flowv1.Message) error {
	op := []map[string]any{{"op": "add", "path": "/spec/messages/-", "value": m}}
	if k == 0 {
		op = []map[string]any{{"op": "add", "path": "/spec/messages", "value": []flowv1.Message{m}}}
	}
	raw, err := json.Marshal(op)
	if err != nil {
		return err
	}
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: name}}
	tr.markSent(name, k, time.Now())
	return c.Patch(ctx, s, client.RawPatch(types.JSONPatchType, raw))
}

func newSession(smp *sample, name string, messages []flowv1.Message) *flowv1.Session {
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: name}}
	s.Spec = *smp.session.Spec.DeepCopy()
	s.Spec.Messages = append([]flowv1.Message(nil), messages...)
	return s
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
