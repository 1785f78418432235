package openai

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// The replay table: each server's documented error answers (status, headers, body),
// served by the harness's chat server to the real go-openai client, with the class the
// agent gives them and what the Session gets. Every case cites where the answer's
// shape is documented or reported. The agent runs with its defaults (maxRetries 2,
// responseFormat Auto).

// replayCase is one documented answer of one server.
type replayCase struct {
	server string
	name   string
	// answers are served in order; the last one repeats.
	answers []testenv.Reply
	class   agent.ErrorClass // "" = the call answers
	kind    flowv1.FailureKind
	calls   int
	waits   []time.Duration // nil: not checked
	// says is server text the error must carry.
	says string
}

// outcome is what the Session gets from a call that ends with class.
func outcome(class agent.ErrorClass) string {
	switch class {
	case agent.Transient:
		return "retried, then requeued with backoff: nothing journaled"
	case agent.Terminal:
		return "Stalled with the server's message"
	case agent.Invalid:
		return "journaled: an unclear decision or a failed turn, routed by the journey"
	}
	return "answered"
}

func stringError(status int, message string) testenv.Reply {
	return testenv.JSONReply(status, map[string]any{"error": message})
}

func objectError(status int, fields map[string]any) testenv.Reply {
	return testenv.JSONReply(status, map[string]any{"error": fields})
}

var okDecision = testenv.Answer(decisionJSON("booking", 0.9))

func repeat(r testenv.Reply) []testenv.Reply { return []testenv.Reply{r} }

func thenOK(r testenv.Reply) []testenv.Reply { return []testenv.Reply{r, okDecision} }

var replayCases = []replayCase{
	// OpenAI: {"error": {message, type, param, code}}.
	// https://platform.openai.com/docs/guides/error-codes
	{server: "OpenAI", name: "401 invalid_api_key",
		answers: repeat(testenv.APIError(401, "Incorrect API key provided: sk-abc***.", "invalid_api_key")),
		class:   agent.Terminal, kind: flowv1.FailurePolicyKind, calls: 1, says: "Incorrect API key"},
	{server: "OpenAI", name: "404 model_not_found",
		answers: repeat(objectError(404, map[string]any{"message": "The model `gpt-9` does not exist or you do not have access to it.", "type": "invalid_request_error", "param": nil, "code": "model_not_found"})),
		class:   agent.Terminal, kind: flowv1.FailureException, calls: 1, says: "does not exist"},
	{server: "OpenAI", name: "429 insufficient_quota",
		answers: repeat(testenv.APIError(429, "You exceeded your current quota, please check your plan and billing details.", "insufficient_quota")),
		class:   agent.Terminal, kind: flowv1.FailureRateLimit, calls: 1, says: "exceeded your current quota"},
	{server: "OpenAI", name: "429 rate_limit_exceeded with retry-after-ms, then an answer",
		answers: thenOK(testenv.APIError(429, "Rate limit reached for gpt-4o-mini on requests per min (RPM): Limit 3, Used 3.", "rate_limit_exceeded").With("Retry-After-Ms", "1500")),
		calls:   2, waits: []time.Duration{1500 * time.Millisecond}},
	{server: "OpenAI", name: "400 invalid_prompt",
		answers: repeat(objectError(400, map[string]any{"message": "Invalid prompt: your prompt was flagged as potentially violating our usage policy.", "type": "invalid_request_error", "param": nil, "code": "invalid_prompt"})),
		class:   agent.Invalid, kind: flowv1.FailurePolicyKind, calls: 1, says: "flagged"},
	{server: "OpenAI", name: "500 server_error saying to retry, every time",
		answers: repeat(testenv.APIError(500, "The server had an error while processing your request. Sorry about that! You can retry your request, or contact us through our help center at help.openai.com if the error persists.", "server_error")),
		class:   agent.Transient, kind: flowv1.FailureException, calls: 3, says: "You can retry your request"},
	{server: "OpenAI", name: "503 overloaded every time",
		answers: repeat(testenv.APIError(503, "The engine is currently overloaded, please try again later.", "server_error")),
		class:   agent.Transient, kind: flowv1.FailureException, calls: 3, says: "overloaded"},

	// Azure OpenAI: codes as strings, content filters with innererror.
	// https://learn.microsoft.com/en-us/azure/ai-foundry/openai/concepts/content-filter
	// https://learn.microsoft.com/en-us/azure/ai-foundry/openai/quotas-limits
	{server: "Azure OpenAI", name: "400 content_filter",
		answers: repeat(objectError(400, map[string]any{
			"message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
			"type":    nil, "param": "prompt", "code": "content_filter", "status": 400,
			"innererror": map[string]any{"code": "ResponsibleAIPolicyViolation", "content_filter_result": map[string]any{"hate": map[string]any{"filtered": true, "severity": "high"}}},
		})),
		class: agent.Invalid, kind: flowv1.FailurePolicyKind, calls: 1, says: "content management policy"},
	{server: "Azure OpenAI", name: `429 code "429" with Retry-After, then an answer`,
		answers: thenOK(objectError(429, map[string]any{"code": "429", "message": "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds."}).With("Retry-After", "6")),
		calls:   2, waits: []time.Duration{6 * time.Second}},
	{server: "Azure OpenAI", name: `401 code "401"`,
		answers: repeat(objectError(401, map[string]any{"code": "401", "message": "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."})),
		class:   agent.Terminal, kind: flowv1.FailurePolicyKind, calls: 1, says: "Access denied"},
	{server: "Azure OpenAI", name: "404 DeploymentNotFound",
		answers: repeat(objectError(404, map[string]any{"code": "DeploymentNotFound", "message": "The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."})),
		class:   agent.Terminal, kind: flowv1.FailureException, calls: 1, says: "DeploymentNotFound"},

	// vLLM: a top-level {"object": "error", ...} in older releases, {"error": {...}}
	// in newer ones. https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/openai/protocol.py
	{server: "vLLM", name: "404 NotFoundError at the top level",
		answers: repeat(testenv.JSONReply(404, map[string]any{"object": "error", "message": "The model `llama` does not exist.", "type": "NotFoundError", "param": nil, "code": 404})),
		class:   agent.Terminal, kind: flowv1.FailureException, calls: 1, says: "The model `llama` does not exist"},
	{server: "vLLM", name: "400 context length at the top level",
		answers: repeat(testenv.JSONReply(400, map[string]any{"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you requested 5120 tokens (4096 in the messages, 1024 in the completion).", "type": "BadRequestError", "param": nil, "code": 400})),
		class:   agent.Terminal, kind: flowv1.FailureValidation, calls: 1, says: "maximum context length"},
	{server: "vLLM", name: "500 InternalServerError every time",
		answers: repeat(objectError(500, map[string]any{"message": "Expected 2 output messages, got 1", "type": "InternalServerError", "param": nil, "code": 500})),
		class:   agent.Terminal, kind: flowv1.FailureException, calls: 3, says: "same error 3 times: HTTP 500: Expected 2 output messages"},

	// llama.cpp renders the model's chat template and fails with a 500 when the template
	// raises (roles that do not alternate, a system message it refuses).
	// https://github.com/ggml-org/llama.cpp/issues/19851
	// https://github.com/janhq/jan/issues/6254
	{server: "llama.cpp", name: "500 chat template error every time",
		answers: repeat(objectError(500, map[string]any{"code": 500, "type": "server_error", "message": "Conversation roles must alternate user/assistant/user/assistant/..."})),
		class:   agent.Terminal, kind: flowv1.FailureException, calls: 3, says: "Conversation roles must alternate"},

	// Ollama's /v1: OpenAI-shaped errors; its native API answers {"error": "<text>"}.
	// https://github.com/ollama/ollama/blob/main/openai/openai.go
	// https://github.com/ollama/ollama/blob/main/docs/api.md#errors
	{server: "Ollama", name: "404 model not found",
		answers: repeat(objectError(404, map[string]any{"message": `model "llama3.2" not found, try pulling it first`, "type": "api_error", "param": nil, "code": nil})),
		class:   agent.Terminal, kind: flowv1.FailureException, calls: 1, says: "try pulling it first"},
	{server: "Ollama", name: "503 server busy (string body), then an answer",
		answers: thenOK(stringError(503, "server busy, please try again.  maximum pending requests exceeded")),
		calls:   2},
	{server: "Ollama", name: "500 runner terminated every time",
		answers: repeat(objectError(500, map[string]any{"message": "llama runner process has terminated: exit status 2", "type": "api_error", "param": nil, "code": nil})),
		class:   agent.Terminal, kind: flowv1.FailureException, calls: 3, says: "llama runner process has terminated"},

	// llama.cpp server: {"error": {"code": <number>, "message", "type"}}.
	// https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md
	{server: "llama.cpp", name: "503 Loading model, then an answer",
		answers: thenOK(objectError(503, map[string]any{"code": 503, "message": "Loading model", "type": "unavailable_error"})),
		calls:   2},
	{server: "llama.cpp", name: "401 Invalid API Key",
		answers: repeat(objectError(401, map[string]any{"code": 401, "message": "Invalid API Key", "type": "authentication_error"})),
		class:   agent.Terminal, kind: flowv1.FailurePolicyKind, calls: 1, says: "Invalid API Key"},
	{server: "llama.cpp", name: "400 exceed_context_size_error",
		answers: repeat(objectError(400, map[string]any{"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096})),
		class:   agent.Terminal, kind: flowv1.FailureValidation, calls: 1, says: "exceeds the available context size"},

	// LM Studio: {"error": "<text>"}.
	// https://github.com/lmstudio-ai/lmstudio-bug-tracker/issues/189
	{server: "LM Studio", name: "429 string body, then an answer",
		answers: thenOK(stringError(429, "Too many requests")),
		calls:   2},
	{server: "LM Studio", name: "503 string body every time",
		answers: repeat(stringError(503, "Model is still loading")),
		class:   agent.Transient, kind: flowv1.FailureException, calls: 3, says: "Model is still loading"},
	{server: "LM Studio", name: "404 string body",
		answers: repeat(stringError(404, "Model not found")),
		class:   agent.Terminal, kind: flowv1.FailureException, calls: 1, says: "Model not found"},

	// TGI (text-generation-inference): {"error": "<text>", "error_type"}.
	// https://github.com/huggingface/text-generation-inference/blob/main/router/src/server.rs
	// https://github.com/huggingface/text-generation-inference/issues/439
	{server: "TGI", name: "429 overloaded (string body) every time",
		answers: repeat(testenv.JSONReply(429, map[string]any{"error": "Model is overloaded", "error_type": "overloaded"})),
		class:   agent.Transient, kind: flowv1.FailureRateLimit, calls: 3, says: "Model is overloaded"},
	{server: "TGI", name: "422 input validation",
		answers: repeat(testenv.JSONReply(422, map[string]any{"error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 3500 `inputs` tokens and 1024 `max_new_tokens`", "error_type": "validation"})),
		class:   agent.Terminal, kind: flowv1.FailureValidation, calls: 1, says: "Input validation error"},
	{server: "TGI", name: "424 generation error every time",
		answers: repeat(testenv.JSONReply(424, map[string]any{"error": "Request failed during generation: Server error: CUDA out of memory", "error_type": "generation"})),
		class:   agent.Terminal, kind: flowv1.FailureException, calls: 3, says: "CUDA out of memory"},

	// LocalAI: {"error": {"code": <number>, "message", "type"}}.
	// https://github.com/mudler/LocalAI/blob/master/core/schema/openai.go
	{server: "LocalAI", name: "500 could not load model every time",
		answers: repeat(objectError(500, map[string]any{"code": 500, "message": "could not load model: rpc error: code = Unknown desc = failed to load model", "type": ""})),
		class:   agent.Terminal, kind: flowv1.FailureException, calls: 3, says: "could not load model"},
	{server: "LocalAI", name: "500 once, then an answer",
		answers: thenOK(objectError(500, map[string]any{"code": 500, "message": "backend busy", "type": ""})),
		calls:   2},

	// Groq: OpenAI-shaped, with its own codes.
	// https://console.groq.com/docs/errors
	// https://github.com/thepersonalaicompany/amurex-backend/issues/38 (json_validate_failed)
	{server: "Groq", name: "400 json_validate_failed",
		answers: repeat(objectError(400, map[string]any{"message": "Failed to generate JSON. Please adjust your prompt. See 'failed_generation' for more details.", "type": "invalid_request_error", "code": "json_validate_failed", "failed_generation": `{"destination": "deploy"`})),
		class:   agent.Invalid, kind: flowv1.FailureValidation, calls: 1, says: "Failed to generate JSON"},
	{server: "Groq", name: "429 rate_limit_exceeded with Retry-After, then an answer",
		answers: thenOK(objectError(429, map[string]any{"message": "Rate limit reached for model `llama-3.1-8b-instant` on tokens per minute (TPM). Please try again in 2s.", "type": "tokens", "code": "rate_limit_exceeded"}).With("Retry-After", "2")),
		calls:   2, waits: []time.Duration{2 * time.Second}},
	{server: "Groq", name: "498 flex tier capacity every time",
		answers: repeat(objectError(498, map[string]any{"message": "Flex tier capacity exceeded. Please try again later.", "type": "capacity_exceeded"})),
		class:   agent.Transient, kind: flowv1.FailureException, calls: 3, says: "capacity exceeded"},

	// OpenRouter: {"error": {"code": <number>, "message", "metadata"}}; an error
	// during generation comes in a 200 answer.
	// https://openrouter.ai/docs/api-reference/errors
	{server: "OpenRouter", name: "200 with an error body, then an answer",
		answers: thenOK(testenv.JSONReply(200, map[string]any{"id": "gen-1", "error": map[string]any{"code": 502, "message": "Provider returned error", "metadata": map[string]any{"provider_name": "Example"}}})),
		calls:   2},
	{server: "OpenRouter", name: "200 with an error body every time",
		answers: repeat(testenv.JSONReply(200, map[string]any{"error": map[string]any{"code": 502, "message": "Provider returned error"}})),
		class:   agent.Transient, kind: flowv1.FailureException, calls: 3, says: "Provider returned error"},
	{server: "OpenRouter", name: "403 moderation",
		answers: repeat(objectError(403, map[string]any{"code": 403, "message": "openai/gpt-4o requires moderation. Your input was flagged for \"harassment\".", "metadata": map[string]any{"reasons": []string{"harassment"}, "flagged_input": "...", "provider_name": "OpenAI", "model_slug": "openai/gpt-4o"}})),
		class:   agent.Invalid, kind: flowv1.FailurePolicyKind, calls: 1, says: "requires moderation"},
	{server: "OpenRouter", name: "402 insufficient credits",
		answers: repeat(objectError(402, map[string]any{"code": 402, "message": "Insufficient credits. Add more using https://openrouter.ai/credits"})),
		class:   agent.Terminal, kind: flowv1.FailureRateLimit, calls: 1, says: "Insufficient credits"},
	{server: "OpenRouter", name: "408 timeout, then an answer",
		answers: thenOK(objectError(408, map[string]any{"code": 408, "message": "Request timed out"})),
		calls:   2},

	// LiteLLM proxy: OpenAI-shaped, code a string, the exception class in the message.
	// https://docs.litellm.ai/docs/exception_mapping
	{server: "LiteLLM", name: `429 RateLimitError code "429" every time`,
		answers: repeat(objectError(429, map[string]any{"message": "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached", "type": "None", "param": "None", "code": "429"})),
		class:   agent.Transient, kind: flowv1.FailureRateLimit, calls: 3, says: "litellm.RateLimitError"},
	{server: "LiteLLM", name: `400 ContentPolicyViolationError`,
		answers: repeat(objectError(400, map[string]any{"message": "litellm.ContentPolicyViolationError: AzureException - The response was filtered due to the prompt triggering Azure OpenAI's content management policy.", "type": "None", "param": "None", "code": "400"})),
		class:   agent.Invalid, kind: flowv1.FailurePolicyKind, calls: 1, says: "ContentPolicyViolationError"},
	{server: "LiteLLM", name: `401 AuthenticationError`,
		answers: repeat(objectError(401, map[string]any{"message": "Authentication Error, Invalid proxy server token passed.", "type": "auth_error", "param": "None", "code": "401"})),
		class:   agent.Terminal, kind: flowv1.FailurePolicyKind, calls: 1, says: "Invalid proxy server token"},
	{server: "LiteLLM", name: "500 APIConnectionError every time",
		answers: repeat(objectError(500, map[string]any{"message": "litellm.APIConnectionError: Ollama_chatException - cannot unpack non-iterable NoneType object", "type": "None", "param": "None", "code": "500"})),
		class:   agent.Terminal, kind: flowv1.FailureException, calls: 3, says: "APIConnectionError"},

	// Gemini's OpenAI endpoint: a list of errors.
	// https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes
	{server: "Gemini", name: "429 RESOURCE_EXHAUSTED (a list), then an answer",
		answers: thenOK(testenv.JSONReply(429, []any{map[string]any{"error": map[string]any{"code": 429, "message": "Resource has been exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED"}}})),
		calls:   2},
}

func TestReplayServers(t *testing.T) {
	for _, tc := range replayCases {
		t.Run(tc.server+"/"+tc.name, func(t *testing.T) {
			srv := newChatServer(t, func(req testenv.ChatRequest) testenv.Reply {
				return tc.answers[min(req.N, len(tc.answers))-1]
			})
			sl := &sleeper{}
			a := newTestAgent(t, testSpec(srv.URL+"/v1"), sl)
			got, err := a.Decide(context.Background(), decisionReq("please"))

			if calls := srv.Calls(); calls != tc.calls {
				t.Errorf("calls = %d, want %d", calls, tc.calls)
			}
			if tc.waits != nil && !slices.Equal(sl.Waits(), tc.waits) {
				t.Errorf("waits = %v, want %v", sl.Waits(), tc.waits)
			}
			if tc.class == "" {
				if err != nil || got.Destination != "booking" {
					t.Fatalf("Decide = %+v, %v; want booking (%s)", got, err, outcome(tc.class))
				}
				return
			}
			var ae *agent.Error
			if !asAgentError(err, &ae) {
				t.Fatalf("err = %v (%T), want an *agent.Error", err, err)
			}
			if ae.Class != tc.class || ae.Kind != tc.kind {
				t.Errorf("err = %s/%s (%v), want %s/%s: %s", ae.Class, ae.Kind, err, tc.class, tc.kind, outcome(tc.class))
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %v, want the server's text %q", err, tc.says)
			}
			if got.Destination != "" {
				t.Errorf("Decide = %+v with an error, want no destination", got)
			}
		})
	}
}

// TestReplayRefusalsFailTheTurn: a refused prompt on a pathway turn is an Invalid
// answer (a failed turn the journey routes), not a stall.
func TestReplayRefusalsFailTheTurn(t *testing.T) {
	n := 0
	for _, tc := range replayCases {
		if tc.class != agent.Invalid {
			continue
		}
		n++
		srv := newChatServer(t, testenv.Always(tc.answers[0]))
		a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
		got, err := a.RunPathway(context.Background(), agent.PathwayRequest{Pathway: "booking", Spec: bookingSpec, Message: "hi"})
		if agent.ClassOf(err) != agent.Invalid || got.Outputs != nil || srv.Calls() != 1 {
			t.Errorf("%s/%s: RunPathway = %+v, %v after %d calls; want an Invalid turn after 1", tc.server, tc.name, got, err, srv.Calls())
		}
	}
	if n < 5 {
		t.Fatalf("only %d refusal cases in the replay table", n)
	}
}

// TestRepeatedServerErrorsThatDiffer: a 500 whose message changes is not "the same
// answer": it stays Transient after the retries.
func TestRepeatedServerErrorsThatDiffer(t *testing.T) {
	srv := newChatServer(t, func(req testenv.ChatRequest) testenv.Reply {
		return testenv.APIError(500, "worker "+string(rune('a'+req.N))+" crashed", "server_error")
	})
	a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
	_, err := a.Decide(context.Background(), decisionReq("x"))
	if agent.ClassOf(err) != agent.Transient || srv.Calls() != 3 {
		t.Errorf("err = %v after %d calls, want Transient after 3", err, srv.Calls())
	}
}

// TestRepeatedServerErrorWithoutRetries: with maxRetries 0 there is nothing to compare
// with, and the 500 stays Transient.
func TestRepeatedServerErrorWithoutRetries(t *testing.T) {
	srv := newChatServer(t, testenv.Always(testenv.APIError(500, "boom", "server_error")))
	spec := testSpec(srv.URL + "/v1")
	spec.MaxRetries = new(int32)
	a := newTestAgent(t, spec, &sleeper{})
	_, err := a.Decide(context.Background(), decisionReq("x"))
	if agent.ClassOf(err) != agent.Transient || srv.Calls() != 1 {
		t.Errorf("err = %v after %d calls, want Transient after 1", err, srv.Calls())
	}
}

// TestFinishReasonError: OpenRouter's choice-level error is retried.
func TestFinishReasonError(t *testing.T) {
	srv := newChatServer(t, func(req testenv.ChatRequest) testenv.Reply {
		if req.N == 1 {
			return testenv.JSONReply(http.StatusOK, map[string]any{"choices": []any{map[string]any{"index": 0, "finish_reason": "error",
				"message": map[string]any{"role": "assistant", "content": ""}}}})
		}
		return okDecision
	})
	a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
	got, err := a.Decide(context.Background(), decisionReq("x"))
	if err != nil || got.Destination != "booking" || srv.Calls() != 2 {
		t.Errorf("Decide = %+v, %v after %d calls; want booking after 2", got, err, srv.Calls())
	}
}
