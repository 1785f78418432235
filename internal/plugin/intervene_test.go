package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// ivSession creates, in default, a Session of journey "iv" (intake, booking), and the
// Journey when it is missing.
func ivSession(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	j := &flowv1alpha1.Journey{ObjectMeta: metav1.ObjectMeta{Name: "iv", Namespace: "default"}, Spec: flowv1alpha1.JourneySpec{
		EntryPathway: "intake", Pathways: []flowv1alpha1.PathwayEntry{{Name: "intake", PathwayRef: "intake"}, {Name: "booking", PathwayRef: "booking"}}}}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: "default", Name: "iv"}, &flowv1alpha1.Journey{}); err != nil {
		if err := admin.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	s := &flowv1alpha1.Session{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: flowv1alpha1.SessionSpec{JourneyRef: flowv1alpha1.JourneyReference{Name: "iv"}}}
	if err := admin.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	setStatus(t, name, func(st *flowv1alpha1.SessionStatus) {
		st.Phase, st.CurrentPathway, st.Iteration, st.Step = flowv1alpha1.PhaseWaitingForInput, "intake", 1, 3
	})
}

// Each command appends its intervention, with the field of its action, and the next
// one drops the processed ones from the front.
func TestInterventionCommandsAppend(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ivSession(t, "iv-1")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"resume", "iv-1", "--max-turns", "50", "--max-cost-usd", "3", "--reason", "false alarm"}, "intervention i-1 (Resume) sent to session/iv-1\n"},
		{[]string{"retry", "iv-1", "--feedback", "use the insurance id"}, "intervention i-2 (Retry) sent to session/iv-1\n"},
		{[]string{"goto", "iv-1", "booking"}, "intervention i-3 (Goto) sent to session/iv-1\n"},
		{[]string{"rewind", "iv-1", "--to-step", "2"}, "intervention i-4 (Rewind) sent to session/iv-1\n"},
	} {
		out, _, err := kubectlJourney(ctx, tc.args...)
		if err != nil || out != tc.want {
			t.Fatalf("%s: %q, %v; want %q", strings.Join(tc.args, " "), out, err, tc.want)
		}
	}
	got := getSession(t, "iv-1").Spec.Interventions
	if len(got) != 4 {
		t.Fatalf("interventions %+v", got)
	}
	if i := got[0]; i.Action != flowv1alpha1.InterventionResume || i.Reason != "false alarm" || i.By != "" ||
		i.Limits == nil || i.Limits.MaxTurns != 50 || i.Limits.Budget == nil || i.Limits.Budget.MaxCostUSD != "3" {
		t.Errorf("resume sent %+v (limits %+v)", i, i.Limits)
	}
	if i := got[1]; i.Action != flowv1alpha1.InterventionRetry || i.Feedback != "use the insurance id" || i.Limits != nil {
		t.Errorf("retry sent %+v", i)
	}
	if i := got[2]; i.Action != flowv1alpha1.InterventionGoto || i.Pathway != "booking" {
		t.Errorf("goto sent %+v", i)
	}
	if i := got[3]; i.Action != flowv1alpha1.InterventionRewind || i.Step == nil || *i.Step != 2 {
		t.Errorf("rewind sent %+v", i)
	}

	// Refused before anything is sent.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"goto", "iv-1", "nowhere"}, `pathway "nowhere" is not a pathway of journey "iv" (it has intake, booking)`},
		{[]string{"rewind", "iv-1", "--to-step", "3"}, "session/iv-1 is at step 3: --to-step 3 is not a step it has taken and left"},
		{[]string{"rewind", "iv-1"}, `required flag(s) "to-step" not set`},
		{[]string{"resume", "nosuch"}, `session "nosuch" not found in namespace "default"`},
		{[]string{"retry", "iv-1", "--wait", "--dry-run"}, "--wait cannot be used with --dry-run"},
	} {
		if _, _, err := kubectlJourney(ctx, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	// Dry runs: the client sends nothing, the server stores nothing.
	if out, _, err := kubectlJourney(ctx, "resume", "iv-1", "--dry-run=client"); err != nil || out != "intervention i-5 (Resume) sent to session/iv-1 (dry run)\n" {
		t.Errorf("resume --dry-run=client: %q, %v", out, err)
	}
	if out, _, err := kubectlJourney(ctx, "goto", "iv-1", "booking", "--dry-run=server"); err != nil || out != "intervention i-5 (Goto) sent to session/iv-1 (server dry run)\n" {
		t.Errorf("goto --dry-run=server: %q, %v", out, err)
	}
	if n := len(getSession(t, "iv-1").Spec.Interventions); n != 4 {
		t.Errorf("a dry run stored an intervention: %d", n)
	}

	// Once the controller has processed them, the next one drops them.
	setStatus(t, "iv-1", func(st *flowv1alpha1.SessionStatus) { st.ProcessedInterventions = 3 })
	if _, _, err := kubectlJourney(ctx, "resume", "iv-1"); err != nil {
		t.Fatal(err)
	}
	s := getSession(t, "iv-1")
	if s.Spec.InterventionsDropped != 3 || len(s.Spec.Interventions) != 2 || s.Spec.Interventions[0].ID != "i-4" || s.Spec.Interventions[1].ID != "i-5" {
		t.Errorf("after compaction: dropped %d, interventions %+v", s.Spec.InterventionsDropped, s.Spec.Interventions)
	}

	// A cancelled Session takes none.
	setStatus(t, "iv-1", func(st *flowv1alpha1.SessionStatus) { st.Phase = flowv1alpha1.PhaseCancelled })
	if _, _, err := kubectlJourney(ctx, "resume", "iv-1"); err == nil || err.Error() != "session/iv-1 is cancelled: a cancel cannot be undone, there is nothing to resume" {
		t.Errorf("resuming a cancelled Session: %v", err)
	}
}

// playIntervention plays the controller: once session has an intervention, it
// processes it with change and, when note is set, writes the Warning Event that
// refuses it.
func playIntervention(t *testing.T, session, note string, change func(*flowv1alpha1.SessionStatus, int64)) {
	ctx := context.Background()
	go func() {
		for range 400 {
			s := &flowv1alpha1.Session{}
			if err := admin.Get(ctx, types.NamespacedName{Namespace: "default", Name: session}, s); err == nil &&
				s.Spec.InterventionCount() > s.Status.ProcessedInterventions {
				if note != "" {
					now := time.Now()
					e := &eventsv1.Event{
						ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: session + "-"},
						EventTime:  metav1.NewMicroTime(now), ReportingController: "journey-controller", ReportingInstance: "test",
						Action: "Intervene", Reason: "InterventionRefused", Type: corev1.EventTypeWarning, Note: note,
						Regarding: corev1.ObjectReference{APIVersion: flowv1alpha1.GroupVersion.String(), Kind: "Session",
							Namespace: "default", Name: session, UID: s.UID},
					}
					if err := admin.Create(ctx, e); err != nil {
						t.Error(err)
						return
					}
				}
				if err := patchStatus(session, func(st *flowv1alpha1.SessionStatus) {
					st.ProcessedInterventions = s.Spec.InterventionCount()
					st.ObservedGeneration = s.Generation
					change(st, s.Generation)
				}); err != nil {
					t.Error(err)
				}
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

// --wait prints what the controller did with the intervention: the history entries it
// made, or the Event that refused it (and fails).
func TestInterventionWait(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ivSession(t, "iv-wait")

	playIntervention(t, "iv-wait", "", func(st *flowv1alpha1.SessionStatus, _ int64) {
		st.CurrentPathway, st.Step = "booking", 4
		st.History = append(st.History, flowv1alpha1.HistoryEntry{Time: metav1.Now(), Step: 4, From: "intake", To: "booking",
			Action: flowv1alpha1.ActionAdvance, Source: flowv1alpha1.SourceHuman, Intervention: flowv1alpha1.InterventionGoto, By: "alice", Reason: "paper form"})
	})
	out, _, err := kubectlJourney(ctx, "goto", "iv-wait", "booking", "--reason", "paper form", "--wait", "--timeout", "20s")
	if err != nil {
		t.Fatal(err)
	}
	want := "intervention i-1 (Goto) sent to session/iv-wait\n" +
		"Transition: intake -> booking (Advance, by Human): paper form\n" +
		"Phase:      WaitingForInput\n" +
		"Pathway:    booking\n"
	if out != want {
		t.Errorf("goto --wait printed:\n%s\nwant:\n%s", out, want)
	}

	const note = "Intervention i-2 (Resume) refused: the Session is not blocked, there is nothing to resume"
	playIntervention(t, "iv-wait", note, func(*flowv1alpha1.SessionStatus, int64) {})
	out, _, err = kubectlJourney(ctx, "resume", "iv-wait", "--wait", "--timeout", "20s")
	if err == nil || err.Error() != "session/iv-wait refused intervention i-2 (Resume): "+note {
		t.Errorf("a refused resume: %v", err)
	}
	if !strings.Contains(out, "Refused:    "+note+"\n") {
		t.Errorf("a refused resume printed:\n%s", out)
	}

	// Nobody processes the next one: the wait times out and says where things stand.
	_, _, err = kubectlJourney(ctx, "retry", "iv-wait", "--wait", "--timeout", "1s")
	if err == nil || !strings.Contains(err.Error(), "timed out after 1s waiting for session/iv-wait to process intervention i-3: phase WaitingForInput, pathway booking") {
		t.Errorf("an intervention nobody processes: %v", err)
	}
}
