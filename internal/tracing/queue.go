package tracing

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// spansDropped counts the spans dropped because the export queue was full.
var spansDropped = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "journey_trace_spans_dropped_total",
	Help: "Spans dropped because the trace export queue was full (the collector is slow or unreachable).",
})

func init() { ctrlmetrics.Registry.MustRegister(spansDropped) }

// queue is the span processor in front of the SDK's batch processor: ending a span
// hands it to a bounded channel without waiting, or drops and counts it when the
// channel is full. One goroutine feeds the batch processor, which blocks it (never a
// step) while the exporter is behind, so that every dropped span is counted here.
type queue struct {
	next    sdktrace.SpanProcessor
	spans   chan item
	dropped prometheus.Counter
	done    chan struct{}

	mu     sync.RWMutex
	closed bool
}

// item is a span to export, or a flush marker (flushed set) closed once the spans
// before it are handed on.
type item struct {
	span    sdktrace.ReadOnlySpan
	flushed chan struct{}
}

var _ sdktrace.SpanProcessor = (*queue)(nil)

func newQueue(exp sdktrace.SpanExporter, size int, dropped prometheus.Counter) *queue {
	q := &queue{
		next: sdktrace.NewBatchSpanProcessor(exp, sdktrace.WithMaxQueueSize(size),
			sdktrace.WithMaxExportBatchSize(min(size, sdktrace.DefaultMaxExportBatchSize)), sdktrace.WithBlocking()),
		spans:   make(chan item, size),
		dropped: dropped,
		done:    make(chan struct{}),
	}
	go q.run()
	return q
}

func (q *queue) run() {
	defer close(q.done)
	for it := range q.spans {
		if it.flushed != nil {
			close(it.flushed)
			continue
		}
		q.next.OnEnd(it.span)
	}
}

// OnStart does nothing: the batch processor only looks at ended spans.
func (q *queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s for export, or drops and counts it.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return
	}
	select {
	case q.spans <- item{span: s}:
	default:
		q.dropped.Inc()
	}
}

// ForceFlush hands on the queued spans, then flushes the batch processor.
func (q *queue) ForceFlush(ctx context.Context) error {
	flushed := make(chan struct{})
	q.mu.RLock()
	if q.closed {
		q.mu.RUnlock()
		return nil
	}
	select {
	case q.spans <- item{flushed: flushed}:
	case <-ctx.Done():
		q.mu.RUnlock()
		return ctx.Err()
	}
	q.mu.RUnlock()
	select {
	case <-flushed:
	case <-ctx.Done():
		return ctx.Err()
	}
	return q.next.ForceFlush(ctx)
}

// Shutdown hands on the queued spans and shuts the batch processor down, within ctx.
func (q *queue) Shutdown(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.spans)
	}
	q.mu.Unlock()
	select {
	case <-q.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return q.next.Shutdown(ctx)
}
