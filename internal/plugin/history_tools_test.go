package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// TestHistoryShowsToolCalls: the controller's records of tool calls (journaled
// answers, the last turn's records, the turn in progress) are listed by history, each
// in the turn that made it.
func TestHistoryShowsToolCalls(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	newSession(t, "tools", flowv1alpha1.Message{ID: "m1", Text: "hi"}, flowv1alpha1.Message{ID: "m2", Text: "book Dr. Lee"}, flowv1alpha1.Message{ID: "m3", Text: "the 10:00 then"})
	digest := "382e9ff7f4951939baac9031730711186f77e901358272c55a67fa3c93dd97f9"
	at := metav1.NewTime(time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC))
	setStatus(t, "tools", func(st *flowv1alpha1.SessionStatus) {
		st.Phase, st.CurrentPathway, st.ProcessedMessages = flowv1alpha1.PhaseAwaitingApproval, "booking", 3
		st.History = []flowv1alpha1.HistoryEntry{{Time: at, Step: 4, From: "intake", To: "booking", Action: flowv1alpha1.ActionAdvance, Source: flowv1alpha1.SourceNext, Iteration: 1}}
		st.Journal = []flowv1alpha1.EffectRecord{
			{ID: "u/2/a", Kind: flowv1alpha1.EffectCallTool, Step: 2, InputHash: "a", ToolCall: "t-2-0", Agent: "find_doctors", Result: flowv1alpha1.AgentResult{DurationMs: 12}},
			{ID: "u/6/b", Kind: flowv1alpha1.EffectCallTool, Step: 6, InputHash: "b", ToolCall: "t-5-0", Agent: "book_slot", Result: flowv1alpha1.AgentResult{DurationMs: 31,
				Failure: &flowv1alpha1.Failure{Source: flowv1alpha1.FailureTool, Kind: flowv1alpha1.FailureException, Message: "slot taken"}}},
		}
		st.LastTurn = &flowv1alpha1.TurnOutcome{Pathway: "booking", MessageID: "m2", ToolCalls: []flowv1alpha1.ToolCallRecord{
			{ID: "t-5-0", Tool: "book_slot", ArgsDigest: digest, State: flowv1alpha1.ToolCallFailed, DurationMs: 31, Error: "slot taken", ApprovedBy: "alice"},
		}}
		st.Turn = &flowv1alpha1.TurnProgress{Trigger: flowv1alpha1.TurnMessage, Stage: flowv1alpha1.StageRun, Pathway: "booking", MessageID: "m3",
			ToolCalls: []flowv1alpha1.ToolCallProgress{{
				ToolCallRecord:   flowv1alpha1.ToolCallRecord{ID: "t-8-0", Tool: "book_slot", ArgsDigest: digest, State: flowv1alpha1.ToolCallPending},
				AwaitingApproval: true, IdempotencyKey: "u-8-0",
				Args: &apiextensionsv1.JSON{Raw: []byte(`{"doctor_id":"dr-lee","slot":"2026-12-01T10:00"}`)},
			}}}
	})
	out, _, err := kubectlJourney(ctx, "history", "tools")
	if err != nil {
		t.Fatal(err)
	}
	want := "TIME                   FROM     TO        ACTION    SOURCE   CONFIDENCE   REASON\n" +
		"2026-11-22T09:30:00Z   intake   booking   Advance   Next     <none>       <none>\n" +
		"\n" +
		"STEP   PATHWAY   TOOL           ARGS                                               STATE                         DURATION   APPROVED BY   ERROR\n" +
		"2      intake    find_doctors   <none>                                             Done                          12ms       <none>        <none>\n" +
		"5      booking   book_slot      sha256:382e9ff7f495                                Failed                        31ms       alice         slot taken\n" +
		"8      booking   book_slot      {\"doctor_id\":\"dr-lee\",\"slot\":\"2026-12-01T10:00\"}   Pending (awaiting approval)   <none>     <none>        <none>\n"
	if out != want {
		t.Errorf("history:\n%s\nwant:\n%s", out, want)
	}
	out, _, err = kubectlJourney(ctx, "history", "tools", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"STEP   PATHWAY   ID      MESSAGE   TOOL", "5      booking   t-5-0   m2        book_slot", "8      booking   t-8-0   m3        book_slot"} {
		if !strings.Contains(out, w) {
			t.Errorf("history -o wide lacks %q:\n%s", w, out)
		}
	}

	// Tool calls are listed even before the first transition.
	setStatus(t, "tools", func(st *flowv1alpha1.SessionStatus) { st.History = nil })
	out, errOut, err := kubectlJourney(ctx, "history", "tools")
	if err != nil || !strings.HasPrefix(out, "STEP   PATHWAY   TOOL") || !strings.Contains(errOut, "No transitions recorded") {
		t.Fatalf("history without transitions: %q, %q, %v", out, errOut, err)
	}
}
