package toolview

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func TestOf(t *testing.T) {
	digest := "382e9ff7f4951939baac9031730711186f77e901358272c55a67fa3c93dd97f9"
	st := &flowv1.SessionStatus{
		CurrentPathway: "book",
		History:        []flowv1.HistoryEntry{{Step: 1, From: "intake", To: "search"}, {Step: 6, From: "search", To: "book"}},
		Journal: []flowv1.EffectRecord{
			{Kind: flowv1.EffectRunPathway, Agent: "writer"},
			{Kind: flowv1.EffectCallTool, ToolCall: "t-2-0", Agent: "find_doctors", Result: flowv1.AgentResult{DurationMs: 12}},
			{Kind: flowv1.EffectCallTool, ToolCall: "t-3-1", Agent: "find_doctors", Result: flowv1.AgentResult{DurationMs: 7,
				Failure: &flowv1.Failure{Source: flowv1.FailureTool, Kind: flowv1.FailureException, Message: "no such specialty"}}},
			{Kind: flowv1.EffectCallTool, ToolCall: "t-7-0", Agent: "book_slot", Result: flowv1.AgentResult{DurationMs: 30}},
			{Kind: "SomethingNew", ToolCall: "x"}, // another kind of record is ignored
		},
		LastTurn: &flowv1.TurnOutcome{Pathway: "book", MessageID: "m2", ToolCalls: []flowv1.ToolCallRecord{
			{ID: "t-7-0", Tool: "book_slot", ArgsDigest: digest, State: flowv1.ToolCallDone, DurationMs: 30, ApprovedBy: "alice"},
		}},
		Turn: &flowv1.TurnProgress{Pathway: "book", MessageID: "m3", ToolCalls: []flowv1.ToolCallProgress{{
			ToolCallRecord:   flowv1.ToolCallRecord{ID: "t-9-0", Tool: "book_slot", ArgsDigest: digest, State: flowv1.ToolCallPending},
			AwaitingApproval: true, Args: &apiextensionsv1.JSON{Raw: []byte(`{"doctor_id":"dr-lee","slot":"2026-12-01T09:00"}`)},
		}}},
	}
	got := Of(st)
	want := []struct{ id, tool, pathway, state, dur, args, by, err string }{
		{"t-2-0", "find_doctors", "search", "Done", "12ms", "", "", ""},
		{"t-3-1", "find_doctors", "search", "Failed", "7ms", "", "", "no such specialty"},
		{"t-7-0", "book_slot", "book", "Done", "30ms", "sha256:382e9ff7f495", "alice", ""},
		{"t-9-0", "book_slot", "book", "Pending (awaiting approval)", "", `{"doctor_id":"dr-lee"…`, "", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d calls: %+v", len(got), got)
	}
	for i, w := range want {
		c := got[i]
		g := []string{c.ID, c.Tool, c.Pathway, c.StateText(), c.Duration(), c.ArgsPreview(22), c.ApprovedBy, c.Error}
		for j, v := range []string{w.id, w.tool, w.pathway, w.state, w.dur, w.args, w.by, w.err} {
			if g[j] != v {
				t.Errorf("call %d field %d: got %q, want %q", i, j, g[j], v)
			}
		}
	}
	if got[2].MessageID != "m2" || got[3].MessageID != "m3" {
		t.Errorf("message ids %q, %q", got[2].MessageID, got[3].MessageID)
	}
	if len(Of(&flowv1.SessionStatus{})) != 0 {
		t.Error("a Session without tool calls lists some")
	}
}

// A call whose outcome is unknown, and one whose server asked the user for input, are
// listed with their state and arguments, as `kubectl journey history` and the console
// show them while the Session waits for `kubectl journey answer`.
func TestOfCallsWaitingForAnAnswer(t *testing.T) {
	st := &flowv1.SessionStatus{Turn: &flowv1.TurnProgress{Pathway: "pay", MessageID: "m1", ToolCalls: []flowv1.ToolCallProgress{
		{ToolCallRecord: flowv1.ToolCallRecord{ID: "t-4-0", Tool: "pay", State: flowv1.ToolCallOutcomeUnknown},
			Args: &apiextensionsv1.JSON{Raw: []byte(`{"amount":40}`)}},
		{ToolCallRecord: flowv1.ToolCallRecord{ID: "t-4-1", Tool: "register", State: flowv1.ToolCallAwaitingInput},
			Args: &apiextensionsv1.JSON{Raw: []byte(`{}`)}, Elicitations: []flowv1.ToolElicitation{
				{Mode: flowv1.ElicitationForm, Message: "Your name?", Answer: flowv1.AnswerAccept},
				{Mode: flowv1.ElicitationForm, Message: "Your date of birth,\nas on your insurance card, so that the clinic can find your record"}}},
		{ToolCallRecord: flowv1.ToolCallRecord{ID: "t-4-2", Tool: "sign", State: flowv1.ToolCallAwaitingInput},
			Elicitations: []flowv1.ToolElicitation{{Mode: flowv1.ElicitationURL, URL: "https://sign.example/s/1", Message: "Sign the form"}}},
	}}}
	got := Of(st)
	if len(got) != 3 {
		t.Fatalf("got %d calls: %+v", len(got), got)
	}
	for i, want := range []struct{ id, state, args string }{{"t-4-0", "OutcomeUnknown", `{"amount":40}`}, {"t-4-1", "AwaitingInput (asks: Your date of birth, as on your insurance card, so that the …)", "{}"},
		{"t-4-2", "AwaitingInput (asks: visit https://sign.example/s/1 Sign the form)", ""}} {
		if c := got[i]; c.ID != want.id || c.StateText() != want.state || c.ArgsPreview(40) != want.args || c.Pathway != "pay" {
			t.Errorf("call %d: %s %q %q %q; want %s %q %q in pay", i, c.ID, c.StateText(), c.ArgsPreview(40), c.Pathway, want.id, want.state, want.args)
		}
	}
}
