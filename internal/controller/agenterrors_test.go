package controller

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

func condition(s *flowv1.Session, typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(s.Status.Conditions, typ)
}

// triageAgainstFailingAgent runs the healthcare sample with its classifier on a chat
// server that answers every call with status, and sends the first message.
func triageAgainstFailingAgent(t *testing.T, status int) (string, *testenv.ChatServer, *flowv1.Session) {
	t.Helper()
	ns := newNamespace(t)
	cs := newChatServer(t, faqClassifier)
	cs.Respond(failing(status))
	startManager(t, ns, Options{})
	s := withOpenAITriage(t, ns, cs)
	create(t, s)
	send(t, ns, s.Name, "m1", "Hi, I need to book an appointment with a cardiologist. Here's my referral.")
	return ns, cs, s
}

// A rate-limited endpoint sets AgentAvailable=False and loses nothing: when it
// recovers, the message is processed once.
func TestRateLimitedAgentRecovers(t *testing.T) {
	t.Parallel()
	ns, cs, s := triageAgainstFailingAgent(t, http.StatusTooManyRequests)
	eventually(t, 20*time.Second, func() error {
		got := get(t, ns, s.Name, &flowv1.Session{})
		c := condition(got, flowv1.ConditionAgentAvailable)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != flowv1.ReasonRateLimited {
			return fmt.Errorf("AgentAvailable = %+v", c)
		}
		if got.Status.ProcessedMessages != 0 {
			return fmt.Errorf("processed %d while the agent fails", got.Status.ProcessedMessages)
		}
		return nil
	})
	if strings.Contains(fmt.Sprint(get(t, ns, s.Name, &flowv1.Session{}).Status), "sk-test-123") {
		t.Fatal("the API key leaked into status")
	}

	cs.Respond(answering(faqClassifier))
	got := settled(t, ns, s.Name, func(s *flowv1.Session) error {
		if s.Status.ProcessedMessages < 1 {
			return fmt.Errorf("processed %d", s.Status.ProcessedMessages)
		}
		if c := condition(s, flowv1.ConditionAgentAvailable); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("AgentAvailable = %+v", c)
		}
		return nil
	})
	if got.Status.CurrentPathway != "booking" || got.Status.Turns != 1 {
		t.Errorf("after recovery: pathway %s, turns %d; want booking, 1", got.Status.CurrentPathway, got.Status.Turns)
	}
}

// An endpoint that refuses the key stalls the Session with a reason a person can act on.
func TestUnauthorizedAgentStallsSession(t *testing.T) {
	t.Parallel()
	ns, cs, s := triageAgainstFailingAgent(t, http.StatusUnauthorized)
	eventually(t, 20*time.Second, func() error {
		got := get(t, ns, s.Name, &flowv1.Session{})
		c := condition(got, flowv1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != flowv1.ReasonAgentTerminalError {
			return fmt.Errorf("Stalled = %+v", c)
		}
		if strings.Contains(c.Message, "sk-test-123") {
			return fmt.Errorf("the API key is in the condition: %s", c.Message)
		}
		return nil
	})
	calls := cs.Calls()
	time.Sleep(500 * time.Millisecond)
	if cs.Calls() != calls {
		t.Errorf("a terminal error was retried: %d calls, then %d", calls, cs.Calls())
	}
}
