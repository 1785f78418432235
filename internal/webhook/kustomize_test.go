package webhook_test

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/webhook"
)

// TestDefaultKustomizationServesTheWebhook renders config/default and checks the
// webhook wiring a cluster needs: the configurations call the prefixed Service in the
// manager's namespace at the paths SetupWebhooks serves, cert-manager issues a
// certificate for that Service and injects its CA, the manager mounts the certificate
// and exposes the port, and the user ClusterRoles aggregate as documented.
func TestDefaultKustomizationServesTheWebhook(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is needed to render config/default: %v", err)
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(testenv.RepoRoot(), "config", "default")).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("kubectl kustomize config/default: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	decoded, err := testenv.DecodeManifests(out)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]*unstructured.Unstructured{}
	for _, u := range decoded {
		objs[u.GetKind()+"/"+u.GetName()] = u
	}
	get := func(key string) *unstructured.Unstructured {
		t.Helper()
		u, ok := objs[key]
		if !ok {
			t.Fatalf("config/default renders no %s", key)
		}
		return u
	}
	str := func(u *unstructured.Unstructured, fields ...string) string {
		s, _, _ := unstructured.NestedString(u.Object, fields...)
		return s
	}

	const nsName, svcName = "journey-operator-system", "journey-operator-webhook-service"
	svc := get("Service/" + svcName)
	if svc.GetNamespace() != nsName {
		t.Errorf("webhook Service in namespace %q, want %q", svc.GetNamespace(), nsName)
	}
	// Each webhook: its path and failure policy (the outcomes bound and the Journey and
	// Pathway checks fail open).
	type hook struct{ path, policy string }
	for kind, want := range map[string][]hook{
		"MutatingWebhookConfiguration/journey-operator-mutating-webhook-configuration":     {{webhook.MutatePath, "Fail"}},
		"ValidatingWebhookConfiguration/journey-operator-validating-webhook-configuration": {{webhook.JourneyPath, "Ignore"}, {webhook.PathwayPath, "Ignore"}, {webhook.ValidatePath, "Fail"}, {webhook.OutcomesPath, "Ignore"}},
	} {
		wh := get(kind)
		if got := wh.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != nsName+"/journey-operator-serving-cert" {
			t.Errorf("%s: inject-ca-from = %q", kind, got)
		}
		hooks, _, _ := unstructured.NestedSlice(wh.Object, "webhooks")
		if len(hooks) != len(want) {
			t.Fatalf("%s: %d webhooks, want %d", kind, len(hooks), len(want))
		}
		for i, w := range want {
			h := &unstructured.Unstructured{Object: hooks[i].(map[string]any)}
			if got := [3]string{str(h, "clientConfig", "service", "name"), str(h, "clientConfig", "service", "namespace"), str(h, "clientConfig", "service", "path")}; got != [3]string{svcName, nsName, w.path} {
				t.Errorf("%s calls %v, want %v", kind, got, [3]string{svcName, nsName, w.path})
			}
			if str(h, "failurePolicy") != w.policy {
				t.Errorf("%s: failurePolicy %q, want %s", kind, str(h, "failurePolicy"), w.policy)
			}
		}
	}

	cert := get("Certificate/journey-operator-serving-cert")
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if want := []string{svcName + "." + nsName + ".svc", svcName + "." + nsName + ".svc.cluster.local"}; !slices.Equal(dns, want) {
		t.Errorf("certificate dnsNames %v, want %v", dns, want)
	}
	if got := str(cert, "spec", "issuerRef", "name"); got != "journey-operator-selfsigned-issuer" {
		t.Errorf("certificate issuer %q", got)
	}
	get("Issuer/journey-operator-selfsigned-issuer")
	secret := str(cert, "spec", "secretName")

	dep := get("Deployment/journey-operator-controller-manager")
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	c := &unstructured.Unstructured{Object: containers[0].(map[string]any)}
	ports, _, _ := unstructured.NestedSlice(c.Object, "ports")
	if !slices.ContainsFunc(ports, func(p any) bool { return fmt.Sprint(p.(map[string]any)["containerPort"]) == "9443" }) {
		t.Errorf("manager exposes ports %v, want 9443", ports)
	}
	mounts, _, _ := unstructured.NestedSlice(c.Object, "volumeMounts")
	volumes, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
	mounted := false
	for _, m := range mounts {
		m := m.(map[string]any)
		if m["mountPath"] != "/tmp/k8s-webhook-server/serving-certs" {
			continue
		}
		for _, v := range volumes {
			v := v.(map[string]any)
			if s, ok := v["secret"].(map[string]any); ok && v["name"] == m["name"] && s["secretName"] == secret {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("manager does not mount Secret %s at the webhook server's certificate directory: mounts %v, volumes %v", secret, mounts, volumes)
	}

	for name, label := range map[string]string{
		"journey-operator-journey-editor": "rbac.authorization.k8s.io/aggregate-to-edit",
		"journey-operator-journey-viewer": "rbac.authorization.k8s.io/aggregate-to-view",
	} {
		if got := get("ClusterRole/" + name).GetLabels()[label]; got != "true" {
			t.Errorf("ClusterRole %s: label %s = %q, want \"true\"", name, label, got)
		}
	}
	if labels := get("ClusterRole/journey-operator-journey-approver").GetLabels(); labels["rbac.authorization.k8s.io/aggregate-to-edit"] != "" {
		t.Errorf("journey-approver aggregates: %v", labels)
	}
}
