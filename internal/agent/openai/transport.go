package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/journeyops/journey-operator/internal/tracing"
)

// go-openai marshals the request struct with omitempty, so it cannot send a
// temperature of 0 (the server default, often 1, would apply), and it decodes a 200
// answer without looking for an error in it. The agent's HTTP client therefore goes
// through transport, which, for the calls that ask for it in their context (an
// *exchange), adds "temperature":0 to the request body and keeps the first bytes of
// the answer's body for classification.

// maxCaptured bounds the answer bytes kept per attempt: error bodies are small, and a
// chat completion's error field comes first when there is one.
const maxCaptured = 64 << 10

// exchange is one attempt as the transport sees it.
type exchange struct {
	// zeroTemperature asks for "temperature":0 in the request body.
	zeroTemperature bool
	// body holds the first maxCaptured bytes of the answer's body, as read by the client.
	body bytes.Buffer
}

type exchangeKey struct{}

// transport wraps the HTTP client's own transport.
type transport struct{ base http.RoundTripper }

// withTransport returns a copy of c whose transport is wrapped: c's timeout, redirect
// policy and cookie jar are kept, and its connection pool is shared. Below transport,
// tracing.Transport sends the traceparent of the call's chat span, when it is traced.
func withTransport(c *http.Client) *http.Client {
	out := *c
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out.Transport = &transport{base: tracing.Transport(base)}
	return &out
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ex, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if ex == nil {
		return t.base.RoundTrip(req)
	}
	if ex.zeroTemperature && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = withZeroTemperature(body)
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	resp.Body = &capture{ReadCloser: resp.Body, buf: &ex.body}
	return resp, nil
}

// withZeroTemperature adds "temperature":0 as the first key of a JSON object that has
// no temperature; anything else is returned as it is.
func withZeroTemperature(body []byte) []byte {
	trimmed := bytes.TrimSpace(body)
	var keys map[string]json.RawMessage
	if len(trimmed) < 2 || trimmed[0] != '{' || json.Unmarshal(trimmed, &keys) != nil {
		return body
	}
	if _, ok := keys["temperature"]; ok {
		return body
	}
	rest := bytes.TrimSpace(trimmed[1:])
	out := make([]byte, 0, len(trimmed)+16)
	out = append(out, `{"temperature":0`...)
	if rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// capture copies what the client reads into buf, up to maxCaptured bytes.
type capture struct {
	io.ReadCloser
	buf *bytes.Buffer
}

func (c *capture) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if room := maxCaptured - c.buf.Len(); room > 0 && n > 0 {
		c.buf.Write(p[:min(n, room)])
	}
	return n, err
}
