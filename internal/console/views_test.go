package console

import (
	"testing"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// TestTimelineNamesTheMessageOfATransition: a transition shows the text of the message
// that caused it, from spec.messages while the message is there, from the transcript
// once kubectl journey say has dropped it, and says so when neither keeps it.
func TestTimelineNamesTheMessageOfATransition(t *testing.T) {
	s := &flowv1alpha1.Session{
		Spec: flowv1alpha1.SessionSpec{
			MessagesDropped: 2,
			Messages:        []flowv1alpha1.Message{{ID: "m-3", Text: "Book the Tuesday slot."}},
		},
		Status: flowv1alpha1.SessionStatus{
			Transcript: []flowv1alpha1.Exchange{{MessageID: "m-2", User: "What is the copay?", Assistant: "USD 40."}},
			History: []flowv1alpha1.HistoryEntry{
				{Step: 1, From: "intake", To: "booking", MessageID: "m-1"},
				{Step: 2, From: "booking", To: "faq", MessageID: "m-2"},
				{Step: 3, From: "booking", To: "confirmation", MessageID: "m-3"},
			},
		},
	}
	want := map[int64]string{
		1: "m-1: " + droppedMessage,
		2: "m-2: What is the copay?",
		3: "m-3: Book the Tuesday slot.",
	}
	seen := 0
	for _, it := range timeline(s) {
		if it.Kind != "transition" {
			continue
		}
		for _, f := range it.Fields {
			if f.Name != "After message" {
				continue
			}
			seen++
			if f.Value != want[it.Step] {
				t.Errorf("step %d: After message %q, want %q", it.Step, f.Value, want[it.Step])
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d transitions name their message, want %d", seen, len(want))
	}
}
