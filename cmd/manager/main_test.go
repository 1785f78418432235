package main

import (
	"context"
	"flag"
	"testing"
)

// TestTracingFlags: tracing is off by default (no provider at all), and --tracing
// builds one that exports as OTEL_EXPORTER_OTLP_ENDPOINT says.
func TestTracingFlags(t *testing.T) {
	var f flags
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	f.bind(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if f.tracing || f.traceContent {
		t.Errorf("tracing %v, content %v by default: want both off", f.tracing, f.traceContent)
	}
	if p, err := startTracing(context.Background(), f); p != nil || err != nil {
		t.Errorf("without --tracing: provider %v, %v; want none", p, err)
	}
	if err := fs.Parse([]string{"--tracing", "--trace-content"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	p, err := startTracing(context.Background(), f)
	if err != nil || p == nil || !p.Content() {
		t.Fatalf("with --tracing --trace-content: provider %v (content %v), %v", p, p.Content(), err)
	}
	shutdownTracing(p)
}
