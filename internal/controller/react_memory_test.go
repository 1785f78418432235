package controller

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// TestReActToolCallsInConversation: a turn's tool calls are part of the conversation.
// Turn 1 looks a cardiologist up (saying so alongside its call) and answers; turn 2's
// request carries turn 1's call and result in the assistant message before turn 1's
// reply, as text (no tool messages: turn 2 made no calls of its own).
func TestReActToolCallsInConversation(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	c := clinic.New()
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	var n atomic.Int32
	answer := func(reply string, complete bool) testenv.Reply {
		b, _ := json.Marshal(map[string]any{"reply": reply, "outputs": map[string]any{"booking_id": ""}, "outcome": "success", "complete": complete})
		return testenv.Answer(string(b))
	}
	model := newReactModel(t, map[string]modelScript{"mem": func([]testenv.ToolResult) testenv.Reply {
		switch n.Add(1) {
		case 1:
			return testenv.CallToolsSaying("Let me look that up.", testenv.ToolCall{ID: "call_1", Name: "find_doctors", Arguments: `{"specialty":"cardiology"}`})
		case 2:
			return answer("Dr. Lee is free on Monday.", false)
		}
		return answer("It was Dr. Lee.", true)
	}})
	startManager(t, ns, Options{})
	startReact(t, ns, srv.URL, model.BaseURL(), nil)
	create(t, sessionOf(ns, "mem", "react"))
	send(t, ns, "mem", "m1", "Find me a cardiologist.")
	eventually(t, 60*time.Second, func() error {
		s := get(t, ns, "mem", &flowv1.Session{})
		if len(s.Status.Transcript) != 1 || s.Status.Turn != nil {
			return fmt.Errorf("transcript %+v, turn %+v", s.Status.Transcript, s.Status.Turn)
		}
		return nil
	})
	s := get(t, ns, "mem", &flowv1.Session{})
	ex := s.Status.Transcript[0]
	if len(ex.ToolCalls) != 1 || ex.ToolCalls[0].Tool != "find_doctors" || ex.ToolCalls[0].Args != `{"specialty":"cardiology"}` ||
		ex.ToolCalls[0].State != flowv1.ToolCallDone || !strings.Contains(ex.ToolCalls[0].Result, `"dr-lee"`) || ex.Assistant != "Dr. Lee is free on Monday." {
		t.Fatalf("turn 1's exchange %+v", ex)
	}

	send(t, ns, "mem", "m2", "Who was it again?")
	eventually(t, 60*time.Second, func() error {
		s := get(t, ns, "mem", &flowv1.Session{})
		if len(s.Status.Transcript) != 2 || s.Status.Turn != nil {
			return fmt.Errorf("transcript %+v, turn %+v", s.Status.Transcript, s.Status.Turn)
		}
		return nil
	})
	reqs := model.asked("mem")
	if len(reqs) != 3 {
		t.Fatalf("the model was asked %d times, want 3", len(reqs))
	}
	if a := assistantMessages(reqs[1]); len(a) != 1 || a[0] != "Let me look that up." {
		t.Errorf("turn 1's re-ask: assistant messages %q", a)
	}
	a := assistantMessages(reqs[2])
	want := `[called find_doctors {"specialty":"cardiology"} -> {`
	if len(a) != 1 || !strings.HasPrefix(a[0], want) || !strings.Contains(a[0], `"dr-lee"`) || !strings.HasSuffix(a[0], "]\n\nDr. Lee is free on Monday.") {
		t.Errorf("turn 2's assistant messages %q: want turn 1's call, result and reply", a)
	}
	if r := reqs[2].ToolResults(); len(r) != 0 || len(reqs[2].ToolCalls()) != 0 {
		t.Errorf("turn 2 replays tool messages: %+v", r)
	}
	if c.Calls("find_doctors") != 1 {
		t.Errorf("find_doctors called %d times", c.Calls("find_doctors"))
	}
}

// assistantMessages are the contents of r's assistant messages, in order.
func assistantMessages(r testenv.ChatRequest) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			out = append(out, m.Content)
		}
	}
	return out
}
