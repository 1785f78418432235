// Package tracing records OpenTelemetry traces of Sessions. A Session is one trace: its
// trace context is created at the Session's first step and kept in its status
// (status.traceContext), so every later step, on any replica and after any restart,
// continues the same trace under the Session's root span. Each step is a span with the
// journey's events (transitions, decisions, blocks); each model call is a GenAI `chat`
// span and each tool call an `execute_tool` span; the W3C traceparent of the span in a
// request's context goes with the requests the agents make (Transport).
//
// Tracing is off unless the manager runs with --tracing: a nil *Provider traces
// nothing, and every function here returns at once for a context without one. Spans
// are exported in the background through a bounded queue: a slow or unreachable
// collector never slows a step, and the spans it cannot take are dropped and counted
// (journey_trace_spans_dropped_total). Message and answer text is recorded only with
// content capture on (--trace-content); API keys never.
package tracing

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the operator's spans.
const ScopeName = "github.com/journeyops/journey-operator"

// DefaultQueueSize bounds the spans waiting for export when Options.QueueSize is not set.
const DefaultQueueSize = 2048

// Options configure a Provider.
type Options struct {
	// Content records message and answer text in spans.
	Content bool
	// QueueSize bounds the spans waiting for export (DefaultQueueSize when not set);
	// spans ended while it is full are dropped and counted.
	QueueSize int
	// Exporter, when set, replaces the OTLP/HTTP exporter that the standard
	// OTEL_EXPORTER_OTLP_* variables configure.
	Exporter sdktrace.SpanExporter
	// Dropped counts the dropped spans; nil means journey_trace_spans_dropped_total.
	Dropped prometheus.Counter
}

// Provider traces Sessions. A nil *Provider traces nothing.
type Provider struct {
	sdk     *sdktrace.TracerProvider
	tracer  trace.Tracer
	content bool
}

// New returns a Provider exporting over OTLP/HTTP (or through o.Exporter) in the
// background. The resource is service.name journey-operator, overridden by
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func New(ctx context.Context, o Options) (*Provider, error) {
	exp := o.Exporter
	if exp == nil {
		var err error
		if exp, err = otlptracehttp.New(ctx); err != nil {
			return nil, fmt.Errorf("OTLP/HTTP exporter: %w", err)
		}
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("journey-operator")),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	dropped := o.Dropped
	if dropped == nil {
		dropped = spansDropped
	}
	size := o.QueueSize
	if size <= 0 {
		size = DefaultQueueSize
	}
	return newProvider(newQueue(exp, size, dropped), res, o.Content), nil
}

// NewWithProcessor returns a Provider whose spans go to sp as they end, for example
// an in-memory tracetest.SpanRecorder.
func NewWithProcessor(sp sdktrace.SpanProcessor, content bool) *Provider {
	return newProvider(sp, resource.Empty(), content)
}

func newProvider(sp sdktrace.SpanProcessor, res *resource.Resource, content bool) *Provider {
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(sp),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(idGenerator{}),
	)
	return &Provider{sdk: tp, tracer: tp.Tracer(ScopeName), content: content}
}

// Content says whether p records message and answer text.
func (p *Provider) Content() bool { return p != nil && p.content }

// ForceFlush exports the spans ended so far.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.sdk.ForceFlush(ctx)
}

// Shutdown exports what is left, within ctx, and stops p.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

type providerKey struct{}

// ContextWith returns ctx carrying p, for the spans made below it (model and tool
// calls). A nil p returns ctx.
func ContextWith(ctx context.Context, p *Provider) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, providerKey{}, p)
}

// From returns the Provider ctx carries, nil for none.
func From(ctx context.Context) *Provider {
	p, _ := ctx.Value(providerKey{}).(*Provider)
	return p
}

// Content says whether the spans made under ctx record message and answer text.
func Content(ctx context.Context) bool { return From(ctx).Content() }

// noSpan is what the Start functions return when ctx traces nothing: ending it does
// nothing.
var noSpan = trace.SpanFromContext(context.Background())
