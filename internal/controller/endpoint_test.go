package controller

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// A Session stalled by a wrong baseURL resumes when the Journey's baseURL is fixed,
// with no edit to the Session and long before the slow terminal retry: the endpoint is
// read from the Journey's current spec, while the rest of the agent stays pinned.
func TestFixedEndpointResumesStalledSession(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	good := newChatServer(t, faqClassifier)
	// What OpenAI answers for a model the endpoint does not serve: a wrong baseURL
	// (another server, or one without the /v1 prefix) gets the same 404.
	wrong := testenv.NewChatServer(t, testenv.Always(testenv.APIError(http.StatusNotFound,
		"The model `test-model` does not exist or you do not have access to it.", "invalid_request_error").With("Retry-After", "0")))
	startManager(t, ns, Options{})
	s := withOpenAITriage(t, ns, wrong)
	create(t, s)
	// The Session pins its revision at its first step, before any agent call.
	var pinned string
	eventually(t, 20*time.Second, func() error {
		if pinned = get(t, ns, s.Name, &flowv1.Session{}).Status.JourneyRevision; pinned == "" {
			return fmt.Errorf("no revision pinned")
		}
		return nil
	})
	send(t, ns, s.Name, "m1", "Hi, I need to book an appointment with a cardiologist. Here's my referral.")

	eventually(t, 20*time.Second, func() error {
		got := get(t, ns, s.Name, &flowv1.Session{})
		c := condition(got, flowv1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != flowv1.ReasonAgentTerminalError {
			return fmt.Errorf("Stalled = %+v", c)
		}
		return nil
	})
	if wrong.Calls() == 0 {
		t.Fatal("the wrong endpoint was never called")
	}
	generation := get(t, ns, s.Name, &flowv1.Session{}).Generation

	j := get(t, ns, s.Spec.JourneyRef.Name, &flowv1.Journey{})
	patch := client.MergeFrom(j.DeepCopy())
	for i := range j.Spec.Agents {
		if j.Spec.Agents[i].Name == "triage" {
			j.Spec.Agents[i].BaseURL = good.BaseURL()
			// The model decides behaviour: it stays pinned in the Session's revision.
			j.Spec.Agents[i].Model = "another-model"
		}
	}
	if err := k8sClient.Patch(context.Background(), j, patch); err != nil {
		t.Fatal(err)
	}

	got := settled(t, ns, s.Name, func(s *flowv1.Session) error {
		if s.Status.ProcessedMessages < 1 {
			return fmt.Errorf("processed %d", s.Status.ProcessedMessages)
		}
		if c := condition(s, flowv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
			return fmt.Errorf("still Stalled: %s", c.Message)
		}
		return nil
	})
	if got.Status.CurrentPathway != "booking" || got.Status.Turns != 1 {
		t.Errorf("after the fix: pathway %s, turns %d; want booking, 1", got.Status.CurrentPathway, got.Status.Turns)
	}
	if got.Generation != generation {
		t.Errorf("the Session was edited: generation %d, then %d", generation, got.Generation)
	}
	if got.Status.JourneyRevision != pinned {
		t.Errorf("the Session moved from revision %s to %s", pinned, got.Status.JourneyRevision)
	}
	if good.Calls() == 0 {
		t.Error("the fixed endpoint was never called")
	}
	req := good.Request(t, 1)
	if bearer := req.Bearer(); bearer != "Bearer sk-test-123" {
		t.Errorf("the fixed endpoint got Authorization %q", bearer)
	}
	if req.Model != "test-model" {
		t.Errorf("the fixed endpoint was asked for model %q; want the pinned test-model", req.Model)
	}
}
