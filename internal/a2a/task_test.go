package a2a

import (
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// waiting is a Session that took three messages and answered each; the transcript
// keeps the last two exchanges only.
func waiting() *flowv1.Session {
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 4}}
	s.Spec.Messages = []flowv1.Message{{ID: "m-1", Text: "a"}, {ID: "m-2", Text: "b"}, {ID: "m-3", Text: "c"}}
	s.Status = flowv1.SessionStatus{
		Phase: flowv1.PhaseWaitingForInput, Step: 9, ObservedGeneration: 4, ProcessedMessages: 3,
		TranscriptDropped: 1,
		Transcript: []flowv1.Exchange{
			{MessageID: "m-2", User: "b", Assistant: "B", Step: 6},
			{MessageID: "m-3", User: "c", Assistant: "C", Step: 9},
		},
	}
	return s
}

func ids(events []a2a.Event) []string {
	var out []string
	for _, ev := range events {
		out = append(out, ev.Meta()[MetaEventID].(string))
	}
	return out
}

func TestEventsAfter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		after     string
		want      []string
		wantFinal bool
	}{
		{"from the start, the trimmed exchange is a gap", "t0.s0", []string{"t1.gap", "t2.s6", "t3.s9", "t3.s9.input-required"}, true},
		{"after a gap", "t1.gap", []string{"t2.s6", "t3.s9", "t3.s9.input-required"}, true},
		{"after an exchange", "t2.s6", []string{"t3.s9", "t3.s9.input-required"}, true},
		{"after the last exchange", "t3.s9", []string{"t3.s9.input-required"}, true},
		{"after the state: nothing", "t3.s9.input-required", nil, true},
		{"after another state at the same place", "t3.s8.input-required.d-8", []string{"t3.s9.input-required"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseCursor(tc.after)
			if err != nil {
				t.Fatal(err)
			}
			events, last, final := eventsAfter(waiting(), c)
			got := ids(events)
			if len(got) != len(tc.want) || final != tc.wantFinal {
				t.Fatalf("events %q final %v, want %q final %v", got, final, tc.want, tc.wantFinal)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("event %d: %s, want %s", i, got[i], tc.want[i])
				}
			}
			if len(got) > 0 && last.id() != got[len(got)-1] {
				t.Errorf("cursor after the events %s, want the last id %s", last.id(), got[len(got)-1])
			}
		})
	}
}

func TestEventsWaitForTheMessage(t *testing.T) {
	s := waiting()
	s.Spec.Messages = append(s.Spec.Messages, flowv1.Message{ID: "m-4", Text: "d"})
	s.Generation = 5
	events, _, final := eventsAfter(s, cursor{exchanges: 3, step: 9})
	if len(events) != 0 || final || State(s) != a2a.TaskStateWorking {
		t.Errorf("a message not taken in yet: events %q, final %v, state %s; want none, working", ids(events), final, State(s))
	}
}

func TestStates(t *testing.T) {
	for phase, want := range map[flowv1.Phase]a2a.TaskState{
		flowv1.PhaseWaitingForInput:  a2a.TaskStateInputRequired,
		flowv1.PhaseAwaitingApproval: a2a.TaskStateInputRequired,
		flowv1.PhaseEscalated:        a2a.TaskStateInputRequired,
		flowv1.PhaseCompleted:        a2a.TaskStateCompleted,
		flowv1.PhaseFailed:           a2a.TaskStateFailed,
		flowv1.PhaseCancelled:        a2a.TaskStateCanceled,
		flowv1.PhaseRunning:          a2a.TaskStateWorking,
		flowv1.PhasePending:          a2a.TaskStateSubmitted,
	} {
		s := waiting()
		s.Status.Phase = phase
		if got := State(s); got != want {
			t.Errorf("%s: %s, want %s", phase, got, want)
		}
	}
}

func TestParseCursorRefusesForeignIDs(t *testing.T) {
	for _, id := range []string{"", "abc", "t", "t1", "tx.s1", "t1.sx", "t-1.s1", "3d8f-uuid"} {
		if _, err := parseCursor(id); err == nil {
			t.Errorf("%q was taken as an event id", id)
		}
	}
}
