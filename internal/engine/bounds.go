package engine

import (
	"encoding/json"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Byte bounds of the status lists the engine writes. Every list that grows with a
// conversation is bounded by bytes as well as by count, so that a Session's stored size
// stays under the bound internal/step.MaxObjectBytes derives from its limits.
const (
	// MaxHistoryBytes bounds status.history: the oldest transitions are dropped past it
	// (the newest is always kept; an entry's reason is at most 1 KiB).
	MaxHistoryBytes = 16384
)

// ContextHistoryBytes bounds status.contextHistory for a context capped at
// contextBytes: a quarter of it. Versions are deltas, so this holds the last changes
// of a conversation, not copies of the context.
func ContextHistoryBytes(contextBytes int) int { return contextBytes / 4 }

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
// MaxHistoryBytes; the newest one is always kept.
func trimHistory(history []flowv1.HistoryEntry, count int) []flowv1.HistoryEntry {
	total, keep := 2, 0 // the brackets
	for i := len(history) - 1; i >= 0 && keep < count; i-- {
		n := StoredBytes(&history[i])
		if keep > 0 && total+n > MaxHistoryBytes {
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
