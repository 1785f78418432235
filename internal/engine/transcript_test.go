package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Each turn's message and reply are kept in the transcript, which the reply template
// reads; over maxTranscriptBytes the oldest exchanges are dropped whole.
func TestTranscript(t *testing.T) {
	// An exchange costs its JSON and a separator; the brackets take 2 bytes. The
	// bound holds two exchanges and half of a third, besides the last turn's
	// replies, which share it.
	one, _ := json.Marshal(flowv1.Exchange{MessageID: "m2", Pathway: "chat", User: "hello 2", Assistant: "4 before"})
	replies := StoredBytes([]flowv1.TurnReply{{Pathway: "chat", Text: "4 before"}})
	bound := int32(2 + 2*(len(one)+1) + len(one)/2 + replies)
	d := conversation(func(j *flowv1.JourneySpec) { j.Limits.MaxTranscriptBytes = new(bound) })
	d.p["chat"].Builtin.Reply = `{{ len .history }} before`
	s := newSession(t, d)
	for i := range 4 {
		s.say(fmt.Sprintf("m%d", i), fmt.Sprintf("hello %d", i))
		s.settle()
	}
	// Two exchanges fit. A turn sees the two before it as four lines.
	tr := s.st.Transcript
	if len(tr) != 2 || s.st.TranscriptDropped != 2 {
		t.Fatalf("transcript %s, dropped %d: want the last 2 exchanges", dump(tr), s.st.TranscriptDropped)
	}
	if !exchangeEqual(tr[0], flowv1.Exchange{MessageID: "m2", Pathway: "chat", User: "hello 2", Assistant: "4 before", Step: 3}) ||
		!exchangeEqual(tr[1], flowv1.Exchange{MessageID: "m3", Pathway: "chat", User: "hello 3", Assistant: "4 before", Step: 4}) {
		t.Errorf("transcript %s", dump(tr))
	}
	// An exchange larger than the bound is dropped whole, never cut.
	s.say("m4", strings.Repeat("a message longer than the bound on its own ", 5))
	s.settle()
	if len(s.st.Transcript) != 0 || s.st.TranscriptDropped != 5 {
		t.Errorf("transcript %s, dropped %d", dump(s.st.Transcript), s.st.TranscriptDropped)
	}
}

// The transcript is bounded by what it takes in status, ids and field names included,
// and by its CRD's item count: a long conversation of one-letter messages neither
// outgrows maxTranscriptBytes as stored nor makes a status the API server refuses.
func TestTranscriptOfShortMessagesStaysBounded(t *testing.T) {
	const bound = 131072 // the largest the API allows
	d := conversation(func(j *flowv1.JourneySpec) {
		j.Limits.MaxTranscriptBytes = new(int32(bound))
		j.Limits.MaxTurns = 2000
	})
	d.p["chat"].Builtin.Reply = "k"
	s := newSession(t, d)
	for i := range MaxTranscriptExchanges + 100 {
		s.say(fmt.Sprintf("m%d", i), "y")
		s.settleQuickly()
		s.spec.Messages, s.spec.MessagesDropped = nil, s.spec.MessagesDropped+1
	}
	tr := s.st.Transcript
	stored, _ := json.Marshal(tr)
	if len(tr) != MaxTranscriptExchanges || int(s.st.TranscriptDropped) != 100 || len(stored) > bound {
		t.Fatalf("%d exchanges kept, %d dropped, %d bytes stored", len(tr), s.st.TranscriptDropped, len(stored))
	}
	if last := tr[len(tr)-1]; last.MessageID != fmt.Sprintf("m%d", MaxTranscriptExchanges+99) {
		t.Errorf("the newest exchange is %s", last.MessageID)
	}

	// At the default bound, as stored, the same conversation keeps fewer.
	d = conversation(func(j *flowv1.JourneySpec) { j.Limits.MaxTurns = 2000 })
	s = newSession(t, d)
	for i := range 400 {
		s.say(fmt.Sprintf("m%d", i), "y")
		s.settleQuickly()
		s.spec.Messages, s.spec.MessagesDropped = nil, s.spec.MessagesDropped+1
	}
	if stored, _ := json.Marshal(s.st.Transcript); len(stored) > flowv1.DefaultMaxTranscriptBytes || s.st.TranscriptDropped == 0 {
		t.Errorf("%d exchanges, %d bytes stored, %d dropped", len(s.st.Transcript), len(stored), s.st.TranscriptDropped)
	}
}

// settleQuickly steps until a step changes nothing, like settle but without its
// per-step purity checks, whose deep copies would dominate a long conversation.
func (s *session) settleQuickly() {
	s.t.Helper()
	for range 200 {
		st, eff := Step(s.snap, s.input())
		if eff != nil {
			s.t.Fatalf("unexpected effect %s", eff.Kind)
		}
		unchanged := st.Step == s.st.Step
		s.st = st
		if unchanged {
			return
		}
	}
	s.t.Fatalf("no settling after 200 steps")
}
