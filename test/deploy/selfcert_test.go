package deploy

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/journeyops/journey-operator/internal/testenv"
)

// checkCertAccess: an install with a self-provisioned certificate lets the manager read
// the Secrets of its own namespace, update only the certificate's Secret, and update
// only its own webhook configurations; it may create no Secret. An install without it
// grants none of that.
func checkCertAccess(ctx context.Context, t *testing.T, cs kubernetes.Interface, in install) {
	t.Helper()
	hooks := map[string]string{}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		hooks[strings.ToLower(kind)+"s"] = in.r.ofKind(kind)[0].GetName()
	}
	type check struct {
		a    access
		name string
		want bool
	}
	self := in.selfCert != ""
	checks := []check{
		{access{"", "secrets", "", "list", in.ns}, "", self},
		{access{"", "secrets", "", "watch", in.ns}, "", self},
		{access{"", "secrets", "", "update", in.ns}, in.selfCert, self},
		{access{"", "secrets", "", "update", in.ns}, "another-secret", false},
		{access{"", "secrets", "", "create", in.ns}, "", false},
		{access{"", "secrets", "", "delete", in.ns}, in.selfCert, false},
	}
	for res, name := range hooks {
		checks = append(checks,
			check{access{"admissionregistration.k8s.io", res, "", "list", ""}, "", self},
			check{access{"admissionregistration.k8s.io", res, "", "watch", ""}, "", self},
			check{access{"admissionregistration.k8s.io", res, "", "update", ""}, name, self},
			check{access{"admissionregistration.k8s.io", res, "", "update", ""}, "another-webhook", false},
			check{access{"admissionregistration.k8s.io", res, "", "delete", ""}, name, false},
		)
	}
	for _, ch := range checks {
		if got := canNamed(ctx, t, cs, in, ch.a, ch.name); got != ch.want {
			t.Errorf("%s: the manager may %s %s: %v, want %v", in.name, ch.a, ch.name, got, ch.want)
		}
	}
}

// runSelfCertManager runs cmd/manager with the self-provisioned certificate install's
// arguments and RBAC, and checks that it writes a CA and a serving certificate for the
// webhook Service into the install's Secret and injects that CA into every webhook of
// both webhook configurations. Nothing here mounts the Secret, so the webhook server
// itself never starts.
func runSelfCertManager(ctx context.Context, t *testing.T, env *testenv.Environment, c client.Client, in install, bin string) {
	args := append(expandedArgs(t, in.r.ofKind("Deployment")[0]),
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--webhook-cert-dir="+t.TempDir(), "--kubeconfig="+saKubeconfig(t, env, in))
	out := startManager(ctx, t, bin, args)

	var secret corev1.Secret
	key := client.ObjectKey{Namespace: in.ns, Name: in.selfCert}
	injected := func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, &secret); err != nil {
			return false, err
		}
		ca := secret.Data["ca.crt"]
		if len(ca) == 0 || len(secret.Data["tls.crt"]) == 0 || len(secret.Data["tls.key"]) == 0 {
			return false, nil
		}
		for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
			wc := &unstructured.Unstructured{}
			wc.SetGroupVersionKind(in.r.ofKind(kind)[0].GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKey{Name: in.r.ofKind(kind)[0].GetName()}, wc); err != nil {
				return false, err
			}
			hooks, _, _ := unstructured.NestedSlice(wc.Object, "webhooks")
			for _, h := range hooks {
				bundle, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle")
				if bundle == "" {
					return false, nil
				}
				if !bytes.Equal(decodeBase64(t, bundle), ca) {
					return false, nil
				}
			}
		}
		return true, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, injected); err != nil {
		t.Fatalf("the manager did not provision the certificate and inject its CA: %v (Secret keys %v)", err, keys(secret.Data))
	}
	svc := in.r.get(t, "Service", in.ns, strings.TrimSuffix(in.sa, "controller-manager")+"webhook-service")
	host := svc.GetName() + "." + in.ns + ".svc"
	verifyServingCert(t, secret.Data["ca.crt"], secret.Data["tls.crt"], host)
	if strings.Contains(out.String(), "forbidden") {
		t.Errorf("the manager was refused a request:\n%s", out.String())
	}
}

// verifyServingCert fails unless cert is signed by ca and valid for host and
// host.cluster.local as a TLS server.
func verifyServingCert(t *testing.T, caPEM, certPEM []byte, host string) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.crt holds no PEM certificate")
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("tls.crt holds no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{host, host + ".cluster.local"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the serving certificate does not serve %s: %v", name, err)
		}
	}
}

func decodeBase64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("caBundle is not base64: %v", err)
	}
	return b
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
