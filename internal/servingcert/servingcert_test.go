package servingcert_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
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
//
// Then the renewal: a serving certificate that expires within the renewal window (30
// days left) is replaced when the manager starts, by one of the same CA valid for a
// year; the webhook server, which started with the old files, serves the new
// certificate once the kubelet updates them, and the API server still trusts it. A CA
// within the window is replaced too, and the new CA is injected into both webhook
// configurations.
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
	start := func(t *testing.T) *testenv.Manager {
		t.Helper()
		p, err := servingcert.New(servingcert.Options{
			Name:              "serving-cert-" + strings.ReplaceAll(t.Name(), "/", "-"),
			Secret:            secret,
			DNSName:           "localhost",
			CertDir:           certDir,
			MutatingWebhook:   mutating,
			ValidatingWebhook: validating,
		})
		if err != nil {
			t.Fatal(err)
		}
		return env.StartManager(t, testenv.ManagerOptions{
			Webhooks: true,
			WebhookServer: func(o crwebhook.Options) crwebhook.Server {
				o.CertDir = certDir
				return p.Server(crwebhook.NewServer(o))
			},
			Setup: func(mgr ctrl.Manager) error {
				if err := webhook.SetupWebhooks(mgr, webhook.Options{Checks: controller.AdmissionChecks()}); err != nil {
					return err
				}
				return p.Add(mgr)
			},
		})
	}
	// written waits until the Secret holds a certificate that differs from old.
	written := func(t *testing.T, old []byte) *corev1.Secret {
		t.Helper()
		var s corev1.Secret
		if err := testenv.Poll(30*time.Second, func() error {
			if err := env.Client.Get(ctx, secret, &s); err != nil {
				return err
			}
			if len(s.Data["tls.crt"]) == 0 || len(s.Data["tls.key"]) == 0 || len(s.Data["ca.crt"]) == 0 {
				return errors.New("the rotator has not written the certificate into the Secret")
			}
			if bytes.Equal(s.Data["tls.crt"], old) {
				return errors.New("the rotator has not replaced the certificate")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	current := func(t *testing.T) *corev1.Secret {
		t.Helper()
		return testenv.Get(t, env, secret.Namespace, secret.Name, &corev1.Secret{})
	}
	mount := func(t *testing.T, s *corev1.Secret) { // the kubelet's part
		t.Helper()
		for _, k := range []string{"tls.crt", "tls.key"} {
			if err := os.WriteFile(filepath.Join(certDir, k), s.Data[k], 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	// denied checks that the API server reaches the validating webhook over TLS.
	denied := func(t *testing.T, name string) {
		t.Helper()
		session := &flowv1.Session{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: flowv1.SessionSpec{
				JourneyRef: flowv1.JourneyReference{Name: "absent"},
				Approvals:  []flowv1.Approval{{DecisionID: "d1", Approve: ptr.To(true)}},
			},
		}
		err := testenv.Poll(30*time.Second, func() error {
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

	var provisioned *corev1.Secret
	t.Run("provisioned", func(t *testing.T) {
		mgr := start(t)
		provisioned = written(t, nil)
		if err := mgr.GetWebhookServer().StartedChecker()(nil); err == nil {
			t.Fatal("the webhook server is ready before its certificate is mounted")
		}
		mount(t, provisioned)
		if err := mgr.WaitForWebhooks(60 * time.Second); err != nil {
			t.Fatal(err)
		}
		denied(t, "approved-early")
		if err := mgr.Stop(); err != nil {
			t.Fatal(err)
		}
	})
	if provisioned == nil {
		t.FailNow()
	}

	t.Run("a serving certificate near its end is renewed", func(t *testing.T) {
		// While the manager is down, the Secret and the mounted files come to hold a
		// serving certificate of the same CA with 30 days left.
		crt, key := issue(t, provisioned.Data["ca.crt"], provisioned.Data["ca.key"], 30*24*time.Hour)
		expiring := current(t)
		expiring.Data["tls.crt"], expiring.Data["tls.key"] = crt, key
		if err := env.Client.Update(ctx, expiring); err != nil {
			t.Fatal(err)
		}
		mount(t, expiring)

		mgr := start(t)
		renewed := written(t, crt)
		if !bytes.Equal(renewed.Data["ca.crt"], provisioned.Data["ca.crt"]) {
			t.Error("the CA was replaced; only the serving certificate is near its end")
		}
		if left := time.Until(leaf(t, renewed.Data["tls.crt"]).NotAfter); left < 300*24*time.Hour {
			t.Errorf("the renewed certificate is valid for %s more; want about a year", left.Round(time.Hour))
		}
		if err := mgr.WaitForWebhooks(60 * time.Second); err != nil {
			t.Fatal(err)
		}
		mount(t, renewed)
		want := leaf(t, renewed.Data["tls.crt"])
		if err := testenv.Poll(30*time.Second, func() error {
			if got := served(t, env); !got.Equal(want) {
				return fmt.Errorf("the webhook server serves the certificate valid until %s; the renewed one is valid until %s", got.NotAfter, want.NotAfter)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		denied(t, "approved-after-renewal")
		if err := mgr.Stop(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a CA near its end is renewed and injected", func(t *testing.T) {
		caCrt, caKey := selfSigned(t, 30*24*time.Hour)
		expiring := current(t)
		expiring.Data["ca.crt"], expiring.Data["ca.key"] = caCrt, caKey
		expiring.Data["tls.crt"], expiring.Data["tls.key"] = issue(t, caCrt, caKey, 20*24*time.Hour)
		if err := env.Client.Update(ctx, expiring); err != nil {
			t.Fatal(err)
		}
		mount(t, expiring)

		mgr := start(t)
		renewed := written(t, expiring.Data["tls.crt"])
		if bytes.Equal(renewed.Data["ca.crt"], caCrt) {
			t.Fatal("the CA near its end was kept")
		}
		if err := testenv.Poll(30*time.Second, func() error {
			for _, h := range []struct {
				name string
				obj  client.Object
			}{{mutating, &admissionregistrationv1.MutatingWebhookConfiguration{}}, {validating, &admissionregistrationv1.ValidatingWebhookConfiguration{}}} {
				if err := env.Client.Get(ctx, types.NamespacedName{Name: h.name}, h.obj); err != nil {
					return err
				}
				for _, b := range caBundles(h.obj) {
					if !bytes.Equal(b, renewed.Data["ca.crt"]) {
						return fmt.Errorf("%s has a caBundle other than the renewed CA", h.name)
					}
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := mgr.WaitForWebhooks(60 * time.Second); err != nil {
			t.Fatal(err)
		}
		mount(t, renewed)
		denied(t, "approved-after-new-ca")
	})
}

const (
	mutating   = "mutating-webhook-configuration"
	validating = "validating-webhook-configuration"
)

// caBundles are the caBundles of a webhook configuration's webhooks.
func caBundles(o client.Object) [][]byte {
	var out [][]byte
	switch c := o.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for _, w := range c.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for _, w := range c.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	}
	return out
}

// leaf parses the first certificate of PEM data.
func leaf(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatal("no PEM certificate")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// served is the certificate the webhook server presents.
func served(t *testing.T, env *testenv.Environment) *x509.Certificate {
	t.Helper()
	o := env.WebhookServerOptions()
	conn, err := tls.Dial("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate, trusts nothing
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// maker makes certificates as the manager's rotator does.
var maker = &rotator.CertRotator{CAName: servingcert.CAName, CAOrganization: "journey-operator", DNSName: "localhost",
	ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}

// selfSigned is a CA certificate and key (PEM) valid for d from an hour ago.
func selfSigned(t *testing.T, d time.Duration) (crt, key []byte) {
	t.Helper()
	ca, err := maker.CreateCACert(time.Now().Add(-time.Hour), time.Now().Add(d))
	if err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM, ca.KeyPEM
}

// issue is a serving certificate for localhost and its key (PEM), signed by the CA
// caCrt and caKey and valid for d from an hour ago.
func issue(t *testing.T, caCrt, caKey []byte, d time.Duration) (crt, key []byte) {
	t.Helper()
	kb, _ := pem.Decode(caKey)
	if kb == nil {
		t.Fatal("no PEM CA key")
	}
	signer, err := x509.ParsePKCS1PrivateKey(kb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err = maker.CreateCertPEM(&rotator.KeyPairArtifacts{Cert: leaf(t, caCrt), Key: signer}, time.Now().Add(-time.Hour), time.Now().Add(d))
	if err != nil {
		t.Fatal(err)
	}
	return crt, key
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
