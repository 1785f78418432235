package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// conversations are the bench's Sessions and how far each has got: next[i] is the
// index of Session i's next message. A conversation sends its next message only when
// its last one is answered (the informer saw the Session wait for input with it
// processed): a turn is that message and its reply.
type conversations struct {
	c       client.Client
	tr      *tracker
	timeout time.Duration
	names   []string
	next    []int
	// sends bounds the user writes in flight: thousands of conversations answered at
	// once do not open thousands of requests.
	sends chan struct{}
}

func newConversations(c client.Client, tr *tracker, names []string, senders int, timeout time.Duration) *conversations {
	return &conversations{c: c, tr: tr, timeout: timeout, names: names, next: make([]int, len(names)), sends: make(chan struct{}, max(1, senders))}
}

// turn has conversation i send its next message and waits for the reply; it returns
// the turn's latency, from just before the message is sent to the moment the manager's
// informer delivered the Session waiting for input with it processed.
func (cv *conversations) turn(ctx context.Context, i int) (time.Duration, error) {
	name, k := cv.names[i], cv.next[i]
	cv.sends <- struct{}{}
	start := time.Now()
	cv.tr.markSent(name, k, start)
	err := say(ctx, cv.c, benchNamespace, name, k, nil)
	<-cv.sends
	if err != nil {
		return 0, fmt.Errorf("%s message %d: %w", name, k, err)
	}
	end, err := cv.tr.waitIdle(name, k+1, cv.timeout)
	if err != nil {
		return 0, err
	}
	cv.next[i]++
	return end.Sub(start), nil
}

// closedLoop has every conversation take turns turns, each sending its next message
// when the reply to the last one arrives, and returns the latencies.
func (cv *conversations) closedLoop(ctx context.Context, turns int) ([]time.Duration, error) {
	var mu sync.Mutex
	lat := make([]time.Duration, 0, len(cv.names)*turns)
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for i := range cv.names {
		wg.Go(func() {
			for range turns {
				d, err := cv.turn(ctx, i)
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	return lat, nil
}

// probeResult is one paced probe: turns offered at a fixed rate for a while.
type probeResult struct {
	Offered  float64 `json:"offeredTurnsPerSecond"`
	Achieved float64 `json:"sentTurnsPerSecond"`
	Turns    int     `json:"turns"`
	// Missed counts the turns due when every conversation was still waiting for a
	// reply: the operator was that far behind.
	Missed int     `json:"missed"`
	P50    float64 `json:"p50ms"`
	P99    float64 `json:"p99ms"`
	Pass   bool    `json:"pass"`
	// Queue is what the turns waited for in the manager, from the probe's start to
	// its last reply.
	Queue *queueStats `json:"queue,omitempty"`
}

// paced offers turns at rate per second for d, open loop: at each due time one
// conversation that is not waiting for a reply sends its next message, whatever
// happened to the earlier ones. It then waits for every reply.
func (cv *conversations) paced(ctx context.Context, rate float64, d time.Duration, limit time.Duration) (probeResult, error) {
	m0 := snapshotMetrics()
	res, err := offer(ctx, rate, d, len(cv.names), limit, func(ctx context.Context, i int) (time.Duration, bool, error) {
		l, err := cv.turn(ctx, i)
		return l, true, err
	})
	res.Queue = sessionQueue(m0, snapshotMetrics())
	return res, err
}

// offer offers turns at rate per second for d, open loop, to n parties: at each due
// time one party that is not waiting for the end of its last turn takes a turn
// (turn(i): its latency, and whether the party can take another). It then waits for
// every turn to end, and checks the p99 against limit.
func offer(ctx context.Context, rate float64, d time.Duration, n int, limit time.Duration, turn func(context.Context, int) (time.Duration, bool, error)) (probeResult, error) {
	res := probeResult{Offered: rate}
	ready := make(chan int, n)
	for i := range n {
		ready <- i
	}
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for due := start; due.Before(start.Add(d)); due = due.Add(interval) {
		if wait := time.Until(due); wait > 0 {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(wait):
			}
		}
		select {
		case err := <-errs:
			wg.Wait()
			return res, err
		default:
		}
		select {
		case i := <-ready:
			res.Turns++
			wg.Go(func() {
				l, again, err := turn(ctx, i)
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				mu.Lock()
				lat = append(lat, l)
				mu.Unlock()
				if again {
					ready <- i
				}
			})
		default:
			res.Missed++
		}
	}
	res.Achieved = float64(res.Turns) / time.Since(start).Seconds()
	wg.Wait()
	select {
	case err := <-errs:
		return res, err
	default:
	}
	res.P50, res.P99 = ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99))
	res.Pass = res.Missed == 0 && res.Turns > 0 && res.P99 < ms(limit)
	return res, nil
}

// searchRate finds the highest paced rate whose probe passes: a bisection over
// (0, hi] with steps steps. settle runs before each probe, so a probe does not pay
// for the one before it. A probe that fails is made once more and fails the step
// only if it fails again: on a shared machine one stall of another process would
// otherwise cut the search short for good. It returns the best passing probe (zero
// when none passed) and every probe made.
func searchRate(ctx context.Context, hi float64, steps int, settle func() error, probe func(rate float64) (probeResult, error)) (probeResult, []probeResult, error) {
	lo := 0.0
	var best probeResult
	var all []probeResult
	for range steps {
		rate := (lo + hi) / 2
		var res probeResult
		for try := range 2 {
			if err := settle(); err != nil {
				return best, all, err
			}
			var err error
			if res, err = probe(rate); err != nil {
				return best, all, err
			}
			all = append(all, res)
			logf("  paced %.1f turns/s (try %d): sent %.1f/s, %d turns, %d missed, p50 %.1f ms p99 %.1f ms: %s",
				rate, try+1, res.Achieved, res.Turns, res.Missed, res.P50, res.P99, map[bool]string{true: "pass", false: "fail"}[res.Pass])
			if res.Queue != nil {
				logf("    manager: %s", res.Queue)
			}
			if res.Pass {
				break
			}
		}
		if res.Pass {
			lo, best = rate, res
		} else {
			hi = rate
		}
	}
	return best, all, nil
}

// calibrate has one Session take turns turns alone and returns its status before
// the first (statuses[0]) and after each, as stored: the bytes the operator wrote for
// each turn, for the plain pair.
func calibrate(ctx context.Context, cv *conversations, turns int) ([]flowv1.SessionStatus, *flowv1.Session, error) {
	name := cv.names[0]
	get := func() (*flowv1.Session, error) {
		var s flowv1.Session
		err := cv.c.Get(ctx, types.NamespacedName{Namespace: benchNamespace, Name: name}, &s)
		return &s, err
	}
	s, err := get()
	if err != nil {
		return nil, nil, err
	}
	statuses := []flowv1.SessionStatus{s.Status}
	for range turns {
		if _, err := cv.turn(ctx, 0); err != nil {
			return nil, nil, err
		}
		if s, err = get(); err != nil {
			return nil, nil, err
		}
		statuses = append(statuses, s.Status)
	}
	return statuses, s, nil
}

// turnsPerSession is how many turns each of n conversations takes in the closed loop
// and the plain pair: enough for about minTurns in all, at least one each.
func turnsPerSession(n, minTurns int) int {
	return max(1, int(math.Ceil(float64(minTurns)/float64(n))))
}
