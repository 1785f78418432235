package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// A Journey that becomes invalid after it was valid (here: a Pathway it references is
// deleted, which no admission check can refuse) keeps serving its last valid revision:
// new Sessions start on readyRevision and answer, the Ready condition and a Warning
// Event say which revision serves and why the latest is invalid, a Pathway edit made
// meanwhile reaches no Session, and fixing the Journey serves the new revision.
func TestInvalidJourneyKeepsServingTheReadyRevision(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	echoJourney(t, ns, "v1 {{ .message }}")
	help := entryPathway(ns, "help", "")
	create(t, help)
	j := get(t, ns, "echo", &flowv1.Journey{})
	j.Spec.Pathways = append(j.Spec.Pathways, flowv1.PathwayEntry{Name: "help", PathwayRef: "help"})
	j.Spec.Transitions = []flowv1.GlobalTransition{{Name: "ask-for-help", From: "*", To: "help",
		Trigger: flowv1.Trigger{Intent: &flowv1.IntentTrigger{Patterns: []string{"help me"}}}}}
	if err := k8sClient.Update(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	var r1 string
	eventually(t, 30*time.Second, func() error {
		j := get(t, ns, "echo", &flowv1.Journey{})
		if j.Status.Pathways != 2 || j.Status.ReadyRevision == "" || j.Status.LatestRevision != j.Status.ReadyRevision {
			return fmt.Errorf("pathways %d, ready %q, latest %q", j.Status.Pathways, j.Status.ReadyRevision, j.Status.LatestRevision)
		}
		r1 = j.Status.ReadyRevision
		return nil
	})

	if err := k8sClient.Delete(context.Background(), help); err != nil {
		t.Fatal(err)
	}
	latest := waitServing(t, ns, r1, "", flowv1.ReasonPathwayNotFound, `pathway "help": Pathway "help" not found`)
	if c := apimeta.FindStatusCondition(get(t, ns, "echo", &flowv1.Journey{}).Status.Conditions, flowv1.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Reconciling = %+v; want True while a referenced Pathway does not exist", c)
	}
	waitJourneyWarning(t, ns, flowv1.ReasonPathwayNotFound, "serving "+r1+"; "+latest+" is invalid: ")

	// The Pathway edit makes another invalid snapshot: still nothing but r1 serves.
	p := get(t, ns, "echo", &flowv1.Pathway{})
	p.Spec.Builtin.Reply = "v2 {{ .message }}"
	if err := k8sClient.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ns, r1, latest, flowv1.ReasonPathwayNotFound, `pathway "help": Pathway "help" not found`)
	create(t, sessionOf(ns, "meanwhile", "echo"))
	send(t, ns, "meanwhile", "m1", "hello")
	if s := replied(t, ns, "meanwhile", 1); s.Status.LastTurn.AssistantText != "v1 hello" || s.Status.JourneyRevision != r1 {
		t.Errorf("a new Session replied %q on revision %s; want v1 on the ready revision %s", s.Status.LastTurn.AssistantText, s.Status.JourneyRevision, r1)
	}

	// Fixing the Journey serves its new revision, with the Pathway edit.
	j = get(t, ns, "echo", &flowv1.Journey{})
	j.Spec.Pathways = j.Spec.Pathways[:1]
	j.Spec.Transitions = nil
	if err := k8sClient.Update(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	var r3 string
	eventually(t, 30*time.Second, func() error {
		j := get(t, ns, "echo", &flowv1.Journey{})
		c := apimeta.FindStatusCondition(j.Status.Conditions, flowv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || j.Status.ReadyRevision == r1 || j.Status.LatestRevision != j.Status.ReadyRevision {
			return fmt.Errorf("Ready %+v, ready %q, latest %q", c, j.Status.ReadyRevision, j.Status.LatestRevision)
		}
		if c := apimeta.FindStatusCondition(j.Status.Conditions, flowv1.ConditionReconciling); c != nil {
			return fmt.Errorf("Reconciling still present: %+v", c)
		}
		r3 = j.Status.ReadyRevision
		return nil
	})
	create(t, sessionOf(ns, "fixed", "echo"))
	send(t, ns, "fixed", "m1", "hello")
	if s := replied(t, ns, "fixed", 1); s.Status.LastTurn.AssistantText != "v2 hello" || s.Status.JourneyRevision != r3 {
		t.Errorf("a Session after the fix replied %q on revision %s; want v2 on %s", s.Status.LastTurn.AssistantText, s.Status.JourneyRevision, r3)
	}
}

// waitServing waits until the Journey echo serves ready while its latest revision,
// another than before, is invalid for reason, the Ready message saying so and
// containing issue; it returns the latest revision.
func waitServing(t *testing.T, ns, ready, before, reason, issue string) string {
	t.Helper()
	var latest string
	eventually(t, 30*time.Second, func() error {
		j := get(t, ns, "echo", &flowv1.Journey{})
		c := apimeta.FindStatusCondition(j.Status.Conditions, flowv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || c.ObservedGeneration != j.Generation {
			return fmt.Errorf("Ready = %+v", c)
		}
		if j.Status.ReadyRevision != ready || j.Status.LatestRevision == "" || j.Status.LatestRevision == ready || j.Status.LatestRevision == before {
			return fmt.Errorf("ready %q, latest %q; want ready %s and a latest other than %q", j.Status.ReadyRevision, j.Status.LatestRevision, ready, before)
		}
		prefix := "serving " + ready + "; " + j.Status.LatestRevision + " is invalid: "
		if !strings.HasPrefix(c.Message, prefix) || !strings.Contains(c.Message, issue) {
			return fmt.Errorf("Ready message %q; want %q... with %q", c.Message, prefix, issue)
		}
		latest = j.Status.LatestRevision
		return nil
	})
	return latest
}

// waitJourneyWarning waits for a Warning Event with reason on the Journey echo whose
// note starts with prefix.
func waitJourneyWarning(t *testing.T, ns, reason, prefix string) {
	t.Helper()
	eventually(t, 10*time.Second, func() error {
		var list eventsv1.EventList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind != "Journey" || e.Regarding.Name != "echo" {
				continue
			}
			if e.Type == "Warning" && e.Reason == reason && strings.HasPrefix(e.Note, prefix) {
				return nil
			}
			seen = append(seen, e.Type+" "+e.Reason+": "+e.Note)
		}
		return fmt.Errorf("no Warning %s %q... on the Journey; events %q", reason, prefix, seen)
	})
}

// replied waits until the Session has processed n messages.
func replied(t *testing.T, ns, name string, n int32) *flowv1.Session {
	t.Helper()
	return settled(t, ns, name, func(s *flowv1.Session) error {
		if s.Status.ProcessedMessages < n {
			return fmt.Errorf("processed %d", s.Status.ProcessedMessages)
		}
		return nil
	})
}
