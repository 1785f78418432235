package plugin

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// askingSession waits for the user's answer to a form its tool server asked for.
func askingSession(e flowv1alpha1.ToolElicitation) *flowv1alpha1.Session {
	s := pendingSession()
	s.Status.Phase, s.Status.LastDecision = flowv1alpha1.PhaseWaitingForInput, nil
	s.Status.Turn = &flowv1alpha1.TurnProgress{Trigger: flowv1alpha1.TurnMessage, Stage: flowv1alpha1.StageRun, Pathway: "intake",
		ToolCalls: []flowv1alpha1.ToolCallProgress{{
			ToolCallRecord: flowv1alpha1.ToolCallRecord{ID: "t-4-0", Tool: "register", State: flowv1alpha1.ToolCallAwaitingInput},
			IdempotencyKey: "u-4-0", Elicitations: []flowv1alpha1.ToolElicitation{e},
		}}}
	return s
}

var registerForm = flowv1alpha1.ToolElicitation{Mode: flowv1alpha1.ElicitationForm, Message: "Who is it for?",
	RequestedSchema: &apiextensionsv1.JSON{Raw: []byte(`{"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "consent": {"type": "boolean"}}}`)}}

func TestAnswerFillsInTheForm(t *testing.T) {
	var w writes
	out, _, c, err := runWithFakeInput(t, &w, []client.Object{askingSession(registerForm)}, "",
		"answer", "deploy-42", "t-4-0", "--accept", "name=Ada Lovelace", "age=36", "consent=true")
	if err != nil || !strings.Contains(out, "intervention i-1 (Answer) sent to session/deploy-42") {
		t.Fatalf("%q, %v", out, err)
	}
	var s flowv1alpha1.Session
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "deploy-42"}, &s); err != nil {
		t.Fatal(err)
	}
	iv := s.Spec.Interventions[0]
	if iv.Action != flowv1alpha1.InterventionAnswer || iv.Call != "t-4-0" || iv.Outcome != flowv1alpha1.AnswerAccept ||
		string(iv.Content.Raw) != `{"age":36,"consent":true,"name":"Ada Lovelace"}` {
		t.Errorf("intervention %+v content %s", iv, iv.Content.Raw)
	}
}

func TestAnswerRefusesWhatTheFormDoesNotTake(t *testing.T) {
	url := flowv1alpha1.ToolElicitation{Mode: flowv1alpha1.ElicitationURL, Message: "Sign", URL: "https://example.test/sign"}
	cases := []struct {
		session *flowv1alpha1.Session
		args    []string
		want    string
	}{
		{askingSession(registerForm), []string{"--accept", "age=36"}, `field "name" is required by the form (it asks for age, consent, name)`},
		{askingSession(registerForm), []string{"--accept", "name=Ada", "age=old"}, `field "age" must be an integer, got "old"`},
		{askingSession(registerForm), []string{"--accept", "name=Ada", "nmae=x"}, `field "nmae" is not one the form asks for`},
		{askingSession(registerForm), []string{"--accept", "--content", `{"name": 7}`}, `field "name" must be a string, got 7`},
		{askingSession(registerForm), []string{"--decline", "name=Ada"}, "FIELD=VALUE arguments (name=Ada) go with --accept"},
		{askingSession(registerForm), []string{"--done", "ok"}, "answer it Accept, Decline or Cancel, not Done"},
		{askingSession(registerForm), []string{"--accept", "name"}, `"name" is not FIELD=VALUE`},
		{askingSession(url), []string{"--accept", "--content", `{"a": 1}`}, "a URL request takes no content"},
		{pendingSession(), []string{"--accept"}, "tool call t-4-0 of session/deploy-42 does not wait for an answer"},
	}
	for _, tc := range cases {
		var w writes
		_, _, err := runWithFake(t, &w, []client.Object{tc.session}, append([]string{"answer", "deploy-42", "t-4-0"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
		if w.patch+w.create+w.update != 0 {
			t.Errorf("%v: %+v writes, want none", tc.args, w)
		}
	}
}
