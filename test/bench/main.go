// Command bench measures the operator end to end on a local control plane (kube-apiserver
// and etcd built from source), in turns: a turn is one user message and its reply, the
// unit users pay for in API-server CPU, etcd writes and latency.
//
//	make bench                                  # 100 and 1,000 Sessions, three journeys
//	make bench BENCH_SESSIONS=10000             # 10,000 Sessions
//	go run ./test/bench -h                      # every knob
//
// For each journey (builtin, llm, react), number of Sessions n and advance mode it
// starts a fresh control plane and a manager configured like cmd/manager (client QPS
// and burst, workers, cache options) in this process, creates the journey and n
// Sessions waiting for their first message, and measures:
//
//  1. calibration: one more Session takes the run's turns alone; its status after each
//     turn, as stored, is what the operator wrote for that turn;
//  2. (a) the plain pair: a plain client makes each turn's two writes, the user's
//     message (the JSON patch kubectl journey say sends) and one status merge patch of
//     the calibration's bytes for that turn under the resourceVersion precondition,
//     with as many workers as the manager has: the least a turn can cost, in turns/s.
//     It runs twice, on Sessions of its own, before the operator's phases and after
//     them, and the better pass (higher rate, lower CPU) is the limit: on a shared
//     machine the load drifts during a run;
//  3. (b) closed loop: every conversation sends its next message when the reply
//     arrives; a turn ends when the manager's informer sees the Session wait for input
//     with the message processed. Turns/s, and the ratio to (a);
//  4. (b) paced: turns offered at a fixed rate, open loop, to conversations not waiting
//     for a reply, each probe on n new Sessions that took their first turn before it
//     (at most the run's turns each, as the plain pair's probes); the highest rate
//     whose turn p99 stays under -p99 (plus the model's latency for each model call of
//     a turn) is found by bisection over (0, 1.25x the closed loop's rate], -probes
//     steps of -probe-duration probes, each after the Events of the turns before are
//     written and the cluster is quiet, a failed probe made once more. Each probe
//     logs what its turns waited for in the manager (the Session workqueue's wait and
//     reconcile time, reconciles by result, client rate limiting, the API server's
//     PATCH answer times: queue.go). Then the plain pair is paced the same way, on
//     Sessions of its own, at the operator's best rate and at the goal's (0.6x the
//     plain pair): whether the latency limit is the operator's or the machine's;
//  5. (c) cluster CPU (kube-apiserver, etcd and this process, from /proc) per turn of
//     the closed loop against per plain pair;
//  6. (d) status writes per turn, counted by a watch of the Sessions' metadata (every
//     write is an event; one that did not raise metadata.generation wrote status);
//  7. (e) the manager's heap per cached Session after GC, over the heap it had before
//     any Session.
//
// The llm and react journeys' model (internal/testenv's chat server, answering after
// -llm-latency) and the react journey's MCP server (the clinic) run in a child process,
// so their CPU is not counted as the cluster's. -burst adds the former headline, the
// burst of whole conversations, as a secondary line; -long runs the long-conversation
// mode instead. -cpuprofile, -memprofile and -apiserver-profile write profiles.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
)

var scheme = testenv.Scheme

type options struct {
	sizes         []int
	modes         []controller.AdvanceMode
	journeys      []string
	concurrency   int
	qps           float64
	burst         int
	transform     string
	minTurns      int
	plainSessions int
	senders       int
	p99           time.Duration
	probes        int
	probeDuration time.Duration
	modelLatency  time.Duration
	timeout       time.Duration
	sample        string
	burstRun      bool
	jsonOut       string
	cpuProfile    string
	memProfile    string
	apiProfile    string
	longWindow    int
}

// Cache transforms (-cache-transform).
const (
	transformDefault       = "default"        // controller.CacheOptions, as cmd/manager
	transformManagedFields = "managed-fields" // managedFields dropped only
	transformNone          = "none"           // the objects as the API server sends them
)

// cacheOptions are the manager's cache options for -cache-transform.
func (o *options) cacheOptions() cache.Options {
	opts := controller.CacheOptions(nil)
	switch o.transform {
	case transformManagedFields:
		opts.DefaultTransform = cache.TransformStripManagedFields()
		for obj, by := range opts.ByObject {
			by.Transform = nil
			opts.ByObject[obj] = by
		}
	case transformNone:
		opts.DefaultTransform = nil
		for obj, by := range opts.ByObject {
			by.Transform = nil
			opts.ByObject[obj] = by
		}
	}
	return opts
}

//nolint:funlen // the flags, then the runs they ask for
func main() {
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))
	// How long the manager's requests wait for its client's rate limiter, and for
	// the API server (queue.go).
	metrics.RegisterRESTClientMetrics(metrics.MetricRateLimiterLatency, metrics.MetricRequestLatency)

	opts := &options{}
	var sizes, modes, journeys, serve string
	var strip bool
	flag.StringVar(&sizes, "sessions", env("BENCH_SESSIONS", "100,1000"), "Comma-separated numbers of Sessions, one run each ($BENCH_SESSIONS).")
	flag.StringVar(&journeys, "journeys", env("BENCH_JOURNEYS", strings.Join(allJourneys, ",")), "Comma-separated journeys: builtin (no model call), llm (an openai pathway agent and an openai decision agent: two model calls a turn), react (an openai agent calling one MCP tool: two model calls and a tool call a turn); empty for none ($BENCH_JOURNEYS).")
	flag.StringVar(&modes, "advance", env("BENCH_ADVANCE", "watch"), "Comma-separated advance modes, one run each: watch, requeue ($BENCH_ADVANCE).")
	flag.IntVar(&opts.concurrency, "max-concurrent-reconciles", envInt("BENCH_CONCURRENCY", controller.DefaultMaxConcurrentReconciles), "Manager workers, as the manager flag; the plain pair has as many ($BENCH_CONCURRENCY).")
	flag.Float64Var(&opts.qps, "kube-api-qps", envFloat("BENCH_QPS", 200), "Manager client QPS, as the manager flag ($BENCH_QPS).")
	flag.IntVar(&opts.burst, "kube-api-burst", envInt("BENCH_BURST", 400), "Manager client burst, as the manager flag ($BENCH_BURST).")
	flag.StringVar(&opts.transform, "cache-transform", env("BENCH_TRANSFORM", transformDefault), "The manager's cache transforms: default (as cmd/manager: controller.CacheOptions), managed-fields (managedFields dropped only) or none ($BENCH_TRANSFORM).")
	flag.BoolVar(&strip, "strip-managed-fields", true, "false is -cache-transform none.")
	flag.IntVar(&opts.minTurns, "turns", envInt("BENCH_TURNS", 1000), "Turns of the closed loop and of the plain pair, about: each Session takes ceil(turns/sessions), at least one ($BENCH_TURNS).")
	flag.IntVar(&opts.plainSessions, "plain-sessions", 1000, "Sessions of the plain pair, at most (each takes the same turns as the operator's).")
	flag.IntVar(&opts.senders, "senders", 64, "User writes in flight at most, however many conversations send at once.")
	flag.DurationVar(&opts.p99, "p99", 250*time.Millisecond, "Paced rate: the turn p99 to stay under, over the model's own latency.")
	flag.IntVar(&opts.probes, "probes", envInt("BENCH_PROBES", 6), "Paced rate: steps of the bisection; a step whose probe fails probes once more ($BENCH_PROBES).")
	flag.DurationVar(&opts.probeDuration, "probe-duration", 10*time.Second, "Paced rate: how long each probe offers turns.")
	flag.DurationVar(&opts.modelLatency, "llm-latency", 50*time.Millisecond, "The chat server's fixed latency, for the llm and react journeys.")
	flag.DurationVar(&opts.timeout, "timeout", 20*time.Minute, "Longest wait for any phase of a run.")
	flag.BoolVar(&opts.burstRun, "burst", env("BENCH_BURST_RUN", "") != "", "Also run the former headline, the burst, as a secondary line: Sessions created with their whole conversation of -sample, released at once; batched pure steps, not turns ($BENCH_BURST_RUN).")
	flag.StringVar(&opts.sample, "sample", "healthcare-referral", "The burst's sample of config/samples.")
	flag.StringVar(&opts.jsonOut, "json", "", "Also write the results as JSON to this file.")
	flag.StringVar(&opts.cpuProfile, "cpuprofile", "", "Write a CPU profile of this process (manager and harness) during each closed loop to <file>-closed-<journey>-<sessions>-<advance>.")
	flag.StringVar(&opts.memProfile, "memprofile", "", "Write a heap profile, taken when the heap is measured, to <file>-heap-<journey>-<sessions>-<advance>.")
	flag.StringVar(&opts.apiProfile, "apiserver-profile", "", "Write 15-second CPU profiles of the kube-apiserver, at the start of the plain pair and of the closed loop, to <file>-<plain|operator>-<journey>-<sessions>-<advance>.")
	for _, old := range []struct{ name, instead string }{
		{"load", "replaced: the paced rate is searched (-p99, -probes, -probe-duration)"},
		{"loaded-messages", "replaced: -probe-duration bounds each paced probe"},
		{"idle-sessions", "replaced: the calibration Session takes its turns alone; its latency is the closed loop's with one Session"},
	} {
		flag.String(old.name, "", "Ignored ("+old.instead+").")
	}
	var longSessions string
	var longMessages int
	flag.IntVar(&longMessages, "long", envInt("BENCH_LONG", 0), "Long-conversation mode: messages each Session takes (0: off; make bench-long uses 5000) ($BENCH_LONG).")
	flag.IntVar(&opts.longWindow, "long-window", envInt("BENCH_LONG_WINDOW", 10), "Long-conversation mode: turns measured at each checkpoint, ending there; with -cpuprofile and -apiserver-profile, checkpoints from message 1,000 on are profiled ($BENCH_LONG_WINDOW).")
	flag.StringVar(&longSessions, "long-sessions", env("BENCH_LONG_SESSIONS", "1,100"), "Long-conversation mode: comma-separated numbers of Sessions in parallel, one run each ($BENCH_LONG_SESSIONS).")
	flag.StringVar(&serve, "serve-models", "", "Internal: serve the model and the MCP server with this latency, for the bench's child process.")
	flag.Parse()
	if serve != "" {
		d, err := time.ParseDuration(serve)
		if err != nil {
			fatal(err)
		}
		serveModels(d)
		return
	}
	if !strip {
		opts.transform = transformNone
	}
	switch opts.transform {
	case transformDefault, transformManagedFields, transformNone:
	default:
		fatal(fmt.Errorf("unknown -cache-transform %q", opts.transform))
	}
	if longMessages > 0 {
		mainLong(opts, longSessions, longMessages)
		return
	}
	if opts.memProfile != "" {
		runtime.MemProfileRate = 4096
	}
	var err error
	if opts.sizes, err = parseInts(sizes); err != nil {
		fatal(err)
	}
	for _, m := range strings.Split(modes, ",") {
		switch mode := controller.AdvanceMode(strings.TrimSpace(m)); mode {
		case controller.AdvanceWatch, controller.AdvanceRequeue:
			opts.modes = append(opts.modes, mode)
		default:
			fatal(fmt.Errorf("unknown advance mode %q", m))
		}
	}
	for _, j := range strings.Split(journeys, ",") {
		if j = strings.TrimSpace(j); j == "" {
			continue
		}
		if _, _, err := journeyObjects(j, "", endpoints{}); err != nil {
			fatal(err)
		}
		opts.journeys = append(opts.journeys, j)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	var results []*result
	var bursts []*burstResult
	for _, n := range opts.sizes {
		for _, mode := range opts.modes {
			for _, j := range opts.journeys {
				res, err := runOne(ctx, opts, j, n, mode)
				if err != nil {
					fatal(fmt.Errorf("%s journey, %d sessions, advance %s: %w", j, n, mode, err))
				}
				results = append(results, res)
			}
			if opts.burstRun {
				smp, err := loadSample(opts.sample)
				if err != nil {
					fatal(err)
				}
				b, err := runBurst(ctx, opts, smp, n, mode)
				if err != nil {
					fatal(fmt.Errorf("burst, %d sessions, advance %s: %w", n, mode, err))
				}
				bursts = append(bursts, b)
			}
		}
	}
	report(os.Stdout, opts, results, bursts)
	if opts.jsonOut != "" {
		raw, _ := json.MarshalIndent(map[string]any{"turns": results, "bursts": bursts}, "", "  ")
		if err := os.WriteFile(opts.jsonOut, append(raw, '\n'), 0o644); err != nil {
			fatal(err)
		}
	}
}

// report prints the results as one table, the bursts as secondary lines, and the goals.
func report(w io.Writer, opts *options, results []*result, bursts []*burstResult) {
	fmt.Fprintf(w, "\nMachine: %d CPUs, %s %s/%s, load %s. Manager: %d workers, client QPS %g burst %d, cache transform %s. Model latency %s (llm, react).\n\n",
		runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH, loadAverage(), opts.concurrency, opts.qps, opts.burst, opts.transform, opts.modelLatency)
	fmt.Fprintln(w, "| journey | Sessions | advance | (a) plain pair turns/s (pass 1 / 2) | (b) closed-loop turns/s (x a) | (b) paced turns/s at p99 < limit (x a) | paced p50 / p99 | (c) cluster CPU ms per turn / per plain pair (x) | (d) status writes per turn | model / tool calls per turn | CPU ms per model call (x builtin turn) | (e) heap per Session (turns, bytes each) | load |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	builtin := map[string]*result{}
	for _, r := range results {
		if r.Journey == journeyBuiltin {
			builtin[fmt.Sprint(r.Sessions, r.Advance)] = r
		}
	}
	for _, r := range results {
		perCall := "-"
		if r.ModelCalls > 0 {
			perCall = fmt.Sprintf("%.1f", r.cpuPerModelCall())
			if b := builtin[fmt.Sprint(r.Sessions, r.Advance)]; b != nil {
				perCall += fmt.Sprintf(" (%.2fx)", ratio(r.cpuPerModelCall(), total(b.TurnCPU)))
			}
		}
		passes := make([]string, len(r.PlainPasses))
		for i, p := range r.PlainPasses {
			passes[i] = fmt.Sprintf("%.1f", p.Rate)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.1f (%s) | %.1f (%.2fx) | %.1f at %.0f ms (%.2fx) | %.1f / %.1f ms | %.1f / %.1f (%.2fx) | %.2f | %.2f / %.2f | %s | %.1f KiB (%.1f, %.0f B) | %s / %s |\n",
			r.Journey, r.Sessions, r.Advance, r.PlainRate, strings.Join(passes, " / "), r.ClosedRate, r.closedRatio(), r.Paced.Offered, r.PacedLimit, r.pacedRatio(),
			r.Paced.P50, r.Paced.P99, total(r.TurnCPU), total(r.PlainCPU), r.cpuRatio(), r.StatusWrites, r.ModelCalls, r.ToolCalls, perCall,
			r.HeapPerSession/1024, r.TurnsAtHeap, r.SessionBytes, r.Load, r.LoadEnd)
	}
	for _, b := range bursts {
		fmt.Fprintf(w, "\nBurst (secondary; batched: %d %s Sessions created with their whole %d-message conversation, released at once; measures batching, not turns): %.0f engine steps/s, %.1f Sessions/s, %.2f status writes a Session, %.2f ms cluster CPU a step, heap %.1f KiB per completed Session (%.0f bytes each), advance %s, load %s.\n",
			b.Sessions, b.Sample, b.Messages, b.StepRate, b.SessionRate, b.Writes, total(b.StepCPU), b.HeapPerSession/1024, b.SessionBytes, b.Advance, b.Load)
	}
	fmt.Fprintln(w, "\nGoals (issue 27):")
	for _, r := range results {
		switch {
		case r.Journey == journeyBuiltin:
			fmt.Fprintf(w, "- builtin, %d Sessions: paced turns/s at p99 < %.0f ms %.2fx the plain pair (goal >= 0.6): %s; cluster CPU per turn %.2fx the plain pair (goal <= 1.1): %s; %.2f status writes a turn (goal 1): %s\n",
				r.Sessions, r.PacedLimit, r.pacedRatio(), met(r.pacedRatio() >= 0.6), r.cpuRatio(), met(r.cpuRatio() <= 1.1), r.StatusWrites, met(r.StatusWrites <= 1.005))
			for _, p := range r.PlainPaced {
				fmt.Fprintf(w, "  - the plain pair paced at the operator's rate, %.1f turns/s (%.2fx its rate): p50 %.1f ms, p99 %.1f ms: %s the limit\n",
					p.Offered, ratio(p.Offered, r.PlainRate), p.P50, p.P99, map[bool]string{true: "within", false: "over"}[p.Pass])
			}
			b := r.PlainPacedBest
			fmt.Fprintf(w, "  - the plain pair's own highest paced rate under the limit, searched as the operator's: %.1f turns/s (%.2fx its closed-loop rate; p50 %.1f ms, p99 %.1f ms); the operator's paced rate is %.2fx it\n",
				b.Offered, ratio(b.Offered, r.PlainRate), b.P50, b.P99, ratio(r.Paced.Offered, b.Offered))
		default:
			b := builtin[fmt.Sprint(r.Sessions, r.Advance)]
			if b == nil {
				continue
			}
			x := ratio(r.cpuPerModelCall(), total(b.TurnCPU))
			fmt.Fprintf(w, "- %s, %d Sessions: cluster CPU per model call %.2fx the builtin turn (goal <= 1.2): %s; %.2f status writes a turn for %.2f model calls (goal: one per model call): %s\n",
				r.Journey, r.Sessions, x, met(x <= 1.2), r.StatusWrites, r.ModelCalls, met(r.StatusWrites <= r.ModelCalls+0.005))
		}
	}
	for _, r := range results {
		if r.Sessions >= 10000 {
			fmt.Fprintf(w, "- %s, %d Sessions: heap %.1f KiB per Session of %.1f turns (goal < 8): %s\n", r.Journey, r.Sessions, r.HeapPerSession/1024, r.TurnsAtHeap, met(r.HeapPerSession < 8*1024))
		}
	}
	for _, b := range bursts {
		if b.Sessions >= 10000 {
			fmt.Fprintf(w, "- burst, %d completed %s Sessions: heap %.1f KiB per Session (goal < 8): %s\n", b.Sessions, b.Sample, b.HeapPerSession/1024, met(b.HeapPerSession < 8*1024))
		}
	}
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// total sums CPU milliseconds over processes.
func total(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

func envFloat(key string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(key), 64); err == nil {
		return v
	}
	return def
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad number of sessions %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// mainLong runs the long-conversation mode: one run per number of Sessions.
func mainLong(opts *options, sessions string, messages int) {
	ns, err := parseInts(sessions)
	if err != nil {
		fatal(err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var results []*longResult
	for _, n := range ns {
		r, err := runLong(ctx, opts, n, messages)
		if err != nil {
			fatal(fmt.Errorf("long conversations, %d sessions: %w", n, err))
		}
		results = append(results, r)
	}
	fmt.Printf("\nMachine: %d CPUs, %s %s/%s, load %s.\n", runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH, loadAverage())
	for _, r := range results {
		reportLong(r)
	}
	if opts.jsonOut != "" {
		raw, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(opts.jsonOut, append(raw, '\n'), 0o644); err != nil {
			fatal(err)
		}
	}
}
