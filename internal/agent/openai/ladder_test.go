package openai

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// ladderCase is a server that refuses some response formats, as it says so.
type ladderCase struct {
	server string
	// refuse answers a request whose response_format type is format ("" for none),
	// or returns false to let it through.
	refuse func(format string) (testenv.Reply, bool)
	// formats are the response_format types sent, in order, until the answer.
	formats []string
	learned flowv1.ResponseFormat
}

var ladderCases = []ladderCase{
	{
		// Models without structured outputs (gpt-4-turbo, gpt-3.5-turbo).
		// https://platform.openai.com/docs/guides/structured-outputs#supported-models
		server: "OpenAI",
		refuse: func(format string) (testenv.Reply, bool) {
			return objectError(400, map[string]any{"message": "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
				"type": "invalid_request_error", "param": "response_format", "code": nil}), format == "json_schema"
		},
		formats: []string{"json_schema", "json_object"}, learned: flowv1.ResponseFormatJSONObject,
	},
	{
		// Schemas with keywords the model's decoder does not support.
		// https://github.com/i-am-bee/beeai-framework/issues/1215
		server: "Groq",
		refuse: func(format string) (testenv.Reply, bool) {
			return objectError(400, map[string]any{"message": "invalid schema for response format: response_format/json_schema/decision: enum is not supported",
				"type": "invalid_request_error"}), format == "json_schema"
		},
		formats: []string{"json_schema", "json_object"}, learned: flowv1.ResponseFormatJSONObject,
	},
	{
		// Older llama.cpp servers knew text and json_object only, and failed with a 500.
		// https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md
		server: "llama.cpp",
		refuse: func(format string) (testenv.Reply, bool) {
			return objectError(500, map[string]any{"code": 500, "type": "server_error",
				"message": `response_format type must be one of "text" or "json_object", but got: json_schema`}), format == "json_schema"
		},
		formats: []string{"json_schema", "json_object"}, learned: flowv1.ResponseFormatJSONObject,
	},
	{
		// A proxied model without response_format, and drop_params not set.
		// https://docs.litellm.ai/docs/completion/drop_params
		server: "LiteLLM",
		refuse: func(format string) (testenv.Reply, bool) {
			return objectError(400, map[string]any{"message": "litellm.UnsupportedParamsError: huggingface does not support parameters: ['response_format'], for model=tgi. " +
				"To drop these, set `litellm.drop_params=True` or for proxy:\n\n`litellm_settings:\n drop_params: true`\n",
				"type": "None", "param": "None", "code": "400"}), format != ""
		},
		formats: []string{"json_schema", "json_object", ""}, learned: flowv1.ResponseFormatPrompt,
	},
	{
		// TGI releases whose grammar types are json and regex: axum's plain-text 422.
		// https://huggingface.co/docs/text-generation-inference/basic_tutorials/using_guidance
		server: "TGI",
		refuse: func(format string) (testenv.Reply, bool) {
			return testenv.Reply{Status: http.StatusUnprocessableEntity, ContentType: "text/plain; charset=utf-8",
				Body: "Failed to deserialize the JSON body into the target type: response_format: unknown variant `" + format + "`, expected `json` or `regex` at line 1 column 900"}, format != ""
		},
		formats: []string{"json_schema", "json_object", ""}, learned: flowv1.ResponseFormatPrompt,
	},
	{
		// LM Studio takes json_schema (and refuses json_object, which Auto never sends it).
		// https://github.com/lmstudio-ai/lmstudio-bug-tracker/issues/189
		server: "LM Studio",
		refuse: func(format string) (testenv.Reply, bool) {
			return stringError(400, "'response_format.type' must be 'json_schema' or 'text'"), format == "json_object"
		},
		formats: []string{"json_schema"}, learned: flowv1.ResponseFormatJSONSchema,
	},
}

// serve is the ladder case's server: refusals, else answer.
func (lc ladderCase) serve(answer string) testenv.Responder {
	return func(req testenv.ChatRequest) testenv.Reply {
		if r, refused := lc.refuse(req.Format); refused {
			return r
		}
		return testenv.Answer(answer)
	}
}

func formatsSent(srv *testenv.ChatServer) []string {
	var out []string
	for _, r := range srv.Requests() {
		out = append(out, r.Format)
	}
	return out
}

func TestLadderStepsDown(t *testing.T) {
	for _, lc := range ladderCases {
		t.Run(lc.server, func(t *testing.T) {
			srv := newChatServer(t, lc.serve(decisionJSON("escalation", 0.7)))
			spec := testSpec(srv.URL + "/v1")
			before := counterValue(formatFallbacks.WithLabelValues("127.0.0.1", spec.Model, string(lc.learned)))

			a := newTestAgent(t, spec, &sleeper{})
			got, err := a.Decide(context.Background(), decisionReq("x"))
			if err != nil || got.Destination != "escalation" {
				t.Fatalf("Decide = %+v, %v; want escalation", got, err)
			}
			if sent := formatsSent(srv); !reflect.DeepEqual(sent, lc.formats) {
				t.Errorf("formats sent = %q, want %q", sent, lc.formats)
			}
			if l := LearnedResponseFormat(spec.BaseURL, spec.Model); l != lc.learned {
				t.Errorf("learned %s, want %s", l, lc.learned)
			}
			if lc.learned != flowv1.ResponseFormatJSONSchema {
				after := counterValue(formatFallbacks.WithLabelValues("127.0.0.1", spec.Model, string(lc.learned)))
				if after != before+1 {
					t.Errorf("fallbacks to %s counted %v, want %v", lc.learned, after, before+1)
				}
			}
			// Below the first rung the schema travels in the instructions.
			last := srv.Request(t, srv.Calls())
			if inSystem := strings.Contains(last.Messages[0].Content, `"enum":["booking","escalation"]`); inSystem != (lc.learned != flowv1.ResponseFormatJSONSchema) {
				t.Errorf("schema in the system message = %v on rung %s:\n%s", inSystem, lc.learned, last.Messages[0].Content)
			}

			// What was learned holds for the next agent on the same endpoint and model.
			calls := srv.Calls()
			b := newTestAgent(t, spec, &sleeper{})
			if _, err := b.Decide(context.Background(), decisionReq("x")); err != nil {
				t.Fatal(err)
			}
			if n := srv.Calls() - calls; n != 1 || srv.Request(t, srv.Calls()).Format != lc.formats[len(lc.formats)-1] {
				t.Errorf("next agent: %d calls, format %q; want 1 call with the learned format", n, srv.Request(t, srv.Calls()).Format)
			}
		})
	}
}

// TestFixedFormatDoesNotStepDown: an agent with an explicit responseFormat keeps it,
// and the server's refusal is the error.
func TestFixedFormatDoesNotStepDown(t *testing.T) {
	for _, tc := range []struct {
		format flowv1.ResponseFormat
		lc     ladderCase
	}{
		{flowv1.ResponseFormatJSONSchema, ladderCases[0]},
		{flowv1.ResponseFormatJSONObject, ladderCases[len(ladderCases)-1]},
	} {
		srv := newChatServer(t, tc.lc.serve(decisionJSON("booking", 1)))
		spec := testSpec(srv.URL + "/v1")
		spec.ResponseFormat = tc.format
		a := newTestAgent(t, spec, &sleeper{})
		_, err := a.Decide(context.Background(), decisionReq("x"))
		if agent.ClassOf(err) != agent.Terminal || srv.Calls() != 1 {
			t.Errorf("%s on %s: err = %v after %d calls, want Terminal after 1", tc.format, tc.lc.server, err, srv.Calls())
		}
	}
}

// TestEveryRungValidatesStrictly: whatever the format, answers outside the enum,
// with extra fields or a bad confidence are refused, fenced or not, with or without a
// <think> block; well-formed ones pass once the wrapping is removed.
func TestEveryRungValidatesStrictly(t *testing.T) {
	bad := []string{
		decisionJSON("deploy", 1),
		"```json\n" + decisionJSON("deploy", 1) + "\n```",
		"<think>The user wants deploy.</think>" + decisionJSON("deploy", 1),
		"<think>booking is allowed</think>\n```json\n" + decisionJSON("Booking", 1) + "\n```",
		`{"destination":"booking","confidence":1,"reasoning":"","override":"deploy"}`,
		"Sure! ```json\n" + decisionJSON("booking", 1) + "\n```",
		decisionJSON("booking", 1.5),
		"<think>" + decisionJSON("booking", 1) + "</think>",
	}
	good := []string{
		decisionJSON("booking", 1),
		"```json\n" + decisionJSON("booking", 1) + "\n```",
		"```\n" + decisionJSON("booking", 1) + "\n```",
		"<think>\nThe tests failed, so booking.\n</think>\n\n" + decisionJSON("booking", 1),
		"The tests failed, so booking.</think>" + decisionJSON("booking", 1),
	}
	for _, format := range []flowv1.ResponseFormat{flowv1.ResponseFormatJSONSchema, flowv1.ResponseFormatJSONObject, flowv1.ResponseFormatPrompt} {
		for _, answer := range append(bad, good...) {
			srv := newChatServer(t, testenv.Always(testenv.Answer(answer)))
			spec := testSpec(srv.URL + "/v1")
			spec.ResponseFormat = format
			a := newTestAgent(t, spec, &sleeper{})
			got, err := a.Decide(context.Background(), decisionReq("route to deploy"))
			wantOK := !containsString(bad, answer)
			switch {
			case wantOK && (err != nil || got.Destination != "booking"):
				t.Errorf("%s: %q: Decide = %+v, %v; want booking", format, answer, got, err)
			case !wantOK && (agent.ClassOf(err) != agent.Invalid || got.Destination != ""):
				t.Errorf("%s: %q: Decide = %+v, %v; want Invalid", format, answer, got, err)
			}
			want := map[flowv1.ResponseFormat]string{flowv1.ResponseFormatJSONSchema: "json_schema", flowv1.ResponseFormatJSONObject: "json_object"}[format]
			if f := srv.Request(t, 1).Format; f != want {
				t.Errorf("%s: response_format %q, want %q", format, f, want)
			}
			srv.Close()
		}
	}
}

// TestLadderRungsKeepTheEnum: an Auto agent stepped down to the prompt rung still
// refuses an injected destination.
func TestLadderRungsKeepTheEnum(t *testing.T) {
	lc := ladderCases[3] // refuses every response_format
	srv := newChatServer(t, lc.serve(decisionJSON("deploy", 1)))
	a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
	got, err := a.Decide(context.Background(), decisionReq("route to deploy"))
	if agent.ClassOf(err) != agent.Invalid || got.Destination != "" || srv.Calls() != 3 {
		t.Errorf("Decide = %+v, %v after %d calls; want Invalid after stepping to the prompt rung", got, err, srv.Calls())
	}
	if !strings.Contains(srv.Request(t, 3).Messages[0].Content, `"enum":["booking","escalation"]`) {
		t.Error("the prompt rung's instructions lack the schema")
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
