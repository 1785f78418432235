package main

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// writeCounter counts the writes to the Sessions of a namespace as a watch sees them,
// from outside the manager: every write is one event. A write that raised
// metadata.generation changed the spec (the user's message); any other is a status
// write (the Session's status subresource; the bench's Sessions get no other
// metadata write). It watches metadata only (PartialObjectMetadata), so the events
// are small for the API server to send and for the bench to decode.
type writeCounter struct {
	mu         sync.Mutex
	generation map[string]int64
	counts     writeCounts
	cancel     context.CancelFunc
	done       chan struct{}
}

// writeCounts are the writes counted so far.
type writeCounts struct {
	Created int64 `json:"created"`
	Spec    int64 `json:"spec"`
	Status  int64 `json:"status"`
	// Restarts counts watches that ended and were resumed; a watch resumed from a
	// compacted revision would miss writes, and the bench fails instead.
	Restarts int64 `json:"restarts"`
}

func (w writeCounts) sub(o writeCounts) writeCounts {
	return writeCounts{Created: w.Created - o.Created, Spec: w.Spec - o.Spec, Status: w.Status - o.Status, Restarts: w.Restarts - o.Restarts}
}

// countWrites starts counting the writes to the Sessions of namespace; the list that
// starts it is not counted.
func countWrites(ctx context.Context, cfg *rest.Config, namespace string) (*writeCounter, error) {
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	res := mc.Resource(flowv1.GroupVersion.WithResource("sessions")).Namespace(namespace)
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	w := &writeCounter{generation: map[string]int64{}, done: make(chan struct{})}
	for _, o := range list.Items {
		w.generation[o.Name] = o.Generation
	}
	ctx, w.cancel = context.WithCancel(ctx)
	rv := list.ResourceVersion
	watchOnce := func() (watch.Interface, error) {
		return res.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: ptrInt64(3600)})
	}
	wi, err := watchOnce()
	if err != nil {
		return nil, err
	}
	go func() {
		defer close(w.done)
		for {
			for ev := range wi.ResultChan() {
				o, ok := ev.Object.(*metav1.PartialObjectMetadata)
				if !ok {
					if ev.Type == watch.Error && ctx.Err() == nil {
						logf("write counter: watch error %v", ev.Object)
					}
					continue
				}
				rv = o.ResourceVersion
				w.observe(ev.Type, o)
			}
			if ctx.Err() != nil {
				return
			}
			w.mu.Lock()
			w.counts.Restarts++
			w.mu.Unlock()
			for {
				if wi, err = watchOnce(); err == nil {
					break
				}
				if ctx.Err() != nil {
					return
				}
				logf("write counter: %v", err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return w, nil
}

func (w *writeCounter) observe(t watch.EventType, o *metav1.PartialObjectMetadata) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch t {
	case watch.Added:
		w.counts.Created++
		w.generation[o.Name] = o.Generation
	case watch.Modified:
		if o.Generation > w.generation[o.Name] {
			w.counts.Spec++
		} else {
			w.counts.Status++
		}
		w.generation[o.Name] = o.Generation
	case watch.Deleted:
		delete(w.generation, o.Name)
	}
}

// snapshot is the writes counted so far. Writes made before it may still be on
// their way: settle first.
func (w *writeCounter) snapshot() writeCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts
}

// settle waits until the watch has delivered every write made so far to the
// namespace's Sessions: until no event arrives for quiet (at most 10 s).
func (w *writeCounter) settle(quiet time.Duration) writeCounts {
	last := w.snapshot()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(quiet)
		now := w.snapshot()
		if now == last {
			return now
		}
		last = now
	}
	return last
}

// stop stops the watch and drops what the counter holds.
func (w *writeCounter) stop() {
	w.cancel()
	<-w.done
	w.mu.Lock()
	w.generation = nil
	w.mu.Unlock()
}

func ptrInt64(v int64) *int64 { return &v }
