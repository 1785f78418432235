package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// cachedSession is a Session as the API server sends it: five messages of which three
// are processed and the third still read by the turn in progress, two processed
// outcomes of three, one processed approval of two, two processed interventions of
// three, kubectl apply's annotation and
// another, managedFields, and a status with every list.
func cachedSession(t testing.TB) *flowv1.Session {
	t.Helper()
	raw := `{
	"metadata": {"name": "s1", "namespace": "ns", "uid": "u1", "generation": 4,
		"labels": {"team": "a"},
		"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"spec\":{}}", "note": "keep"},
		"managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]},
	"spec": {"journeyRef": {"name": "j"},
		"messages": [{"id": "m0", "text": "zero"}, {"id": "m1", "text": "one"}, {"id": "m2", "text": "two"}, {"id": "m3", "text": "three"}, {"id": "m4", "text": "four"}],
		"outcomes": [{"pathway": "p", "iteration": 1, "attempt": 1, "resultType": "success"}, {"pathway": "p", "iteration": 1, "attempt": 2, "resultType": "success"}, {"pathway": "p", "iteration": 1, "attempt": 3, "resultType": "success"}],
		"approvals": [{"decisionID": "d-1", "approve": true}, {"decisionID": "d-2", "approve": true}],
		"interventions": [{"id": "i-1", "action": "Resume", "by": "alice"}, {"id": "i-2", "action": "Goto", "pathway": "q", "by": "alice"}, {"id": "i-3", "action": "Retry", "by": "bob"}]},
	"status": {"phase": "Running", "currentPathway": "p", "pathwayStack": ["a", "b", "c"], "step": 7,
		"processedMessages": 3, "processedOutcomes": 2, "processedApprovals": 1, "processedInterventions": 2,
		"turn": {"trigger": "Message", "stage": "Run", "messageID": "m2", "pathway": "p"},
		"lastDecision": {"id": "d-1", "from": "a", "to": "p", "action": "Advance", "allowedDestinations": ["p", "q", "r"]},
		"journal": [{"id": "j1", "kind": "RunPathway", "step": 1, "inputHash": "h1", "agent": "gpt", "result": {"reply": "r1"}},
			{"id": "j2", "kind": "Decide", "step": 2, "inputHash": "h2", "agent": "judge", "result": {"destination": "p"}},
			{"id": "j3", "kind": "CallTool", "step": 3, "inputHash": "h3", "agent": "find", "result": {"toolCalls": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}}],
		"lastTurn": {"trigger": "Message", "messageID": "m1", "pathway": "p", "toolCalls": [{"id": "t1", "tool": "find", "state": "Done"}, {"id": "t2", "tool": "find", "state": "Done"}, {"id": "t3", "tool": "book", "state": "Done"}]},
		"context": {"a": 1},
		"contextHistory": [{"version": 1, "pathway": "p", "keys": ["a", "b", "c"]}, {"version": 2, "pathway": "p", "keys": ["a"]}, {"version": 3, "pathway": "q"}],
		"history": [{"step": 1, "from": "a", "to": "b"}, {"step": 2, "from": "b", "to": "c"}, {"step": 3, "from": "c", "to": "p"}],
		"transcript": [{"messageID": "m0", "pathway": "p", "user": "zero", "assistant": "0"}, {"messageID": "m1", "pathway": "p", "user": "one", "assistant": "1", "toolCalls": [{"tool": "find"}, {"tool": "find"}, {"tool": "book"}]}, {"pathway": "q", "assistant": "x"}],
		"journeyRevision": "j-1",
		"conditions": [{"type": "Ready", "status": "False", "reason": "Running", "message": "Running pathway p", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			{"type": "Reconciling", "status": "True", "reason": "Running", "message": "Running pathway p", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			{"type": "AgentAvailable", "status": "True", "reason": "AgentReady", "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
}`
	var s flowv1.Session
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func transformed(t testing.TB, s *flowv1.Session) *flowv1.Session {
	t.Helper()
	out, err := transformSession(s)
	if err != nil {
		t.Fatal(err)
	}
	return out.(*flowv1.Session)
}

func TestTransformSessionKeepsWhatAStepReads(t *testing.T) {
	t.Parallel()
	in := cachedSession(t)
	want := in.DeepCopy()
	got := transformed(t, in.DeepCopy())

	// The whole status, labels and the other annotation are kept.
	if !equality.Semantic.DeepEqual(got.Status, want.Status) {
		t.Errorf("status changed:\n got %+v\nwant %+v", got.Status, want.Status)
	}
	if got.Labels["team"] != "a" || got.Annotations["note"] != "keep" || got.UID != "u1" || got.Generation != 4 {
		t.Errorf("metadata lost: labels %v annotations %v uid %q generation %d", got.Labels, got.Annotations, got.UID, got.Generation)
	}
	// Dropped: managedFields and kubectl's copy of the spec.
	if got.ManagedFields != nil {
		t.Errorf("managedFields kept: %v", got.ManagedFields)
	}
	if _, ok := got.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		t.Errorf("last-applied annotation kept")
	}
	// Processed messages leave but the turn's own (m2), as kubectl journey say drops them.
	var ids []string
	for _, m := range got.Spec.Messages {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "m2,m3,m4" || got.Spec.MessagesDropped != 2 {
		t.Errorf("messages %v dropped %d, want m2,m3,m4 dropped 2", ids, got.Spec.MessagesDropped)
	}
	if got.Spec.MessageCount() != want.Spec.MessageCount() {
		t.Errorf("message count %d, want %d", got.Spec.MessageCount(), want.Spec.MessageCount())
	}
	for n := got.Status.ProcessedMessages - 1; n < want.Spec.MessageCount(); n++ {
		g, _ := got.Spec.MessageAt(n)
		w, _ := want.Spec.MessageAt(n)
		if g == nil || *g != *w {
			t.Errorf("message %d = %v, want %v", n, g, w)
		}
	}
	if len(got.Spec.Outcomes) != 1 || got.Spec.OutcomesDropped != 2 || got.Spec.Outcomes[0].Attempt != 3 {
		t.Errorf("outcomes %+v dropped %d, want attempt 3 alone, 2 dropped", got.Spec.Outcomes, got.Spec.OutcomesDropped)
	}
	if len(got.Spec.Approvals) != 1 || got.Spec.ApprovalsDropped != 1 || got.Spec.Approvals[0].DecisionID != "d-2" {
		t.Errorf("approvals %+v dropped %d, want d-2 alone, 1 dropped", got.Spec.Approvals, got.Spec.ApprovalsDropped)
	}
	if len(got.Spec.Interventions) != 1 || got.Spec.InterventionsDropped != 2 || got.Spec.Interventions[0].ID != "i-3" {
		t.Errorf("interventions %+v dropped %d, want i-3 alone, 2 dropped", got.Spec.Interventions, got.Spec.InterventionsDropped)
	}
	// What the Session's validation lets a client drop, and no more.
	if got.Spec.MessagesDropped > in.DroppableMessages() || got.Spec.OutcomesDropped > in.DroppableOutcomes() ||
		got.Spec.ApprovalsDropped > in.DroppableApprovals() || got.Spec.InterventionsDropped > in.DroppableInterventions() {
		t.Errorf("dropped past what is droppable: %+v", got.Spec)
	}
	// A second pass changes nothing: the informer transforms every version it gets.
	again := transformed(t, got.DeepCopy())
	if !equality.Semantic.DeepEqual(again, got) {
		t.Errorf("second transform changed the Session")
	}
}

func TestTransformSessionWithoutATurnDropsEveryProcessedMessage(t *testing.T) {
	t.Parallel()
	s := cachedSession(t)
	s.Status.Turn = nil
	got := transformed(t, s)
	if len(got.Spec.Messages) != 2 || got.Spec.MessagesDropped != 3 || got.Spec.Messages[0].ID != "m3" {
		t.Errorf("messages %+v dropped %d, want m3,m4 with 3 dropped", got.Spec.Messages, got.Spec.MessagesDropped)
	}
}

func TestTransformSessionClipsLists(t *testing.T) {
	t.Parallel()
	s := cachedSession(t)
	// Lists as the JSON decoder leaves them: with room to spare.
	s.Status.Journal = append(s.Status.Journal[:3:3], s.Status.Journal[0])[:3]
	s.Status.History = append(make([]flowv1.HistoryEntry, 0, 8), s.Status.History...)
	s.Status.Transcript = append(make([]flowv1.Exchange, 0, 8), s.Status.Transcript...)
	s.Status.Conditions = append(make([]metav1.Condition, 0, 8), s.Status.Conditions...)
	s.Status.PathwayStack = []string{}
	s.Status.ContextHistory[2].Keys = nil
	want := s.DeepCopy()
	got := transformed(t, s)
	for name, l := range map[string][2]int{
		"journal":    {len(got.Status.Journal), cap(got.Status.Journal)},
		"history":    {len(got.Status.History), cap(got.Status.History)},
		"transcript": {len(got.Status.Transcript), cap(got.Status.Transcript)},
		"conditions": {len(got.Status.Conditions), cap(got.Status.Conditions)},
	} {
		if l[0] != l[1] || l[0] != 3 {
			t.Errorf("%s: len %d cap %d, want 3 and 3", name, l[0], l[1])
		}
	}
	if got.Status.PathwayStack == nil || len(got.Status.PathwayStack) != 0 {
		t.Errorf("an empty list became %#v", got.Status.PathwayStack)
	}
	if got.Status.ContextHistory[2].Keys != nil {
		t.Errorf("a nil list became %#v", got.Status.ContextHistory[2].Keys)
	}
	if !equality.Semantic.DeepEqual(got.Status, want.Status) {
		t.Errorf("clipping changed the status")
	}
}

func TestTransformSessionSharesStringsAcrossSessions(t *testing.T) {
	t.Parallel()
	a, b := transformed(t, cachedSession(t)), transformed(t, cachedSession(t))
	for name, p := range map[string][2]string{
		"namespace":         {a.Namespace, b.Namespace},
		"condition message": {a.Status.Conditions[0].Message, b.Status.Conditions[0].Message},
		"journal kind":      {string(a.Status.Journal[0].Kind), string(b.Status.Journal[0].Kind)},
		"pathway":           {a.Status.Transcript[0].Pathway, b.Status.Transcript[0].Pathway},
	} {
		if unsafe.StringData(p[0]) != unsafe.StringData(p[1]) {
			t.Errorf("%s %q is held twice", name, p[0])
		}
	}
	// Text that differs from Session to Session is not interned.
	if unsafe.StringData(a.Status.Transcript[0].User) == unsafe.StringData(b.Status.Transcript[0].User) {
		t.Errorf("transcript text interned")
	}
}

func TestTransformSessionLeavesOtherObjects(t *testing.T) {
	t.Parallel()
	j := &flowv1.Journey{ObjectMeta: metav1.ObjectMeta{Name: "j", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	out, err := transformSession(j)
	if err != nil || out != j || len(j.ManagedFields) != 1 {
		t.Errorf("transformSession(Journey) = %v, %v", out, err)
	}
}

// BenchmarkTransformSession is the transform's cost per informer event for a Session
// whose journal, history and transcript are full.
func BenchmarkTransformSession(b *testing.B) {
	s := cachedSession(b)
	for i := range 100 {
		s.Status.Journal = append(s.Status.Journal, flowv1.EffectRecord{ID: fmt.Sprintf("j%d", i), Kind: flowv1.EffectRunPathway, Agent: "gpt",
			InputHash: strings.Repeat("h", 64), Result: flowv1.AgentResult{Reply: strings.Repeat("r", 100), ResultType: flowv1.ResultSuccess}})
		s.Status.Transcript = append(s.Status.Transcript, flowv1.Exchange{MessageID: fmt.Sprintf("m%d", i), Pathway: "p",
			User: strings.Repeat("u", 80), Assistant: strings.Repeat("a", 80)})
	}
	for range 50 {
		s.Status.History = append(s.Status.History, flowv1.HistoryEntry{From: "a", To: "b", Action: flowv1.ActionAdvance, Transition: "t"})
	}
	b.ReportAllocs()
	b.StopTimer()
	for range b.N {
		c := s.DeepCopy()
		b.StartTimer()
		_, _ = transformSession(c)
		b.StopTimer()
	}
}

// A Session stepped from the transformed cache: its user never drops a message (as with
// kubectl apply, which also leaves its annotation), the cache holds only the pending
// ones, and every turn still reads its message; what is stored keeps everything, since
// no write carries what the cache dropped.
func TestSessionStepsFromTheTransformedCache(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	mgr := env.StartManager(t, testenv.ManagerOptions{
		Namespaces: []string{ns}, Cache: CacheOptions(nil),
		Setup: func(mgr ctrl.Manager) error { return Setup(mgr, Options{}) },
	})
	p := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"},
		Spec: flowv1.PathwaySpec{Accumulate: []string{"last"}, Builtin: &flowv1.BuiltinPathway{
			Reply: "noted {{ .message }}", Complete: "false", Outputs: []flowv1.BuiltinOutput{{Name: "last", Expression: "message"}}}}}
	create(t, p, journeyOf(ns, "chat", p))
	s := sessionOf(ns, "s1", "chat")
	s.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: `{"spec":{"journeyRef":{"name":"chat"}}}`}
	s.Spec.InitialContext = &apiextensionsv1.JSON{Raw: []byte(`{"customer":"c-1"}`)}
	for i := range 3 {
		s.Spec.Messages = append(s.Spec.Messages, flowv1.Message{ID: fmt.Sprintf("m%d", i), Text: fmt.Sprintf("message %d", i)})
	}
	create(t, s)
	processed := func(n int32) {
		t.Helper()
		eventually(t, 30*time.Second, func() error {
			s := get(t, ns, "s1", &flowv1.Session{})
			if s.Status.ProcessedMessages != n || s.Status.Phase != flowv1.PhaseWaitingForInput {
				return fmt.Errorf("processed %d, phase %s", s.Status.ProcessedMessages, s.Status.Phase)
			}
			return nil
		})
	}
	processed(3)
	// Two more, the whole list sent again as an apply would.
	cur := get(t, ns, "s1", &flowv1.Session{})
	for i := 3; i < 5; i++ {
		cur.Spec.Messages = append(cur.Spec.Messages, flowv1.Message{ID: fmt.Sprintf("m%d", i), Text: fmt.Sprintf("message %d", i)})
	}
	if err := k8sClient.Update(t.Context(), cur); err != nil {
		t.Fatal(err)
	}
	processed(5)

	stored := get(t, ns, "s1", &flowv1.Session{})
	if len(stored.Spec.Messages) != 5 || stored.Spec.MessagesDropped != 0 {
		t.Errorf("stored messages %d dropped %d, want 5 and 0", len(stored.Spec.Messages), stored.Spec.MessagesDropped)
	}
	if _, ok := stored.Annotations[corev1.LastAppliedConfigAnnotation]; !ok {
		t.Errorf("stored annotation lost")
	}
	var users []string
	for _, x := range stored.Status.Transcript {
		users = append(users, x.User+"/"+x.Assistant)
	}
	if got, want := strings.Join(users, ","), "message 0/noted message 0,message 1/noted message 1,message 2/noted message 2,message 3/noted message 3,message 4/noted message 4"; got != want {
		t.Errorf("transcript %s, want %s", got, want)
	}
	if !strings.Contains(string(stored.Status.Context.Raw), `"customer":"c-1"`) || !strings.Contains(string(stored.Status.Context.Raw), `"last":"message 4"`) {
		t.Errorf("context %s", stored.Status.Context.Raw)
	}

	var cached flowv1.Session
	eventually(t, 10*time.Second, func() error {
		if err := mgr.GetCache().Get(t.Context(), client.ObjectKeyFromObject(stored), &cached); err != nil {
			return err
		}
		if cached.ResourceVersion != stored.ResourceVersion {
			return fmt.Errorf("cache at %s, stored %s", cached.ResourceVersion, stored.ResourceVersion)
		}
		return nil
	})
	if len(cached.Spec.Messages) != 0 || cached.Spec.MessagesDropped != 5 || cached.ManagedFields != nil || cached.Annotations != nil {
		t.Errorf("cached messages %d dropped %d, managedFields %v, annotations %v; want 0, 5, none, none",
			len(cached.Spec.Messages), cached.Spec.MessagesDropped, cached.ManagedFields, cached.Annotations)
	}
	if !equality.Semantic.DeepEqual(cached.Status, stored.Status) {
		t.Errorf("cached status differs from the stored one")
	}
}
