package engine

import (
	"encoding/json"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Every status list that grows with a conversation is bounded by bytes as well as by
// count, so that a Session's stored size stays under the bound Limits.MaxObjectBytes
// (api/v1alpha1) derives from its limits; the byte bounds are defined there.

// StoredBytes is what v costs as an entry of a status list: its JSON and a separator.
// The byte bounds of history, journal and transcript count their entries with it.
func StoredBytes(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b) + 1
}

// trimHistory keeps the newest entries of history within count entries and
// flowv1.MaxHistoryBytes; the newest one is always kept.
func trimHistory(history []flowv1.HistoryEntry, count int) []flowv1.HistoryEntry {
	total, keep := 2, 0 // the brackets
	for i := len(history) - 1; i >= 0 && keep < count; i-- {
		n := StoredBytes(&history[i])
		if keep > 0 && total+n > flowv1.MaxHistoryBytes {
			break
		}
		total += n
		keep++
	}
	if keep == len(history) {
		return history
	}
	return append([]flowv1.HistoryEntry(nil), history[len(history)-keep:]...)
}
