package servingcert_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/servingcert"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/webhook"
)

// TestTheAPIServerTrustsTheProvisionedCertificate runs the Session webhooks with a
// certificate the manager provisions: the rotator fills the (empty) Secret, the test
// plays the kubelet and copies the Secret into the webhook server's certificate
// directory, and the API server, which trusts only the caBundle the rotator injected
// (not the control plane's own test CA), calls the webhook over TLS: an approval is
// answered by the validating webhook instead of failing to reach it. Before the
// certificate is there, the webhook server does not start and is not ready.
func TestTheAPIServerTrustsTheProvisionedCertificate(t *testing.T) {
	env := testenv.New(t, testenv.WithWebhooks(), func(e *envtest.Environment) {
		// The API server calls https://localhost:<port>: a name the certificate can hold.
		e.WebhookInstallOptions.LocalServingHostExternalName = "localhost"
	})
	ctx := t.Context()
	ns := env.Namespace(t)
	secret := types.NamespacedName{Namespace: ns, Name: "webhook-server-cert"}
	env.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret.Name}})

	certDir := t.TempDir()
	p, err := servingcert.New(servingcert.Options{
		Secret:            secret,
		DNSName:           "localhost",
		CertDir:           certDir,
		MutatingWebhook:   "mutating-webhook-configuration",
		ValidatingWebhook: "validating-webhook-configuration",
	})
	if err != nil {
		t.Fatal(err)
	}
	mgr := env.StartManager(t, testenv.ManagerOptions{
		Webhooks: true,
		WebhookServer: func(o crwebhook.Options) crwebhook.Server {
			o.CertDir = certDir
			return p.Server(crwebhook.NewServer(o))
		},
		Setup: func(mgr ctrl.Manager) error {
			if err := webhook.SetupWebhooks(mgr, webhook.Options{}); err != nil {
				return err
			}
			return p.Add(mgr)
		},
	})

	var s corev1.Secret
	if err := testenv.Poll(30*time.Second, func() error {
		if err := env.Client.Get(ctx, secret, &s); err != nil {
			return err
		}
		if len(s.Data["tls.crt"]) == 0 || len(s.Data["tls.key"]) == 0 || len(s.Data["ca.crt"]) == 0 {
			return errors.New("the rotator has not written the certificate into the Secret")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := mgr.GetWebhookServer().StartedChecker()(nil); err == nil {
		t.Fatal("the webhook server is ready before its certificate is mounted")
	}
	for _, k := range []string{"tls.crt", "tls.key"} { // the kubelet's part
		if err := os.WriteFile(filepath.Join(certDir, k), s.Data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := mgr.WaitForWebhooks(60 * time.Second); err != nil {
		t.Fatal(err)
	}

	session := &flowv1.Session{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "approved-early"},
		Spec: flowv1.SessionSpec{
			JourneyRef: flowv1.JourneyReference{Name: "absent"},
			Approvals:  []flowv1.Approval{{DecisionID: "d1", Approve: ptr.To(true)}},
		},
	}
	err = testenv.Poll(30*time.Second, func() error {
		err := env.Client.Create(ctx, session.DeepCopy())
		if err != nil && strings.Contains(err.Error(), "failed calling webhook") {
			return err // the CA may not have reached the API server's webhook client yet
		}
		if err == nil || !strings.Contains(err.Error(), "denied the request") {
			return errors.New("no denial")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("an approval of a decision nobody waits on: want the webhook to deny it over TLS, got %v", err)
	}
}

// TestServerWaitsForTheCertificate: the wrapped webhook server neither starts nor
// reports ready without the certificate, and stops waiting when the manager stops.
func TestServerWaitsForTheCertificate(t *testing.T) {
	p, err := servingcert.New(servingcert.Options{
		Secret:  types.NamespacedName{Namespace: "ns", Name: "cert"},
		DNSName: "svc.ns.svc", CertDir: t.TempDir(),
		MutatingWebhook: "m", ValidatingWebhook: "v",
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := p.Server(crwebhook.NewServer(crwebhook.Options{Port: 1}))
	if err := srv.StartedChecker()(nil); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("ready without a certificate: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("started without a certificate: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("stopping while waiting: %v", err)
	}
}

// TestOptionsAreChecked: a Provisioner needs every name.
func TestOptionsAreChecked(t *testing.T) {
	full := servingcert.Options{
		Secret:  types.NamespacedName{Namespace: "ns", Name: "cert"},
		DNSName: "svc.ns.svc", CertDir: "/certs", MutatingWebhook: "m", ValidatingWebhook: "v",
	}
	if _, err := servingcert.New(full); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*servingcert.Options){
		"no Secret namespace": func(o *servingcert.Options) { o.Secret.Namespace = "" },
		"no DNS name":         func(o *servingcert.Options) { o.DNSName = "" },
		"no cert dir":         func(o *servingcert.Options) { o.CertDir = "" },
		"no mutating webhook": func(o *servingcert.Options) { o.MutatingWebhook = "" },
	} {
		o := full
		change(&o)
		if _, err := servingcert.New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
