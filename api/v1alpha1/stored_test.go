package v1alpha1

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestJournalIsStoredOneStringAnAnswer(t *testing.T) {
	st := SessionStatus{Step: 3, Journal: []EffectRecord{
		{ID: "u/1/ab", Kind: EffectRunPathway, Step: 1, InputHash: "ab", Agent: "gpt", Result: AgentResult{
			Reply: `Say "hi"`, Complete: ptr.To(true), Outputs: &apiextensionsv1.JSON{Raw: []byte(`{"topic":"x"}`)}, Usage: Usage{PromptTokens: 5}}},
		{ID: "u/2/cd", Kind: EffectDecide, Step: 2, InputHash: "cd", Result: AgentResult{Destination: "b", Confidence: "0.9"}},
	}}
	stored := storedAsStrings(t, &st, "journal")
	if len(stored) != 2 || !strings.Contains(stored[0], `"reply":"Say \"hi\""`) {
		t.Fatalf("stored %q", stored)
	}
	if n := JournalEntryBytes(&st.Journal[0]); n != len(mustJSON(t, stored[0]))+1 {
		t.Errorf("JournalEntryBytes %d, stored %d and a separator", n, len(mustJSON(t, stored[0])))
	}
	// A journal stored as objects, by an operator that did not encode answers yet,
	// still reads.
	var old SessionStatus
	if err := json.Unmarshal([]byte(`{"step":3,"journal":[{"id":"u/1/ab","kind":"Decide","step":1,"inputHash":"ab","result":{"destination":"b"}}]}`), &old); err != nil {
		t.Fatal(err)
	}
	if len(old.Journal) != 1 || old.Journal[0].Result.Destination != "b" || old.JournalEntries != nil {
		t.Errorf("old form: %+v", old)
	}
	// An empty journal is left out.
	if raw, _ := json.Marshal(SessionStatus{Step: 1}); strings.Contains(string(raw), "journal") {
		t.Errorf("empty journal stored: %s", raw)
	}
}

func TestHistoryIsStoredOneStringATransition(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC).Local())
	st := SessionStatus{Step: 7, History: []HistoryEntry{
		{Time: at, Step: 3, From: "intake", To: "triage", Action: ActionAdvance, Source: SourceAgent,
			Transition: "onSuccess", Confidence: "0.9", Iteration: 1, MessageID: "m-1", Reason: `said "book it"`},
		{Time: at, Step: 6, From: "triage", To: "intake", Action: ActionJumpBack, Source: SourceHuman,
			Intervention: InterventionGoto, By: "alice", PathwayStack: []string{"intake"}},
	}}
	stored := storedAsStrings(t, &st, "history")
	if len(stored) != 2 || !strings.Contains(stored[0], `"reason":"said \"book it\""`) {
		t.Fatalf("stored %q", stored)
	}
	if n := HistoryEntryBytes(&st.History[1]); n != len(mustJSON(t, stored[1]))+1 {
		t.Errorf("HistoryEntryBytes %d, stored %d and a separator", n, len(mustJSON(t, stored[1])))
	}
	// A history stored as objects, by an operator that did not encode transitions
	// yet, still reads.
	var old SessionStatus
	if err := json.Unmarshal([]byte(`{"step":3,"history":[{"step":2,"from":"a","to":"b","action":"Advance","source":"Rule"}]}`), &old); err != nil {
		t.Fatal(err)
	}
	if len(old.History) != 1 || old.History[0].To != "b" || old.History[0].Step != 2 || old.HistoryEntries != nil {
		t.Errorf("old form: %+v", old)
	}
	// A stored entry that is not a transition is an error that names it.
	if err := json.Unmarshal([]byte(`{"history":["{\"step\":\"x\"}"]}`), &old); err == nil || !strings.Contains(err.Error(), "status.history[0]") {
		t.Errorf("a bad entry: %v, want an error naming status.history[0]", err)
	}
	// An empty history is left out.
	if raw, _ := json.Marshal(SessionStatus{Step: 1}); strings.Contains(string(raw), "history") {
		t.Errorf("empty history stored: %s", raw)
	}
}

// storedAsStrings is status.<list> of st as stored: it fails unless the list is
// stored as strings, the rest of the status (its step) as is, the status decodes
// back to st, and st encodes the same by value as by pointer (as a Session's status
// field does).
func storedAsStrings(t *testing.T, st *SessionStatus, list string) []string {
	t.Helper()
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var stored map[string]json.RawMessage
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	var entries []string
	if err := json.Unmarshal(stored[list], &entries); err != nil {
		t.Fatalf("status.%s is not stored as strings: %v\n%s", list, err, raw)
	}
	if step := string(stored["step"]); step != strconv.FormatInt(st.Step, 10) {
		t.Errorf("step stored as %s, want %d", step, st.Step)
	}
	var back SessionStatus
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, *st) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, *st)
	}
	if byValue, _ := json.Marshal(*st); string(byValue) != string(raw) {
		t.Errorf("by value %s, by pointer %s", byValue, raw)
	}
	return entries
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// quotedLen counts what encoding/json writes for a string, escapes included.
func TestQuotedLenIsWhatEncodingJSONWrites(t *testing.T) {
	for _, s := range []string{
		"", `plain`, `{"a":"say \"hi\""}`, "back\\slash", "tab\tnew\nline\rcr\bbs\fff", "\x00\x01\x1f\x7f",
		"<b>&amp;</b>", "caf\u00e9 \u2603 \U0001F600", "line\u2028para\u2029", "bad \xff\xfe utf8 \xe2\x80", "\xed\xa0\x80 surrogate",
	} {
		if got, want := quotedLen([]byte(s)), len(mustJSON(t, s)); got != want {
			t.Errorf("quotedLen(%q) = %d, encoding/json writes %d bytes", s, got, want)
		}
	}
}
