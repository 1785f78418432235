package engine

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// boomOutput is a builtin output whose CEL fails at run time on the message "boom".
var boomOutput = []flowv1.BuiltinOutput{{Name: "x", Expression: `message == "boom" ? context.missing.field : 1`}}

// replies is lastTurn.replies as "pathway: text" lines, a fallback marked with "*".
func replies(lt *flowv1.TurnOutcome) string {
	var b strings.Builder
	for _, r := range lt.Replies {
		mark := ""
		if r.Fallback {
			mark = "*"
		}
		fmt.Fprintf(&b, "%s%s: %s\n", mark, r.Pathway, r.Text)
	}
	return b.String()
}

// TestEveryTurnAnswers: whatever way a turn ends, it leaves a reply in lastTurn, its
// replies and the transcript, and TurnFailed says whether it failed.
func TestEveryTurnAnswers(t *testing.T) {
	pathwayReply := func(reply string) func(agent.PathwayRequest) (agent.PathwayResponse, error) {
		return func(req agent.PathwayRequest) (agent.PathwayResponse, error) {
			return agent.PathwayResponse{Reply: reply, ResultType: flowv1.ResultSuccess}, nil
		}
	}
	for _, tt := range []struct {
		name string
		// run builds the Session and sends what it needs.
		run         func(t *testing.T) *session
		finish      flowv1.FinishReason
		replies     string // lastTurn.replies, see replies
		turnFailed  metav1.ConditionStatus
		failReason  string // TurnFailed's reason when True
		reasonField string // status.reason
	}{
		{
			name: "success",
			run: func(t *testing.T) *session {
				s := newSession(t, journeyOf("chat", map[string]*flowv1.PathwaySpec{
					"chat": {Builtin: &flowv1.BuiltinPathway{Reply: "Hello.", Complete: "false"}},
				}))
				return s.say("m1", "hi")
			},
			finish: flowv1.FinishSuccess, replies: "chat: Hello.\n", reasonField: flowv1.ReasonWaitingForInput,
		},
		{
			name: "failed Graceful",
			run: func(t *testing.T) *session {
				s := newSession(t, journeyOf("chat", map[string]*flowv1.PathwaySpec{
					"chat": {Builtin: &flowv1.BuiltinPathway{Reply: "Hello.", Complete: "false", Outputs: boomOutput}},
				}))
				return s.say("m1", "boom")
			},
			finish: flowv1.FinishError, replies: "*chat: " + FallbackReply + "\n",
			turnFailed: metav1.ConditionTrue, failReason: "SystemValidation", reasonField: flowv1.ConditionTurnFailed,
		},
		{
			name: "capped by maxTurns",
			run: func(t *testing.T) *session {
				s := newSession(t, conversation(func(j *flowv1.JourneySpec) { j.Limits.MaxTurns = 1 }))
				return s.say("m1", "hi").say("m2", "again")
			},
			finish: flowv1.FinishTurnLimit, replies: "*chat: " + defaultReplies[flowv1.FinishTurnLimit] + "\n",
			turnFailed: metav1.ConditionTrue, failReason: flowv1.ReasonTurnLimit, reasonField: flowv1.ReasonTurnLimit,
		},
		{
			name: "budget stall",
			run: func(t *testing.T) *session {
				s := newSession(t, budgeted("0.5"))
				l := &llm{usage: agent.Usage{PromptTokens: 1000, CompletionTokens: 200, CostUSD: 0.45}, pathway: pathwayReply("Sure.")}
				s.answer = l.answer
				return s.say("m1", "hi").say("m2", "again")
			},
			finish: flowv1.FinishBudgetExceeded, replies: "*chat: " + defaultReplies[flowv1.FinishBudgetExceeded] + "\n",
			turnFailed: metav1.ConditionTrue, failReason: flowv1.ReasonBudgetExceeded, reasonField: flowv1.ReasonBudgetExceeded,
		},
		{
			name: "tool-call limit",
			run: func(t *testing.T) *session {
				two := int32(2)
				n := 0
				s, _ := reactTools(t, func(agent.PathwayRequest) agent.PathwayResponse {
					n++
					return asks(call("find_doctors", fmt.Sprintf(`{"specialty":"s%d"}`, n)))
				}, func(_ *flowv1.JourneySpec, p *flowv1.PathwaySpec) { p.MaxToolCalls = &two })
				return s.say("m1", "go")
			},
			finish: flowv1.FinishToolCallLimit, replies: "*book: " + defaultReplies[flowv1.FinishToolCallLimit] + "\n",
			turnFailed: metav1.ConditionTrue, failReason: string(flowv1.FinishToolCallLimit), reasonField: flowv1.ConditionTurnFailed,
		},
		{
			name: "empty model answer",
			run: func(t *testing.T) *session {
				s := newSession(t, conversation(func(j *flowv1.JourneySpec) { j.Agents = []flowv1.AgentSpec{openai}; j.Agents[0].Name = "bot" }))
				s.answer = (&llm{pathway: pathwayReply("  \n")}).answer
				return s.say("m1", "hi")
			},
			finish: flowv1.FinishSuccess, replies: "*chat: " + defaultReplies[flowv1.FinishSuccess] + "\n", reasonField: flowv1.ReasonWaitingForInput,
		},
		{
			name: "entry run that waits",
			run: func(t *testing.T) *session {
				// Both answer with no text: the route moves on, the form waits.
				s := newSession(t, journeyOf("route", map[string]*flowv1.PathwaySpec{
					"route": {Agents: []flowv1.Name{"gpt"}, Next: "form"},
					"form":  {Agents: []flowv1.Name{"gpt"}, RunOn: flowv1.RunOnEntry},
				}, func(j *flowv1.JourneySpec) { j.Agents = []flowv1.AgentSpec{openai} }))
				s.answer = (&llm{pathway: func(req agent.PathwayRequest) (agent.PathwayResponse, error) {
					return agent.PathwayResponse{ResultType: flowv1.ResultSuccess, Complete: req.Pathway == "route"}, nil
				}}).answer
				return s.say("m1", "hi")
			},
			finish: flowv1.FinishSuccess, replies: "*form: " + defaultReplies[flowv1.FinishSuccess] + "\n", reasonField: flowv1.ReasonWaitingForInput,
		},
		{
			name: "a failure routed to a pathway that waits for input",
			run: func(t *testing.T) *session {
				s := newSession(t, journeyOf("chat", map[string]*flowv1.PathwaySpec{
					"chat":  {Builtin: &flowv1.BuiltinPathway{Reply: "Hello.", Outputs: boomOutput}, Transitions: &flowv1.OutcomeTransitions{OnFailure: str("human")}},
					"human": {Builtin: &flowv1.BuiltinPathway{Complete: "false"}},
				}))
				return s.say("m1", "boom")
			},
			finish: flowv1.FinishError, replies: "*chat: " + FallbackReply + "\n",
			turnFailed: metav1.ConditionTrue, failReason: "SystemValidation", reasonField: flowv1.ConditionTurnFailed,
		},
		{
			name: "a message through three pathways",
			run: func(t *testing.T) *session {
				s := newSession(t, journeyOf("greet", map[string]*flowv1.PathwaySpec{
					"greet":    {Next: "diagnose", Builtin: &flowv1.BuiltinPathway{Reply: "Hi."}},
					"diagnose": {RunOn: flowv1.RunOnEntry, Next: "resolved", Builtin: &flowv1.BuiltinPathway{Reply: "Looking into it."}},
					"resolved": {RunOn: flowv1.RunOnEntry, Builtin: &flowv1.BuiltinPathway{Reply: "Fixed.", Complete: "false"}},
				}))
				return s.say("m1", "my printer is broken")
			},
			finish: flowv1.FinishSuccess, replies: "greet: Hi.\ndiagnose: Looking into it.\nresolved: Fixed.\n", reasonField: flowv1.ReasonWaitingForInput,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.run(t)
			s.settle()
			lt := s.st.LastTurn
			if lt == nil || lt.FinishReason != tt.finish || lt.AssistantText == "" || replies(lt) != tt.replies {
				t.Fatalf("finish %s, want %s; replies:\n%swant:\n%s%s", lt.FinishReason, tt.finish, replies(lt), tt.replies, dump(lt))
			}
			if last := lt.Replies[len(lt.Replies)-1]; last.Text != lt.AssistantText {
				t.Errorf("assistantText %q is not the last reply %q", lt.AssistantText, last.Text)
			}
			c := s.condition(flowv1.ConditionTurnFailed)
			switch {
			case tt.turnFailed == "" && c != nil:
				t.Errorf("TurnFailed set on a good turn: %+v", c)
			case tt.turnFailed != "" && (c == nil || c.Status != tt.turnFailed || c.Reason != tt.failReason || c.Message == ""):
				t.Errorf("TurnFailed %+v, want %s %s", c, tt.turnFailed, tt.failReason)
			}
			if s.st.Reason != tt.reasonField {
				t.Errorf("status.reason %q, want %q", s.st.Reason, tt.reasonField)
			}
			if s.st.Turn != nil {
				return // stalled in progress: the turn joins the transcript when it ends
			}
			if n := len(s.st.Transcript); lt.MessageID != "" && (n == 0 || s.st.Transcript[n-1].Assistant != lt.AssistantText) {
				t.Errorf("the transcript does not end with the turn's reply: %s", dump(s.st.Transcript))
			}
		})
	}
}

// A message's turn goes on through the entry runs it leads into: one record, every
// reply in order, every transition tagged with the message, the message once in the
// transcript.
func TestMultiPathwayTurnRecord(t *testing.T) {
	s := newSession(t, journeyOf("greet", map[string]*flowv1.PathwaySpec{
		"greet":    {Next: "diagnose", Builtin: &flowv1.BuiltinPathway{Reply: "Hi."}},
		"diagnose": {RunOn: flowv1.RunOnEntry, Next: "resolved", Builtin: &flowv1.BuiltinPathway{Reply: "Looking into it."}},
		"resolved": {RunOn: flowv1.RunOnEntry, Builtin: &flowv1.BuiltinPathway{Reply: "Fixed.", Complete: "false"}},
	}))
	s.say("m1", "my printer is broken").settle()
	lt := s.st.LastTurn
	if lt.Trigger != flowv1.TurnMessage || lt.MessageID != "m1" || lt.Pathway != "resolved" || s.st.Turns != 3 {
		t.Fatalf("turns %d, last turn %s", s.st.Turns, dump(lt))
	}
	var moves []string
	for _, h := range s.st.History {
		if h.MessageID == "m1" {
			moves = append(moves, h.From+">"+h.To)
		}
	}
	if strings.Join(moves, " ") != "greet>diagnose diagnose>resolved" {
		t.Errorf("the turn's transitions %v", moves)
	}
	var users []string
	for _, e := range s.st.Transcript {
		if e.User != "" {
			users = append(users, e.MessageID+":"+e.User)
		}
	}
	if len(s.st.Transcript) != 3 || strings.Join(users, ",") != "m1:my printer is broken" {
		t.Errorf("transcript %s", dump(s.st.Transcript))
	}
	// The next message starts a new record.
	s.say("m2", "thanks").settle()
	if lt := s.st.LastTurn; lt.MessageID != "m2" || replies(lt) != "resolved: Fixed.\n" {
		t.Errorf("next turn %s", dump(lt))
	}
}

// The fallback reply is the pathway's fallbackReply, else the Journey's, else the
// default for how the turn ended; TurnFailed goes False after the next good turn.
func TestFallbackReplyPrecedence(t *testing.T) {
	for _, tt := range []struct {
		name             string
		pathway, journey string
		want             string
	}{
		{"default", "", "", FallbackReply},
		{"journey", "", "The team has been told.", "The team has been told."},
		{"pathway over journey", "Let me get a person to help.", "The team has been told.", "Let me get a person to help."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newSession(t, journeyOf("chat", map[string]*flowv1.PathwaySpec{
				"chat": {FallbackReply: tt.pathway, Builtin: &flowv1.BuiltinPathway{Reply: "Hello.", Complete: "false", Outputs: boomOutput}},
			}, func(j *flowv1.JourneySpec) { j.FallbackReply = tt.journey }))
			s.say("m1", "boom").settle()
			if lt := s.st.LastTurn; lt.AssistantText != tt.want || replies(lt) != "*chat: "+tt.want+"\n" {
				t.Fatalf("reply %q, want %q", lt.AssistantText, tt.want)
			}
			if n := len(s.st.Transcript); n != 1 || s.st.Transcript[0].Assistant != tt.want {
				t.Errorf("transcript %s", dump(s.st.Transcript))
			}
			c := s.condition(flowv1.ConditionTurnFailed)
			if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "Pathway chat: System/Validation") {
				t.Fatalf("TurnFailed after a failed turn: %+v", c)
			}
			s.say("m2", "fine").settle()
			c = s.condition(flowv1.ConditionTurnFailed)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != flowv1.ReasonTurnAnswered || s.st.Reason != flowv1.ReasonWaitingForInput {
				t.Errorf("TurnFailed after a good turn: %+v, reason %q", c, s.st.Reason)
			}
			if lt := s.st.LastTurn; replies(lt) != "chat: Hello.\n" {
				t.Errorf("good turn replies %s", replies(lt))
			}
		})
	}
}

// A budget stall answers with its fallback; once spec.limits lifts the cap, the
// stalled turn takes it back and answers with its own reply.
func TestBudgetStallAnswersAndTakesItBack(t *testing.T) {
	s := newSession(t, budgeted("0.5"))
	l := &llm{usage: agent.Usage{PromptTokens: 1000, CompletionTokens: 200, CostUSD: 0.45},
		pathway: func(req agent.PathwayRequest) (agent.PathwayResponse, error) {
			return agent.PathwayResponse{Reply: "re: " + req.Message, ResultType: flowv1.ResultSuccess}, nil
		}}
	s.answer = l.answer
	s.say("m1", "hi").say("m2", "again").settle()
	if lt := s.st.LastTurn; lt.AssistantText != defaultReplies[flowv1.FinishBudgetExceeded] || s.st.Turn == nil {
		t.Fatalf("stalled turn %s", dump(lt))
	}
	s.spec.Limits = &flowv1.SessionLimits{Budget: &flowv1.SessionBudget{MaxCostUSD: "5"}}
	s.settle()
	if lt := s.st.LastTurn; replies(lt) != "chat: re: again\n" || lt.FinishReason != flowv1.FinishSuccess {
		t.Fatalf("resumed turn %s", dump(lt))
	}
	if c := s.condition(flowv1.ConditionTurnFailed); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("TurnFailed after the resumed turn answered: %+v", c)
	}
}

// AgentAvailable tells what became of the last call: answered, answered unusably, or
// given up.
func TestAgentAvailableAfterJournal(t *testing.T) {
	for _, tt := range []struct {
		name   string
		f      *flowv1.Failure
		status metav1.ConditionStatus
		reason string
	}{
		{"answered", nil, metav1.ConditionTrue, flowv1.ReasonAgentReady},
		{"invalid answer", &flowv1.Failure{Source: flowv1.FailureLLM, Kind: flowv1.FailureValidation, Message: "bad JSON"}, metav1.ConditionTrue, flowv1.ReasonAgentReady},
		{"tool error result", &flowv1.Failure{Source: flowv1.FailureTool, Kind: flowv1.FailureException, Message: "no such patient"}, metav1.ConditionTrue, flowv1.ReasonAgentReady},
		{"server gave up", &flowv1.Failure{Source: flowv1.FailureLLM, Kind: flowv1.FailureException, Message: "gave up after 3 attempts: HTTP 500"}, metav1.ConditionFalse, flowv1.ReasonAgentError},
		{"tool server unreachable", &flowv1.Failure{Source: flowv1.FailureTransport, Kind: flowv1.FailureException, Message: "gave up after 3 attempts: connection refused"}, metav1.ConditionFalse, flowv1.ReasonAgentError},
		{"timeout", &flowv1.Failure{Source: flowv1.FailureTransport, Kind: flowv1.FailureTimeout, Message: "no answer within 10s"}, metav1.ConditionFalse, flowv1.ReasonAgentTimeout},
		{"rate limited", &flowv1.Failure{Source: flowv1.FailureLLM, Kind: flowv1.FailureRateLimit, Message: "HTTP 429"}, metav1.ConditionFalse, flowv1.ReasonRateLimited},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := &flowv1.SessionStatus{}
			Journal(st, &flowv1.EffectRecord{Agent: "clinic", Result: flowv1.AgentResult{Failure: tt.f}}, nil, t0)
			c := st.Conditions[0]
			if c.Type != flowv1.ConditionAgentAvailable || c.Status != tt.status || c.Reason != tt.reason {
				t.Fatalf("condition %+v, want %s %s", c, tt.status, tt.reason)
			}
			if tt.f != nil && !strings.Contains(c.Message, tt.f.Message) {
				t.Errorf("message %q does not say what failed", c.Message)
			}
		})
	}
}
