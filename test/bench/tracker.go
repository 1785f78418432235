package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// tracker follows Sessions through the manager's own informer, so observing them costs
// no second watch and no second copy of every object. It keeps a few numbers per
// Session and the time each message was sent and processed.
type tracker struct {
	mu       sync.Mutex
	sessions map[string]*tracked
}

type tracked struct {
	phase     flowv1.Phase
	reason    string // the Ready condition's reason
	step      int64
	processed int32
	sent      []time.Time // by message index
	done      []time.Time // by message index: when processedMessages first covered it
	// idle is, by message index, when the Session was first seen waiting for input
	// with the message processed: the end of its turn.
	idle []time.Time
	// waiters wait for idle to reach their length (waitIdle).
	waiters []idleWaiter
}

// idleWaiter is a waitIdle call waiting for n idle messages.
type idleWaiter struct {
	n    int
	wake chan struct{}
}

func newTracker() *tracker {
	return &tracker{sessions: map[string]*tracked{}}
}

// handler is the informer event handler.
func (t *tracker) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.observe(o) },
		UpdateFunc: func(_, o any) { t.observe(o) },
	}
}

func (t *tracker) observe(o any) {
	s, ok := o.(*flowv1.Session)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sessions == nil {
		return
	}
	tr := t.sessions[s.Name]
	if tr == nil {
		tr = &tracked{}
		t.sessions[s.Name] = tr
	}
	tr.phase = s.Status.Phase
	tr.reason = ""
	if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionReady); c != nil {
		tr.reason = c.Reason
	}
	tr.step = s.Status.Step
	for i := tr.processed; i < s.Status.ProcessedMessages; i++ {
		for int(i) >= len(tr.done) {
			tr.done = append(tr.done, time.Time{})
		}
		tr.done[i] = now
	}
	if s.Status.ProcessedMessages > tr.processed {
		tr.processed = s.Status.ProcessedMessages
	}
	if s.Status.Phase == flowv1.PhaseWaitingForInput {
		for i := len(tr.idle); i < int(s.Status.ProcessedMessages); i++ {
			tr.idle = append(tr.idle, now)
		}
		// Wake only the waiters of this Session whose turn ended: with thousands of
		// conversations waiting, waking all of them on every event would cost the
		// process more than the manager.
		kept := tr.waiters[:0]
		for _, w := range tr.waiters {
			if len(tr.idle) >= w.n {
				close(w.wake)
			} else {
				kept = append(kept, w)
			}
		}
		tr.waiters = kept
	}
}

// waitIdle waits until session name has processed n messages and waits for input
// again, and returns when the informer first saw it so: the time is taken as the
// event arrives, so a turn's latency is not rounded up to a polling interval.
func (t *tracker) waitIdle(name string, n int, timeout time.Duration) (time.Time, error) {
	t.mu.Lock()
	tr := t.sessions[name]
	if tr == nil {
		tr = &tracked{}
		t.sessions[name] = tr
	}
	if len(tr.idle) >= n {
		at := tr.idle[n-1]
		t.mu.Unlock()
		return at, nil
	}
	wake := make(chan struct{})
	tr.waiters = append(tr.waiters, idleWaiter{n: n, wake: wake})
	t.mu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-wake:
		t.mu.Lock()
		defer t.mu.Unlock()
		return tr.idle[n-1], nil
	case <-timer.C:
		t.mu.Lock()
		defer t.mu.Unlock()
		return time.Time{}, fmt.Errorf("%s: processed %d of %d messages, phase %q, after %s", name, tr.processed, n, tr.phase, timeout)
	}
}

// markSent records that message i of session name is about to be sent.
func (t *tracker) markSent(name string, i int, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tr := t.sessions[name]
	if tr == nil {
		tr = &tracked{}
		t.sessions[name] = tr
	}
	for i >= len(tr.sent) {
		tr.sent = append(tr.sent, time.Time{})
	}
	tr.sent[i] = at
}

// count returns how many Sessions whose name starts with prefix satisfy ok.
func (t *tracker) count(prefix string, ok func(*tracked) bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for name, tr := range t.sessions {
		if strings.HasPrefix(name, prefix) && ok(tr) {
			n++
		}
	}
	return n
}

// phases summarizes the phases of the Sessions with prefix, for error messages.
func (t *tracker) phases(prefix string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	counts := map[string]int{}
	for name, tr := range t.sessions {
		if strings.HasPrefix(name, prefix) {
			counts[string(tr.phase)+"/"+tr.reason]++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, counts[k])
	}
	return strings.TrimSpace(b.String())
}

// steps sums status.step over the Sessions with prefix.
func (t *tracker) steps(prefix string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for name, tr := range t.sessions {
		if strings.HasPrefix(name, prefix) {
			n += tr.step
		}
	}
	return n
}

// release drops everything the tracker holds, before the heap is measured.
func (t *tracker) release() {
	t.mu.Lock()
	t.sessions = nil
	t.mu.Unlock()
}

// waitFor polls until want Sessions with prefix satisfy ok.
func (t *tracker) waitFor(prefix string, want int, timeout time.Duration, what string, ok func(*tracked) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		n := t.count(prefix, ok)
		if n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d of %d after %s (%s)", what, n, want, timeout, t.phases(prefix))
		}
		// Each poll scans every Session under the lock the informer's handler needs:
		// poll less often when there are many.
		time.Sleep(10*time.Millisecond + time.Duration(want/100)*time.Millisecond)
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
