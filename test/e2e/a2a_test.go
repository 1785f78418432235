package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// a2aClientRun is what testdata/a2a-client.mjs prints.
type a2aClientRun struct {
	Card struct {
		Name, URL, ProtocolVersion string
		Streaming                  bool
		Skills                     []string
	}
	Sent struct {
		ID, State string
		Replies   []string
	}
	Streamed, Resumed []a2aEvent
}

type a2aEvent struct {
	Kind, EventID, State, Text string
	Final                      bool
}

func (ev a2aEvent) String() string {
	return fmt.Sprintf("%s %s %s %q final=%t", ev.Kind, ev.EventID, ev.State, ev.Text, ev.Final)
}

// A client nobody here wrote, the official A2A JavaScript SDK, talks to the
// healthcare-referral sample through the gateway: it reads the agent card, starts a
// task with a message, streams the reply to a second one and resubscribes from the
// reply. What it got is the Session's transcript, with the event ids the gateway
// derives from the Session.
func TestA2AJavaScriptClient(t *testing.T) {
	t.Parallel()
	ns := "e2e-a2a"
	kubectl(t, "create", "namespace", ns)
	kubectl(t, "-n", ns, "apply", "-f", "config/samples/healthcare-referral.yaml")
	kubectl(t, "-n", ns, "wait", "--for=condition=Ready", "--timeout=30s", "journey/healthcare-referral")
	kubectl(t, "-n", ns, "create", "serviceaccount", "a2a-caller")
	kubectl(t, "-n", ns, "create", "role", "a2a-user", "--verb=get,list,watch,create,patch", "--resource=sessions.flow.journey.dev")
	kubectl(t, "-n", ns, "create", "rolebinding", "a2a-caller", "--role=a2a-user", "--serviceaccount="+ns+":a2a-caller")
	token := strings.TrimSpace(kubectl(t, "-n", ns, "create", "token", "a2a-caller"))

	gw, err := cluster.ServeA2A("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	agent := gw.URL + "/a2a/" + ns + "/healthcare-referral"

	first := "Hi, I need to book an appointment with a cardiologist. Here's my referral."
	second := "I have my referral right here."
	out := runNode(t, "a2a-client.mjs", []string{"A2A_TOKEN=" + token}, agent, first, second)
	var run a2aClientRun
	if err := json.Unmarshal(out, &run); err != nil {
		t.Fatalf("the client's output is not its JSON report: %v\n%s", err, out)
	}

	if run.Card.Name != "healthcare-referral" || run.Card.URL != agent || run.Card.ProtocolVersion != "0.3.0" || !run.Card.Streaming {
		t.Errorf("agent card %+v: want name healthcare-referral, url %s, protocol 0.3.0, streaming", run.Card, agent)
	}
	if !slices.Contains(run.Card.Skills, "intake") || !slices.Contains(run.Card.Skills, "booking") {
		t.Errorf("agent card skills %q: want one per pathway (intake, booking, ...)", run.Card.Skills)
	}

	s := &flowv1.Session{}
	if err := cluster.Env.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: run.Sent.ID}, s); err != nil {
		t.Fatalf("the task %q is not a Session: %v", run.Sent.ID, err)
	}
	if s.Spec.JourneyRef.Name != "healthcare-referral" {
		t.Errorf("the task's Session is of journey %q", s.Spec.JourneyRef.Name)
	}
	x := s.Status.Transcript
	if len(x) != 2 || x[0].User != first || x[1].User != second {
		t.Fatalf("the Session's transcript is not the two messages: %+v", x)
	}
	if run.Sent.State != "input-required" || !slices.Equal(run.Sent.Replies, []string{x[0].Assistant}) {
		t.Errorf("message/send: state %s, replies %q; want input-required and the Session's reply %q", run.Sent.State, run.Sent.Replies, x[0].Assistant)
	}

	// The stream: the task as the message left it (after the first exchange, at the
	// status.step it was sent at), the reply, the settled state.
	var got []string
	for _, ev := range run.Streamed {
		got = append(got, ev.String())
	}
	if len(got) > 0 && regexp.MustCompile(`^task t1\.s\d+ working "" final=false$`).MatchString(got[0]) {
		got[0] = "task t1.s<step> working"
	}
	want := []string{
		"task t1.s<step> working",
		fmt.Sprintf("artifact-update t2.s%d  %q final=false", x[1].Step, x[1].Assistant),
		fmt.Sprintf("status-update t2.s%d.input-required input-required \"\" final=true", s.Status.Step),
	}
	if !slices.Equal(got, want) {
		t.Errorf("message/stream events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Resubscribing after the reply replays the one event after it.
	if len(run.Streamed) == 3 && (len(run.Resumed) != 1 || run.Resumed[0] != run.Streamed[2]) {
		t.Errorf("tasks/resubscribe from %s yields %v, want the stream's last event", run.Streamed[1].EventID, run.Resumed)
	}
	if s.Status.Phase != flowv1.PhaseWaitingForInput {
		t.Errorf("Session phase %s, want WaitingForInput", s.Status.Phase)
	}
}
