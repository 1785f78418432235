// Command bench measures the operator end to end on a local control plane (kube-apiserver
// and etcd built from source) with the builtin agent: steps per second against what a
// plain client can write, turn latency, and manager heap per Session, in both advance
// modes.
//
//	make bench                                  # 100 and 1,000 Sessions, watch and requeue
//	BENCH_SESSIONS=10000 BENCH_ADVANCE=watch make bench
//	go run ./test/bench -h                      # every knob
//
// For each size and mode it starts a fresh control plane and:
//  1. has a plain client write, for up to 500 Sessions, the statuses the pure engine
//     produces for the sample's conversation, step by step, as the operator writes
//     them (merge patch, resourceVersion precondition), with as many workers as the
//     manager has and with 4x as many: the physical limit of one write per step;
//  2. starts a manager configured like cmd/manager (client QPS and burst, workers, cache
//     options) in the same process;
//  3. creates n Sessions of the healthcare-referral sample, each with its whole
//     conversation, before their Journey exists; creating the Journey releases them all,
//     and the steps they take until every one has completed, over the time that took,
//     is the step rate;
//  4. sends the conversation of a few Sessions one message at a time (idle latency);
//  5. paces conversations at a fraction of the step rate (loaded latency);
//  6. reads the heap after GC with every Session in the cache, minus the heap of the
//     same manager before it had any Session.
//
// Turn latency runs from just before the message is sent to the moment the manager's
// informer sees a status whose processedMessages covers it. CPU time per plain write
// and per operator step is read from /proc for the kube-apiserver, etcd and this
// process, which is steadier than rates on a shared machine. -llm-latency makes the
// intent classifier a remote agent that answers after a delay; -cpuprofile,
// -memprofile and -apiserver-profile write profiles.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
)

var scheme = testenv.Scheme

type options struct {
	sizes          []int
	modes          []controller.AdvanceMode
	concurrency    int
	qps            float64
	burst          int
	strip          bool
	load           float64
	loadedMessages int
	idleSessions   int
	timeout        time.Duration
	sample         string
	jsonOut        string
	cpuProfile     string
	memProfile     string
	apiProfile     string
	llmLatency     time.Duration
	longWindow     int
}

func main() {
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))

	opts := &options{}
	var sizes, modes string
	flag.StringVar(&sizes, "sessions", env("BENCH_SESSIONS", "100,1000"), "Comma-separated numbers of Sessions, one run each ($BENCH_SESSIONS).")
	flag.StringVar(&modes, "advance", env("BENCH_ADVANCE", "watch,requeue"), "Comma-separated advance modes to compare ($BENCH_ADVANCE).")
	flag.IntVar(&opts.concurrency, "max-concurrent-reconciles", envInt("BENCH_CONCURRENCY", controller.DefaultMaxConcurrentReconciles), "Manager workers, as the manager flag ($BENCH_CONCURRENCY).")
	flag.Float64Var(&opts.qps, "kube-api-qps", envFloat("BENCH_QPS", 200), "Manager client QPS, as the manager flag ($BENCH_QPS).")
	flag.IntVar(&opts.burst, "kube-api-burst", envInt("BENCH_BURST", 400), "Manager client burst, as the manager flag ($BENCH_BURST).")
	flag.BoolVar(&opts.strip, "strip-managed-fields", env("BENCH_STRIP", "true") == "true", "Drop managedFields in the manager's cache, as cmd/manager does ($BENCH_STRIP).")
	flag.Float64Var(&opts.load, "load", 0.25, "Loaded latency: offered messages per second as a fraction of the measured step rate (each message costs a user write, a step write and about one Event).")
	flag.IntVar(&opts.loadedMessages, "loaded-messages", 1000, "Loaded latency: messages to send (5 per conversation).")
	flag.IntVar(&opts.idleSessions, "idle-sessions", 10, "Idle latency: conversations sent one message at a time.")
	flag.DurationVar(&opts.timeout, "timeout", 20*time.Minute, "Longest wait for any phase of a run.")
	flag.StringVar(&opts.sample, "sample", "healthcare-referral", "Sample of config/samples to run.")
	flag.StringVar(&opts.jsonOut, "json", "", "Also write the results as JSON to this file.")
	flag.StringVar(&opts.cpuProfile, "cpuprofile", "", "Write a CPU profile of each throughput phase to <file>-<sessions>-<advance>.")
	flag.StringVar(&opts.memProfile, "memprofile", "", "Write a heap profile, taken when the heap is measured, to <file>-<sessions>-<advance>.")
	flag.StringVar(&opts.apiProfile, "apiserver-profile", "", "Write 15-second CPU profiles of the kube-apiserver, during the plain client and the throughput phase, to <file>-<phase>-<sessions>-<advance>.")
	flag.DurationVar(&opts.llmLatency, "llm-latency", 0, "Make the journey's intent classifier a remote (openai) agent answering after this long, e.g. 200ms (0: all builtin).")
	var longSessions string
	var longMessages int
	flag.IntVar(&longMessages, "long", envInt("BENCH_LONG", 0), "Long-conversation mode: messages each Session takes (0: off; make bench-long uses 5000) ($BENCH_LONG).")
	flag.IntVar(&opts.longWindow, "long-window", envInt("BENCH_LONG_WINDOW", 10), "Long-conversation mode: turns measured at each checkpoint, ending there; with -cpuprofile and -apiserver-profile, checkpoints from message 1,000 on are profiled ($BENCH_LONG_WINDOW).")
	flag.StringVar(&longSessions, "long-sessions", env("BENCH_LONG_SESSIONS", "1,100"), "Long-conversation mode: comma-separated numbers of Sessions in parallel, one run each ($BENCH_LONG_SESSIONS).")
	flag.Parse()
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
	smp, err := loadSample(opts.sample)
	if err != nil {
		fatal(err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	var results []*result
	for _, n := range opts.sizes {
		for _, mode := range opts.modes {
			res, err := runOne(ctx, opts, smp, n, mode)
			if err != nil {
				fatal(fmt.Errorf("%d sessions, advance %s: %w", n, mode, err))
			}
			results = append(results, res)
		}
	}
	report(os.Stdout, opts, results)
	if opts.jsonOut != "" {
		raw, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(opts.jsonOut, append(raw, '\n'), 0o644); err != nil {
			fatal(err)
		}
	}
}

func report(w *os.File, opts *options, results []*result) {
	fmt.Fprintf(w, "\nMachine: %d CPUs, %s %s/%s. Manager: %d workers, client QPS %g burst %d, managedFields dropped: %v.\n\n",
		runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH, opts.concurrency, opts.qps, opts.burst, opts.strip)
	fmt.Fprintln(w, "| sessions | advance | plain client patches/s (workers) | operator steps/s | ratio | idle turn p50 / p99 | loaded turn p50 / p99 (msg/s) | CPU ms per step / per plain write | heap/session | events / reconciles / conflicts per step | load avg |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		fmt.Fprintf(w, "| %d | %s | %.0f (%d) / %.0f (%d) | %.0f | %.2f | %.1f / %.1f ms | %.1f / %.1f ms (%.0f) | %.1f / %.1f | %.1f KiB | %.2f / %.2f / %.2f | %s |\n",
			r.Sessions, r.Advance, r.PlainRate, r.Concurrency, r.PlainRateWide, r.PlainWide, r.StepRate, r.ratio(),
			r.IdleP50, r.IdleP99, r.LoadedP50, r.LoadedP99, r.LoadedRate, total(r.StepCPU), total(r.PlainCPU), r.HeapPerSession/1024, r.EventsPerStep, r.ReconcilesPer, r.ConflictsPer, r.Load)
	}
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
