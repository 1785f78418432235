package deploy

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/journeyops/journey-operator/internal/testenv"
)

// container is the manager container of an install's Deployment.
func container(t *testing.T, dep *unstructured.Unstructured) map[string]any {
	t.Helper()
	return nested(t, dep, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
}

// expandedArgs are the manager's arguments as the kubelet passes them: each $(VAR) of
// the container's environment replaced by its value, the pod's namespace for a
// metadata.namespace field reference.
func expandedArgs(t *testing.T, dep *unstructured.Unstructured) []string {
	t.Helper()
	c := container(t, dep)
	var pairs []string
	if env, ok := c["env"].([]any); ok {
		for _, e := range env {
			m := e.(map[string]any)
			v, isValue := m["value"]
			if !isValue {
				ref, _, _ := unstructured.NestedString(m, "valueFrom", "fieldRef", "fieldPath")
				if ref != "metadata.namespace" {
					continue
				}
				v = dep.GetNamespace()
			}
			pairs = append(pairs, "$("+fmt.Sprint(m["name"])+")", fmt.Sprint(v))
		}
	}
	r := strings.NewReplacer(pairs...)
	var args []string
	for _, a := range strs(c["args"]) {
		args = append(args, r.Replace(a))
	}
	return args
}

// checkSelfCertArgs: with a self-provisioned certificate the manager is told to make
// it, and every name it is given is an object the install renders: the (empty)
// Secret it mounts, the webhook Service, the two webhook configurations. The RBAC the
// rotator needs is rendered too; TestInstallsOnAControlPlane checks what it grants.
func checkSelfCertArgs(t *testing.T, name string, r *rendered, dep *unstructured.Unstructured, ns, prefix, secret string) {
	t.Helper()
	mutating := r.ofKind("MutatingWebhookConfiguration")[0].GetName()
	validating := r.ofKind("ValidatingWebhookConfiguration")[0].GetName()
	args := expandedArgs(t, dep)
	for _, want := range []string{
		"--enable-webhooks", // a prefix: the chart spells it --enable-webhooks=true
		"--webhook-certificate=self",
		"--webhook-cert-secret=" + ns + "/" + secret,
		"--webhook-service=" + ns + "/" + prefix + "webhook-service",
		"--mutating-webhook-configuration=" + mutating,
		"--validating-webhook-configuration=" + validating,
	} {
		if want == "--enable-webhooks" {
			if slices.Contains(args, "--enable-webhooks=false") {
				t.Errorf("%s: webhooks off with a self-provisioned certificate", name)
			}
			continue
		}
		if !slices.Contains(args, want) {
			t.Errorf("%s: manager args %v lack %s", name, args, want)
		}
	}
	s := r.get(t, "Secret", ns, secret)
	if _, ok := s.Object["data"]; ok {
		t.Errorf("%s: the certificate's Secret is rendered with data; the manager writes it", name)
	}
	r.get(t, "Service", ns, prefix+"webhook-service")
	r.get(t, "Role", ns, prefix+"webhook-cert-role")
	r.get(t, "RoleBinding", ns, prefix+"webhook-cert-rolebinding")
	r.get(t, "ClusterRole", "", prefix+"webhook-cert-role")
	r.get(t, "ClusterRoleBinding", "", prefix+"webhook-cert-rolebinding")
}

// checkScopedKustomize: config/scoped gives the manager a Role with the rules of
// config/rbac/role.yaml and a RoleBinding in each watched namespace, no cluster-wide
// role or binding for them, watches only those namespaces, and its webhooks see only
// them.
func checkScopedKustomize(t *testing.T, r *rendered, wantRules any) {
	t.Helper()
	for _, ns := range watched {
		role := r.get(t, "Role", ns, "journey-operator-manager-role")
		if !reflect.DeepEqual(role.Object["rules"], wantRules) {
			t.Errorf("config/scoped Role in %s: rules differ from config/rbac/role.yaml", ns)
		}
		rb := r.get(t, "RoleBinding", ns, "journey-operator-manager-rolebinding")
		subj := nested(t, rb, "subjects").([]any)[0].(map[string]any)
		if subj["name"] != "journey-operator-controller-manager" || subj["namespace"] != kustomizeNS {
			t.Errorf("config/scoped RoleBinding in %s binds %v", ns, subj)
		}
	}
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		for _, c := range r.ofKind(kind) {
			if strings.Contains(c.GetName(), "manager-role") {
				t.Errorf("config/scoped renders %s %s", kind, c.GetName())
			}
		}
	}
	dep := r.get(t, "Deployment", kustomizeNS, "journey-operator-controller-manager")
	if args := expandedArgs(t, dep); !slices.Contains(args, "--watch-namespaces="+strings.Join(watched, ",")) {
		t.Errorf("config/scoped manager args %v lack --watch-namespaces=%s", args, strings.Join(watched, ","))
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, h := range nested(t, r.ofKind(kind)[0], "webhooks").([]any) {
			exprs, _, _ := unstructured.NestedSlice(h.(map[string]any), "namespaceSelector", "matchExpressions")
			if len(exprs) != 1 || !reflect.DeepEqual(strs(exprs[0].(map[string]any)["values"]), watched) {
				t.Errorf("config/scoped %s: namespaceSelector %v, want the watched namespaces", kind, exprs)
			}
		}
	}
}

// TestMetricsService: every install renders one metrics Service, named alike in the
// chart and config/, that selects the manager's pods and reaches its metrics port
// (:8443, what --metrics-bind-address says).
func TestMetricsService(t *testing.T) {
	installs := map[string]struct {
		r      *rendered
		ns     string
		prefix string
	}{
		"chart":            {renderChart(t, clusterRelease, clusterNS, nil), clusterNS, "jo-journey-operator-"},
		"scoped chart":     {renderChart(t, scopedRelease, scopedNS, scopedValues()), scopedNS, "scoped-journey-operator-"},
		"self cert chart":  {renderChart(t, selfRelease, selfNS, selfValues()), selfNS, "self-journey-operator-"},
		"config/default":   {renderKustomize(t, filepath.Join(testenv.RepoRoot(), "config", "default")), kustomizeNS, "journey-operator-"},
		"config/scoped":    {renderKustomize(t, filepath.Join(testenv.RepoRoot(), "config", "scoped")), kustomizeNS, "journey-operator-"},
		"config/self-cert": {renderKustomize(t, filepath.Join(testenv.RepoRoot(), "config", "self-cert")), kustomizeNS, "journey-operator-"},
	}
	for name, in := range installs {
		dep := in.r.get(t, "Deployment", in.ns, in.prefix+"controller-manager")
		c := container(t, dep)
		if args := expandedArgs(t, dep); !slices.Contains(args, "--metrics-bind-address=:8443") {
			t.Errorf("%s: manager args %v do not serve metrics on :8443", name, args)
		}
		ports := map[string]int64{}
		for _, p := range c["ports"].([]any) {
			pm := p.(map[string]any)
			ports[fmt.Sprint(pm["name"])] = toInt(pm["containerPort"])
		}
		if ports["metrics"] != 8443 {
			t.Errorf("%s: the manager's metrics port is %d, want 8443", name, ports["metrics"])
		}
		var metrics []*unstructured.Unstructured
		for _, s := range in.r.ofKind("Service") {
			if strings.Contains(s.GetName(), "metrics") {
				metrics = append(metrics, s)
			}
		}
		if len(metrics) != 1 {
			t.Fatalf("%s: %d metrics Services, want 1", name, len(metrics))
		}
		svc := metrics[0]
		if svc.GetName() != in.prefix+"metrics-service" || svc.GetNamespace() != in.ns {
			t.Errorf("%s: metrics Service %s/%s", name, svc.GetNamespace(), svc.GetName())
		}
		port := nested(t, svc, "spec", "ports").([]any)[0].(map[string]any)
		target := port["targetPort"]
		if toInt(port["port"]) != 8443 || (target != "metrics" && toInt(target) != 8443) || port["name"] != "https" {
			t.Errorf("%s: metrics Service port %v %v -> %v, want https 8443 -> the manager's metrics port", name, port["name"], port["port"], target)
		}
		podLabels := nested(t, dep, "spec", "template", "metadata", "labels").(map[string]any)
		sel := nested(t, svc, "spec", "selector").(map[string]any)
		if len(sel) == 0 {
			t.Errorf("%s: the metrics Service selects every pod", name)
		}
		for k, v := range sel {
			if podLabels[k] != v {
				t.Errorf("%s: metrics Service selects %s=%v, the manager's pods do not carry it", name, k, v)
			}
		}
	}
}

// TestKustomizeOverlaysOnAControlPlane applies config/scoped and config/self-cert,
// each to a control plane of its own (both run the manager as the same
// ServiceAccount), and checks what the manager may do and where the webhooks call.
func TestKustomizeOverlaysOnAControlPlane(t *testing.T) {
	t.Parallel() // each overlay on a control plane of its own, beside the other installs
	overlays := []install{
		{"config/scoped", renderKustomize(t, filepath.Join(testenv.RepoRoot(), "config", "scoped")), kustomizeNS,
			"journey-operator-controller-manager", watched, ""},
		{"config/self-cert", renderKustomize(t, filepath.Join(testenv.RepoRoot(), "config", "self-cert")), kustomizeNS,
			"journey-operator-controller-manager", nil, "journey-operator-webhook-server-cert"},
	}
	for _, in := range overlays {
		t.Run(in.name, func(t *testing.T) {
			t.Parallel()
			env := testenv.New(t, testenv.WithoutCRDs())
			ctx := t.Context()
			for _, ns := range append([]string{"outside"}, watched...) {
				ensureNamespace(ctx, t, env.Client, ns)
			}
			apply(ctx, t, env.Client, in.r)
			checkAccess(ctx, t, kubernetes.NewForConfigOrDie(env.Config), in)
			checkWebhookService(ctx, t, env.Client, in)
		})
	}
}
