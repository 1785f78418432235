package engine

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// The transcript (status.transcript) is the conversation pathway agents see: each
// turn's user message with the reply that answered it, bounded by
// limits.maxTranscriptBytes. Whole exchanges are dropped from the front to stay under
// the bound; a message is never cut. The first drop sets the TranscriptTrimmed
// condition, which stays: the conversation agents see is no longer the whole one.

// recordExchange appends the turn that just ended to the transcript: its message (for
// a message turn) and its reply. A turn with neither adds nothing.
func (r *run) recordExchange() {
	lt := r.st.LastTurn
	if lt == nil {
		return
	}
	ex := flowv1.Exchange{MessageID: lt.MessageID, Pathway: lt.Pathway, Assistant: lt.AssistantText}
	if lt.MessageID != "" {
		ex.User, _ = r.message(lt.MessageID)
	}
	if ex.User == "" && ex.Assistant == "" {
		return
	}
	st := r.st
	st.Transcript = append(st.Transcript, ex)
	total := 0
	for _, e := range st.Transcript {
		total += exchangeBytes(e)
	}
	drop := 0
	for drop < len(st.Transcript) && total > r.snap.lim.transcriptBytes {
		total -= exchangeBytes(st.Transcript[drop])
		drop++
	}
	if drop > 0 {
		st.Transcript = append([]flowv1.Exchange(nil), st.Transcript[drop:]...)
		st.TranscriptDropped += int32(drop)
		setCondition(st, flowv1.ConditionTranscriptTrimmed, metav1.ConditionTrue, flowv1.ReasonOldestExchangesDropped, fmt.Sprintf(
			"The oldest exchanges are dropped from status.transcript to keep it under %d bytes (status.transcriptDropped counts them); pathway agents no longer see them",
			r.snap.lim.transcriptBytes), r.now)
	}
	if len(st.Transcript) == 0 {
		st.Transcript = nil
	}
}

func exchangeBytes(e flowv1.Exchange) int { return len(e.User) + len(e.Assistant) }

// history is the transcript as alternating user and assistant lines, oldest first.
func (r *run) history() []agent.Exchange {
	var out []agent.Exchange
	for _, e := range r.st.Transcript {
		if e.User != "" {
			out = append(out, agent.Exchange{Role: "user", Text: e.User})
		}
		if e.Assistant != "" {
			out = append(out, agent.Exchange{Role: "assistant", Text: e.Assistant})
		}
	}
	return out
}
