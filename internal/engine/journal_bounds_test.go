package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func TestJournalIsBounded(t *testing.T) {
	st := &flowv1.SessionStatus{}
	limit := int32(3)
	for i := range 5 {
		AppendJournal(st, &flowv1.EffectRecord{ID: fmt.Sprint(i)}, &limit)
	}
	if len(st.Journal) != 3 || st.Journal[0].ID != "2" || st.Journal[2].ID != "4" || st.JournalDropped != 2 {
		t.Errorf("journal %+v dropped %d: want the last 3 and 2 dropped", st.Journal, st.JournalDropped)
	}
	off := int32(0)
	AppendJournal(st, &flowv1.EffectRecord{ID: "x"}, &off)
	if len(st.Journal) != 0 || st.JournalDropped != 6 {
		t.Errorf("maxJournal 0: journal %+v dropped %d", st.Journal, st.JournalDropped)
	}
}

func TestJournalIsBoundedByBytes(t *testing.T) {
	var st flowv1.SessionStatus
	for i := range 100 {
		// Quotes take two bytes each in the stored journal (a JSON string an answer).
		AppendJournal(&st, &flowv1.EffectRecord{ID: "e", Step: int64(i), Result: flowv1.AgentResult{Reply: strings.Repeat(`r"`, 500)}}, nil)
	}
	raw, err := json.Marshal(&st)
	if err != nil {
		t.Fatal(err)
	}
	var stored map[string]json.RawMessage
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	b := stored["journal"]
	if len(b) > flowv1.MaxJournalBytes || len(st.Journal) < 5 || st.Journal[len(st.Journal)-1].Step != 99 {
		t.Errorf("%d entries, %d bytes", len(st.Journal), len(b))
	}
	if int(st.JournalDropped)+len(st.Journal) != 100 {
		t.Errorf("dropped %d of 100, kept %d", st.JournalDropped, len(st.Journal))
	}
}
