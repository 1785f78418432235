package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// The burst (-burst): the bench's former headline, kept as a secondary figure. n
// Sessions of a sample, each created with its whole conversation in spec.messages
// before their Journey exists; creating the Journey releases them all at once. The
// controller takes up to 16 pure steps per write, so a Session's whole conversation
// takes a write or two: its steps per second measure how well the controller batches
// conversations that are already there, not turns, and it is not compared with the
// plain pair.

// burstResult is what one burst measured.
type burstResult struct {
	Sample      string             `json:"sample"`
	Sessions    int                `json:"sessions"`
	Advance     string             `json:"advance"`
	Messages    int                `json:"messagesPerSession"`
	Steps       int64              `json:"steps"`
	Seconds     float64            `json:"seconds"`
	StepRate    float64            `json:"stepsPerSecond"`
	SessionRate float64            `json:"sessionsPerSecond"`
	StepCPU     map[string]float64 `json:"cpuMsPerStep"`
	Writes      float64            `json:"statusWritesPerSession"`
	Load        string             `json:"loadAverage"`
	// HeapPerSession is the manager's heap per completed Session, over the heap it
	// had before any: the figure earlier rounds reported.
	HeapPerSession float64 `json:"heapBytesPerSession"`
	SessionBytes   float64 `json:"meanSessionBytes"`
}

// runBurst runs the burst of n Sessions of smp on a control plane of its own.
//
//nolint:funlen // the burst's phases, in the order they run
func runBurst(ctx context.Context, opts *options, smp *sample, n int, mode controller.AdvanceMode) (*burstResult, error) {
	res := &burstResult{Sample: opts.sample, Sessions: n, Advance: string(mode), Messages: len(smp.session.Spec.Messages)}
	logf("burst of %d %s sessions, advance %s: starting a control plane", n, opts.sample, mode)
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
		Namespaces: []string{benchNamespace}, Cache: opts.cacheOptions(), QPS: float32(opts.qps), Burst: opts.burst,
		Setup: func(mgr ctrl.Manager) error {
			return controller.Setup(mgr, controller.Options{Advance: mode, MaxConcurrentReconciles: opts.concurrency})
		},
	})
	if err != nil {
		return nil, err
	}
	tr := newTracker()
	inf, err := mgr.GetCache().GetInformer(ctx, &flowv1.Session{})
	if err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(tr.handler()); err != nil {
		return nil, err
	}
	mgr.Start()
	defer func() { _ = mgr.Stop() }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("cache did not sync")
	}
	writes, err := countWrites(ctx, env.Config, benchNamespace)
	if err != nil {
		return nil, err
	}
	defer writes.stop()
	for _, p := range smp.pathways {
		p := p.DeepCopy()
		p.Namespace, p.ResourceVersion = benchNamespace, ""
		if err := c.Create(ctx, p); err != nil {
			return nil, err
		}
	}
	heap0 := heapAlloc()
	sessions := make([]*flowv1.Session, n)
	for i := range sessions {
		s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: fmt.Sprintf("burst-%05d", i)}}
		s.Spec = *smp.session.Spec.DeepCopy()
		sessions[i] = s
	}
	if _, err := createSessions(ctx, c, 16, sessions); err != nil {
		return nil, err
	}
	if err := tr.waitFor("burst-", n, opts.timeout, "sessions waiting for their Journey", func(t *tracked) bool {
		return t.phase == flowv1.PhasePending && t.reason == flowv1.ReasonJourneyNotFound
	}); err != nil {
		return nil, err
	}
	j := smp.journey.DeepCopy()
	j.Namespace, j.ResourceVersion = benchNamespace, ""
	w0, cpu0 := writes.settle(200*time.Millisecond), readCPU()
	t0 := time.Now()
	if err := c.Create(ctx, j); err != nil {
		return nil, err
	}
	if err := tr.waitFor("burst-", n, opts.timeout, "completed sessions", func(t *tracked) bool { return t.phase.IsTerminal() }); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(t0).Seconds()
	cpu := readCPU().sub(cpu0)
	res.Load = loadAverage()
	if bad := tr.count("burst-", func(t *tracked) bool { return t.phase != flowv1.PhaseCompleted }); bad > 0 {
		return nil, fmt.Errorf("%d sessions ended but did not complete: %s", bad, tr.phases("burst-"))
	}
	res.Steps = tr.steps("burst-")
	res.StepRate = float64(res.Steps) / res.Seconds
	res.SessionRate = float64(n) / res.Seconds
	res.StepCPU = perUnit(cpu, float64(res.Steps))
	res.Writes = float64(writes.settle(200*time.Millisecond).sub(w0).Status) / float64(n)
	names := make([]string, n)
	for i := range names {
		names[i] = sessions[i].Name
	}
	if res.SessionBytes, err = meanSize(ctx, c, names, 100); err != nil {
		return nil, err
	}
	if _, err := settleEvents(ctx, c, benchNamespace, opts.timeout); err != nil {
		return nil, err
	}
	writes.stop()
	tr.release()
	res.HeapPerSession = float64(int64(heapAlloc())-int64(heap0)) / float64(n)
	if opts.memProfile != "" {
		if err := writeHeapProfile(fmt.Sprintf("%s-burst-%d-%s", opts.memProfile, n, mode)); err != nil {
			return nil, err
		}
	}
	logf("burst: %d steps in %.1fs = %.0f steps/s, %.1f sessions/s, %.2f status writes a session, %.2f ms CPU a step, load %s; heap %.1f KiB per Session (%.0f bytes each)",
		res.Steps, res.Seconds, res.StepRate, res.SessionRate, res.Writes, total(res.StepCPU), res.Load, res.HeapPerSession/1024, res.SessionBytes)
	return res, nil
}
