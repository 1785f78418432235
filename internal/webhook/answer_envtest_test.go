package webhook_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// waitingOnUnknown creates a Session as alice and, as the controller would after a
// crash between a tool call's send and its answer, records a turn in progress whose
// call t-4-0 has an unknown outcome and whose call t-4-1 is done.
func waitingOnUnknown(t *testing.T) *flowv1.Session {
	t.Helper()
	s := newSession(t, nil)
	sent := metav1.NewTime(now.Add(-time.Minute))
	s.Status.Phase = flowv1.PhaseRunning
	s.Status.Turn = &flowv1.TurnProgress{Trigger: flowv1.TurnEntry, Stage: flowv1.StageRun, Pathway: "draft",
		ToolCalls: []flowv1.ToolCallProgress{
			{ToolCallRecord: flowv1.ToolCallRecord{ID: "t-4-0", Tool: "pay", State: flowv1.ToolCallOutcomeUnknown}, IdempotencyKey: string(s.UID) + "-4-0", SentAt: &sent},
			{ToolCallRecord: flowv1.ToolCallRecord{ID: "t-4-1", Tool: "pay", State: flowv1.ToolCallDone}, IdempotencyKey: string(s.UID) + "-4-1"},
		}}
	if err := admin.Status().Update(context.Background(), s); err != nil {
		t.Fatalf("writing status: %v", err)
	}
	return s
}

// TestAnswerAdmission: an Answer intervention is stamped with the user who sent it
// and a forged one is refused; an Answer that names no call whose outcome is unknown
// is refused, naming the calls that wait; and an Answer of a bad shape is refused by
// the schema or the webhook, naming the field.
func TestAnswerAdmission(t *testing.T) {
	t.Parallel()
	s := waitingOnUnknown(t)
	// Only a call whose outcome is unknown takes an answer.
	for call, why := range map[string]string{"t-4-1": "done", "t-9-9": "not a call of the turn"} {
		t.Run("call "+why, func(t *testing.T) {
			err := intervene("bob", s, `{"id":"i-1","action":"Answer","call":"`+call+`","outcome":"Fail"}`)
			wantDenied(t, err, "spec.interventions[0].call", "tool call "+call+" of session/"+s.Name+" does not wait for an answer (waiting: t-4-0)")
		})
	}
	for _, c := range []struct {
		name, iv string
		want     []string
	}{
		{"no call", `{"id":"i-1","action":"Answer","outcome":"Done"}`, []string{"call is required for action Answer"}},
		{"no outcome", `{"id":"i-1","action":"Answer","call":"t-4-0"}`, []string{"outcome is required for action Answer"}},
		{"unknown outcome", `{"id":"i-1","action":"Answer","call":"t-4-0","outcome":"Maybe"}`, []string{"spec.interventions[0].outcome", `"Maybe"`}},
		{"a call on another action", `{"id":"i-1","action":"Retry","call":"t-4-0"}`, []string{"call is required for action Answer and belongs to no other action"}},
		{"a result on another action", `{"id":"i-1","action":"Resume","result":"paid"}`, []string{"result and content belong to action Answer"}},
		{"content over the bound", `{"id":"i-1","action":"Answer","call":"t-4-0","outcome":"Done","content":{"receipt":"` + strings.Repeat("r", 2100) + `"}}`,
			[]string{"spec.interventions would hold", "more than 2000"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantDenied(t, intervene("bob", s, c.iv), c.want...)
		})
	}

	if err := intervene("alice", s, `{"id":"i-1","action":"Answer","call":"t-4-0","outcome":"Done","result":"paid by hand"}`); err != nil {
		t.Fatalf("alice answering t-4-0: %v", err)
	}
	err := intervene("alice", s, `{"id":"i-2","action":"Answer","call":"t-4-0","outcome":"NotDone","by":"bob"}`)
	wantDenied(t, err, "spec.interventions[1].by", `intervention forged: by is "bob" but the request was made by "alice"`)
	var got flowv1.Session
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	if n := len(got.Spec.Interventions); n != 1 {
		t.Fatalf("%d interventions stored, want alice's only: %+v", n, got.Spec.Interventions)
	}
	if iv := got.Spec.Interventions[0]; iv.By != "alice" || iv.Call != "t-4-0" || iv.Outcome != flowv1.AnswerDone || iv.Result != "paid by hand" {
		t.Errorf("intervention %+v, want alice's answer stamped with her name", iv)
	}
}
