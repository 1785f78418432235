package reliability

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// verdict is what the invariants say about a set of Sessions.
type verdict struct {
	sessions, messages int
	// lost counts messages not processed; duplicated counts messages or transitions
	// applied more than once; escaped counts decisions or intents outside what was
	// allowed; unsettled counts Sessions neither finished nor waiting.
	lost, duplicated, escaped, unsettled int
	problems                             []string
}

func (v *verdict) problem(kind *int, format string, args ...any) {
	*kind++
	if len(v.problems) < 40 {
		v.problems = append(v.problems, fmt.Sprintf(format, args...))
	}
}

func settled(s *flowv1.Session) bool {
	switch s.Status.Phase {
	case flowv1.PhaseCompleted, flowv1.PhaseFailed, flowv1.PhaseCancelled,
		flowv1.PhaseWaitingForInput, flowv1.PhaseAwaitingApproval, flowv1.PhaseEscalated:
		return s.Status.Turn == nil && s.Status.PendingEffect == nil
	}
	return false
}

// check verifies the invariants of the chaos test on each Session:
//   - every message processed exactly once: processedMessages == len(messages);
//     turns == processedMessages (the journey has no other kind of turn); the last
//     turn is the last message's; a message's history entries are contiguous and in
//     message order (a message processed again would show up after a later one);
//   - no transition applied twice: history steps never decrease, no entry repeats, no
//     message's turn takes the same transition twice, and transitions == len(history)
//     (history is not truncated in this journey);
//   - every Session finished or waiting, with no turn or journal entry left over;
//   - no decision outside allowedDestinations, no intent outside the journey's, no
//     pathway outside the journey.
func check(sessions []flowv1.Session) verdict {
	var v verdict
	for i := range sessions {
		s := &sessions[i]
		st := &s.Status
		v.sessions++
		v.messages += len(s.Spec.Messages)
		if lost := len(s.Spec.Messages) - int(st.ProcessedMessages); lost > 0 {
			v.problem(&v.lost, "%s: %d of %d messages processed (phase %s)", s.Name, st.ProcessedMessages, len(s.Spec.Messages), st.Phase)
		} else if lost < 0 {
			v.problem(&v.duplicated, "%s: processedMessages %d > %d messages", s.Name, st.ProcessedMessages, len(s.Spec.Messages))
		}
		if st.Turns != st.ProcessedMessages {
			v.problem(&v.duplicated, "%s: %d turns for %d processed messages", s.Name, st.Turns, st.ProcessedMessages)
		}
		if n := int(st.ProcessedMessages); n > 0 && n <= len(s.Spec.Messages) && st.Turn == nil {
			if st.LastTurn == nil || st.LastTurn.MessageID != s.Spec.Messages[n-1].ID {
				v.problem(&v.duplicated, "%s: last turn is not message %s's: %+v", s.Name, s.Spec.Messages[n-1].ID, st.LastTurn)
			}
		}
		if !settled(s) {
			v.problem(&v.unsettled, "%s: phase %q, turn %v, pending effect %v", s.Name, st.Phase, st.Turn != nil, st.PendingEffect != nil)
		}

		index := map[string]int{}
		for k, m := range s.Spec.Messages {
			index[m.ID] = k
		}
		if int(st.Transitions) != len(st.History) {
			v.problem(&v.duplicated, "%s: %d transitions counted, %d in history", s.Name, st.Transitions, len(st.History))
		}
		lastMsg, seen, edges := -1, map[string]bool{}, map[string]bool{}
		for k, h := range st.History {
			if k > 0 {
				prev := st.History[k-1]
				if h.Step < prev.Step {
					v.problem(&v.duplicated, "%s: history step %d after %d", s.Name, h.Step, prev.Step)
				}
				prev.Time = h.Time
				if equality.Semantic.DeepEqual(prev, h) {
					v.problem(&v.duplicated, "%s: history entry repeated: %+v", s.Name, h)
				}
			}
			if h.MessageID != "" {
				idx, ok := index[h.MessageID]
				switch {
				case !ok:
					v.problem(&v.escaped, "%s: history names unknown message %q", s.Name, h.MessageID)
				case idx < lastMsg || (idx != lastMsg && seen[h.MessageID]):
					v.problem(&v.duplicated, "%s: message %s acted on again after message %d", s.Name, h.MessageID, lastMsg)
				}
				seen[h.MessageID] = true
				lastMsg = max(lastMsg, idx)
				edge := fmt.Sprintf("%s|%s>%s|%s|%s", h.MessageID, h.From, h.To, h.Transition, h.Action)
				if edges[edge] {
					v.problem(&v.duplicated, "%s: message %s took %s -> %s (%s) twice", s.Name, h.MessageID, h.From, h.To, h.Transition)
				}
				edges[edge] = true
			}
			if h.To != "" && !journeyPathways[h.To] {
				v.problem(&v.escaped, "%s: transition to %q, not a pathway of the journey", s.Name, h.To)
			}
			if h.Source == flowv1.SourceAgent && !allowedDecisions[h.To] && (h.To != escalation || !strings.Contains(h.Reason, "escalated")) {
				v.problem(&v.escaped, "%s: agent decision to %q outside allowedDestinations (%s)", s.Name, h.To, h.Reason)
			}
			if h.Source == flowv1.SourceTransition && !globalNames[h.Transition] {
				v.problem(&v.escaped, "%s: global transition %q does not exist", s.Name, h.Transition)
			}
		}
		if d := st.LastDecision; d != nil && d.Source == flowv1.SourceAgent && d.To != "" && (d.State == flowv1.DecisionApplied || d.State == flowv1.DecisionPending) {
			if !slices.Contains(d.AllowedDestinations, d.To) {
				v.problem(&v.escaped, "%s: decision %s chose %q outside %v", s.Name, d.ID, d.To, d.AllowedDestinations)
			}
		}
		if st.CurrentPathway != "" && !journeyPathways[st.CurrentPathway] {
			v.problem(&v.escaped, "%s: current pathway %q is not in the journey", s.Name, st.CurrentPathway)
		}
	}
	return v
}
