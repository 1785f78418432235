package tracing

import (
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// propagator writes the W3C traceparent and tracestate headers.
var propagator = propagation.TraceContext{}

// Transport returns base (http.DefaultTransport when nil) wrapped so that a request
// whose context holds a span carries that span's W3C traceparent: the chat-completions
// endpoint and MCP tool servers see the call as part of the Session's trace. A request
// without a span goes out unchanged.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return propagating{base: base}
}

// HTTPClient returns a copy of c (an empty client when nil) whose transport is
// wrapped by Transport; timeouts, redirect policy and cookie jar are kept.
func HTTPClient(c *http.Client) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	}
	out.Transport = Transport(out.Transport)
	return &out
}

type propagating struct{ base http.RoundTripper }

func (t propagating) RoundTrip(req *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(req.Context()).IsValid() {
		return t.base.RoundTrip(req)
	}
	// A RoundTripper must not change the request it is given.
	req = req.Clone(req.Context())
	propagator.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	return t.base.RoundTrip(req)
}
