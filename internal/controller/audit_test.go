package controller

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/audit"
)

// auditJourney is a journey whose intake pathway (builtin) calls the copay tool, which
// waits for approval, then asks a builtin judge whose confidence (0.7) needs an
// approval to go to done, which completes the journey.
func auditJourney(ns string) []*flowv1.Pathway {
	intake := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "intake"}, Spec: flowv1.PathwaySpec{
		Tools:   []flowv1.ToolName{"copay"},
		Builtin: &flowv1.BuiltinPathway{Reply: "noted", ToolCalls: []flowv1.BuiltinToolCall{{Tool: "copay", Args: "{'plan': 'basic'}"}}},
		Transitions: &flowv1.OutcomeTransitions{OnSuccess: &flowv1.OutcomeTransition{Decision: &flowv1.Decision{
			Agent: "judge", Prompt: "Is the intake done?", AllowedDestinations: []flowv1.Name{"done"},
			ConfidenceThresholds: &flowv1.ConfidenceThresholds{AutoAdvance: "0.9", RequireApproval: "0.5"},
		}}},
	}}
	done := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "done"}, Spec: flowv1.PathwaySpec{
		RunOn: flowv1.RunOnEntry, Builtin: &flowv1.BuiltinPathway{Reply: "finished"},
	}}
	return []*flowv1.Pathway{intake, done}
}

// startAuditJourney creates the journey and a Session s1 that has sent one message.
func startAuditJourney(t *testing.T, ns string) {
	t.Helper()
	ps := auditJourney(ns)
	j := journeyOf(ns, "audited", ps...)
	j.Spec.Agents = []flowv1.AgentSpec{{Name: "judge", Builtin: &flowv1.BuiltinAgent{Confidence: "0.7"}}}
	j.Spec.Tools = []flowv1.Tool{{Name: "copay", Approval: flowv1.ToolApprovalAlways, Builtin: &flowv1.BuiltinTool{Expression: "{'copay_usd': 40}"}}}
	j.Spec.Redact = &flowv1.Redaction{Patterns: []string{`INS-[0-9]{6}`}}
	create(t, ps[0], ps[1], j)
	s := sessionOf(ns, "s1", "audited")
	s.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "I need a referral"}}
	create(t, s)
}

// waitingFor waits until s1 waits for an approval of a decision whose id starts with
// prefix, and returns that id.
func waitingFor(t *testing.T, ns, prefix string) string {
	t.Helper()
	var id string
	eventually(t, 30*time.Second, func() error {
		s := get(t, ns, "s1", &flowv1.Session{})
		if d := s.Status.LastDecision; s.Status.Phase == flowv1.PhaseAwaitingApproval && d != nil && strings.HasPrefix(d.ID, prefix) && d.State == flowv1.DecisionPending {
			id = d.ID
			return nil
		}
		return fmt.Errorf("phase %s, decision %+v", s.Status.Phase, s.Status.LastDecision)
	})
	return id
}

// runAuditConversation approves the tool call and the decision and waits until s1
// completes.
func runAuditConversation(t *testing.T, ns string) *flowv1.Session {
	t.Helper()
	for _, prefix := range []string{"t-", "d-"} {
		id := waitingFor(t, ns, prefix)
		approve(t, ns, "s1", flowv1.Approval{DecisionID: id, Approve: ptr.To(true), By: "alice", Reason: "checked INS-123456"})
	}
	return completed(t, ns)
}

func completed(t *testing.T, ns string) *flowv1.Session {
	t.Helper()
	var s *flowv1.Session
	eventually(t, 30*time.Second, func() error {
		s = get(t, ns, "s1", &flowv1.Session{})
		if s.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %s", s.Status.Phase)
		}
		return nil
	})
	return s
}

// readRecords reads the JSON lines file at path.
func readRecords(t *testing.T, path string) []audit.Record {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []audit.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// trailOf waits until the file at path holds the records of a Session that
// completed (the last write's records are written just after it) and returns them.
func trailOf(t *testing.T, path string) []audit.Record {
	t.Helper()
	var recs []audit.Record
	eventually(t, 10*time.Second, func() error {
		recs = readRecords(t, path)
		if len(recs) == 0 || recs[len(recs)-1].Phase == nil || recs[len(recs)-1].Phase.To != string(flowv1.PhaseCompleted) {
			return fmt.Errorf("%d records, the last not the phase Completed", len(recs))
		}
		return nil
	})
	return recs
}

// jsonLinesTrail is a Trail writing JSON lines to a file of the test's.
func jsonLinesTrail(t *testing.T, path string) *audit.Trail {
	t.Helper()
	sink, err := audit.OpenJSONLines(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	return &audit.Trail{Sink: sink}
}

// summary is a record as the tests compare it: its kind and what it is about.
func summary(r audit.Record) string {
	switch {
	case r.Phase != nil:
		return fmt.Sprintf("Phase %s->%s", r.Phase.From, r.Phase.To)
	case r.Transition != nil:
		return fmt.Sprintf("%s %s->%s %s by %s", r.Kind, r.Transition.From, r.Transition.To, r.Transition.Action, r.Actor)
	case r.Decision != nil:
		return fmt.Sprintf("Decision %s->%s confidence %s band %s by %s", r.Decision.From, r.Decision.To, r.Decision.Confidence, r.Decision.Band, r.Actor)
	case r.Approval != nil:
		return fmt.Sprintf("%s %s by %s", r.Kind, r.Approval.DecisionID[:2], r.Actor)
	case r.ToolCall != nil:
		return fmt.Sprintf("ToolCall %s %s approved by %s", r.ToolCall.Tool, r.ToolCall.State, r.ToolCall.ApprovedBy)
	}
	return string(r.Kind)
}

// wantTrail is the audit trail of the conversation, in order.
var wantTrail = []string{
	// The message is taken; the tool call waits for approval.
	"Phase ->AwaitingApproval",
	// alice approves it; it is made; the judge answers 0.7, which needs an approval.
	"Approval t- by alice",
	"ToolCall copay Done approved by alice",
	"Decision intake->done confidence 0.7 band requireApproval by agent:judge",
	// alice approves; done runs and closes the journey.
	"Approval d- by alice",
	"Transition intake->done Advance by alice",
	"Transition done-> Close by system:journey-operator",
	"Phase AwaitingApproval->Completed",
}

// checkTrail checks records against wantTrail, and the ids, schema and Session of
// every record.
func checkTrail(t *testing.T, s *flowv1.Session, records []audit.Record) {
	t.Helper()
	var got []string
	ids := map[string]bool{}
	step, n := int64(-1), 0
	for _, r := range records {
		got = append(got, summary(r))
		if r.Step != step {
			step, n = r.Step, 0
		}
		if want := fmt.Sprintf("%s/%d/%d", s.UID, r.Step, n); r.ID != want {
			t.Errorf("record %s has id %s, want %s", summary(r), r.ID, want)
		}
		n++
		if ids[r.ID] {
			t.Errorf("id %s twice", r.ID)
		}
		ids[r.ID] = true
		if r.Schema != audit.Schema || r.Session != (audit.SessionRef{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)}) ||
			r.Journey != "audited" || r.Revision != s.Status.JourneyRevision || r.Time.IsZero() {
			t.Errorf("record %+v: schema, Session, journey, revision or time wrong", r)
		}
		// spec.redact masks the insurance id the approver quoted.
		if r.Approval != nil && r.Approval.Reason != "checked [redacted]" {
			t.Errorf("approval reason %q, want the insurance id redacted", r.Approval.Reason)
		}
		if r.ToolCall != nil && (r.ToolCall.IdempotencyKey != fmt.Sprintf("%s-%s", s.UID, strings.TrimPrefix(r.ToolCall.ID, "t-")) ||
			len(r.ToolCall.ArgsDigest) != 64 || len(r.ToolCall.ResultDigest) != 64) {
			t.Errorf("tool call record %+v: key or digests wrong", r.ToolCall)
		}
	}
	if !slices.Equal(got, wantTrail) {
		t.Errorf("audit trail:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(wantTrail, "\n  "))
	}
	if c := s.Status.Audit; c == nil || c.AcknowledgedStep >= s.Status.Step || c.AcknowledgedStep == 0 {
		t.Errorf("status.audit %+v at step %d: want the cursor of the write before the last", c, s.Status.Step)
	}
}

// TestAuditTrailOfAConversation: a conversation with a tool call that waits for
// approval, a decision in the requireApproval band and two approvals writes exactly
// the expected records, in order, numbered by step, while the Session controller's
// Event queue is full and every Event is dropped.
func TestAuditTrailOfAConversation(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	// A writer that is never started: its queue (one Event) fills with the first.
	full := newEventWriter(k8sClient, scheme, "session-controller")
	full.queue = make(chan *eventsv1.Event, 1)
	dropped := droppedEvents(t)
	startManager(t, ns, Options{Audit: jsonLinesTrail(t, path), sessionEvents: full})
	startAuditJourney(t, ns)
	s := runAuditConversation(t, ns)
	// The last write's Events and records come just after it.
	eventually(t, 10*time.Second, func() error {
		if got := droppedEvents(t) - dropped; got < 3 {
			return fmt.Errorf("%v Events dropped, want at least 3: the queue was not full", got)
		}
		return nil
	})
	checkTrail(t, s, trailOf(t, path))
}

// gatedSink writes to its sink, but holds the first batch that holds a Decision
// record until its context ends, as a sink that has not answered when the manager
// stops, and then fails.
type gatedSink struct {
	audit.Sink
	mu   sync.Mutex
	held []audit.Record
}

func (g *gatedSink) Write(ctx context.Context, recs []audit.Record) error {
	if slices.ContainsFunc(recs, func(r audit.Record) bool { return r.Kind == audit.KindDecision }) {
		g.mu.Lock()
		first := g.held == nil
		if first {
			g.held = slices.Clone(recs)
		}
		g.mu.Unlock()
		if first {
			<-ctx.Done()
			return ctx.Err()
		}
	}
	return g.Sink.Write(ctx, recs)
}

func (g *gatedSink) heldRecords() []audit.Record {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// TestAuditTrailSurvivesARestart stops the manager after it wrote the status of the
// judge's decision and before its sink acknowledged that write's records. The next
// manager writes those records, with the same ids, and no record written before; the
// two files together hold the whole trail once.
func TestAuditTrailSurvivesARestart(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	dir := t.TempDir()
	before, after := filepath.Join(dir, "before.jsonl"), filepath.Join(dir, "after.jsonl")
	gate := &gatedSink{Sink: jsonLinesTrail(t, before).Sink}
	first := startManager(t, ns, Options{Audit: &audit.Trail{Sink: gate}})
	startAuditJourney(t, ns)
	approve(t, ns, "s1", flowv1.Approval{DecisionID: waitingFor(t, ns, "t-"), Approve: ptr.To(true), By: "alice", Reason: "checked INS-123456"})
	decision := waitingFor(t, ns, "d-")
	eventually(t, 10*time.Second, func() error {
		if gate.heldRecords() == nil {
			return fmt.Errorf("the decision's records have not reached the sink")
		}
		return nil
	})
	if err := first.Stop(); err != nil {
		t.Errorf("manager: %v", err)
	}
	s := get(t, ns, "s1", &flowv1.Session{})
	held := gate.heldRecords()
	// The held records are those of the last status write, which status.audit does
	// not count as acknowledged.
	if c := s.Status.Audit; c == nil || c.AcknowledgedStep >= s.Status.Step || held[0].Step != s.Status.Step {
		t.Fatalf("status.audit %+v at step %d, held records of step %d", c, s.Status.Step, held[0].Step)
	}

	startManager(t, ns, Options{Audit: jsonLinesTrail(t, after)})
	eventually(t, 10*time.Second, func() error {
		if n := len(readRecords(t, after)); n < len(held) {
			return fmt.Errorf("%d records written again, want %d", n, len(held))
		}
		return nil
	})
	again := readRecords(t, after)[:len(held)]
	if !slices.EqualFunc(again, held, func(a, b audit.Record) bool { return a.ID == b.ID && summary(a) == summary(b) }) {
		t.Errorf("after the restart the manager wrote %v first, want the held records %v", ids(again), ids(held))
	}
	approve(t, ns, "s1", flowv1.Approval{DecisionID: decision, Approve: ptr.To(true), By: "alice", Reason: "checked INS-123456"})
	s = completed(t, ns)
	checkTrail(t, s, append(readRecords(t, before), trailOf(t, after)...))
}

func ids(recs []audit.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// TestFinishedSessionIsArchivedThenDeleted: a Session of a journey whose
// sessionDefaults say 2 s after finishing is deleted after its archive is written,
// and the archive holds its transcript, journal and history as the Session had them.
func TestFinishedSessionIsArchivedThenDeleted(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	startManager(t, ns, Options{Audit: jsonLinesTrail(t, path)})
	p := &flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "answer"}, Spec: flowv1.PathwaySpec{
		Builtin: &flowv1.BuiltinPathway{Reply: "Your referral INS-123456 is noted"},
	}}
	j := journeyOf(ns, "short", p)
	j.Spec.SessionDefaults = &flowv1.SessionDefaults{TTLSecondsAfterFinished: ptr.To[int32](2)}
	j.Spec.Redact = &flowv1.Redaction{Patterns: []string{`INS-[0-9]{6}`}}
	create(t, p, j)
	s := sessionOf(ns, "s1", "short")
	s.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "Here is my referral"}}
	create(t, s)
	done := completed(t, ns)
	if len(done.Status.Transcript) == 0 || len(done.Status.History) == 0 {
		t.Fatalf("transcript %v, history %v: nothing to archive", done.Status.Transcript, done.Status.History)
	}
	eventually(t, 20*time.Second, func() error {
		err := k8sClient.Get(context.Background(), clientKey(ns, "s1"), &flowv1.Session{})
		if err == nil {
			return fmt.Errorf("the Session still exists")
		}
		return client.IgnoreNotFound(err)
	})
	var archive *audit.Record
	for _, r := range readRecords(t, path) {
		if r.Kind == audit.KindArchive {
			archive = &r
		}
	}
	if archive == nil || archive.ID != string(done.UID)+"/archive" || archive.Archive == nil {
		t.Fatalf("no archive of %s in %s", done.UID, path)
	}
	a := archive.Archive
	// The reply's insurance id is redacted in the archive, as the journey says.
	want := done.Status.DeepCopy()
	for i := range want.Transcript {
		want.Transcript[i].Assistant = strings.ReplaceAll(want.Transcript[i].Assistant, "INS-123456", flowv1.DefaultRedactionMask)
	}
	for i := range want.Journal {
		want.Journal[i].Result.Reply = strings.ReplaceAll(want.Journal[i].Result.Reply, "INS-123456", flowv1.DefaultRedactionMask)
	}
	same := func(what string, got, want any) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if string(g) != string(w) {
			t.Errorf("archived %s:\n  %s\nwant\n  %s", what, g, w)
		}
	}
	same("transcript", a.Transcript, want.Transcript)
	same("journal", a.Journal, want.Journal)
	same("history", a.History, want.History)
	if a.Phase != string(flowv1.PhaseCompleted) || !strings.Contains(a.Transcript[0].Assistant, "[redacted]") {
		t.Errorf("archive phase %s, transcript %v", a.Phase, a.Transcript)
	}
}
