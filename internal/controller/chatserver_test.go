package controller

import (
	"testing"

	"github.com/journeyops/journey-operator/internal/testenv"
)

// answering answers each chat request with the JSON content answer returns for the
// response schema's name (decision, intent, pathway_turn) and the user messages.
func answering(answer func(kind, user string) string) testenv.Responder {
	return func(r testenv.ChatRequest) testenv.Reply {
		return testenv.Reply{Content: answer(r.Schema, r.User()), Usage: testenv.Usage{Prompt: 120, Completion: 30}}
	}
}

// newChatServer is the harness's chat server answering with answer.
func newChatServer(t testing.TB, answer func(kind, user string) string) *testenv.ChatServer {
	t.Helper()
	return testenv.NewChatServer(t, answering(answer))
}

// failing answers every request with status and a Retry-After of 0.
func failing(status int) testenv.Responder {
	return testenv.Always(testenv.APIError(status, "try later", "test").With("Retry-After", "0"))
}
