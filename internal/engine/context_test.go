package engine

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func TestMergeRules(t *testing.T) {
	base := map[string]any{
		"name":     "Ann",
		"rejected": []any{map[string]any{"id": "dr1"}, "x"},
		"prefs":    map[string]any{"time": "am", "loc": map[string]any{"city": "Oslo"}},
		"count":    1.0,
		"tags":     []any{"a"},
	}
	upd := map[string]any{
		"name":     "Bob",                                                                // scalar replaces
		"rejected": []any{map[string]any{"id": "dr1"}, map[string]any{"id": "dr2"}, "x"}, // lists append de-duplicated
		"prefs":    map[string]any{"loc": map[string]any{"zip": "0150"}},                 // maps deep-merge
		"count":    []any{2.0},                                                           // a type change replaces
		"tags":     []any{"b", "b"},
		"new":      true,
	}
	want := map[string]any{
		"name":     "Bob",
		"rejected": []any{map[string]any{"id": "dr1"}, "x", map[string]any{"id": "dr2"}},
		"prefs":    map[string]any{"time": "am", "loc": map[string]any{"city": "Oslo", "zip": "0150"}},
		"count":    []any{2.0},
		"tags":     []any{"a", "b"},
		"new":      true,
	}
	before := string(encodeJSON(base))
	got := mergeObject(base, upd)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merge:\n got %s\nwant %s", encodeJSON(got), encodeJSON(want))
	}
	if string(encodeJSON(base)) != before {
		t.Error("merge modified its base")
	}
	// The set path for long lists gives the same result as the pairwise one.
	var long, add []any
	for i := range 100 {
		long = append(long, map[string]any{"id": float64(i)})
	}
	for i := 90; i < 120; i++ {
		add = append(add, map[string]any{"id": float64(i)}, map[string]any{"id": float64(i)})
	}
	if got := appendUnique(long, add); len(got) != 120 {
		t.Errorf("appendUnique: %d items, want 120", len(got))
	}
}

func TestContextCapAndVersions(t *testing.T) {
	d := conversation(func(j *flowv1.JourneySpec) { j.Limits.MaxContextBytes = 1024 })
	d.p["chat"].Accumulate = []string{"notes", "last"}
	d.p["chat"].Builtin.Outputs = []flowv1.BuiltinOutput{
		{Name: "notes", Expression: `[message]`},
		{Name: "last", Expression: `message`},
	}
	s := newSession(t, d)
	s.spec.InitialContext = raw(`{"user":"ann"}`)
	s.say("m1", "first").say("m2", "second")
	s.settle()
	if s.st.ContextVersion != 2 || !reflect.DeepEqual(s.context()["notes"], []any{"first", "second"}) {
		t.Fatalf("context v%d %v", s.st.ContextVersion, s.context())
	}
	// A message that would overflow the context is an error, not a truncation.
	s.say("m3", strings.Repeat("z", 1000))
	s.settle()
	if s.st.ContextVersion != 2 || len(s.st.Context.Raw) > 1024 {
		t.Fatalf("context changed past its cap: v%d, %d bytes", s.st.ContextVersion, len(s.st.Context.Raw))
	}
	if f := s.st.LastTurn.Failures; len(f) != 1 || !strings.Contains(f[0].Message, "over maxContextBytes 1024") {
		t.Errorf("failures %s", dump(f))
	}
	s.expect(flowv1.PhaseWaitingForInput, "chat")

	// Each change is a version holding a delta: the values it replaced (null: the key
	// was absent) and, for a list it appended to, only the items it added. So it can be
	// undone, and it costs what the change added, not the size of the context.
	want := []flowv1.ContextVersion{
		{Version: 1, Step: 1, Pathway: "chat", Keys: []string{"last", "notes"}, Previous: raw(`{"last":null,"notes":null}`)},
		{Version: 2, Step: 2, Pathway: "chat", Keys: []string{"last", "notes"}, Previous: raw(`{"last":"first"}`), Appended: raw(`{"notes":["second"]}`)},
	}
	if got := s.st.ContextHistory; !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("contextHistory %s, want %s", dump(got), dump(want))
	}
	for v, want := range map[int64]string{
		0: `{"user":"ann"}`,
		1: `{"last":"first","notes":["first"],"user":"ann"}`,
		2: `{"last":"second","notes":["first","second"],"user":"ann"}`,
	} {
		got, err := ContextAt(s.st, v)
		if err != nil || string(toJSON(got).Raw) != want {
			t.Errorf("context at version %d: %s, %v; want %s", v, toJSON(got).Raw, err, want)
		}
	}
	if _, err := ContextAt(s.st, 3); err == nil {
		t.Error("a context version from the future was rebuilt")
	}
	// FailFast fails the Session instead.
	d.j.ErrorRecovery = flowv1.ErrorRecoveryFailFast
	s = newSession(t, d)
	s.say("m1", strings.Repeat("z", 1000))
	s.settle()
	s.expect(flowv1.PhaseFailed, "chat")
	if c := s.condition(flowv1.ConditionReady); c.Reason != flowv1.ReasonContextTooLarge {
		t.Errorf("Ready %+v", c)
	}
}

func TestContextHistoryIsBounded(t *testing.T) {
	d := conversation()
	d.p["chat"].Accumulate = []string{"n"}
	d.p["chat"].Builtin.Outputs = []flowv1.BuiltinOutput{{Name: "n", Expression: `session.turns`}}
	s := newSession(t, d)
	for i := range 25 {
		s.say("m"+string(rune('a'+i)), "hi")
	}
	s.settle()
	if s.st.ContextVersion != 25 || len(s.st.ContextHistory) != MaxContextVersions || s.st.ContextHistory[0].Version != 16 {
		t.Errorf("version %d, %d versions kept from %d", s.st.ContextVersion, len(s.st.ContextHistory), s.st.ContextHistory[0].Version)
	}
	if _, err := ContextAt(s.st, 14); err == nil || !strings.Contains(err.Error(), "no longer kept") {
		t.Errorf("context at a dropped version: %v", err)
	}
	if got, err := ContextAt(s.st, 15); err != nil || got["n"] != int64(15) && got["n"] != float64(15) {
		t.Errorf("context at version 15: %v, %v", got, err)
	}
}

// A long conversation appending to a list costs each version what it added: the
// versions and the history stay within their byte bounds however long it runs, and the
// context at every kept version can be rebuilt.
func TestLongConversationStaysBounded(t *testing.T) {
	d := conversation()
	d.j.Limits.MaxTurns = 1000
	d.j.Limits.MaxContextBytes = 16384
	d.p["chat"].Accumulate = []string{"notes"}
	d.p["chat"].Builtin.Outputs = []flowv1.BuiltinOutput{{Name: "notes", Expression: `[message]`}}
	s := newSession(t, d)
	for i := range 120 {
		s.say(fmt.Sprintf("m%d", i), fmt.Sprintf("note %03d %s", i, strings.Repeat("x", 100)))
	}
	s.settle()
	if s.st.ProcessedMessages != 120 {
		t.Fatalf("processed %d", s.st.ProcessedMessages)
	}
	total := 0
	for i := range s.st.ContextHistory {
		v := &s.st.ContextHistory[i]
		total += versionBytes(v)
		if v.Previous != nil || v.Appended == nil || len(v.Appended.Raw) > 200 {
			t.Errorf("version %d is not an append delta: previous %s", v.Version, dump(v.Previous))
		}
	}
	if total > flowv1.ContextHistoryBytes(16384) {
		t.Errorf("context versions take %d bytes, over %d", total, flowv1.ContextHistoryBytes(16384))
	}
	for _, v := range s.st.ContextHistory {
		ctx, err := ContextAt(s.st, v.Version-1)
		if err != nil {
			t.Fatal(err)
		}
		if notes, _ := ctx["notes"].([]any); int64(len(notes)) != v.Version-1 {
			t.Errorf("context at version %d has %d notes", v.Version-1, len(notes))
		}
	}
	if n := storedHistoryBytes(t, s.st.History); n > flowv1.MaxHistoryBytes {
		t.Errorf("history takes %d bytes as stored", n)
	}
}

// storedHistoryBytes is what h takes in a Session's status as stored: its JSON there.
func storedHistoryBytes(t *testing.T, h []flowv1.HistoryEntry) int {
	t.Helper()
	raw, err := json.Marshal(flowv1.SessionStatus{History: h})
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		History json.RawMessage `json:"history"`
	}
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	return len(stored.History)
}

func TestDetourWithoutPreservingContext(t *testing.T) {
	d := fuzzJourney(flowv1.ErrorRecoveryGraceful, true)
	s := newSession(t, d)
	s.answer = (&llm{
		intent: func(intentReq) (intentResp, error) { return intentResp{Intent: "none", Confidence: 1}, nil },
		pathway: func(req pathwayReq) (pathwayResp, error) {
			if req.Pathway == "help" {
				return pathwayResp{Outputs: map[string]any{"items": []any{"from-help"}}, ResultType: flowv1.ResultSuccess, Complete: true}, nil
			}
			return pathwayResp{Outputs: map[string]any{"items": []any{"from-booking"}}, ResultType: flowv1.ResultSuccess, Complete: false}, nil
		},
	}).answer
	s.say("m1", "hello").say("m2", "book something")
	s.settle()
	s.expect(flowv1.PhaseWaitingForInput, "booking")
	s.say("m3", "I need help")
	s.settle()
	// help is a detour that does not preserve context: its items are gone after the return.
	s.expect(flowv1.PhaseWaitingForInput, "booking")
	if got := s.context()["items"]; !reflect.DeepEqual(got, []any{"from-booking"}) {
		t.Errorf("items %v", got)
	}
	if got := s.path(); got != "intake>booking>help>booking" {
		t.Errorf("path %s", got)
	}
}

// The bound counts the history as stored: one JSON string a transition, so a reason's
// quotes take four bytes each, not two.
func TestHistoryIsBoundedByBytes(t *testing.T) {
	var h []flowv1.HistoryEntry
	for i := range 200 {
		h = trimHistory(append(h, flowv1.HistoryEntry{Step: int64(i), Reason: strings.Repeat(`"r`, 200)}), 500)
	}
	if n := storedHistoryBytes(t, h); n > flowv1.MaxHistoryBytes || len(h) < 8 || h[len(h)-1].Step != 199 {
		t.Errorf("%d entries, %d bytes as stored, newest step %d", len(h), n, h[len(h)-1].Step)
	}
	if h = trimHistory([]flowv1.HistoryEntry{{Reason: strings.Repeat("r", 20000)}}, 5); len(h) != 1 {
		t.Errorf("the newest entry was dropped: %d entries", len(h))
	}
}

// Processed messages dropped from the front of spec.messages (messagesDropped raised
// by as many) change nothing: message numbers count from the first message ever sent,
// so each message is processed exactly once.
func TestDroppedMessagesAreProcessedOnce(t *testing.T) {
	d := conversation()
	d.p["chat"].Accumulate = []string{"notes"}
	d.p["chat"].Builtin.Outputs = []flowv1.BuiltinOutput{{Name: "notes", Expression: `[message]`}}
	s := newSession(t, d)
	s.say("m1", "one").say("m2", "two").say("m3", "three")
	s.settle()
	s.spec.Messages = s.spec.Messages[2:]
	s.spec.MessagesDropped = 2
	s.say("m4", "four")
	if s.settle() == 0 {
		t.Fatal("the new message took no step")
	}
	if s.st.ProcessedMessages != 4 || s.st.LastTurn.MessageID != "m4" {
		t.Fatalf("processed %d, last turn %s", s.st.ProcessedMessages, s.st.LastTurn.MessageID)
	}
	if !reflect.DeepEqual(s.context()["notes"], []any{"one", "two", "three", "four"}) {
		t.Errorf("notes %v", s.context()["notes"])
	}
	s.spec.Messages, s.spec.MessagesDropped = nil, 4
	if n := s.settle(); n != 0 || s.st.ProcessedMessages != 4 {
		t.Errorf("dropping every processed message took %d steps, processed %d", n, s.st.ProcessedMessages)
	}
}
