package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/plugin"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// The long-conversation mode: Sessions of a one-pathway builtin chat each take a long
// conversation through kubectl journey say (which drops processed messages in the
// patch that appends), one message at a time, waiting for each reply. At checkpoints
// it measures, over the ten turns that end there: the stored size of the largest
// Session, turn latency, and the cluster's CPU (kube-apiserver, etcd, manager) per
// turn. Flat figures mean a turn costs the same however long the conversation.

// longPoint is what one checkpoint measured.
type longPoint struct {
	Message    int                `json:"message"`
	Bytes      int                `json:"objectBytes"`
	P50        float64            `json:"turnP50ms"`
	P99        float64            `json:"turnP99ms"`
	CPUPerTurn map[string]float64 `json:"cpuMsPerTurn"`
}

// longResult is one long-conversation run.
type longResult struct {
	Sessions int         `json:"sessions"`
	Messages int         `json:"messages"`
	Points   []longPoint `json:"points"`
}

// longCheckpoints are the messages measured, those within messages.
func longCheckpoints(messages int) []int {
	var out []int
	for _, m := range []int{10, 100, 1000, 5000} {
		if m <= messages {
			out = append(out, m)
		}
	}
	if len(out) == 0 || out[len(out)-1] != messages {
		out = append(out, messages)
	}
	return out
}

// runLong runs sessions Sessions through messages messages each.
func runLong(ctx context.Context, opts *options, sessions, messages int) (*longResult, error) {
	logf("long conversations: %d Session(s), %d messages each: starting a control plane", sessions, messages)
	env, err := testenv.Start()
	if err != nil {
		return nil, err
	}
	defer func() { _ = env.Stop() }()
	c, err := harnessClient(env.Config)
	if err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}); err != nil {
		return nil, err
	}
	mgr, err := env.NewManager(testenv.ManagerOptions{
		Namespaces: []string{benchNamespace}, Cache: opts.cacheOptions(),
		QPS: float32(opts.qps), Burst: opts.burst,
		Setup: func(mgr ctrl.Manager) error {
			return controller.Setup(mgr, controller.Options{MaxConcurrentReconciles: opts.concurrency})
		},
	})
	if err != nil {
		return nil, err
	}
	mgr.Start()
	defer func() { _ = mgr.Stop() }()
	tr := newTracker()
	inf, err := mgr.GetCache().GetInformer(ctx, &flowv1.Session{})
	if err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(tr.handler()); err != nil {
		return nil, err
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("cache did not sync")
	}
	names, err := createChats(ctx, c, sessions, messages)
	if err != nil {
		return nil, err
	}
	res := &longResult{Sessions: sessions, Messages: messages}
	done := 0
	for _, cp := range longCheckpoints(messages) {
		// Unmeasured turns up to the window, then the measured ones.
		from := max(done+1, cp-max(opts.longWindow, 1)+1)
		if _, err := longTurns(ctx, c, tr, names, done+1, from-1, opts.timeout); err != nil {
			return nil, err
		}
		stop, err := profileLong(ctx, opts, env, sessions, cp)
		if err != nil {
			return nil, err
		}
		cpu0 := readCPU()
		lat, err := longTurns(ctx, c, tr, names, from, cp, opts.timeout)
		cpu := readCPU().sub(cpu0)
		stop()
		if err != nil {
			return nil, err
		}
		p := longPoint{Message: cp, CPUPerTurn: perUnit(cpu, float64(len(lat)))}
		slices.Sort(lat)
		p.P50, p.P99 = ms(lat[len(lat)/2]), ms(lat[min(len(lat)-1, len(lat)*99/100)])
		if p.Bytes, err = largestSession(ctx, c, names); err != nil {
			return nil, err
		}
		logf("message %d: %d bytes, turn p50 %.1f ms p99 %.1f ms, %.2f ms cluster CPU a turn", cp, p.Bytes, p.P50, p.P99, total(p.CPUPerTurn))
		res.Points = append(res.Points, p)
		done = cp
	}
	return res, nil
}

// profileLong starts, for a checkpoint from message 1,000 on, a CPU profile of this
// process (manager and senders) to <cpuprofile>-long-<sessions>-<message> and one of
// the kube-apiserver to <apiserver-profile>-long-<sessions>-<message>, as asked; the
// returned function stops the first and waits for the second. The kube-apiserver is
// profiled for a fixed time from the window's start, so the window should last about
// as long (-long-window).
func profileLong(ctx context.Context, opts *options, env *testenv.Environment, sessions, message int) (func(), error) {
	if message < 1000 {
		return func() {}, nil
	}
	name := fmt.Sprintf("long-%d-%d", sessions, message)
	waitAPI := apiserverProfileFor(ctx, env.Config, opts.apiProfile, name, 10)
	if opts.cpuProfile == "" {
		return waitAPI, nil
	}
	stop, err := startCPUProfile(opts.cpuProfile + "-" + name)
	if err != nil {
		waitAPI()
		return nil, err
	}
	return func() {
		stop()
		waitAPI()
	}, nil
}

// createChats creates the chat journey and n Sessions of it.
func createChats(ctx context.Context, c client.Client, n, messages int) ([]string, error) {
	p := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: "chat"},
		Spec: flowv1.PathwaySpec{Accumulate: []string{"last"}, Builtin: &flowv1.BuiltinPathway{
			Reply: "noted", Complete: "false", Outputs: []flowv1.BuiltinOutput{{Name: "last", Expression: "message"}}}}}
	j := &flowv1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: "chat"}}
	j.Spec.EntryPathway = "chat"
	j.Spec.Pathways = []flowv1.PathwayEntry{{Name: "chat", PathwayRef: "chat"}}
	j.Spec.Limits.MaxTurns = int32(messages + 10)
	if err := c.Create(ctx, p); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, j); err != nil {
		return nil, err
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("long-%d", i)
		s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: names[i]},
			Spec: flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "chat"}}}
		if err := c.Create(ctx, s); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// longTurns has every Session take messages from..to, one at a time, each waiting for
// its reply (seen by the manager's informer), and returns the turn latencies.
func longTurns(ctx context.Context, c client.Client, tr *tracker, names []string, from, to int, timeout time.Duration) ([]time.Duration, error) {
	if from > to {
		return nil, nil
	}
	var mu sync.Mutex
	var lat []time.Duration
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			key := types.NamespacedName{Namespace: benchNamespace, Name: name}
			for i := from; i <= to; i++ {
				start := time.Now()
				text := fmt.Sprintf("message %d: %s", i, strings.Repeat("words ", 15))
				if _, _, err := plugin.SendMessage(ctx, c, key, fmt.Sprintf("m-%d", i), text); err != nil {
					errs <- fmt.Errorf("%s message %d: %w", name, i, err)
					return
				}
				end, err := tr.waitIdle(name, i, timeout)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				lat = append(lat, end.Sub(start))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return nil, err
	}
	return lat, nil
}

// largestSession is the JSON size of the largest of the Sessions, as stored.
func largestSession(ctx context.Context, c client.Client, names []string) (int, error) {
	largest := 0
	for _, name := range names {
		var s flowv1.Session
		if err := c.Get(ctx, types.NamespacedName{Namespace: benchNamespace, Name: name}, &s); err != nil {
			return 0, err
		}
		raw, err := json.Marshal(&s)
		if err != nil {
			return 0, err
		}
		largest = max(largest, len(raw))
	}
	return largest, nil
}

// reportLong prints a long-conversation run, each checkpoint's figures as ratios of
// message 100's (or the first checkpoint's) in the same run.
func reportLong(r *longResult) {
	base := r.Points[0]
	for _, p := range r.Points {
		if p.Message == 100 {
			base = p
		}
	}
	fmt.Printf("\nLong conversations: %d Session(s), %d messages each (ratios to message %d)\n\n", r.Sessions, r.Messages, base.Message)
	fmt.Println("| message | object bytes | turn p50 ms | turn p99 ms | cluster CPU ms/turn | apiserver | etcd | manager | p50 ratio | CPU ratio |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, p := range r.Points {
		c := p.CPUPerTurn
		fmt.Printf("| %d | %d | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", p.Message, p.Bytes, p.P50, p.P99, total(c),
			c["apiserver"], c["etcd"], c["manager"], p.P50/base.P50, total(c)/total(base.CPUPerTurn))
	}
}
