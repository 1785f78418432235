package step

import (
	"encoding/json"
	"strings"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func TestJournalIsBoundedByBytes(t *testing.T) {
	var st flowv1.SessionStatus
	for i := range 100 {
		AppendJournal(&st, &flowv1.EffectRecord{ID: "e", Step: int64(i), Result: flowv1.AgentResult{Reply: strings.Repeat("r", 4000)}}, nil)
	}
	b, _ := json.Marshal(st.Journal)
	if len(b) > MaxJournalBytes || len(st.Journal) < 5 || st.Journal[len(st.Journal)-1].Step != 99 {
		t.Errorf("%d entries, %d bytes", len(st.Journal), len(b))
	}
	if int(st.JournalDropped)+len(st.Journal) != 100 {
		t.Errorf("dropped %d of 100, kept %d", st.JournalDropped, len(st.Journal))
	}
}
