package engine

import (
	"fmt"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Each turn's message and reply are kept in the transcript, which the reply template
// reads; over maxTranscriptBytes the oldest exchanges are dropped whole.
func TestTranscript(t *testing.T) {
	d := conversation(func(j *flowv1.JourneySpec) { j.Limits.MaxTranscriptBytes = new(int32(40)) })
	d.p["chat"].Builtin.Reply = `{{ len .history }} before`
	s := newSession(t, d)
	for i := range 4 {
		s.say(fmt.Sprintf("m%d", i), fmt.Sprintf("hello %d", i))
		s.settle()
	}
	// Each exchange is 7 + 8 = 15 bytes: two fit in 40. A turn sees the two before it
	// as four lines.
	tr := s.st.Transcript
	if len(tr) != 2 || s.st.TranscriptDropped != 2 {
		t.Fatalf("transcript %s, dropped %d: want the last 2 exchanges", dump(tr), s.st.TranscriptDropped)
	}
	if !exchangeEqual(tr[0], flowv1.Exchange{MessageID: "m2", Pathway: "chat", User: "hello 2", Assistant: "4 before"}) ||
		!exchangeEqual(tr[1], flowv1.Exchange{MessageID: "m3", Pathway: "chat", User: "hello 3", Assistant: "4 before"}) {
		t.Errorf("transcript %s", dump(tr))
	}
	// An exchange larger than the bound is dropped whole, never cut.
	s.say("m4", "a message that is longer than forty bytes on its own")
	s.settle()
	if len(s.st.Transcript) != 0 || s.st.TranscriptDropped != 5 {
		t.Errorf("transcript %s, dropped %d", dump(s.st.Transcript), s.st.TranscriptDropped)
	}
}
