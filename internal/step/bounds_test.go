package step

import (
	"encoding/json"
	"strings"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func TestDefaultBoundIsUnder256KiB(t *testing.T) {
	if n := MaxObjectBytes(flowv1.Limits{}); n >= 256*1024 {
		t.Errorf("a Session with the default limits may take %d bytes", n)
	}
	// The largest limits the API allows still stay under etcd's request limit.
	largest := flowv1.Limits{MaxContextBytes: 524288, MaxTranscriptBytes: new(int32(131072))}
	if n := MaxObjectBytes(largest); n >= 1536*1024 {
		t.Errorf("a Session with the largest limits may take %d bytes", n)
	}
	// A journey's own transcript bound counts, not the default's.
	if MaxObjectBytes(largest)-MaxObjectBytes(flowv1.Limits{MaxContextBytes: 524288}) != 131072-16384 {
		t.Errorf("the bound ignores limits.maxTranscriptBytes")
	}
}

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
