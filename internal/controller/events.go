package controller

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/journeyops/journey-operator/internal/truncate"
)

// eventsDropped counts Events dropped because the queue was full.
var eventsDropped = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "journey_events_dropped_total",
	Help: "Session Events dropped because more were emitted than the API server took.",
})

// eventQueue is how many Events may wait to be written.
const eventQueue = 4096

// eventWriter is the Session controller's events.k8s.io recorder. client-go's event
// broadcaster keeps every Event it sent in memory for six minutes to fold repeats into
// a series; a Session's Events (transitions and phase changes, never one per step)
// almost never repeat, so on a busy manager that cache held more memory than the
// Sessions themselves. eventWriter writes each Event once, from a bounded queue,
// by its own workers. A step never waits for it: when the queue is full the Event is
// dropped and counted (journey_events_dropped_total), as the broadcaster drops when its
// own queue is full. Events are a notification; status.history and the metrics are the
// record, so a step's latency never depends on how fast Events are written.
type eventWriter struct {
	client     client.Client
	scheme     *runtime.Scheme
	controller string
	instance   string
	queue      chan *eventsv1.Event
	workers    int
}

var _ events.EventRecorder = (*eventWriter)(nil)

func newEventWriter(c client.Client, scheme *runtime.Scheme, controller string) *eventWriter {
	host, _ := os.Hostname()
	instance := controller + "-" + host
	if len(instance) > 128 {
		instance = instance[:128]
	}
	return &eventWriter{client: c, scheme: scheme, controller: controller, instance: instance,
		queue: make(chan *eventsv1.Event, eventQueue), workers: 16}
}

// Eventf queues an Event about regarding, or drops it when the queue is full: it never
// blocks.
func (w *eventWriter) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	ref, err := reference.GetReference(w.scheme, regarding)
	if err != nil {
		return
	}
	now := time.Now()
	e := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      eventName(ref.Name, now),
			Namespace: ref.Namespace,
		},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: w.controller,
		ReportingInstance:   w.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Note:                truncate.Bytes(fmt.Sprintf(note, args...), maxNoteBytes, "..."),
		Type:                eventtype,
	}
	if e.Namespace == "" {
		e.Namespace = metav1.NamespaceDefault
	}
	if related != nil {
		if rel, err := reference.GetReference(w.scheme, related); err == nil {
			e.Related = rel
		}
	}
	select {
	case w.queue <- e:
	default:
		eventsDropped.Inc()
	}
}

// Start writes queued Events until ctx ends.
func (w *eventWriter) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("events")
	done := make(chan struct{})
	for range w.workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-ctx.Done():
					return
				case e := <-w.queue:
					wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					if err := w.client.Create(wctx, e); err != nil && ctx.Err() == nil {
						logger.V(4).Info("Unable to write Event", "reason", e.Reason, "object", e.Regarding.Name, "error", err.Error())
					}
					cancel()
				}
			}
		}()
	}
	for range w.workers {
		<-done
	}
	return nil
}

// NeedLeaderElection is false: a standby emits nothing, and a leader's Events must not
// wait for anything.
func (w *eventWriter) NeedLeaderElection() bool { return false }

// eventName is <object>.<hex nanoseconds>, as client-go names Events, or a
// timestamp-only name when that is not a valid name.
func eventName(object string, t time.Time) string {
	name := fmt.Sprintf("%s.%x", object, t.UnixNano())
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		name = fmt.Sprintf("session.%x", t.UnixNano())
	}
	return name
}

// maxNoteBytes is the most an Event's note may hold: the events API refuses more.
const maxNoteBytes = 1024
