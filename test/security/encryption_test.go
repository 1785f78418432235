package security

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/test/docs"
)

// encryptionConfig writes the EncryptionConfiguration of docs/security.md
// ("Encryption at rest") to a file, with provider (secretbox, as the document shows it,
// or aescbc) and a freshly generated 32-byte key, and returns its path.
func encryptionConfig(t *testing.T, provider string) string {
	t.Helper()
	const file = "docs/security.md"
	md, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), file))
	if err != nil {
		t.Fatal(err)
	}
	var cfg string
	for _, b := range docs.Extract(file, string(md)) {
		if b.Lang == "yaml" && strings.Contains(b.Text, "kind: EncryptionConfiguration") {
			if cfg != "" {
				t.Fatalf("%s has two EncryptionConfigurations; the test reads one", file)
			}
			cfg = b.Text
		}
	}
	if !strings.Contains(cfg, "- secretbox:") || !secretLine.MatchString(cfg) {
		t.Fatalf("%s has no EncryptionConfiguration with a secretbox key:\n%s", file, cfg)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfg = secretLine.ReplaceAllString(cfg, "${1}"+base64.StdEncoding.EncodeToString(key))
	cfg = strings.Replace(cfg, "- secretbox:", "- "+provider+":", 1)
	path := filepath.Join(t.TempDir(), "encryption.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// secretLine is the key's line of an EncryptionConfiguration.
var secretLine = regexp.MustCompile(`(?m)^(\s*secret: ).*$`)

// TestConversationsAreEncryptedAtRest runs a short conversation (the builtin agent, two
// messages, two replies, an initial context with an insurance id) on a control plane
// whose API server encrypts Sessions, Secrets and Events, then reads etcd directly:
// the Session's, a Secret's and the namespace's Events' values carry the provider's
// k8s:enc: prefix, and no value anywhere in etcd holds the conversation's text or the
// Secret's value. Without the configuration (the control case) the same text is in the
// Session's value in the clear, so the check can fail.
//
// The cases run in parallel, beside the package's other tests: each works on a control
// plane of its own or in a namespace of its own on the shared one.
func TestConversationsAreEncryptedAtRest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, provider string
	}{
		{"secretbox", "secretbox"},
		{"aescbc", "aescbc"},
		{"without an encryption config", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The control case runs on the shared control plane; each encrypting one
			// starts its own, with the encryption config.
			var env *testenv.Environment
			if tc.provider != "" {
				env = testenv.New(t, testenv.WithEncryptionProviderConfig(encryptionConfig(t, tc.provider)))
			} else {
				env = controlPlane(t)
			}
			c := runConversation(t, env)
			etcd := etcdClient(t, env)
			session := etcdGet(t, etcd, "/registry/flow.journey.dev/sessions/"+c.namespace+"/"+c.session)
			secret := etcdGet(t, etcd, "/registry/secrets/"+c.namespace+"/"+c.secret)

			if tc.provider == "" {
				// The control case: the API server stores a Session as JSON and a Secret
				// as protobuf, readable by whoever reads etcd, its disk or its backups.
				for _, needle := range c.text {
					if !bytes.Contains(session, []byte(needle)) {
						t.Errorf("without encryption the Session's value in etcd lacks %q: the encrypted cases prove nothing", needle)
					}
				}
				if !bytes.Contains(secret, []byte(c.secretValue)) {
					t.Errorf("without encryption the Secret's value in etcd lacks its data: the encrypted cases prove nothing")
				}
				if bytes.HasPrefix(session, []byte("k8s:enc:")) {
					t.Errorf("without encryption the Session's value starts with %q", session[:min(len(session), 40)])
				}
				return
			}

			prefix := []byte("k8s:enc:" + tc.provider + ":v1:key1:")
			stored := map[string][]byte{"the Session": session, "the Secret": secret}
			// Events are written in the background: wait for the first (Started).
			var events map[string][]byte
			waitFor(t, 10*time.Second, func() error {
				if events = etcdList(t, etcd, "/registry/events/"+c.namespace+"/"); len(events) == 0 {
					return fmt.Errorf("no Event of namespace %s in etcd", c.namespace)
				}
				return nil
			})
			maps.Copy(stored, events)
			for what, value := range stored {
				if !bytes.HasPrefix(value, prefix) {
					t.Errorf("%s is stored in etcd starting with %q, want %q", what, value[:min(len(value), 40)], prefix)
				}
			}
			// Nothing in etcd, encrypted or not (Journeys, Pathways, revisions, leases),
			// holds a copy of the conversation or of the Secret's value.
			needles := append([]string{c.secretValue}, c.text...)
			for key, value := range etcdList(t, etcd, "/") {
				for _, needle := range needles {
					if i := bytes.Index(value, []byte(needle)); i >= 0 {
						t.Errorf("etcd key %s holds %q in the clear at byte %d", key, needle, i)
					}
				}
			}
		})
	}
}

// conversation is what runConversation did: where, and the text it must not find.
type conversation struct {
	namespace, session, secret string
	// text holds the messages, the replies and the initial context's insurance id.
	text        []string
	secretValue string
}

// runConversation runs the operator's manager on env and has a two-message
// conversation with a builtin journey; it returns when both replies are in the
// Session's transcript, read back through the API server.
func runConversation(t *testing.T, env *testenv.Environment) conversation {
	t.Helper()
	ctx := context.Background()
	marker := func(prefix string) string {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		return prefix + hex.EncodeToString(b)
	}
	insurance := marker("INS-")
	c := conversation{namespace: env.Namespace(t), session: "patient-1", secret: "clinic", secretValue: marker("token-")}
	// The reply quotes the context: its text is in no object but the Session.
	template := "We have insurance {{ .context.insurance_id }} on file, a nurse will call you back"
	reply := "We have insurance " + insurance + " on file, a nurse will call you back"
	messages := []string{
		"I need a cardiologist for chest pain, my case number is " + marker("CASE-"),
		"Tuesday mornings suit me, call me on 555 " + marker("PHONE-"),
	}
	c.text = append([]string{insurance, reply}, messages...)

	env.StartManager(t, testenv.ManagerOptions{
		Namespaces: []string{c.namespace},
		Setup:      func(mgr ctrl.Manager) error { return controller.Setup(mgr, controller.Options{}) },
	})
	env.Create(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: c.secret},
			StringData: map[string]string{"token": c.secretValue}},
		&flowv1.Pathway{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: "intake"}, Spec: flowv1.PathwaySpec{
			Builtin: &flowv1.BuiltinPathway{Reply: template, Complete: "false"},
		}},
		&flowv1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: "referral"}, Spec: flowv1.JourneySpec{
			EntryPathway: "intake",
			Pathways:     []flowv1.PathwayEntry{{Name: "intake", PathwayRef: "intake"}},
		}},
	)
	waitFor(t, 30*time.Second, func() error {
		var j flowv1.Journey
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: "referral"}, &j); err != nil {
			return err
		}
		if j.Status.ReadyRevision == "" {
			return fmt.Errorf("journey not ready: %v", j.Status.Issues)
		}
		return nil
	})
	env.Create(t, &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: c.session}, Spec: flowv1.SessionSpec{
		JourneyRef:     flowv1.JourneyReference{Name: "referral"},
		InitialContext: &apiextensionsv1.JSON{Raw: []byte(`{"insurance_id":"` + insurance + `"}`)},
	}})
	for i, text := range messages {
		var s flowv1.Session
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.session}, &s); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(s.DeepCopy())
		s.Spec.Messages = append(s.Spec.Messages, flowv1.Message{ID: fmt.Sprintf("m-%d", i+1), Text: text})
		if err := env.Client.Patch(ctx, &s, patch); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, func() error {
			var s flowv1.Session
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.session}, &s); err != nil {
				return err
			}
			if n := len(s.Status.Transcript); n != i+1 || s.Status.Transcript[i].User != text || s.Status.Transcript[i].Assistant != reply {
				return fmt.Errorf("transcript %+v (phase %q), want %d exchanges ending with the reply to %q", s.Status.Transcript, s.Status.Phase, i+1, text)
			}
			return nil
		})
	}
	return c
}

// etcdClient is a client of env's etcd, closed when the test ends.
func etcdClient(t *testing.T, env *testenv.Environment) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{env.ControlPlane.Etcd.URL.String()},
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// etcdGet reads key's value straight from etcd; a missing key fails the test.
func etcdGet(t *testing.T, cli *clientv3.Client, key string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatalf("reading %s from etcd: %v", key, err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("etcd has %d values at %s, want 1", len(resp.Kvs), key)
	}
	return resp.Kvs[0].Value
}

// etcdList reads every key under prefix straight from etcd, by key.
func etcdList(t *testing.T, cli *clientv3.Client, prefix string) map[string][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("listing %s in etcd: %v", prefix, err)
	}
	out := make(map[string][]byte, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = kv.Value
	}
	return out
}
