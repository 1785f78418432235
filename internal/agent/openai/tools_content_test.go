package openai

import (
	"context"
	"testing"

	"github.com/journeyops/journey-operator/internal/testenv"
)

// TestToolCallsKeepTheirText: the text a model writes alongside its tool calls comes
// back with them, and a re-ask gives it back as the content of the assistant message
// that carries the round's calls.
func TestToolCallsKeepTheirText(t *testing.T) {
	srv := newChatServer(t, testenv.Always(testenv.CallToolsSaying("<think>hmm</think>Let me check the copay.",
		testenv.ToolCall{ID: "call_1", Name: "copay", Arguments: `{}`})))
	a := newTestAgent(t, testSpec(srv.URL+"/v1"), &sleeper{})
	turn := toolTurn()
	turn.ToolExchanges[0].AssistantText = "Looking for cardiologists."
	turn.ToolExchanges[2].AssistantText = "Now the copay."
	got, err := a.RunPathway(context.Background(), turn)
	if err != nil {
		t.Fatalf("RunPathway: %v", err)
	}
	if len(got.ToolCalls) != 1 || got.Reply != "Let me check the copay." {
		t.Fatalf("RunPathway = %+v: want the call with the text written alongside", got)
	}

	req := srv.Request(t, 1)
	var assistants []testenv.ChatMessage
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			assistants = append(assistants, m)
		}
	}
	if len(assistants) != 2 || assistants[0].Content != "Looking for cardiologists." || assistants[1].Content != "Now the copay." {
		t.Fatalf("assistant messages %+v", assistants)
	}
	if calls := req.ToolCalls(); len(calls) != 3 || calls[0].ID != "t-3-0" || calls[2].ID != "t-5-2" {
		t.Errorf("replayed calls %+v", calls)
	}
}
