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
// flowv1.MaxHistoryBytes, as stored; the newest one is always kept.
func trimHistory(history []flowv1.HistoryEntry, count int) []flowv1.HistoryEntry {
	return keepNewestSized(history, count, flowv1.MaxHistoryBytes, true, flowv1.HistoryEntryBytes)
}

// trimInterventions keeps the newest records of status.interventions within
// flowv1.MaxInterventionRecords and flowv1.MaxInterventionRecordsBytes; the newest one
// is always kept.
func trimInterventions(records []flowv1.InterventionRecord) []flowv1.InterventionRecord {
	return keepNewest(records, flowv1.MaxInterventionRecords, flowv1.MaxInterventionRecordsBytes, true)
}

// keepNewest keeps the newest entries of list within count entries and maxBytes (the
// list's JSON: each entry's StoredBytes and the brackets), dropping the oldest. With
// newestAlways, the newest entry is kept even when it alone passes maxBytes (the
// list then says what happened last); count 0 keeps nothing. It returns list itself
// when nothing is dropped, else a copy.
func keepNewest[T any](list []T, count, maxBytes int, newestAlways bool) []T {
	return keepNewestSized(list, count, maxBytes, newestAlways, func(v *T) int { return StoredBytes(v) })
}

// keepNewestSized is keepNewest for a list whose entries are stored in another form
// than their JSON: size is what an entry takes as stored, separator included.
func keepNewestSized[T any](list []T, count, maxBytes int, newestAlways bool, size func(*T) int) []T {
	total, keep := 2, 0 // the brackets
	for i := len(list) - 1; i >= 0 && keep < count; i-- {
		n := size(&list[i])
		if total+n > maxBytes && (keep > 0 || !newestAlways) {
			break
		}
		total += n
		keep++
	}
	if keep == len(list) {
		return list
	}
	return append([]T(nil), list[len(list)-keep:]...)
}
