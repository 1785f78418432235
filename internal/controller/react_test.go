package controller

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
	"github.com/journeyops/journey-operator/internal/tracing"
)

// A ReAct model: the chat server plays a model that calls the clinic's tools through
// OpenAI function calling. Each Session gets its own script, chosen by the Session's
// name in the request; a script sees the tool results the request carries.

// modelScript answers one chat request of a Session from the tool results it carries.
type modelScript func(results []testenv.ToolResult) testenv.Reply

var sessionName = regexp.MustCompile(`"session":\{"name":"([^"]+)"`)

// reactModel is a chat server that answers each Session's requests with its script,
// and keeps every request by Session.
type reactModel struct {
	*testenv.ChatServer
	mu       sync.Mutex
	scripts  map[string]modelScript
	requests map[string][]testenv.ChatRequest
}

func newReactModel(t *testing.T, scripts map[string]modelScript) *reactModel {
	m := &reactModel{scripts: scripts, requests: map[string][]testenv.ChatRequest{}}
	m.ChatServer = testenv.NewChatServer(t, m.scripted)
	return m
}

// scripted answers r with the script of its Session.
func (m *reactModel) scripted(r testenv.ChatRequest) testenv.Reply {
	name := ""
	if sm := sessionName.FindStringSubmatch(r.User()); sm != nil {
		name = sm[1]
	}
	m.mu.Lock()
	m.requests[name] = append(m.requests[name], r)
	script := m.scripts[name]
	m.mu.Unlock()
	if script == nil {
		return testenv.APIError(500, "no script for session "+name, "test_error")
	}
	return script(r.ToolResults())
}

// asked is what the model was asked for Session name, in order.
func (m *reactModel) asked(name string) []testenv.ChatRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests[name])
}

// finalAnswer is the model's structured answer: reply, the booking id, success.
func finalAnswer(reply, bookingID string) testenv.Reply {
	b, _ := json.Marshal(map[string]any{"reply": reply, "outputs": map[string]any{"booking_id": bookingID}, "outcome": "success", "complete": true})
	return testenv.Answer(string(b))
}

func callTool(name, args string) testenv.Reply {
	return testenv.CallTools(testenv.ToolCall{ID: "call_" + name, Name: name, Arguments: args})
}

// reactJourney is a one-pathway journey whose openai agent may call the clinic's
// find_doctors and book_slot tools (no approval unless mod says otherwise).
func reactJourney(ns, clinicURL, chatURL string, mod func(*flowv1.Journey, *flowv1.Pathway)) (*flowv1.Journey, *flowv1.Pathway) {
	p := &flowv1.Pathway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "book"},
		Spec: flowv1.PathwaySpec{
			Agents: []flowv1.Name{"gpt"},
			Tools:  []flowv1.ToolName{"find_doctors", "book_slot"},
			Signature: flowv1.Signature{
				Instructions: "Find a doctor and book a slot.",
				Outputs:      []flowv1.SignatureField{{Name: "booking_id", Type: "string"}},
			},
			Accumulate: []string{"booking_id"},
		},
	}
	j := journeyOf(ns, "react", p)
	j.Spec.Agents = []flowv1.AgentSpec{{Name: "gpt", Provider: flowv1.ProviderOpenAI, Model: "test-model", BaseURL: chatURL, MaxRetries: ptr.To[int32](0)}}
	j.Spec.ToolServers = []flowv1.ToolServer{{Name: "clinic", URL: clinicURL, Timeout: &metav1.Duration{Duration: 20 * time.Second}}}
	j.Spec.Tools = []flowv1.Tool{
		{Name: "find_doctors", Server: "clinic", Approval: flowv1.ToolApprovalNever},
		{Name: "book_slot", Server: "clinic", Approval: flowv1.ToolApprovalNever},
	}
	if mod != nil {
		mod(j, p)
	}
	return j, p
}

// startReact creates the journey and waits until its tools are discovered and pinned.
func startReact(t *testing.T, ns, clinicURL, chatURL string, mod func(*flowv1.Journey, *flowv1.Pathway)) {
	t.Helper()
	j, p := reactJourney(ns, clinicURL, chatURL, mod)
	create(t, p, j)
	eventually(t, 30*time.Second, func() error {
		j := get(t, ns, j.Name, &flowv1.Journey{})
		if len(j.Status.Tools) < 2 || j.Status.ReadyRevision == "" {
			return fmt.Errorf("tools %+v, revision %q", j.Status.Tools, j.Status.ReadyRevision)
		}
		return nil
	})
}

// talk creates Session name and sends it one message.
func talk(t *testing.T, ns, name string) {
	t.Helper()
	create(t, sessionOf(ns, name, "react"))
	send(t, ns, name, "m1", "Please book me a cardiologist.")
}

// finished waits until Session name's first turn is over and returns the Session.
func finished(t *testing.T, ns, name string) *flowv1.Session {
	t.Helper()
	var s *flowv1.Session
	eventually(t, 60*time.Second, func() error {
		s = get(t, ns, name, &flowv1.Session{})
		if s.Status.ProcessedMessages < 1 || s.Status.Turn != nil || s.Status.LastTurn == nil || s.Status.LastTurn.FinishReason == "" {
			return fmt.Errorf("phase %s, turn %+v", s.Status.Phase, s.Status.Turn)
		}
		return nil
	})
	return s
}

// bookCardiologist is the two-tool script: find a cardiologist, book the first free
// slot with find_doctors' result, then answer with book_slot's result.
func bookCardiologist(results []testenv.ToolResult) testenv.Reply {
	switch len(results) {
	case 0:
		return callTool("find_doctors", `{"specialty":"cardiology"}`)
	case 1:
		var found clinic.FindOut
		if err := json.Unmarshal([]byte(results[0].Content), &found); err != nil || len(found.Doctors) == 0 {
			return finalAnswer("find_doctors gave "+results[0].Content, "")
		}
		d := found.Doctors[0]
		return callTool("book_slot", fmt.Sprintf(`{"doctor_id":%q,"slot":%q}`, d.ID, d.Slots[0]))
	}
	var b clinic.Booking
	if err := json.Unmarshal([]byte(results[len(results)-1].Content), &b); err != nil {
		return finalAnswer("book_slot gave "+results[len(results)-1].Content, "")
	}
	return finalAnswer(fmt.Sprintf("Booked %s with %s at %s", b.ID, b.DoctorID, b.Slot), b.ID)
}

func TestReActTwoToolTurn(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	c := clinic.New()
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	model := newReactModel(t, map[string]modelScript{"s1": bookCardiologist})
	startManager(t, ns, Options{})
	startReact(t, ns, srv.URL, model.BaseURL(), nil)
	talk(t, ns, "s1")
	s := finished(t, ns, "s1")

	lt := s.Status.LastTurn
	if s.Status.Phase != flowv1.PhaseCompleted || lt.AssistantText != "Booked b-1 with dr-lee at 2026-12-01T09:00" {
		t.Fatalf("phase %s, last turn %+v", s.Status.Phase, lt)
	}
	var ctx map[string]any
	if err := json.Unmarshal(s.Status.Context.Raw, &ctx); err != nil || ctx["booking_id"] != "b-1" {
		t.Errorf("context %s (%v)", s.Status.Context.Raw, err)
	}
	if len(lt.ToolCalls) != 2 || lt.ToolCalls[0].Tool != "find_doctors" || lt.ToolCalls[1].Tool != "book_slot" ||
		lt.ToolCalls[0].State != flowv1.ToolCallDone || lt.ToolCalls[1].State != flowv1.ToolCallDone || len(lt.Failures) != 0 {
		t.Errorf("lastTurn.toolCalls %+v failures %+v", lt.ToolCalls, lt.Failures)
	}
	reqs := model.asked("s1")
	if len(reqs) != 3 {
		t.Fatalf("the model was asked %d times, want 3", len(reqs))
	}
	fns := reqs[0].Functions()
	if len(fns) != 2 || !strings.Contains(string(fns["find_doctors"]), `"specialty"`) || !strings.Contains(string(fns["book_slot"]), `"doctor_id"`) {
		t.Errorf("functions offered %s", fns)
	}
	second, third := reqs[1].ToolResults(), reqs[2].ToolResults()
	if len(second) != 1 || !strings.Contains(second[0].Content, `"dr-lee"`) {
		t.Errorf("second request's tool results %+v", second)
	}
	if len(third) != 2 || third[0] != second[0] || !strings.Contains(third[1].Content, `"booking_id":"b-1"`) {
		t.Errorf("third request's tool results %+v", third)
	}
	if calls := reqs[2].ToolCalls(); len(calls) != 2 || calls[1].Name != "book_slot" || calls[1].ID != third[1].ToolCallID {
		t.Errorf("third request's replayed calls %+v", calls)
	}
	if c.Calls("find_doctors") != 1 || c.Calls("book_slot") != 1 || c.Bookings() != 1 {
		t.Errorf("clinic calls find %d book %d, bookings %d", c.Calls("find_doctors"), c.Calls("book_slot"), c.Bookings())
	}
}

// refusedThenAnswer asks for call first, then answers with the refusal it was told.
func refusedThenAnswer(call testenv.Reply) modelScript {
	return func(results []testenv.ToolResult) testenv.Reply {
		if len(results) == 0 {
			return call
		}
		return finalAnswer("told: "+results[0].Content, "")
	}
}

func TestReActRefusals(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	c := clinic.New()
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	cases := map[string]struct {
		call testenv.Reply
		want string
	}{
		"unlisted": {callTool("copay", `{}`), `tool "copay" is not one of the pathway's tools (find_doctors, book_slot)`},
		"nearmiss": {callTool("find_doctor", `{"specialty":"cardiology"}`), `tool "find_doctor" is not one of the pathway's tools`},
		"schema":   {callTool("find_doctors", `{"specialty":42}`), "the arguments do not match its input schema"},
		"prereq":   {callTool("book_slot", `{"doctor_id":"dr-lee","slot":"2026-12-01T09:00"}`), `requires context key "patient"`},
	}
	scripts := map[string]modelScript{}
	for name, tc := range cases {
		scripts[name] = refusedThenAnswer(tc.call)
	}
	model := newReactModel(t, scripts)
	startManager(t, ns, Options{})
	startReact(t, ns, srv.URL, model.BaseURL(), func(j *flowv1.Journey, _ *flowv1.Pathway) {
		j.Spec.Tools = append(j.Spec.Tools, flowv1.Tool{Name: "copay", Builtin: &flowv1.BuiltinTool{Expression: "{'copay_usd': 40}"}})
		j.Spec.Tools[1].Requires = []string{"patient"}
	})
	for name := range cases {
		talk(t, ns, name)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := finished(t, ns, name)
			lt := s.Status.LastTurn
			if len(lt.Failures) != 1 || lt.Failures[0].Source != flowv1.FailureTool || lt.Failures[0].Kind != flowv1.FailureValidation ||
				!strings.Contains(lt.Failures[0].Message, tc.want) {
				t.Errorf("failures %+v", lt.Failures)
			}
			if len(lt.ToolCalls) != 1 || lt.ToolCalls[0].State != flowv1.ToolCallFailed {
				t.Errorf("toolCalls %+v", lt.ToolCalls)
			}
			reqs := model.asked(name)
			if len(reqs) != 2 || len(reqs[1].ToolResults()) != 1 || !strings.Contains(reqs[1].ToolResults()[0].Content, tc.want) {
				t.Fatalf("the model was not told the refusal: %d requests", len(reqs))
			}
			if s.Status.Phase != flowv1.PhaseCompleted || !strings.Contains(lt.AssistantText, tc.want) {
				t.Errorf("the turn did not go on: phase %s, reply %q", s.Status.Phase, lt.AssistantText)
			}
		})
	}
	if n := c.Calls("find_doctors") + c.Calls("book_slot"); n != 0 {
		t.Errorf("refused calls reached the server %d times", n)
	}
}

func TestReActLimits(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	c := clinic.New()
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	specialties := []string{"cardiology", "dermatology", "general", "neurology"}
	model := newReactModel(t, map[string]modelScript{
		"max": func(results []testenv.ToolResult) testenv.Reply {
			return callTool("find_doctors", fmt.Sprintf(`{"specialty":%q}`, specialties[min(len(results), 3)]))
		},
		"loop": func([]testenv.ToolResult) testenv.Reply {
			return callTool("find_doctors", `{"specialty":"cardiology"}`)
		},
	})
	startManager(t, ns, Options{})
	startReact(t, ns, srv.URL, model.BaseURL(), func(_ *flowv1.Journey, p *flowv1.Pathway) {
		p.Spec.MaxToolCalls = ptr.To[int32](3)
	})
	talk(t, ns, "max")
	talk(t, ns, "loop")
	for name, want := range map[string]struct {
		finish  flowv1.FinishReason
		calls   int
		message string
	}{
		"max":  {flowv1.FinishToolCallLimit, 3, "maxToolCalls 3"},
		"loop": {flowv1.FinishLoopDetected, 2, "tool find_doctors was called 3 times with the same arguments"},
	} {
		s := finished(t, ns, name)
		lt := s.Status.LastTurn
		if lt.FinishReason != want.finish || len(lt.ToolCalls) != want.calls || len(lt.Failures) != 1 ||
			lt.Failures[0].Source != flowv1.FailurePolicy || !strings.Contains(lt.Failures[0].Message, want.message) {
			t.Errorf("%s: last turn %+v", name, lt)
		}
		if n := len(model.asked(name)); n != want.calls+1 {
			t.Errorf("%s: the model was asked %d times, want %d", name, n, want.calls+1)
		}
		if s.Status.Phase != flowv1.PhaseWaitingForInput || s.Status.Turns != 1 {
			t.Errorf("%s: phase %s, turns %d", name, s.Status.Phase, s.Status.Turns)
		}
	}
	if n := c.Calls("find_doctors"); n != 5 {
		t.Errorf("find_doctors called %d times, want 3+2", n)
	}
}

// TestReActExactlyOnceAcrossRestart: the model asks to book; the clinic holds the
// first response while the manager is stopped; the new manager delivers the call again
// with the same key, the clinic books once, and the model is not asked again for the
// call, only once more with its result.
func TestReActExactlyOnceAcrossRestart(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	c, srv, held := holdingClinic(t)
	model := newReactModel(t, map[string]modelScript{"s1": func(results []testenv.ToolResult) testenv.Reply {
		if len(results) == 0 {
			return callTool("book_slot", `{"doctor_id":"dr-lee","slot":"2026-12-01T09:00"}`)
		}
		var b clinic.Booking
		_ = json.Unmarshal([]byte(results[0].Content), &b)
		return finalAnswer("Booked "+b.ID, b.ID)
	}})

	first := env.StartManager(t, managerOptions(ns, Options{}))
	startReact(t, ns, srv.URL, model.BaseURL(), nil)
	talk(t, ns, "s1")
	var key string
	select {
	case key = <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("book_slot was never called")
	}
	if err := first.Stop(); err != nil {
		t.Fatalf("stopping the manager: %v", err)
	}
	s := get(t, ns, "s1", &flowv1.Session{})
	if s.Status.Turn == nil || len(s.Status.Turn.ToolCalls) != 1 || s.Status.Turn.ToolCalls[0].State != flowv1.ToolCallPending ||
		s.Status.Turn.ToolCalls[0].IdempotencyKey != key || !strings.HasPrefix(key, string(s.UID)+"-") {
		t.Fatalf("after the crash the call is not pending in the journal with key %q: %+v", key, s.Status.Turn)
	}
	if n := len(model.asked("s1")); n != 1 {
		t.Fatalf("the model was asked %d times before the restart", n)
	}

	startManager(t, ns, Options{})
	s = finished(t, ns, "s1")
	if s.Status.Phase != flowv1.PhaseCompleted || s.Status.LastTurn.AssistantText != "Booked b-1" {
		t.Fatalf("phase %s, last turn %+v", s.Status.Phase, s.Status.LastTurn)
	}
	keys := c.BookingKeys()
	if c.Bookings() != 1 || len(keys) < 2 || slices.IndexFunc(keys, func(k string) bool { return k != key }) >= 0 {
		t.Fatalf("bookings %d, delivered keys %v (want %q every time)", c.Bookings(), keys, key)
	}
	reqs := model.asked("s1")
	if len(reqs) != 2 || len(reqs[1].ToolResults()) != 1 {
		t.Fatalf("the model was asked %d times, want 2 (the call, then its result)", len(reqs))
	}
	if s.Status.Transitions != 1 || len(s.Status.History) != 1 {
		t.Errorf("transitions %d, history %+v", s.Status.Transitions, s.Status.History)
	}
}

// TestReActApproval: book_slot, destructive on the server, waits for a person; a
// rejection goes back to the model as the call's result and the server gets nothing;
// an approval makes exactly one call.
func TestReActApproval(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	c := clinic.New()
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	book := func(results []testenv.ToolResult) testenv.Reply {
		if len(results) == 0 {
			return callTool("book_slot", `{"doctor_id":"dr-lee","slot":"2026-12-01T09:00"}`)
		}
		return finalAnswer("result: "+results[0].Content, "")
	}
	model := newReactModel(t, map[string]modelScript{"no": book, "yes": book})
	rec := tracetest.NewSpanRecorder()
	startManager(t, ns, Options{Tracing: tracing.NewWithProcessor(rec, false)})
	startReact(t, ns, srv.URL, model.BaseURL(), func(j *flowv1.Journey, _ *flowv1.Pathway) {
		j.Spec.Tools[1].Approval = "" // the default, IfDestructive
	})
	talk(t, ns, "no")
	talk(t, ns, "yes")
	waiting := func(name string) string {
		var id string
		eventually(t, 30*time.Second, func() error {
			s := get(t, ns, name, &flowv1.Session{})
			d := s.Status.PendingDecision()
			if s.Status.Phase != flowv1.PhaseAwaitingApproval || d == nil || !strings.Contains(d.Reasoning, `call book_slot {"doctor_id":"dr-lee"`) {
				return fmt.Errorf("phase %s, decision %+v", s.Status.Phase, d)
			}
			id = d.ID
			return nil
		})
		return id
	}
	no, yes := waiting("no"), waiting("yes")
	if c.Calls("book_slot") != 0 {
		t.Fatalf("book_slot called %d times before any approval", c.Calls("book_slot"))
	}
	answer := func(name, id string, ok bool) {
		approve(t, ns, name, flowv1.Approval{DecisionID: id, Approve: ptr.To(ok), By: "alice", Reason: "not this week"})
	}
	answer("no", no, false)
	s := finished(t, ns, "no")
	lt := s.Status.LastTurn
	if lt.AssistantText != "result: rejected by alice: not this week" || lt.ToolCalls[0].State != flowv1.ToolCallRejected {
		t.Fatalf("last turn %+v", lt)
	}
	if r := model.asked("no"); len(r) != 2 || r[1].ToolResults()[0].Content != "rejected by alice: not this week" {
		t.Errorf("the model was not told the rejection: %d requests", len(r))
	}
	if c.Calls("book_slot") != 0 {
		t.Fatalf("a rejected call reached the server")
	}
	answer("yes", yes, true)
	s = finished(t, ns, "yes")
	if s.Status.Phase != flowv1.PhaseCompleted || s.Status.LastTurn.ToolCalls[0].ApprovedBy != "alice" ||
		!strings.Contains(s.Status.LastTurn.AssistantText, `"booking_id":"b-1"`) {
		t.Fatalf("phase %s, last turn %+v", s.Status.Phase, s.Status.LastTurn)
	}
	if c.Calls("book_slot") != 1 || c.Bookings() != 1 {
		t.Fatalf("book_slot calls %d, bookings %d", c.Calls("book_slot"), c.Bookings())
	}
	var approvals []string
	for _, sp := range rec.Ended() {
		if sp.Name() != "execute_tool book_slot" {
			continue
		}
		for _, a := range sp.Attributes() {
			if a.Key == tracing.AttrToolApproval {
				approvals = append(approvals, a.Value.AsString())
			}
		}
	}
	if !slices.Equal(approvals, []string{"alice"}) {
		t.Errorf("the book_slot span's approval attributes %v, want [alice]", approvals)
	}
}
