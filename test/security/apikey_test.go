// Package security holds end-to-end checks of the operator's security claims that no
// single package can make alone (see docs/security.md).
package security

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/audit"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// syncBuffer collects the manager's log lines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// verbosity is the log verbosity the tests run the manager at: the highest client-go
// knows (10: every request and response body, whole), through the cap the manager
// puts on its logger (audit.CapVerbosity: nothing above 7, where client-go starts
// logging bodies, the Secrets it reads and the Sessions it writes included; see
// docs/security.md).
const verbosity = 10

// logs receives every log line of the manager.
var logs = &syncBuffer{}

func TestMain(m *testing.M) {
	ctrl.SetLogger(audit.CapVerbosity(zap.New(zap.WriteTo(logs), zap.Level(zapcore.Level(-verbosity))), audit.MaxLogVerbosity))
	code := m.Run()
	if sharedEnv != nil {
		if err := sharedEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		}
	}
	os.Exit(code)
}

// The tests that need no particular API server configuration share one control plane,
// started by the first of them; each works in a namespace of its own with a manager
// restricted to it. The encryption cases start control planes of their own.
var (
	sharedOnce sync.Once
	sharedEnv  *testenv.Environment
	sharedErr  error
)

func controlPlane(t *testing.T) *testenv.Environment {
	t.Helper()
	sharedOnce.Do(func() { sharedEnv, sharedErr = testenv.Start() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedEnv
}

// chatServer is an OpenAI-compatible endpoint that echoes the bearer token it receives
// in its error bodies, as real servers sometimes do. The model decides the script:
// "flaky" fails its first call with a 500 that echoes the key and then decides "done";
// "revoked" always answers 401 with the key in the message.
func chatServer(t *testing.T) *testenv.ChatServer {
	var mu sync.Mutex
	calls := map[string]int{}
	return testenv.NewChatServer(t, func(req testenv.ChatRequest) testenv.Reply {
		auth := req.Bearer()
		mu.Lock()
		calls[req.Model]++
		n := calls[req.Model]
		mu.Unlock()
		switch {
		case req.Model == "revoked":
			return testenv.JSONReply(http.StatusUnauthorized, map[string]any{"error": map[string]any{
				"message": "Incorrect API key provided: " + strings.TrimPrefix(auth, "Bearer ") + " (header " + auth + ")",
				"type":    "invalid_request_error", "code": "invalid_api_key"}})
		case n == 1:
			return testenv.JSONReply(http.StatusInternalServerError, map[string]any{"error": map[string]any{
				"message": "upstream failure for credentials " + auth, "type": "server_error"}})
		default:
			return testenv.Reply{Content: `{"destination":"done","confidence":0.95,"reasoning":"the work is done"}`,
				Usage: testenv.Usage{Prompt: 40, Completion: 10}}
		}
	})
}

// journey creates a Journey whose entry pathway's success is decided by an openai agent
// of the given model, then a pathway "done" that ends it.
func journey(t *testing.T, c client.Client, ns, name, model, baseURL string) {
	t.Helper()
	ctx := context.Background()
	zero := int32(0)
	objs := []client.Object{
		&flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-start"}, Spec: flowv1.PathwaySpec{
			RunOn:   flowv1.RunOnEntry,
			Builtin: &flowv1.BuiltinPathway{Reply: "started"},
			Transitions: &flowv1.OutcomeTransitions{OnSuccess: &flowv1.OutcomeTransition{Decision: &flowv1.Decision{
				Agent: "judge", Prompt: "Is the work done?", AllowedDestinations: []flowv1.Name{"done"},
			}}},
		}},
		&flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-done"}, Spec: flowv1.PathwaySpec{
			RunOn: flowv1.RunOnEntry, Builtin: &flowv1.BuiltinPathway{Reply: "finished"},
		}},
		&flowv1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: flowv1.JourneySpec{
			EntryPathway: "start",
			Pathways:     []flowv1.PathwayEntry{{Name: "start", PathwayRef: name + "-start"}, {Name: "done", PathwayRef: name + "-done"}},
			Agents: []flowv1.AgentSpec{{
				Name: "judge", Provider: flowv1.ProviderOpenAI, Model: model, BaseURL: baseURL,
				APIKeySecretRef: &flowv1.SecretKeyRef{Name: "llm", Key: "apiKey"},
				MaxRetries:      &zero, Timeout: &metav1.Duration{Duration: 5 * time.Second},
			}},
		}},
		&flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: flowv1.SessionSpec{
			JourneyRef: flowv1.JourneyReference{Name: name},
		}},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// TestAPIKeyAppearsNowhere runs Sessions whose decision agent is an OpenAI-compatible
// endpoint with its key in a Secret. The endpoint echoes the key in a retried 500 and in
// a terminal 401. Afterwards the key must not appear in any Session, Journey or
// Journey revision, any Event of the namespace, or any line the manager logged.
func TestAPIKeyAppearsNowhere(t *testing.T) {
	raw := make([]byte, 24)
	_, _ = rand.Read(raw)
	secretPart := hex.EncodeToString(raw)
	key := "sk-proj-" + secretPart

	env := controlPlane(t)
	c := env.Client
	ctx := context.Background()
	const ns = "secrets"
	if err := env.CreateNamespace(ns); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm"},
		StringData: map[string]string{"apiKey": key}}); err != nil {
		t.Fatal(err)
	}
	env.StartManager(t, testenv.ManagerOptions{
		Namespaces: []string{ns},
		Setup:      func(mgr ctrl.Manager) error { return controller.Setup(mgr, controller.Options{}) },
	})

	srv := chatServer(t)
	journey(t, c, ns, "flaky", "flaky", srv.BaseURL())
	journey(t, c, ns, "revoked", "revoked", srv.BaseURL())

	// flaky completes after one transient failure; revoked stalls on the 401.
	waitFor(t, 60*time.Second, func() error {
		var flaky, revoked flowv1.Session
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flaky"}, &flaky); err != nil {
			return err
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "revoked"}, &revoked); err != nil {
			return err
		}
		if flaky.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("flaky is %q, want Completed", flaky.Status.Phase)
		}
		if st := apimeta.FindStatusCondition(revoked.Status.Conditions, flowv1.ConditionStalled); st == nil || st.Reason != flowv1.ReasonAgentTerminalError {
			return fmt.Errorf("revoked has Stalled condition %+v, want reason %s", st, flowv1.ReasonAgentTerminalError)
		}
		return nil
	})

	// The key was really used: every call carried it.
	calls := 0
	for _, r := range srv.Requests() {
		if r.Model == "flaky" || r.Model == "revoked" {
			calls++
		}
	}
	if calls < 3 {
		t.Errorf("the endpoint got %d calls, want at least 3 (flaky twice, revoked once)", calls)
	}
	for _, r := range srv.Requests() {
		if b := r.Bearer(); b != "Bearer "+key {
			t.Fatalf("a call carried Authorization %q, not the Secret's key", b)
		}
	}

	// Everything a user or an operator can read. Events are recorded asynchronously:
	// wait for the stall's Warning.
	var haystack map[string]string
	waitFor(t, 10*time.Second, func() error {
		var err error
		if haystack, err = readable(ctx, c, ns); err != nil {
			return err
		}
		if !strings.Contains(haystack["events.k8s.io events"], flowv1.ReasonAgentTerminalError) {
			return fmt.Errorf("no %s event yet", flowv1.ReasonAgentTerminalError)
		}
		return nil
	})

	for where, text := range haystack {
		for _, needle := range []string{key, secretPart, secretPart[:16], secretPart[len(secretPart)-16:]} {
			if i := strings.Index(text, needle); i >= 0 {
				start, end := max(0, i-120), min(len(text), i+len(needle)+40)
				t.Errorf("the API key appears in %s: ...%s...", where, text[start:end])
				break
			}
		}
	}
	// The echoed errors did reach status, events and logs, scrubbed: the check above
	// looked at text that had the chance to leak.
	for _, where := range []string{"sessions", "events.k8s.io events", "manager logs"} {
		if !strings.Contains(haystack[where], "[redacted]") {
			t.Errorf("%s hold no scrubbed endpoint error; the test did not exercise the leak it guards against", where)
		}
	}
}

// readable is everything a user or an operator can read about namespace ns: its
// Sessions, Journeys, Journey revisions and Events (both APIs) as JSON, and every line
// the managers of this test binary logged up to verbosity, hex dumps joined.
func readable(ctx context.Context, c client.Client, ns string) (map[string]string, error) {
	out := map[string]string{}
	var sessions flowv1.SessionList
	var journeys flowv1.JourneyList
	var revisions appsv1.ControllerRevisionList
	var coreEvents corev1.EventList
	var events eventsv1.EventList
	for name, list := range map[string]client.ObjectList{"sessions": &sessions, "journeys": &journeys, "controllerrevisions": &revisions,
		"core/v1 events": &coreEvents, "events.k8s.io events": &events} {
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		b, err := json.Marshal(list)
		if err != nil {
			return nil, err
		}
		out[name] = string(b)
	}
	out["manager logs"] = joinHexDumps(logs.String())
	return out, nil
}

// hexDumpBreak is where one line of a hex dump (encoding/hex.Dump, as client-go logs a
// protobuf body) ends and the next begins, in a log line's JSON: the text column's
// closing bar, a newline (escaped or not), the next offset and bytes, and the next
// text column's opening bar.
var hexDumpBreak = regexp.MustCompile(`\|(?:\\n|\n)[0-9a-f]{8} (?: {1,2}[0-9a-f]{2}){1,16} +\|`)

// joinHexDumps joins the text columns of the hex dumps in logs, so that a value a dump
// splits over its 16-byte lines can be found whole.
func joinHexDumps(logs string) string {
	return hexDumpBreak.ReplaceAllString(logs, "")
}

func waitFor(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	testenv.Eventually(t, timeout, cond)
}
