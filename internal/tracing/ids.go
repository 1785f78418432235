package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// A Session's trace and root span ids are derived from its UID, so that a first step
// tried again (its status write lost to a conflict) or taken by another replica makes
// the same trace; a step's span id is chosen before the step, so that the model and
// tool calls it makes are its children although the span itself is recorded only once
// the step's status is written. idGenerator gives a span the ids its context presets.

type presetKey struct{}

type preset struct {
	trace trace.TraceID
	span  trace.SpanID
}

// withIDs returns ctx presetting the ids of the next span started with it.
func withIDs(ctx context.Context, t trace.TraceID, s trace.SpanID) context.Context {
	return context.WithValue(ctx, presetKey{}, preset{trace: t, span: s})
}

type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if p, ok := ctx.Value(presetKey{}).(preset); ok && p.trace.IsValid() && p.span.IsValid() {
		return p.trace, p.span
	}
	var t trace.TraceID
	for !t.IsValid() {
		binary.BigEndian.PutUint64(t[:8], rand.Uint64())
		binary.BigEndian.PutUint64(t[8:], rand.Uint64())
	}
	return t, newSpanID()
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if p, ok := ctx.Value(presetKey{}).(preset); ok && p.span.IsValid() {
		return p.span
	}
	return newSpanID()
}

func newSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		binary.BigEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}

// sessionRoot is the trace id and root span id of the Session with uid.
func sessionRoot(uid string) (trace.TraceID, trace.SpanID) {
	var t trace.TraceID
	var s trace.SpanID
	sum := sha256.Sum256([]byte("journey-operator trace\x00" + uid))
	copy(t[:], sum[:16])
	copy(s[:], sum[16:24])
	if !t.IsValid() || !s.IsValid() { // all zeros: practically never
		t[0], s[0] = 1, 1
	}
	return t, s
}
