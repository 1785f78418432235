package audit

import (
	"context"
	"encoding/json"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
)

// OTLP sends records as OpenTelemetry log records over OTLP/HTTP, one export per
// status write, and counts them written when the collector accepts the export. The
// body is the record's JSON; its id, kind and Session are attributes too, for
// collectors that index attributes.
type OTLP struct {
	mu       sync.Mutex
	exporter sdklog.Exporter
	logger   otellog.Logger
	batch    *batch
	provider *sdklog.LoggerProvider
}

// EventName is the event name of the OpenTelemetry log records the OTLP sink sends.
const EventName = "journey.audit"

// NewOTLP exports to the endpoint the standard OTEL_EXPORTER_OTLP_LOGS_* or
// OTEL_EXPORTER_OTLP_* variables name (endpoint, headers, timeout, TLS), or as opts
// say.
func NewOTLP(ctx context.Context, opts ...otlploghttp.Option) (*OTLP, error) {
	exp, err := otlploghttp.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	// The SDK's logger makes the records (resource, scope, limits); the batch
	// keeps them until Write exports them itself, so that it knows the outcome.
	b := &batch{}
	provider := sdklog.NewLoggerProvider(sdklog.WithProcessor(b),
		sdklog.WithResource(resource.NewSchemaless(attribute.String("service.name", "journey-operator"))))
	return &OTLP{exporter: exp, batch: b, provider: provider, logger: provider.Logger("github.com/journeyops/journey-operator/internal/audit")}, nil
}

// Write exports records and waits for the collector's answer.
func (o *OTLP) Write(ctx context.Context, records []Record) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.batch.records = o.batch.records[:0]
	for i := range records {
		r := &records[i]
		body, err := json.Marshal(r)
		if err != nil {
			return err
		}
		var lr otellog.Record
		lr.SetEventName(EventName)
		lr.SetTimestamp(r.Time)
		lr.SetSeverity(otellog.SeverityInfo)
		lr.SetBody(otellog.StringValue(string(body)))
		lr.AddAttributes(
			otellog.String("journey.audit.schema", r.Schema),
			otellog.String("journey.audit.id", r.ID),
			otellog.String("journey.audit.kind", string(r.Kind)),
			otellog.String("k8s.namespace.name", r.Session.Namespace),
			otellog.String("journey.session.name", r.Session.Name),
			otellog.String("journey.session.uid", r.Session.UID),
		)
		o.logger.Emit(ctx, lr)
	}
	return o.exporter.Export(ctx, o.batch.records)
}

// Shutdown stops the exporter.
func (o *OTLP) Shutdown(ctx context.Context) error {
	_ = o.provider.Shutdown(ctx)
	return o.exporter.Shutdown(ctx)
}

// batch is a log processor that keeps the records emitted, for OTLP.Write.
type batch struct {
	records []sdklog.Record
}

func (b *batch) OnEmit(_ context.Context, r *sdklog.Record) error {
	b.records = append(b.records, r.Clone())
	return nil
}

func (b *batch) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (b *batch) Shutdown(context.Context) error                         { return nil }
func (b *batch) ForceFlush(context.Context) error                       { return nil }
