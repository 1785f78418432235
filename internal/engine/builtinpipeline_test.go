package engine

import (
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// twoBuiltinAgents is a one-pathway chat whose two builtin agents, drafter and
// checker, run as pipeline.
func twoBuiltinAgents(pipeline flowv1.Pipeline) def {
	return journeyOf("chat", map[string]*flowv1.PathwaySpec{
		"chat": {Agents: []flowv1.Name{"drafter", "checker"}, Pipeline: pipeline,
			Builtin: &flowv1.BuiltinPathway{Complete: "false", Reply: "pathway reply"}},
	}, func(j *flowv1.JourneySpec) {
		j.Agents = []flowv1.AgentSpec{
			{Name: "drafter", Provider: flowv1.ProviderBuiltin, Builtin: &flowv1.BuiltinAgent{
				Outputs:  []flowv1.BuiltinOutput{{Name: "draft", Expression: "'draft of ' + message"}},
				Reply:    "drafted {{ .outputs.draft }}",
				Patterns: []string{"write"},
			}},
			{Name: "checker", Provider: flowv1.ProviderBuiltin, Builtin: &flowv1.BuiltinAgent{
				Outputs:  []flowv1.BuiltinOutput{{Name: "checked", Expression: "has(inputs.draft) ? 'checked ' + inputs.draft : 'nothing to check'"}},
				Reply:    "{{ .outputs.checked }}",
				Patterns: []string{"check"},
			}},
		}
	})
}

func TestBuiltinPipelines(t *testing.T) {
	for _, tc := range []struct {
		pipeline       flowv1.Pipeline
		message        string
		reply          string
		draft, checked any
	}{
		// Sequential: the checker sees the drafter's output.
		{flowv1.PipelineSequential, "hello", "checked draft of hello", "draft of hello", "checked draft of hello"},
		// Parallel: both run on the same request; outputs merge, replies join.
		{flowv1.PipelineParallel, "hello", "drafted draft of hello\n\nnothing to check", "draft of hello", "nothing to check"},
		// Router: the first agent chooses the handler by its patterns (the second,
		// when none matches).
		{flowv1.PipelineRouter, "please check this", "nothing to check", nil, "nothing to check"},
		// Ensemble: both agree on success; the first answer in declared order wins.
		{flowv1.PipelineEnsemble, "hello", "drafted draft of hello", "draft of hello", nil},
	} {
		t.Run(string(tc.pipeline), func(t *testing.T) {
			s := newSession(t, twoBuiltinAgents(tc.pipeline))
			s.say("m1", tc.message)
			s.settle()
			lt := s.st.LastTurn
			if lt.AssistantText != tc.reply {
				t.Errorf("reply %q, want %q", lt.AssistantText, tc.reply)
			}
			out, _ := decodeJSON(lt.Outputs)
			if out["draft"] != tc.draft || out["checked"] != tc.checked {
				t.Errorf("outputs %v, want draft %v checked %v", out, tc.draft, tc.checked)
			}
		})
	}
}

// Agents with nothing of their own answer once, from the pathway's builtin section.
func TestBuiltinAgentsWithoutOwnBehaviourAnswerOnce(t *testing.T) {
	d := twoBuiltinAgents(flowv1.PipelineParallel)
	for i := range d.j.Agents {
		d.j.Agents[i].Builtin = nil
	}
	s := newSession(t, d)
	s.say("m1", "hello")
	s.settle()
	if lt := s.st.LastTurn; lt.AssistantText != "pathway reply" {
		t.Errorf("reply %q", lt.AssistantText)
	}
}

func TestBuiltinAgentOutputsAreValidated(t *testing.T) {
	d := twoBuiltinAgents(flowv1.PipelineSequential)
	d.j.Agents[0].Builtin.Outputs[0].Expression = "'unterminated"
	d.j.Agents[1].Builtin.Reply = "{{ .outputs.checked "
	issues := Validate(d.j, d.p)
	if len(issues) != 2 {
		t.Fatalf("issues %q", issues)
	}
}

// A builtin Router picks a handler by its patterns, then by the words of the handlers'
// names in the message, else the second agent.
func TestBuiltinRouterPicksByPatternsThenNames(t *testing.T) {
	d := journeyOf("chat", map[string]*flowv1.PathwaySpec{
		"chat": {Agents: []flowv1.Name{"triage", "billing-desk", "clinical-team"}, Pipeline: flowv1.PipelineRouter,
			Builtin: &flowv1.BuiltinPathway{Complete: "false"}},
	}, func(j *flowv1.JourneySpec) {
		agent := func(name, reply string, patterns ...string) flowv1.AgentSpec {
			return flowv1.AgentSpec{Name: flowv1.Name(name), Provider: flowv1.ProviderBuiltin,
				Builtin: &flowv1.BuiltinAgent{Reply: reply, Patterns: patterns}}
		}
		j.Agents = []flowv1.AgentSpec{
			{Name: "triage", Provider: flowv1.ProviderBuiltin},
			agent("billing-desk", "billing", "invoice"),
			agent("clinical-team", "clinical", "symptom"),
		}
	})
	for message, want := range map[string]string{
		"a symptom since Monday":      "clinical",
		"my invoice":                  "billing",
		"I need the clinical team":    "clinical",
		"put me through to the desk":  "billing",
		"hello, is anybody there?":    "billing",
		"the clinical invoice, again": "billing",
	} {
		s := newSession(t, d)
		s.say("m1", message)
		s.settle()
		if got := s.st.LastTurn.AssistantText; got != want {
			t.Errorf("%q went to %q, want %q", message, got, want)
		}
	}
}
