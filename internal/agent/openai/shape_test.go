package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// routedClient sends every connection to srv, whatever the URL's host, so an agent
// whose baseURL names a public endpoint (http://api.openai.com/v1) talks to the local
// server.
func routedClient(srv *testenv.ChatServer) *http.Client {
	addr := srv.Listener.Addr().String()
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		},
	}}
}

// orderedKeys returns the keys of the object at path in raw JSON, in document order.
func orderedKeys(t *testing.T, raw []byte, path ...string) []string {
	t.Helper()
	var v json.RawMessage = raw
	for _, p := range path {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			t.Fatalf("%v at %q: %v", path, p, err)
		}
		v = m[p]
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%v is not an object: %s", path, v)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// emptyObjects lists the paths of empty JSON objects in v.
func emptyObjects(v any, at string) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			out = append(out, at)
		}
		for k, e := range x {
			out = append(out, emptyObjects(e, at+"."+k)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, emptyObjects(e, at+"[]")...)
		}
	}
	return out
}

var zeroTemperature = regexp.MustCompile(`"temperature":0[,}]`)

// TestRequestShapes: what each kind of endpoint receives, as raw JSON.
func TestRequestShapes(t *testing.T) {
	maxTokens := int32(300)
	for _, tc := range []struct {
		flavour     string
		baseURL     string // "" = the local server's /v1
		model       string
		temperature flowv1.Decimal
		maxTokens   *int32
		capField    string
		capValue    float64
	}{
		{flavour: "OpenAI", baseURL: "http://api.openai.com/v1", model: "gpt-4o-mini", temperature: "0", capField: "max_completion_tokens", capValue: agent.DefaultMaxTokens},
		{flavour: "OpenAI-compatible server", model: "Qwen/Qwen2.5-7B-Instruct", temperature: "0", maxTokens: &maxTokens, capField: "max_tokens", capValue: 300},
		{flavour: "OpenAI reasoning model behind a proxy", model: "gpt-5-mini", capField: "max_completion_tokens", capValue: agent.DefaultMaxTokens},
	} {
		t.Run(tc.flavour, func(t *testing.T) {
			srv := newChatServer(t, func(req testenv.ChatRequest) testenv.Reply {
				if req.Schema == "pathway_turn" {
					return testenv.Answer(`{"reply":"ok","outcome":"success","complete":true}`)
				}
				return okDecision
			})
			spec := testSpec(srv.URL + "/v1")
			if tc.baseURL != "" {
				spec.BaseURL = tc.baseURL
			}
			spec.Model, spec.Temperature, spec.MaxTokens = tc.model, tc.temperature, tc.maxTokens
			a := newTestAgent(t, spec, &sleeper{}, WithHTTPClient(routedClient(srv)))
			if _, err := a.Decide(context.Background(), decisionReq("x")); err != nil {
				t.Fatal(err)
			}
			noOutputs := &flowv1.PathwaySpec{Signature: flowv1.Signature{Instructions: "Greet."}}
			if _, err := a.RunPathway(context.Background(), agent.PathwayRequest{
				Pathway: "greet", Spec: noOutputs, Message: "hello again",
				History: []agent.Exchange{{Role: "user", Text: "hi"}, {Role: "user", Text: "anyone?"}, {Role: "assistant", Text: "Hello!"}},
			}); err != nil {
				t.Fatal(err)
			}

			for n := 1; n <= 2; n++ {
				raw := srv.Request(t, n).Body
				req := request(t, srv, n)
				if sent := zeroTemperature.Match(raw); sent != (tc.temperature == "0") {
					t.Errorf("request %d: temperature 0 sent = %v, want %v:\n%s", n, sent, tc.temperature == "0", raw)
				}
				if v, ok := req[tc.capField].(float64); !ok || v != tc.capValue {
					t.Errorf("request %d: %s = %v, want %v", n, tc.capField, req[tc.capField], tc.capValue)
				}
				other := map[string]string{"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens"}[tc.capField]
				if _, sent := req[other]; sent {
					t.Errorf("request %d: both token caps sent", n)
				}
				if empty := emptyObjects(map[string]any(req), ""); len(empty) > 0 {
					t.Errorf("request %d: empty objects at %v", n, empty)
				}
				msgs := messages(t, req)
				for i := 1; i < len(msgs); i++ {
					if msgs[i][0] == msgs[i-1][0] {
						t.Errorf("request %d: messages %d and %d are both %s", n, i-1, i, msgs[i][0])
					}
				}
			}
			schema := []string{"response_format", "json_schema", "schema", "properties"}
			if keys := orderedKeys(t, srv.Request(t, 1).Body, schema...); !reflect.DeepEqual(keys, []string{"destination", "confidence", "reasoning"}) {
				t.Errorf("decision properties in order %v", keys)
			}
			if keys := orderedKeys(t, srv.Request(t, 2).Body, schema...); !reflect.DeepEqual(keys, []string{"reply", "outcome", "complete"}) {
				t.Errorf("pathway properties in order %v, want no outputs for a signature without any", keys)
			}
			wantRoles := []string{"system", "user", "assistant", "user"}
			var roles []string
			for _, m := range messages(t, request(t, srv, 2)) {
				roles = append(roles, m[0])
			}
			if !reflect.DeepEqual(roles, wantRoles) {
				t.Errorf("pathway roles %v, want %v", roles, wantRoles)
			}
			if first := messages(t, request(t, srv, 2))[1][1]; first != "hi\n\nanyone?" {
				t.Errorf("merged history = %q", first)
			}
		})
	}
}

// TestPathwaySchemaOrderWithOutputs: the reply comes first, then the outputs in the
// signature's order.
func TestPathwaySchemaOrderWithOutputs(t *testing.T) {
	srv := newChatServer(t, testenv.Always(testenv.Answer(bookingAnswer)))
	a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
	if _, err := a.RunPathway(context.Background(), agent.PathwayRequest{Pathway: "booking", Spec: bookingSpec}); err != nil {
		t.Fatal(err)
	}
	raw := srv.Request(t, 1).Body
	props := []string{"response_format", "json_schema", "schema", "properties"}
	if keys := orderedKeys(t, raw, props...); !reflect.DeepEqual(keys, []string{"reply", "outputs", "outcome", "complete"}) {
		t.Errorf("pathway properties in order %v", keys)
	}
	if keys := orderedKeys(t, raw, append(props, "outputs", "properties")...); !reflect.DeepEqual(keys, []string{"response", "selected_doctor", "slots_left", "score", "urgent", "options"}) {
		t.Errorf("outputs in order %v", keys)
	}
}

func TestUsesMaxCompletionTokens(t *testing.T) {
	for _, tc := range []struct {
		baseURL, model string
		want           bool
	}{
		{"", "gpt-4o-mini", true},
		{"https://api.openai.com/v1", "gpt-4o-mini", true},
		{"https://my-resource.openai.azure.com/openai/v1", "my-deployment", true},
		{"https://my-resource.cognitiveservices.azure.com/openai/v1", "my-deployment", true},
		{"https://my-project.services.ai.azure.com/openai/v1", "my-deployment", true},
		{"http://vllm.llm.svc:8000/v1", "Qwen/Qwen2.5-7B-Instruct", false},
		{"http://ollama.default:11434/v1", "llama3.1:8b", false},
		{"https://api.groq.com/openai/v1", "llama-3.1-8b-instant", false},
		{"https://openrouter.ai/api/v1", "openai/gpt-4o", false},
		{"http://litellm.llm.svc:4000/v1", "o3-mini", true},
		{"http://litellm.llm.svc:4000/v1", "gpt-5", true},
		{"https://api.openai.com.evil.example/v1", "gpt-4o-mini", false},
	} {
		if got := UsesMaxCompletionTokens(tc.baseURL, tc.model); got != tc.want {
			t.Errorf("UsesMaxCompletionTokens(%q, %q) = %v, want %v", tc.baseURL, tc.model, got, tc.want)
		}
	}
}

// TestMissingUsageIsEstimated: an answer without usage is priced from its lengths and
// flagged, not counted as free.
func TestMissingUsageIsEstimated(t *testing.T) {
	srv := newChatServer(t, testenv.Always(testenv.JSONReply(200, map[string]any{
		"id": "x", "object": "chat.completion",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": decisionJSON("booking", 0.9)}}},
	})))
	spec := testSpec(srv.URL + "/v1")
	before := counterValue(usageEstimated.WithLabelValues("127.0.0.1", spec.Model))
	a := newTestAgent(t, spec, &sleeper{})
	got, err := a.Decide(context.Background(), decisionReq("x"))
	if err != nil {
		t.Fatal(err)
	}
	u := got.Usage
	wantCompletion := agent.EstimateTokens(len(decisionJSON("booking", 0.9)))
	if !u.Estimated || u.CompletionTokens != wantCompletion || u.PromptTokens < 100 || u.CostUSD <= 0 {
		t.Errorf("Usage = %+v, want an estimate flagged, %d completion tokens and a prompt of at least 100", u, wantCompletion)
	}
	// The prompt estimate covers what was sent: instructions, data and schema.
	if sent := agent.EstimateTokens(len(srv.Request(t, 1).Body)); u.PromptTokens > sent || u.PromptTokens < sent/2 {
		t.Errorf("prompt estimate %d, want about the %d tokens of the request body", u.PromptTokens, sent)
	}
	if after := counterValue(usageEstimated.WithLabelValues("127.0.0.1", spec.Model)); after != before+1 {
		t.Errorf("estimates counted %v, want %v", after, before+1)
	}

	// A reported usage is taken as it is.
	srv2 := newChatServer(t, testenv.Always(okDecision))
	b := newTestAgent(t, testSpec(srv2.URL+"/v1"), &sleeper{})
	got, err = b.Decide(context.Background(), decisionReq("x"))
	if err != nil || got.Usage.Estimated || got.Usage.PromptTokens != 100 || got.Usage.CompletionTokens != 20 {
		t.Errorf("Usage = %+v, %v; want the reported 100/20", got.Usage, err)
	}
}

// TestWithZeroTemperature: the zero goes first in an object without a temperature;
// an explicit temperature, or a body that is not an object, is left alone.
func TestWithZeroTemperature(t *testing.T) {
	for in, want := range map[string]string{
		`{"model":"m"}`:                 `{"temperature":0,"model":"m"}`,
		`{}`:                            `{"temperature":0}`,
		`{"model":"m","temperature":1}`: `{"model":"m","temperature":1}`,
		`not json`:                      `not json`,
		`[1]`:                           `[1]`,
	} {
		if got := string(withZeroTemperature([]byte(in))); got != want {
			t.Errorf("withZeroTemperature(%s) = %s, want %s", in, got, want)
		}
	}
}
