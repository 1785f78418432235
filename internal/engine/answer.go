package engine

import (
	"cmp"
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// Every turn answers. A pathway run that ends without a reply of its own answers with
// a fallback reply when its run failed or was stopped (a failure finishReason), or when
// it ends the turn of a message that got no reply at all (an empty model answer, a
// pathway that waits for input, a decision that waits for a person). The fallback is
// the pathway's fallbackReply, else the Journey's, else defaultReplies[finishReason].
// Every reply of the turn is kept in lastTurn.replies, the entry runs a message led
// into included (see continuesTurn), and each run's reply joins the transcript.

// FallbackReply is the default reply of a turn that failed: the person is never left
// without an answer.
const FallbackReply = "Sorry, something went wrong on our side. Please try again in a moment."

// defaultReplies are the replies of a turn without one of its own, its pathway and
// Journey without a fallbackReply, by how it ended: one sentence that says what
// happened, with nothing from the conversation in it.
var defaultReplies = map[flowv1.FinishReason]string{
	flowv1.FinishSuccess:          "Your message was received; there is nothing to add at this step.",
	flowv1.FinishError:            FallbackReply,
	flowv1.FinishToolCallLimit:    "Sorry, I could not finish this: it needed more tool calls than one turn allows.",
	flowv1.FinishBudgetExceeded:   "Sorry, I cannot go on: this conversation has used up its budget.",
	flowv1.FinishTurnLimit:        "Sorry, this conversation has reached its limit of turns.",
	flowv1.FinishTransitionLimit:  "Sorry, this conversation has reached its limit of steps.",
	flowv1.FinishIterationLimit:   "Sorry, this conversation has started over too many times; a person needs to look at it.",
	flowv1.FinishLoopDetected:     "Sorry, this conversation is going in circles; a person needs to look at it.",
	flowv1.FinishDeadline:         "Sorry, this conversation has timed out.",
	flowv1.FinishPolicyDenied:     "Sorry, that is not allowed here.",
	flowv1.FinishAwaitingApproval: "A person needs to approve the next step; I will go on once they have.",
	flowv1.FinishEscalated:        "I have passed this on to a person, who will decide how to go on.",
}

// completedReply is the default reply of a message's turn that completed the journey
// without a reply.
const completedReply = "This conversation is complete."

// answer ends a pathway run of the turn: its reply, or the fallback reply when it
// must answer without one, joins lastTurn.replies. It answers once per step (a run
// blocked inside a turn is answered by block, then ended by endTurn).
func (r *run) answer() {
	lt := r.st.LastTurn
	if lt == nil || r.answered || lt.FinishReason == flowv1.FinishCancelled {
		return
	}
	r.answered = true
	fallback := false
	if lt.AssistantText == "" {
		text, ok := r.fallback(lt)
		if !ok {
			return
		}
		lt.AssistantText, fallback = text, true
	}
	lt.Replies = append(lt.Replies, flowv1.TurnReply{Pathway: lt.Pathway, Text: preview(lt.AssistantText, flowv1.MaxTurnReplyBytes), Fallback: fallback})
	lt.Replies = keepNewest(lt.Replies, maxTurnReplies, flowv1.MaxTurnRepliesBytes, true)
	r.trimTranscript() // the replies share the transcript's bound
}

// maxTurnReplies is the most replies lastTurn keeps (its CRD's MaxItems).
const maxTurnReplies = 16

// fallback is the reply of the run that ends lt without a reply of its own, and
// whether it must answer: when the run failed, or when it ends a message's turn that
// has no reply yet. A run the turn goes on from (an entry run is due next) leaves
// the answer to that run.
func (r *run) fallback(lt *flowv1.TurnOutcome) (string, bool) {
	if r.turnGoesOn() {
		return "", false
	}
	finish := lt.FinishReason
	if !finish.Failed() {
		if lt.MessageID == "" || len(lt.Replies) > 0 {
			return "", false
		}
		if len(lt.Failures) > 0 {
			finish = flowv1.FinishError // a failure earlier in the turn: say so
		}
	}
	if p := r.snap.pathways[lt.Pathway]; p != nil && p.FallbackReply != "" {
		return p.FallbackReply, true
	}
	if r.snap.journey.FallbackReply != "" {
		return r.snap.journey.FallbackReply, true
	}
	if finish == flowv1.FinishSuccess && r.st.Phase == flowv1.PhaseCompleted {
		return completedReply, true
	}
	return cmp.Or(defaultReplies[finish], FallbackReply), true
}

// turnGoesOn reports whether the turn just ended goes on with an entry run: the
// Session runs, is not blocked, and the pathway it entered runs on entry.
func (r *run) turnGoesOn() bool {
	if r.st.Phase.IsTerminal() || r.blocked() || r.awaiting() {
		return false
	}
	return r.entryDue()
}

// unanswer takes back the fallback reply of a run stopped by the budget that goes on
// now that spec.limits lifted the cap: the run answers when it ends.
func unanswer(lt *flowv1.TurnOutcome) {
	if n := len(lt.Replies); n > 0 && lt.Replies[n-1].Fallback {
		lt.Replies = lt.Replies[:n-1]
		if len(lt.Replies) == 0 {
			lt.Replies = nil
		}
		lt.AssistantText = ""
	}
}

// turnCondition makes TurnFailed agree with the last turn, once it is over (or
// stopped in progress by the budget): True with how it failed, False after a turn
// without failures. It is absent until a turn fails.
func (r *run) turnCondition() {
	st := r.st
	lt := st.LastTurn
	if lt == nil || lt.FinishReason == "" {
		return
	}
	if reason, msg, failed := turnFailure(lt); failed {
		setCondition(st, flowv1.ConditionTurnFailed, metav1.ConditionTrue, reason, msg, r.now)
		return
	}
	if apimeta.FindStatusCondition(st.Conditions, flowv1.ConditionTurnFailed) != nil {
		setCondition(st, flowv1.ConditionTurnFailed, metav1.ConditionFalse, flowv1.ReasonTurnAnswered,
			fmt.Sprintf("The last turn (in pathway %s) ended without a failure", lt.Pathway), r.now)
	}
}

// turnFailure says whether turn lt failed, and how: reason is its finishReason when a
// cap or policy stopped it, else its last failure's source and kind; msg is that
// failure in one line.
func turnFailure(lt *flowv1.TurnOutcome) (reason, msg string, failed bool) {
	if !lt.Failed() {
		return "", "", false
	}
	reason = string(lt.FinishReason)
	msg = fmt.Sprintf("The turn in pathway %s ended with %s", lt.Pathway, lt.FinishReason)
	if n := len(lt.Failures); n > 0 {
		f := lt.Failures[n-1]
		if lt.FinishReason == flowv1.FinishError || !lt.FinishReason.Failed() {
			reason = failureReason(f)
		}
		msg = fmt.Sprintf("Pathway %s: %s", lt.Pathway, f.Summary())
	}
	return reason, truncate.Line(msg, 1024), true
}

// failureReason is a condition reason for failure f: its source and kind
// (LLMTimeout, ToolException), PolicyDenied for a policy.
func failureReason(f flowv1.Failure) string {
	if f.Kind == flowv1.FailurePolicyKind {
		return string(flowv1.FinishPolicyDenied)
	}
	return string(f.Source) + string(f.Kind)
}

// summarize sets status.reason, the REASON column: the Ready condition's reason, or
// TurnFailed while the Session is healthy (Ready True, not Completed) and its last
// turn failed.
func summarize(st *flowv1.SessionStatus) {
	ready := apimeta.FindStatusCondition(st.Conditions, flowv1.ConditionReady)
	reason := ""
	if ready != nil {
		reason = ready.Reason
	}
	if (ready == nil || ready.Status == metav1.ConditionTrue) && st.Phase != flowv1.PhaseCompleted &&
		apimeta.IsStatusConditionTrue(st.Conditions, flowv1.ConditionTurnFailed) {
		reason = flowv1.ConditionTurnFailed
	}
	st.Reason = reason
}
