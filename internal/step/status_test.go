package step

import (
	"fmt"
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
