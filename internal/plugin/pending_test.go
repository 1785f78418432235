package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// A Session created together with its Journey reports JourneyNotReady until the
// Journey is validated: `say --wait` keeps waiting then, and fails at once only when
// the Journey is missing or its controller found it invalid.
func TestSayWaitsForAJourneyBeingValidated(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	j := &flowv1alpha1.Journey{
		ObjectMeta: metav1.ObjectMeta{Name: "validating", Namespace: "default"},
		Spec: flowv1alpha1.JourneySpec{
			EntryPathway: "echo",
			Pathways:     []flowv1alpha1.PathwayEntry{{Name: "echo", PathwayRef: "echo"}},
		},
	}
	if err := admin.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	s := &flowv1alpha1.Session{
		ObjectMeta: metav1.ObjectMeta{Name: "early", Namespace: "default"},
		Spec:       flowv1alpha1.SessionSpec{JourneyRef: flowv1alpha1.JourneyReference{Name: "validating"}},
	}
	if err := admin.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	notReady := func(gen int64) func(*flowv1alpha1.SessionStatus) {
		return func(st *flowv1alpha1.SessionStatus) {
			st.ObservedGeneration = gen
			apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: flowv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: flowv1alpha1.ReasonJourneyNotReady, Message: `Journey "validating" is not Ready: it has not been validated yet`})
		}
	}
	setStatus(t, "early", notReady(s.Generation))

	// Play the controller: report the message as seen while the Journey is not
	// validated yet, then validate the Journey and answer.
	go func() {
		for range 200 {
			cur := getSessionE("early")
			if cur == nil || len(cur.Spec.Messages) == 0 {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if err := patchStatus("early", notReady(cur.Generation)); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(300 * time.Millisecond)
			if err := setJourneyReady(ctx, metav1.ConditionTrue); err != nil {
				t.Error(err)
				return
			}
			err := patchStatus("early", func(st *flowv1alpha1.SessionStatus) {
				st.Phase, st.CurrentPathway, st.ProcessedMessages = flowv1alpha1.PhaseWaitingForInput, "echo", 1
				apimeta.RemoveStatusCondition(&st.Conditions, flowv1alpha1.ConditionReady)
				st.LastTurn = &flowv1alpha1.TurnOutcome{MessageID: "m-1", Pathway: "echo", AssistantText: "heard you"}
			})
			if err != nil {
				t.Error(err)
			}
			return
		}
	}()
	out, _, err := kubectlJourney(ctx, "say", "early", "hello", "--wait", "--timeout", "20s")
	if err != nil {
		t.Fatalf("say --wait while the Journey was being validated: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Reply:      heard you") {
		t.Errorf("output:\n%s", out)
	}

	// A Journey its controller found invalid, for its current generation: final.
	if err := setJourneyReady(ctx, metav1.ConditionFalse); err != nil {
		t.Fatal(err)
	}
	setStatus(t, "early", func(st *flowv1alpha1.SessionStatus) {
		st.Phase = ""
		notReady(getSession(t, "early").Generation + 1)(st)
	})
	start := time.Now()
	_, _, err = kubectlJourney(ctx, "say", "early", "again", "--wait", "--timeout", "20s")
	if err == nil || !strings.Contains(err.Error(), "cannot start (JourneyNotReady)") {
		t.Fatalf("say --wait to a Session whose Journey is invalid: %v", err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Errorf("waited %s for a Session that cannot start", waited)
	}
}

func getSessionE(name string) *flowv1alpha1.Session {
	s := &flowv1alpha1.Session{}
	if err := admin.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: name}, s); err != nil {
		return nil
	}
	return s
}

// setJourneyReady plays the Journey controller for the Journey "validating".
func setJourneyReady(ctx context.Context, status metav1.ConditionStatus) error {
	j := &flowv1alpha1.Journey{}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: "default", Name: "validating"}, j); err != nil {
		return err
	}
	base := j.DeepCopy()
	apimeta.SetStatusCondition(&j.Status.Conditions, metav1.Condition{Type: flowv1alpha1.ConditionReady, Status: status,
		Reason: "Checked", Message: "checked by the test", ObservedGeneration: j.Generation})
	if status == metav1.ConditionTrue {
		j.Status.ReadyRevision = "validating-1"
	}
	return admin.Status().Patch(ctx, j, client.MergeFrom(base))
}

// Approving a tool call says it is one, and names the tool.
func TestApproveNamesAToolCall(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	newSession(t, "tool-approve")
	setStatus(t, "tool-approve", func(st *flowv1alpha1.SessionStatus) {
		st.Phase, st.CurrentPathway = flowv1alpha1.PhaseAwaitingApproval, "book"
		st.LastDecision = &flowv1alpha1.DecisionRecord{ID: "t-3-2", Transition: "tool:book_slot", From: "book", State: flowv1alpha1.DecisionPending}
	})
	out, _, err := kubectlJourney(ctx, "approve", "tool-approve", "--reason", "confirmed")
	if err != nil {
		t.Fatal(err)
	}
	if want := "tool call t-3-2 (book_slot) approved on session/tool-approve\n"; out != want {
		t.Errorf("output %q, want %q", out, want)
	}
}
