package openai

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/journeyops/journey-operator/internal/testenv"
)

// BenchmarkDecideOverhead compares one Decide (prompt and schema built, go-openai
// request, answer parsed and validated) with a raw HTTP POST of the same body to the
// same local server. The difference is the agent layer's cost per call; a real
// endpoint adds hundreds of milliseconds to both.
func BenchmarkDecideOverhead(b *testing.B) {
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini",` +
		`"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant",` +
		`"content":"{\"destination\":\"escalation\",\"confidence\":0.85,\"reasoning\":\"three failures\"}"}}],` +
		`"usage":{"prompt_tokens":240,"completion_tokens":25,"total_tokens":265}}`)
	srv := testenv.NewChatServer(b, testenv.Always(testenv.Reply{Body: string(answer)}))

	transport := func() *http.Client {
		return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	a, err := New(testSpec(srv.URL+"/v1"), testKey, WithHTTPClient(transport()))
	if err != nil {
		b.Fatal(err)
	}
	req := decisionReq("the patient asked for another option twice")
	ctx := context.Background()
	if _, err := a.Decide(ctx, req); err != nil {
		b.Fatal(err)
	}
	body := srv.Request(b, 1).Body // the exact body the agent sends

	b.Run("raw", func(b *testing.B) {
		client := transport()
		b.ReportAllocs()
		for b.Loop() {
			hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", bytes.NewReader(body))
			hreq.Header.Set("Content-Type", "application/json")
			hreq.Header.Set("Authorization", "Bearer "+testKey)
			resp, err := client.Do(hreq)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.Logf("request body: %d bytes", len(body))
	b.Run("agent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.Decide(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// roundTripFunc answers HTTP requests in memory.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// BenchmarkDecideInMemory is the agent layer's own CPU cost per Decide: the same call
// answered by an in-memory transport, with no network or server.
func BenchmarkDecideInMemory(b *testing.B) {
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini",` +
		`"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant",` +
		`"content":"{\"destination\":\"escalation\",\"confidence\":0.85,\"reasoning\":\"three failures\"}"}}],` +
		`"usage":{"prompt_tokens":240,"completion_tokens":25,"total_tokens":265}}`)
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(bytes.NewReader(answer)), Request: r}, nil
	})}
	a, err := New(testSpec("http://llm.invalid/v1"), testKey, WithHTTPClient(client))
	if err != nil {
		b.Fatal(err)
	}
	req := decisionReq("the patient asked for another option twice")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Decide(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
