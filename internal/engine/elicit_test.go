package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
)

// patientForm is the form the clinic's book_slot asks the user to fill in.
var patientForm = flowv1.ToolElicitation{Mode: flowv1.ElicitationForm, Message: "Who is the appointment for?",
	RequestedSchema: raw(`{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}`)}

// elicitingClinic is the clinic journey whose book_slot is a server tool (of a server
// whose idempotency is idem) that asks for ask before it books: with the user's
// answer it books for the name given, and answers what it makes of a decline or a
// cancel. Every request the server is sent is kept in sent.
func elicitingClinic(t *testing.T, idem flowv1.ToolIdempotency, ask flowv1.ToolElicitation, mod func(*flowv1.Tool)) (s *session, sent *[]agent.ToolRequest) {
	d := clinicTools(twoCalls, func(j *flowv1.JourneySpec, p *flowv1.PathwaySpec) {
		j.ToolServers = []flowv1.ToolServer{{Name: "clinic", URL: "http://clinic.test/mcp", Idempotency: idem}}
		j.Tools[1] = flowv1.Tool{Name: "book_slot", Server: "clinic", Approval: flowv1.ToolApprovalNever}
		if mod != nil {
			mod(&j.Tools[1])
		}
		p.Builtin.Reply = `{{ with .tools.book_slot }}{{ if .doctor }}Booked {{ .doctor }} at {{ .slot }} for {{ .for }}{{ else }}{{ .note }}{{ end }}{{ end }}`
	})
	s = toolSession(t, d, `{"patient": {"name": "Ada"}}`)
	sent = &[]agent.ToolRequest{}
	s.answer = func(e *Effect) (any, error) {
		if e.Tool.Tool != "book_slot" {
			return builtin.CallTool(*e.Tool)
		}
		*sent = append(*sent, *e.Tool)
		if len(e.Tool.Elicitations) == 0 {
			return agent.ToolResponse{Elicitation: ask.DeepCopy()}, nil
		}
		a := e.Tool.Elicitations[0]
		if a.Answer != flowv1.AnswerAccept {
			return agent.ToolResponse{Result: map[string]any{"note": "not booked: the user answered " + string(a.Answer)}}, nil
		}
		var fields map[string]any
		if a.Content != nil {
			_ = json.Unmarshal(a.Content.Raw, &fields)
		}
		return agent.ToolResponse{Result: map[string]any{"doctor": e.Tool.Args["doctor"], "slot": "10:30", "for": fields["name"]}}, nil
	}
	return s, sent
}

// waitsForInput takes the Session to where book_slot waits for the user's input, and
// checks what it shows.
func waitsForInput(t *testing.T, s *session) *flowv1.ToolCallProgress {
	t.Helper()
	s.say("m1", "book me")
	s.settle()
	if s.st.Turn == nil || len(s.st.Turn.ToolCalls) != 2 {
		t.Fatalf("turn %s", dump(s.st.Turn))
	}
	c := &s.st.Turn.ToolCalls[1]
	if c.State != flowv1.ToolCallAwaitingInput || c.WaitingElicitation() == nil || !c.WaitingElicitation().AskedAt.Equal(&metav1.Time{Time: t0}) {
		t.Fatalf("call %s", dump(c))
	}
	if s.st.Phase != flowv1.PhaseWaitingForInput {
		t.Errorf("phase %s, want WaitingForInput", s.st.Phase)
	}
	cond := s.condition(flowv1.ConditionAwaitingInput)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != flowv1.ReasonInputRequested {
		t.Fatalf("AwaitingInput %+v", cond)
	}
	if ready := s.condition(flowv1.ConditionReady); ready.Status != metav1.ConditionTrue || ready.Reason != flowv1.ReasonInputRequested {
		t.Errorf("Ready %+v: a Session waiting for input is healthy", ready)
	}
	if s.condition(flowv1.ConditionReconciling) != nil || s.stalled() != "" {
		t.Errorf("conditions %s", dump(s.st.Conditions))
	}
	return c
}

func TestElicitationFormWaitsAndTheAnswerReachesTheServer(t *testing.T) {
	s, sent := elicitingClinic(t, "", patientForm, nil)
	waitsForInput(t, s)
	msg := s.condition(flowv1.ConditionAwaitingInput).Message
	for _, want := range []string{"Tool call t-2-1 (book_slot)", `"Who is the appointment for?"`, "age (integer), name (string)*",
		"kubectl journey answer patient-12345 t-2-1 --accept FIELD=VALUE", "2026-11-22T10:00:00Z"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if at := s.snap.NextDeadline(&s.spec, s.st, t0); !at.Equal(t0.Add(time.Hour)) {
		t.Errorf("next deadline %s, want the default elicitationTimeout of 1h after the question", at)
	}
	if evs := Events(&flowv1.SessionStatus{}, s.st); !hasEvent(evs, flowv1.ReasonInputRequested) {
		t.Errorf("events %v lack InputRequested", evs)
	}
	// Messages wait behind the call; nothing is sent while it waits.
	s.say("m2", "hello?")
	s.settle()
	if len(*sent) != 1 || s.st.ProcessedMessages != 1 {
		t.Fatalf("sent %d, processed %d", len(*sent), s.st.ProcessedMessages)
	}

	s.intervene(flowv1.Intervention{Action: flowv1.InterventionAnswer, Call: "t-2-1", Outcome: flowv1.AnswerAccept, Content: raw(`{"name": "Ada Lovelace", "age": 36}`)})
	s.settle()
	// Sent twice (asked, then answered), then once more by m2's turn, which asks again.
	if len(*sent) != 3 || (*sent)[2].ID == (*sent)[1].ID || len((*sent)[2].Elicitations) != 0 {
		t.Fatalf("book_slot sent %s", dump(*sent))
	}
	again := (*sent)[1]
	if again.IdempotencyKey != (*sent)[0].IdempotencyKey || len(again.Elicitations) != 1 || again.Elicitations[0].Answer != flowv1.AnswerAccept ||
		again.Elicitations[0].AnsweredBy != "alice" || string(again.Elicitations[0].Content.Raw) != `{"name": "Ada Lovelace", "age": 36}` {
		t.Fatalf("sent again %s", dump(again))
	}
	if s.st.LastTurn.MessageID != "m2" {
		t.Errorf("m2 not taken after the call: last turn %s", dump(s.st.LastTurn))
	}
	if ctx := string(s.st.Context.Raw); !strings.Contains(ctx, `"for":"Ada Lovelace"`) {
		t.Fatalf("the answer did not reach the booking: context %s", ctx)
	}
	if !strings.Contains(dump(s.st.Transcript), "Booked dr-cardiology at 10:30 for Ada Lovelace") {
		t.Errorf("transcript %s lacks the reply", dump(s.st.Transcript))
	}
	h := s.st.History[len(s.st.History)-1]
	for _, e := range s.st.History {
		if e.Intervention == flowv1.InterventionAnswer {
			h = e
		}
	}
	if h.By != "alice" || !strings.Contains(h.Reason, "answered tool call t-2-1: accept, sent again") {
		t.Errorf("history %s", dump(h))
	}
}

func TestElicitationAnswers(t *testing.T) {
	cases := []struct {
		name    string
		iv      flowv1.Intervention
		refused string // the refusal, "" when the answer applies
		reply   string
	}{
		{name: "decline", iv: flowv1.Intervention{Outcome: flowv1.AnswerDecline}, reply: "not booked: the user answered Decline"},
		{name: "cancel", iv: flowv1.Intervention{Outcome: flowv1.AnswerCancel}, reply: "not booked: the user answered Cancel"},
		{name: "accept without a required field", iv: flowv1.Intervention{Outcome: flowv1.AnswerAccept, Content: raw(`{"age": 36}`)},
			refused: `field "name" is required by the form`},
		{name: "accept with a field of the wrong type", iv: flowv1.Intervention{Outcome: flowv1.AnswerAccept, Content: raw(`{"name": "Ada", "age": "old"}`)},
			refused: `field "age" must be an integer, got "old"`},
		{name: "accept with a field the form does not ask for", iv: flowv1.Intervention{Outcome: flowv1.AnswerAccept, Content: raw(`{"name": "Ada", "nmae": "x"}`)},
			refused: `field "nmae" is not one the form asks for (age, name)`},
		{name: "decline with content", iv: flowv1.Intervention{Outcome: flowv1.AnswerDecline, Content: raw(`{"name": "Ada"}`)},
			refused: "content goes with Accept"},
		{name: "an answer for an unknown outcome", iv: flowv1.Intervention{Outcome: flowv1.AnswerDone, Result: "done"},
			refused: "waits for input its server asked for: answer it Accept, Decline or Cancel, not Done"},
		{name: "a call that does not wait", iv: flowv1.Intervention{Call: "first", Outcome: flowv1.AnswerAccept},
			refused: "is Done: only a call whose outcome is unknown or whose server asked for input takes an answer (call t-2-1 waits for one)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, sent := elicitingClinic(t, "", patientForm, nil)
			waitsForInput(t, s)
			iv := tc.iv
			iv.Action, iv.Call = flowv1.InterventionAnswer, cmpOr(iv.Call, "t-2-1")
			if iv.Call == "first" {
				iv.Call = s.st.Turn.ToolCalls[0].ID
			}
			s.intervene(iv)
			s.settle()
			if tc.refused != "" {
				if !strings.Contains(s.refusal(), tc.refused) {
					t.Fatalf("refusal %q, want %q", s.refusal(), tc.refused)
				}
				if len(*sent) != 1 || s.st.Turn.ToolCalls[1].WaitingElicitation() == nil || s.st.Phase != flowv1.PhaseWaitingForInput {
					t.Fatalf("a refused answer changed the wait: sent %d, call %s", len(*sent), dump(s.st.Turn.ToolCalls[1]))
				}
				return
			}
			if len(*sent) != 2 || (*sent)[1].Elicitations[0].Answer != iv.Outcome {
				t.Fatalf("sent %s", dump(*sent))
			}
			if s.st.Turn != nil || s.st.LastTurn.ToolCalls[1].State != flowv1.ToolCallDone || !strings.Contains(dump(s.st.LastTurn), tc.reply) {
				t.Fatalf("the server's answer to %s is not the result: %s", iv.Outcome, dump(s.st.LastTurn))
			}
		})
	}
}

func TestElicitationTimeoutAnswersCancel(t *testing.T) {
	for _, timeout := range []*metav1.Duration{nil, {Duration: 2 * time.Hour}} {
		t.Run(fmt.Sprint(timeout), func(t *testing.T) {
			s, sent := elicitingClinic(t, "", patientForm, func(tool *flowv1.Tool) { tool.ElicitationTimeout = timeout })
			waitsForInput(t, s)
			wait := time.Hour
			if timeout != nil {
				wait = timeout.Duration
			}
			if at := s.snap.NextDeadline(&s.spec, s.st, t0); !at.Equal(t0.Add(wait)) {
				t.Fatalf("next deadline %s, want %s after the question", at, wait)
			}
			s.now = t0.Add(wait)
			s.settle()
			if len(*sent) != 1 {
				t.Fatalf("answered at the deadline, not after it: sent %d", len(*sent))
			}
			s.now = t0.Add(wait + time.Second)
			s.settle()
			if len(*sent) != 2 || (*sent)[1].Elicitations[0].Answer != flowv1.AnswerCancel || (*sent)[1].Elicitations[0].AnsweredBy != "the system" {
				t.Fatalf("sent %s", dump(*sent))
			}
			if s.st.Turn != nil || !strings.Contains(dump(s.st.LastTurn), "not booked: the user answered Cancel") ||
				!strings.Contains(failureMessages(s), "no one answered the input its server asked for within "+wait.String()) {
				t.Fatalf("last turn %s", dump(s.st.LastTurn))
			}
		})
	}
}

func TestElicitationURLAndUnkeyedServer(t *testing.T) {
	ask := flowv1.ToolElicitation{Mode: flowv1.ElicitationURL, Message: "Sign the consent form", URL: "https://clinic.test/consent/42", ElicitationID: "e-42"}
	s, sent := elicitingClinic(t, flowv1.ToolIdempotencyNone, ask, nil)
	c := waitsForInput(t, s)
	if c.SentAt != nil {
		t.Errorf("sentAt %v: the server asked before it answered, the call is not of unknown outcome", c.SentAt)
	}
	msg := s.condition(flowv1.ConditionAwaitingInput).Message
	if !strings.Contains(msg, "visit https://clinic.test/consent/42, then say it is done: kubectl journey answer patient-12345 t-2-1 --accept") {
		t.Errorf("message %q", msg)
	}
	s.intervene(flowv1.Intervention{Action: flowv1.InterventionAnswer, Call: "t-2-1", Outcome: flowv1.AnswerAccept, Content: raw(`{"a": 1}`)})
	s.settle()
	if !strings.Contains(s.refusal(), "a URL request takes no content") || len(*sent) != 1 {
		t.Fatalf("refusal %q, sent %d", s.refusal(), len(*sent))
	}
	s.intervene(flowv1.Intervention{Action: flowv1.InterventionAnswer, Call: "t-2-1", Outcome: flowv1.AnswerAccept})
	var again *Effect
	for i := 0; i < 10 && again == nil; i++ {
		if eff := s.step(); eff != nil {
			if eff.Tool.Tool == "book_slot" {
				again = eff
			}
			s.perform(eff)
		}
	}
	if again == nil || !again.WriteFirst || s.st.Turn.ToolCalls[1].SentAt == nil {
		t.Fatalf("the call to a server without keys is sent again marked sent first: %s", dump(again))
	}
	s.settle()
	if s.st.Turn != nil || s.stalled() != "" || len(*sent) != 2 {
		t.Fatalf("stalled %q, sent %d, turn %s", s.stalled(), len(*sent), dump(s.st.Turn))
	}
}

func TestElicitationBounds(t *testing.T) {
	t.Run("a schema too large", func(t *testing.T) {
		big := patientForm
		big.RequestedSchema = raw(`{"type": "object", "description": "` + strings.Repeat("x", flowv1.MaxElicitationSchemaBytes) + `"}`)
		s, _ := elicitingClinic(t, "", big, nil)
		s.say("m1", "book me")
		s.settle()
		if s.st.Turn != nil || !strings.Contains(failureMessages(s), fmt.Sprintf("over the limit of %d", flowv1.MaxElicitationSchemaBytes)) {
			t.Fatalf("failures %q, turn %s", failureMessages(s), dump(s.st.Turn))
		}
	})
	t.Run("a server that keeps asking", func(t *testing.T) {
		s, sent := elicitingClinic(t, "", patientForm, nil)
		answer := s.answer
		s.answer = func(e *Effect) (any, error) {
			if e.Tool.Tool == "book_slot" {
				*sent = append(*sent, *e.Tool)
				q := patientForm.DeepCopy()
				q.Message = fmt.Sprintf("question %d", len(e.Tool.Elicitations)+1)
				return agent.ToolResponse{Elicitation: q}, nil
			}
			return answer(e)
		}
		s.say("m1", "book me")
		for i := 0; i < maxElicitations; i++ {
			s.settle()
			s.intervene(flowv1.Intervention{Action: flowv1.InterventionAnswer, Call: "t-2-1", Outcome: flowv1.AnswerCancel})
		}
		s.settle()
		if s.st.Turn != nil || !strings.Contains(failureMessages(s), "asked the user for input 5 times in one call") || len(*sent) != maxElicitations+1 {
			t.Fatalf("sent %d, failures %q", len(*sent), failureMessages(s))
		}
	})
}

// TestElicitationDeclineGoesBackToTheModel: in a ReAct turn, the server's answer to a
// decline is the tool's result the model is given.
func TestElicitationDeclineGoesBackToTheModel(t *testing.T) {
	s, l := reactTools(t, func(req agent.PathwayRequest) agent.PathwayResponse {
		if len(req.ToolExchanges) == 0 {
			return asks(call("book_slot", `{"doctor": "dr-lee"}`))
		}
		return agent.PathwayResponse{Reply: "No booking then.", ResultType: flowv1.ResultSuccess}
	}, func(j *flowv1.JourneySpec, _ *flowv1.PathwaySpec) {
		j.ToolServers = []flowv1.ToolServer{{Name: "clinic", URL: "http://clinic.test/mcp"}}
		j.Tools[1] = flowv1.Tool{Name: "book_slot", Server: "clinic", Approval: flowv1.ToolApprovalNever}
	})
	model := s.answer
	s.answer = func(e *Effect) (any, error) {
		if e.Kind == flowv1.EffectCallTool && e.Tool.Tool == "book_slot" {
			if len(e.Tool.Elicitations) == 0 {
				return agent.ToolResponse{Elicitation: patientForm.DeepCopy()}, nil
			}
			return agent.ToolResponse{Result: "the user declined to say who the appointment is for"}, nil
		}
		return model(e)
	}
	s.say("m1", "book dr-lee")
	s.settle()
	if s.st.Phase != flowv1.PhaseWaitingForInput || s.st.Turn.ToolCalls[0].State != flowv1.ToolCallAwaitingInput {
		t.Fatalf("phase %s, turn %s", s.st.Phase, dump(s.st.Turn))
	}
	s.intervene(flowv1.Intervention{Action: flowv1.InterventionAnswer, Call: s.st.Turn.ToolCalls[0].ID, Outcome: flowv1.AnswerDecline})
	s.settle()
	reqs := pathwayReqs(l)
	last := reqs[len(reqs)-1]
	if len(last.ToolExchanges) != 1 || !strings.Contains(last.ToolExchanges[0].Result, "the user declined") {
		t.Fatalf("the model was told %s", dump(last.ToolExchanges))
	}
	if s.st.Turn != nil || s.st.LastTurn.AssistantText != "No booking then." && !strings.Contains(dump(s.st.LastTurn), "No booking then.") {
		t.Fatalf("last turn %s", dump(s.st.LastTurn))
	}
}

func TestElicitationContentChecks(t *testing.T) {
	e := patientForm.DeepCopy()
	e.RequestedSchema = raw(`{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "weight": {"type": "number"},
		"consent": {"type": "boolean"}, "color": {"type": "string", "enum": ["red", "blue"]}}, "required": ["name", "consent"]}`)
	cases := []struct {
		content, err string
	}{
		{`{"name": "Ada", "consent": true, "age": 36, "weight": 61.5, "color": "red"}`, ""},
		{`{"name": "Ada"}`, `field "consent" is required by the form`},
		{`{"name": null, "consent": true}`, `field "name" is required by the form`},
		{`{"name": "Ada", "consent": "yes"}`, `field "consent" must be a boolean, got "yes"`},
		{`{"name": "Ada", "consent": true, "age": 36.5}`, `field "age" must be an integer, got 36.5`},
		{`{"name": "Ada", "consent": true, "color": "green"}`, `field "color" must be one of "red", "blue", got "green"`},
		{`[1]`, "content must be a JSON object"},
	}
	for _, tc := range cases {
		err := e.CheckContent(raw(tc.content))
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.content, err, tc.err)
		}
	}
	if v, err := e.ParseField("age", "36"); err != nil || v != float64(36) {
		t.Errorf("age=36: %v, %v", v, err)
	}
	if _, err := e.ParseField("consent", "perhaps"); err == nil || !strings.Contains(err.Error(), `field "consent" must be a boolean`) {
		t.Errorf("consent=perhaps: %v", err)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
