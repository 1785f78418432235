package testenv_test

import (
	"context"
	"fmt"
	"net/http"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/journeyops/journey-operator/internal/testenv"
)

// The chat server with the real go-openai client: a rate limit with Retry-After on
// the first intent classification, then an answer, and the requests as captured.
func ExampleChatServer() {
	// In a test: testenv.NewChatServer(t, ...), closed when the test ends.
	srv := testenv.NewChatServerNoCleanup(testenv.Always(testenv.Answer(`{"intent":"none"}`)))
	defer srv.Close()
	srv.On(testenv.BySchema("intent"), testenv.Sequence(
		testenv.APIError(http.StatusTooManyRequests, "slow down", "rate_limit_exceeded").With("Retry-After", "1"),
		testenv.Answer(`{"intent":"faq-detour"}`),
	))

	cfg := goopenai.DefaultConfig("sk-test")
	cfg.BaseURL = srv.BaseURL()
	client := goopenai.NewClientWithConfig(cfg)
	req := goopenai.ChatCompletionRequest{
		Model:    "gpt-4o-mini",
		Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "what is a referral?"}},
		ResponseFormat: &goopenai.ChatCompletionResponseFormat{Type: "json_schema",
			JSONSchema: &goopenai.ChatCompletionResponseFormatJSONSchema{Name: "intent"}},
	}
	for range 2 {
		resp, err := client.CreateChatCompletion(context.Background(), req)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Println("answer:", resp.Choices[0].Message.Content)
	}
	last := srv.Requests()[1]
	fmt.Println(srv.Calls(), "calls; the last:", last.Schema, last.User(), last.Bearer())
	// Output:
	// error: error, status code: 429, status: 429 Too Many Requests, message: slow down
	// answer: {"intent":"faq-detour"}
	// 2 calls; the last: intent what is a referral? Bearer sk-test
}
