package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// kstatusRow is a row of the table in docs/operations.md: what a Journey, Pathway or
// Session in a state shows to kstatus.
type kstatusRow struct {
	ready, readyReason string
	alsoTrue           []string
	result             string
}

// kstatusTable reads the table "Conditions as kstatus reads them" of docs/operations.md,
// by "Kind | State".
func kstatusTable(t *testing.T) map[string]kstatusRow {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]kstatusRow{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 7 || !slices.Contains([]string{"Journey", "Pathway", "Session"}, strings.TrimSpace(cells[1])) {
			continue
		}
		ready := strings.Fields(strings.ReplaceAll(cells[3], "`", ""))
		row := kstatusRow{ready: ready[0], readyReason: ready[1], result: strings.TrimSpace(cells[5])}
		for _, c := range strings.Split(cells[4], ",") {
			if c = strings.TrimSpace(c); c != "" {
				row.alsoTrue = append(row.alsoTrue, c)
			}
		}
		rows[strings.TrimSpace(cells[1])+" | "+strings.TrimSpace(cells[2])] = row
	}
	if len(rows) < 17 {
		t.Fatalf("docs/operations.md: %d rows in the kstatus table", len(rows))
	}
	return rows
}

// kstatusOf reads obj from the API server as kstatus does (unstructured) and returns
// its kstatus result, its Ready condition and the other conditions that are True.
func kstatusOf(t *testing.T, ns, name string, obj client.Object) (result string, ready metav1.Condition, alsoTrue []string, err error) {
	t.Helper()
	gvk, err := k8sClient.GroupVersionKindFor(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return "", ready, nil, err
	}
	res, err := status.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	var conds []metav1.Condition
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, r := range raw {
		m := r.(map[string]any)
		c := metav1.Condition{Type: fmt.Sprint(m["type"]), Status: metav1.ConditionStatus(fmt.Sprint(m["status"])), Reason: fmt.Sprint(m["reason"])}
		gen, _ := m["observedGeneration"].(int64)
		if gen != u.GetGeneration() {
			return "", ready, nil, fmt.Errorf("condition %s observed generation %d, object is at %d", c.Type, gen, u.GetGeneration())
		}
		conds = append(conds, c)
	}
	for _, c := range conds {
		switch {
		case c.Type == flowv1.ConditionReady:
			ready = c
		case c.Status == metav1.ConditionTrue:
			alsoTrue = append(alsoTrue, c.Type)
		}
	}
	slices.Sort(alsoTrue)
	return string(res.Status), ready, alsoTrue, nil
}

// expectKstatus waits until the object shows what the table's row says.
func expectKstatus(t *testing.T, table map[string]kstatusRow, key, ns, name string, obj client.Object) {
	t.Helper()
	want, ok := table[key]
	if !ok {
		t.Fatalf("docs/operations.md has no row %q", key)
	}
	wantTrue := slices.Sorted(slices.Values(want.alsoTrue))
	testenv.Eventually(t, 30*time.Second, func() error {
		result, ready, alsoTrue, err := kstatusOf(t, ns, name, obj)
		if err != nil {
			return err
		}
		if result != want.result || string(ready.Status) != want.ready || ready.Reason != want.readyReason || !slices.Equal(alsoTrue, wantTrue) {
			return fmt.Errorf("%s %s: kstatus %s, Ready %s %s, also True %v; the table says %s, Ready %s %s, also True %v",
				key, name, result, ready.Status, ready.Reason, alsoTrue, want.result, want.ready, want.readyReason, wantTrue)
		}
		return nil
	})
}

// patchSession changes a Session's spec.
func patchSession(t *testing.T, ns, name string, fn func(*flowv1.Session)) {
	t.Helper()
	s := get(t, ns, name, &flowv1.Session{})
	patch := client.MergeFrom(s.DeepCopy())
	fn(s)
	if err := k8sClient.Patch(context.Background(), s, patch); err != nil {
		t.Fatal(err)
	}
}

// Every state of docs/operations.md's kstatus table, reached on a real API server and
// read with cli-utils' kstatus, as Flux and Argo CD health checks read it.
func TestKstatusOfEveryState(t *testing.T) {
	t.Parallel()
	table := kstatusTable(t)
	ns := newNamespace(t)
	cs := newChatServer(t, func(kind, user string) string { return `{}` })
	cs.Respond(testenv.Always(testenv.APIError(401, "Incorrect API key provided", "invalid_request_error")))
	startManager(t, ns, Options{})

	// Journeys and Pathways.
	echoJourney(t, ns, "ok")
	expectKstatus(t, table, "Journey | valid", ns, "echo", &flowv1.Journey{})
	expectKstatus(t, table, "Pathway | valid", ns, "echo", &flowv1.Pathway{})
	create(t, journeyOf(ns, "dangling", &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Name: "missing"}}))
	expectKstatus(t, table, "Journey | a referenced Pathway does not exist", ns, "dangling", &flowv1.Journey{})
	lost := entryPathway(ns, "lost", "nowhere")
	create(t, lost, journeyOf(ns, "invalid", lost))
	expectKstatus(t, table, "Journey | invalid", ns, "invalid", &flowv1.Journey{})
	regressed := entryPathway(ns, "regressed", "")
	create(t, regressed, journeyOf(ns, "regressed", regressed))
	waitJourneyReady(t, ns, "regressed")
	regressed = get(t, ns, "regressed", &flowv1.Pathway{})
	regressed.Spec.Next = "nowhere"
	if err := k8sClient.Update(context.Background(), regressed); err != nil {
		t.Fatal(err)
	}
	expectKstatus(t, table, "Journey | invalid, an earlier revision serves", ns, "regressed", &flowv1.Journey{})
	bad := entryPathway(ns, "bad-cel", "")
	bad.Spec.Builtin.Outputs = []flowv1.BuiltinOutput{{Name: "x", Expression: "1 +"}}
	create(t, bad)
	expectKstatus(t, table, "Pathway | an expression does not compile", ns, "bad-cel", &flowv1.Pathway{})

	// Sessions that cannot start.
	create(t, sessionOf(ns, "orphan", "no-such-journey"), sessionOf(ns, "early", "dangling"))
	expectKstatus(t, table, "Session | Pending: the Journey does not exist", ns, "orphan", &flowv1.Session{})
	expectKstatus(t, table, "Session | Pending: the Journey is not Ready", ns, "early", &flowv1.Session{})

	// Sessions that run.
	create(t, sessionOf(ns, "chat", "echo"))
	send(t, ns, "chat", "m1", "hello")
	expectKstatus(t, table, "Session | WaitingForInput", ns, "chat", &flowv1.Session{})
	create(t, sessionOf(ns, "paused", "echo"))
	expectKstatus(t, table, "Session | WaitingForInput", ns, "paused", &flowv1.Session{})
	patchSession(t, ns, "paused", func(s *flowv1.Session) { s.Spec.Suspend = true })
	expectKstatus(t, table, "Session | suspended", ns, "paused", &flowv1.Session{})

	capped := journeyOf(ns, "capped", &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Name: "echo"}})
	capped.Spec.Limits.MaxTurns = 1
	create(t, capped)
	waitJourneyReady(t, ns, "capped")
	create(t, sessionOf(ns, "chatty", "capped"))
	send(t, ns, "chatty", "m1", "one")
	send(t, ns, "chatty", "m2", "two")
	expectKstatus(t, table, "Session | blocked by a cap", ns, "chatty", &flowv1.Session{})

	steps := threeStepJourney(ns)
	create(t, steps[0], steps[1], steps[2], journeyOf(ns, "three", steps...), sessionOf(ns, "done", "three"))
	expectKstatus(t, table, "Session | Completed", ns, "done", &flowv1.Session{})

	doomed := entryPathway(ns, "doomed", "")
	doomed.Spec.Builtin.Outcome = `"failure"`
	doomed.Spec.Transitions = &flowv1.OutcomeTransitions{OnFailure: &flowv1.OutcomeTransition{Action: flowv1.ActionClose}}
	create(t, doomed, journeyOf(ns, "doomed", doomed), sessionOf(ns, "lost", "doomed"))
	expectKstatus(t, table, "Session | Failed", ns, "lost", &flowv1.Session{})

	create(t, sessionOf(ns, "quit", "echo"))
	expectKstatus(t, table, "Session | WaitingForInput", ns, "quit", &flowv1.Session{})
	patchSession(t, ns, "quit", func(s *flowv1.Session) { s.Spec.Cancel = true })
	expectKstatus(t, table, "Session | Cancelled", ns, "quit", &flowv1.Session{})

	// Waiting on a person: AwaitingApproval (the planning sample as written).
	_, planning := loadSample(t, ns, "planning.yaml")
	create(t, planning)
	expectKstatus(t, table, "Session | AwaitingApproval", ns, planning.Name, &flowv1.Session{})

	// A refused API key stalls the Session.
	triage := withOpenAITriage(t, ns, cs)
	create(t, triage)
	send(t, ns, triage.Name, "m1", "Hi, I need to book an appointment with a cardiologist. Here's my referral.")
	expectKstatus(t, table, "Session | terminal agent error", ns, triage.Name, &flowv1.Session{})

	// Editing a finished Session: the status observes the new generation at once and the
	// table still holds (a stale observedGeneration would read InProgress).
	for name, key := range map[string]string{"done": "Session | Completed", "lost": "Session | Failed", "quit": "Session | Cancelled"} {
		before := get(t, ns, name, &flowv1.Session{})
		patchSession(t, ns, name, func(s *flowv1.Session) {
			s.Spec.Messages = append(s.Spec.Messages, flowv1.Message{ID: "late", Text: "anyone there?"})
		})
		expectKstatus(t, table, key, ns, name, &flowv1.Session{})
		after := get(t, ns, name, &flowv1.Session{})
		if after.Generation == before.Generation || after.Status.ObservedGeneration != after.Generation {
			t.Errorf("%s: generation %d -> %d, observedGeneration %d", name, before.Generation, after.Generation, after.Status.ObservedGeneration)
		}
	}
}
