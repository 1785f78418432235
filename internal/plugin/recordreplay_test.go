package plugin

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/journeytest"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// TestRecordAndReplaySessionsThatSayDrove: Sessions driven by kubectl journey say
// against the Session controller, so that their processed messages left spec.messages,
// are recorded with kubectl journey record, the recording passes kubectl journey test,
// and kubectl journey replay finds no divergence: a healthcare conversation of six
// messages, a journey of builtin tools, and one that calls the clinic MCP server
// (stopped before the recording). A transcript trimmed past the dropped messages makes
// record and replay say which messages are lost.
func TestRecordAndReplaySessionsThatSayDrove(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	t.Parallel()
	controlPlane(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartManager(t, testenv.ManagerOptions{
		Namespaces: []string{ns},
		Setup:      func(mgr ctrl.Manager) error { return controller.Setup(mgr, controller.Options{}) },
	})
	journeyCmd := func(args ...string) (string, string, error) {
		return kubectlJourney(ctx, append(args, "-n", ns)...)
	}
	say := func(t *testing.T, session string, texts ...string) {
		t.Helper()
		for _, text := range texts {
			if out, errOut, err := journeyCmd("say", session, text, "--wait"); err != nil {
				t.Fatalf("say %q: %v\n%s%s", text, err, out, errOut)
			}
		}
	}
	createSession := func(t *testing.T, name, journey string, initial string) {
		t.Helper()
		s := &flowv1alpha1.Session{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       flowv1alpha1.SessionSpec{JourneyRef: flowv1alpha1.JourneyReference{Name: journey}},
		}
		if initial != "" {
			s.Spec.InitialContext = jsonValue(initial)
		}
		if err := admin.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// recordTestReplay records the Session, runs the recording and replays the Session:
	// all three succeed, with no note.
	recordTestReplay := func(t *testing.T, name string, messages int32) {
		t.Helper()
		s := &flowv1alpha1.Session{}
		if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
			t.Fatal(err)
		}
		if s.Spec.MessageCount() != messages || s.Spec.MessagesDropped < messages-1 {
			t.Fatalf("session %s has %d messages, %d of them dropped from spec.messages; want %d, at least %d dropped", name, s.Spec.MessageCount(), s.Spec.MessagesDropped, messages, messages-1)
		}
		out, errOut, err := journeyCmd("record", name)
		if err != nil || errOut != "" {
			t.Fatalf("record: %v\n%s", err, errOut)
		}
		file := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(out, "- message:"); got != int(messages) {
			t.Errorf("the recording sends %d messages, want %d:\n%s", got, messages, out)
		}
		if res, _, err := journeyCmd("test", file); err != nil {
			t.Fatalf("test of the recording: %v\n%s\n%s", err, res, out)
		}
		if res, _, err := journeyCmd("replay", name); err != nil || !strings.Contains(res, "No divergence: today's engine reproduces the transitions and the final status of session "+name) {
			t.Fatalf("replay: %v\n%s", err, res)
		}
	}

	t.Run("six messages", func(t *testing.T) {
		createManifests(t, ns, filepath.Join(testenv.SamplesDir(), "healthcare-referral.yaml"))
		waitReady(t, ns, "healthcare-referral")
		createSession(t, "patient-1", "healthcare-referral", `{"insurance_id":"INS-1"}`)
		say(t, "patient-1",
			"Hi, I need to book an appointment with a cardiologist. Here's my referral.",
			"Wait, what is the copay for specialist visits?",
			"Thanks! Now show me the available doctors.",
			"I don't want Dr. Smith. Can you show me another option?",
			"I'm not sure, let me think about it.",
			"Dr. Johnson looks great. Book the Tuesday 2pm slot.")
		recordTestReplay(t, "patient-1", 6)

		// A transcript that dropped the exchanges of dropped messages: record and replay
		// name them. (The status is changed by hand, as a smaller
		// limits.maxTranscriptBytes would have left it.)
		if err := patchSessionStatus(ctx, ns, "patient-1", func(st *flowv1alpha1.SessionStatus) {
			st.Transcript, st.TranscriptDropped = st.Transcript[3:], 3
		}); err != nil {
			t.Fatal(err)
		}
		want := "session patient-1 cannot be replayed from its start: it no longer holds messages 1 to 3 of its 6: they left spec.messages (spec.messagesDropped is 5) and status.transcript, which dropped its 3 oldest exchanges to stay under limits.maxTranscriptBytes (of the dropped messages it holds messages 4 to 5)"
		for _, cmd := range []string{"record", "replay"} {
			if _, errOut, err := journeyCmd(cmd, "patient-1"); err == nil || !strings.Contains(errOut+err.Error(), want) {
				t.Errorf("%s of a trimmed transcript: %v, want %q", cmd, err, want)
			}
		}
	})

	t.Run("builtin tools", func(t *testing.T) {
		createTestManifests(t, ns, filepath.Join("..", "journeytest", "testdata", "builtin-tools.yaml"))
		waitReady(t, ns, "copay-desk")
		createSession(t, "quote-1", "copay-desk", `{"member":true}`)
		say(t, "quote-1", "What does a specialist visit cost?", "And a general visit?", "A specialist again, please.")
		recordTestReplay(t, "quote-1", 3)
	})

	t.Run("MCP tools", func(t *testing.T) {
		cl := clinic.New()
		srv := httptest.NewServer(cl.Handler())
		defer srv.Close()
		p, j := testenv.ClinicBooking(ns, srv.URL+"/mcp")
		p.Spec.RunOn = ""
		p.Spec.Builtin.ToolCalls = []flowv1alpha1.BuiltinToolCall{{Tool: "find_doctors", Args: "{'specialty': message.contains('skin') ? 'dermatology' : 'cardiology'}"}}
		p.Spec.Builtin.Outputs = []flowv1alpha1.BuiltinOutput{{Name: "doctor", Expression: "tools.find_doctors.doctors[0].name"}}
		p.Spec.Builtin.Reply = "{{ (index .tools.find_doctors.doctors 0).name }} has a free slot."
		p.Spec.Builtin.Complete = "false"
		p.Spec.Accumulate = []string{"doctor"}
		for _, o := range []client.Object{p, j} {
			if err := admin.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		waitReady(t, ns, "clinic")
		createSession(t, "visit-1", "clinic", "")
		say(t, "visit-1", "My heart races.", "And my skin itches.", "Back to my heart, please.")
		if got := cl.Calls("find_doctors"); got != 3 {
			t.Fatalf("the clinic got %d calls of find_doctors, want 3", got)
		}
		srv.Close() // record, test and replay call no server
		recordTestReplay(t, "visit-1", 3)
		if got := cl.Calls("find_doctors"); got != 3 {
			t.Errorf("record, test and replay called the clinic %d times", got-3)
		}
	})
}

func jsonValue(s string) *apiextensionsv1.JSON {
	return &apiextensionsv1.JSON{Raw: []byte(s)}
}

// patchSessionStatus changes the status of Session name in ns.
func patchSessionStatus(ctx context.Context, ns, name string, change func(*flowv1alpha1.SessionStatus)) error {
	s := &flowv1alpha1.Session{}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		return err
	}
	base := s.DeepCopy()
	change(&s.Status)
	return admin.Status().Patch(ctx, s, client.MergeFrom(base))
}

// createManifests creates the Journeys and Pathways of a manifest file in ns.
func createManifests(t *testing.T, ns, path string) {
	t.Helper()
	for _, obj := range testenv.Manifests(t, path) {
		if k := obj.GetKind(); k != "Journey" && k != "Pathway" {
			continue
		}
		obj.SetNamespace(ns)
		if err := admin.Create(context.Background(), obj); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// createTestManifests creates the inline manifests of a journey test in ns.
func createTestManifests(t *testing.T, ns, path string) {
	t.Helper()
	c, err := journeytest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Manifests {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(m.Object); err != nil {
			t.Fatal(err)
		}
		u.SetNamespace(ns)
		if err := admin.Create(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	}
}

// waitReady waits until Journey name in ns is Ready.
func waitReady(t *testing.T, ns, name string) {
	t.Helper()
	err := testenv.Poll(30*time.Second, func() error {
		j := &flowv1alpha1.Journey{}
		if err := admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, j); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(j.Status.Conditions, flowv1alpha1.ConditionReady) {
			return fmt.Errorf("not Ready: %+v", j.Status.Conditions)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("journey %s: %v", name, err)
	}
}
