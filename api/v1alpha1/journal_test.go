package v1alpha1

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

func TestJournalIsStoredOneStringAnAnswer(t *testing.T) {
	st := SessionStatus{Step: 3, Journal: []EffectRecord{
		{ID: "u/1/ab", Kind: EffectRunPathway, Step: 1, InputHash: "ab", Agent: "gpt", Result: AgentResult{
			Reply: `Say "hi"`, Complete: ptr.To(true), Outputs: &apiextensionsv1.JSON{Raw: []byte(`{"topic":"x"}`)}, Usage: Usage{PromptTokens: 5}}},
		{ID: "u/2/cd", Kind: EffectDecide, Step: 2, InputHash: "cd", Result: AgentResult{Destination: "b", Confidence: "0.9"}},
	}}
	raw, err := json.Marshal(&st)
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Journal []string `json:"journal"`
		Step    int64    `json:"step"`
	}
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatalf("the journal is not stored as strings: %v\n%s", err, raw)
	}
	if len(stored.Journal) != 2 || stored.Step != 3 || !strings.Contains(stored.Journal[0], `"reply":"Say \"hi\""`) {
		t.Fatalf("stored %s", raw)
	}
	if n := JournalEntryBytes(&st.Journal[0]); n != len(mustJSON(t, stored.Journal[0]))+1 {
		t.Errorf("JournalEntryBytes %d, stored %d and a separator", n, len(mustJSON(t, stored.Journal[0])))
	}
	var back SessionStatus
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, st) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, st)
	}
	// A value (not a pointer) encodes the same, as a Session's status field does.
	if byValue, _ := json.Marshal(st); string(byValue) != string(raw) {
		t.Errorf("by value %s, by pointer %s", byValue, raw)
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
