package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/webhook"
)

// The installs the tests render: the chart cluster-wide and namespace-scoped, each in
// its own release namespace.
const (
	clusterRelease, clusterNS = "jo", "jo-system"
	scopedRelease, scopedNS   = "scoped", "scoped-system"
	kustomizeNS               = "journey-operator-system"
)

var watched = []string{"team-a", "team-b"}

// The webhook certificate sources of the chart's values.
const (
	certManager = "certManager"
	provided    = "provided"
	self        = "self"
)

// The install with the self-provisioned certificate watches a namespace of its own,
// so that its manager, run in TestInstallsOnAControlPlane, touches nothing else.
const (
	selfRelease, selfNS = "self", "self-system"
	selfWatched         = "team-self"
)

func selfValues() map[string]any {
	return map[string]any{
		"watchNamespaces": []any{selfWatched},
		"webhook":         map[string]any{"certificate": map[string]any{"source": self}},
	}
}

func scopedValues() map[string]any {
	return map[string]any{"watchNamespaces": []any{watched[0], watched[1]}}
}

// fromFile reads the YAML documents of a file under config/.
func fromFile(t *testing.T, rel string) *rendered {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, b)
}

func nested(t *testing.T, u *unstructured.Unstructured, fields ...string) any {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(u.Object, fields...)
	if err != nil || !ok {
		t.Fatalf("%s %s: no field %s", u.GetKind(), u.GetName(), strings.Join(fields, "."))
	}
	return v
}

// TestChartLints runs what `helm lint` runs, with the default and the scoped values,
// and wants no warning or error.
func TestChartLints(t *testing.T) {
	for name, values := range map[string]map[string]any{"default": {}, "scoped": scopedValues(), "self cert": selfValues(),
		"default budget": budgetValues(scopedValues(), nil)} {
		l := lint.All(chartDir, values, clusterNS, false)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s values: helm lint: %s", name, m.Error())
			}
		}
	}
}

// TestValuesSchemaRefusesWrongValues: values.schema.json refuses a wrong value, as
// `helm install` does, and accepts the documented ones.
func TestValuesSchemaRefusesWrongValues(t *testing.T) {
	wrong := map[string]map[string]any{
		"replicas as a string":      {"replicas": "two"},
		"no workers":                {"workers": 0},
		"a misspelt key":            {"replica": 2},
		"a namespace that is not":   {"watchNamespaces": []any{"Team_A"}},
		"an unknown advance mode":   {"advance": "poll"},
		"a negative client qps":     {"kubeAPI": map[string]any{"qps": -1}},
		"a tracing endpoint no URL": {"tracing": map[string]any{"endpoint": "collector:4317"}},
		"a wrong memory quantity":   {"resources": map[string]any{"limits": map[string]any{"memory": "lots"}}},
		"a provided cert, no Secret": {"webhook": map[string]any{"certificate": map[string]any{
			"source": "provided", "caBundle": "Zm9v"}}},
		"an unknown certificate source": {"webhook": map[string]any{"certificate": map[string]any{"source": "selfSigned"}}},
	}
	for name, values := range wrong {
		_, err := renderChartErr(clusterRelease, clusterNS, values)
		if err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("%s: want a schema error, got %v", name, err)
		}
	}
	right := map[string]any{
		"replicas": 2, "workers": 8, "advance": "requeue", "shardSelector": "journey.dev/shard=a",
		"kubeAPI": map[string]any{"qps": 50.5, "burst": 100},
		"tracing": map[string]any{"endpoint": "http://otel-collector.observability:4317"},
		"webhook": map[string]any{"certificate": map[string]any{"source": "provided", "secretName": "tls", "caBundle": "Zm9v"}},
	}
	if _, err := renderChartErr(clusterRelease, clusterNS, right); err != nil {
		t.Errorf("documented values refused: %v", err)
	}
	if _, err := renderChartErr(selfRelease, selfNS, selfValues()); err != nil {
		t.Errorf("a self-provisioned certificate refused: %v", err)
	}
}

// TestChartIsConfig: the chart installs the CRDs of config/crd/bases, grants the rules
// of config/rbac/role.yaml, and registers the webhooks of config/webhook/manifests.yaml,
// in both modes; config/default installs the same CRDs.
func TestChartIsConfig(t *testing.T) {
	crds := fromFile(t, "config/crd/bases/flow.journey.dev_journeys.yaml")
	for _, f := range []string{"flow.journey.dev_pathways.yaml", "flow.journey.dev_sessions.yaml", "flow.journey.dev_budgets.yaml"} {
		crds.objs = append(crds.objs, fromFile(t, "config/crd/bases/"+f).objs...)
	}
	role := fromFile(t, "config/rbac/role.yaml").objs[0]
	hooks := fromFile(t, "config/webhook/manifests.yaml")

	cluster := renderChart(t, clusterRelease, clusterNS, nil)
	scoped := renderChart(t, scopedRelease, scopedNS, scopedValues())
	kust := renderKustomize(t, filepath.Join(testenv.RepoRoot(), "config", "default"))
	kustScoped := renderKustomize(t, filepath.Join(testenv.RepoRoot(), "config", "scoped"))
	kustSelf := renderKustomize(t, filepath.Join(testenv.RepoRoot(), "config", "self-cert"))

	for name, r := range map[string]*rendered{"chart": cluster, "scoped chart": scoped, "config/default": kust,
		"config/scoped": kustScoped, "config/self-cert": kustSelf} {
		got := r.ofKind("CustomResourceDefinition")
		if len(got) != len(crds.objs) {
			t.Fatalf("%s: %d CRDs, config/crd/bases has %d", name, len(got), len(crds.objs))
		}
		for _, want := range crds.objs {
			g := r.get(t, "CustomResourceDefinition", "", want.GetName())
			if !reflect.DeepEqual(g.Object["spec"], want.Object["spec"]) {
				t.Errorf("%s: CRD %s differs from config/crd/bases", name, want.GetName())
			}
		}
	}

	wantRules := role.Object["rules"]
	cr := cluster.get(t, "ClusterRole", "", "jo-journey-operator-manager-role")
	if !reflect.DeepEqual(cr.Object["rules"], wantRules) {
		t.Errorf("chart ClusterRole rules differ from config/rbac/role.yaml")
	}
	for _, ns := range watched {
		r := scoped.get(t, "Role", ns, "scoped-journey-operator-manager-role")
		if !reflect.DeepEqual(r.Object["rules"], wantRules) {
			t.Errorf("scoped chart Role in %s: rules differ from config/rbac/role.yaml", ns)
		}
		scoped.get(t, "RoleBinding", ns, "scoped-journey-operator-manager-rolebinding")
	}
	if got := len(scoped.ofKind("Role")); got != len(watched)+1 { // + leader election
		t.Errorf("scoped chart: %d Roles, want one per watched namespace and leader election", got)
	}
	for _, c := range scoped.ofKind("ClusterRole") {
		if strings.HasSuffix(c.GetName(), "manager-role") {
			t.Errorf("scoped chart renders ClusterRole %s", c.GetName())
		}
	}
	checkScopedKustomize(t, kustScoped, wantRules)

	for _, h := range hooks.objs {
		for name, r := range map[string]*rendered{"chart": cluster, "scoped chart": scoped} {
			release := map[string]string{"chart": clusterRelease, "scoped chart": scopedRelease}[name]
			g := r.get(t, h.GetKind(), "", release+"-journey-operator-"+h.GetName())
			want := nested(t, h, "webhooks").([]any)
			got := nested(t, g, "webhooks").([]any)
			if len(got) != len(want) {
				t.Fatalf("%s %s: %d webhooks, want %d", name, h.GetKind(), len(got), len(want))
			}
			for i := range want {
				w, gg := want[i].(map[string]any), clone(got[i].(map[string]any))
				delete(gg, "namespaceSelector")
				cc := gg["clientConfig"].(map[string]any)
				delete(cc, "caBundle")
				svc := cc["service"].(map[string]any)
				svc["name"], svc["namespace"] = "webhook-service", "system"
				if !reflect.DeepEqual(gg, w) {
					t.Errorf("%s %s: webhook %v differs from config/webhook/manifests.yaml", name, h.GetKind(), w["name"])
				}
			}
		}
	}
}

func clone(m map[string]any) map[string]any {
	b, _ := yaml.Marshal(m)
	var out map[string]any
	_ = yaml.Unmarshal(b, &out)
	return out
}

// TestWebhookPointsAtTheService: each install's webhooks call a Service it renders, in
// the manager's namespace, whose target port is the manager's webhook port, at the
// paths the manager serves; the serving certificate names that Service and is the
// Secret the manager mounts.
func TestWebhookPointsAtTheService(t *testing.T) {
	installs := map[string]struct {
		r      *rendered
		ns     string
		prefix string
		secret string
		cert   string // certManager, provided or self
	}{
		"chart":          {renderChart(t, clusterRelease, clusterNS, nil), clusterNS, "jo-journey-operator-", "jo-journey-operator-webhook-server-cert", certManager},
		"scoped chart":   {renderChart(t, scopedRelease, scopedNS, scopedValues()), scopedNS, "scoped-journey-operator-", "scoped-journey-operator-webhook-server-cert", certManager},
		"config/default": {renderKustomize(t, filepath.Join(testenv.RepoRoot(), "config", "default")), kustomizeNS, "journey-operator-", "webhook-server-cert", certManager},
		"config/scoped":  {renderKustomize(t, filepath.Join(testenv.RepoRoot(), "config", "scoped")), kustomizeNS, "journey-operator-", "webhook-server-cert", certManager},
		"provided cert": {renderChart(t, clusterRelease, clusterNS, map[string]any{"webhook": map[string]any{"certificate": map[string]any{
			"source": "provided", "secretName": "my-tls", "caBundle": "Q0E="}}}), clusterNS, "jo-journey-operator-", "my-tls", provided},
		"self cert chart":  {renderChart(t, selfRelease, selfNS, selfValues()), selfNS, "self-journey-operator-", "self-journey-operator-webhook-server-cert", self},
		"config/self-cert": {renderKustomize(t, filepath.Join(testenv.RepoRoot(), "config", "self-cert")), kustomizeNS, "journey-operator-", "journey-operator-webhook-server-cert", self},
	}
	for name, in := range installs {
		dep := in.r.get(t, "Deployment", in.ns, in.prefix+"controller-manager")
		pod := nested(t, dep, "spec", "template", "spec").(map[string]any)
		container := pod["containers"].([]any)[0].(map[string]any)
		webhookPort := int64(0)
		for _, p := range container["ports"].([]any) {
			if pm := p.(map[string]any); pm["name"] == "webhook-server" {
				webhookPort = toInt(pm["containerPort"])
			}
		}
		if webhookPort != 9443 {
			t.Errorf("%s: manager webhook port %d, want 9443 (controller-runtime's default)", name, webhookPort)
		}
		for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
			wcs := in.r.ofKind(kind)
			if len(wcs) != 1 {
				t.Fatalf("%s: %d %s", name, len(wcs), kind)
			}
			wc := wcs[0]
			for _, h := range nested(t, wc, "webhooks").([]any) {
				cc := h.(map[string]any)["clientConfig"].(map[string]any)
				ref := cc["service"].(map[string]any)
				svc := in.r.get(t, "Service", fmt.Sprint(ref["namespace"]), fmt.Sprint(ref["name"]))
				if svc.GetNamespace() != in.ns {
					t.Errorf("%s: webhook Service in %s, manager in %s", name, svc.GetNamespace(), in.ns)
				}
				port := nested(t, svc, "spec", "ports").([]any)[0].(map[string]any)
				if toInt(port["port"]) != 443 || (port["targetPort"] != "webhook-server" && toInt(port["targetPort"]) != webhookPort) {
					t.Errorf("%s: webhook Service port %v -> %v, want 443 -> the manager's webhook port", name, port["port"], port["targetPort"])
				}
				sel := nested(t, svc, "spec", "selector").(map[string]any)
				podLabels := nested(t, dep, "spec", "template", "metadata", "labels").(map[string]any)
				for k, v := range sel {
					if podLabels[k] != v {
						t.Errorf("%s: webhook Service selects %s=%v, the manager's pods do not carry it", name, k, v)
					}
				}
				path := fmt.Sprint(ref["path"])
				if !slices.Contains([]string{webhook.MutatePath, webhook.ValidatePath, webhook.OutcomesPath, webhook.JourneyPath, webhook.PathwayPath}, path) {
					t.Errorf("%s: webhook path %s is not served by the manager", name, path)
				}
				if want := map[string]any{provided: "Q0E="}[in.cert]; cc["caBundle"] != want {
					t.Errorf("%s: caBundle %v, want %v", name, cc["caBundle"], want)
				}
			}
			inject := wc.GetAnnotations()["cert-manager.io/inject-ca-from"]
			if in.cert == certManager && inject != in.ns+"/"+in.prefix+"serving-cert" {
				t.Errorf("%s: %s inject-ca-from = %q", name, kind, inject)
			}
			if in.cert != certManager && inject != "" {
				t.Errorf("%s: %s certificate but cert-manager injection %q", name, in.cert, inject)
			}
		}
		vols := pod["volumes"].([]any)
		if got := vols[0].(map[string]any)["secret"].(map[string]any)["secretName"]; got != in.secret {
			t.Errorf("%s: manager mounts Secret %v, want %s", name, got, in.secret)
		}
		certs := in.r.ofKind("Certificate")
		if in.cert == self {
			checkSelfCertArgs(t, name, in.r, dep, in.ns, in.prefix, in.secret)
		}
		if in.cert != certManager {
			if len(certs) != 0 || len(in.r.ofKind("Issuer")) != 0 {
				t.Errorf("%s: renders cert-manager objects with a %s certificate", name, in.cert)
			}
			continue
		}
		if len(certs) != 1 {
			t.Fatalf("%s: %d Certificates", name, len(certs))
		}
		svcHost := in.prefix + "webhook-service." + in.ns + ".svc"
		dns := nested(t, certs[0], "spec", "dnsNames").([]any)
		if len(dns) != 2 || dns[0] != svcHost || dns[1] != svcHost+".cluster.local" {
			t.Errorf("%s: certificate names %v, want the webhook Service %s", name, dns, svcHost)
		}
		if got := nested(t, certs[0], "spec", "secretName"); got != in.secret {
			t.Errorf("%s: certificate Secret %v, manager mounts %s", name, got, in.secret)
		}
	}
}

func toInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int:
		return int64(n)
	}
	return -1
}

// TestChartValuesReachTheManager: the values become the manager's arguments and
// environment.
func TestChartValuesReachTheManager(t *testing.T) {
	r := renderChart(t, clusterRelease, clusterNS, map[string]any{
		"image":    map[string]any{"repository": "registry.example.com/journey-operator", "tag": "v1.2.3"},
		"replicas": 3, "workers": 8, "shardSelector": "journey.dev/shard=a",
		"leaderElection":  map[string]any{"enable": false},
		"kubeAPI":         map[string]any{"qps": 50, "burst": 100},
		"tracing":         map[string]any{"endpoint": "http://otel:4317"},
		"watchNamespaces": []any{"team-a"},
		"resources":       map[string]any{"limits": map[string]any{"memory": "1Gi"}},
	})
	dep := r.get(t, "Deployment", clusterNS, "jo-journey-operator-controller-manager")
	if got := toInt(nested(t, dep, "spec", "replicas")); got != 3 {
		t.Errorf("replicas %d, want 3", got)
	}
	c := nested(t, dep, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
	if c["image"] != "registry.example.com/journey-operator:v1.2.3" {
		t.Errorf("image %v", c["image"])
	}
	var args []string
	for _, a := range c["args"].([]any) {
		args = append(args, fmt.Sprint(a))
	}
	for _, want := range []string{"--leader-elect=false", "--max-concurrent-reconciles=8", "--shard-selector=journey.dev/shard=a",
		"--kube-api-qps=50", "--kube-api-burst=100", "--watch-namespaces=team-a", "--tracing"} {
		if !slices.Contains(args, want) {
			t.Errorf("manager args %v lack %s", args, want)
		}
	}
	env := c["env"].([]any)
	if len(env) != 1 || env[0].(map[string]any)["name"] != "OTEL_EXPORTER_OTLP_ENDPOINT" || env[0].(map[string]any)["value"] != "http://otel:4317" {
		t.Errorf("env %v, want OTEL_EXPORTER_OTLP_ENDPOINT", env)
	}
	if got := nested(t, dep, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["resources"].(map[string]any)["limits"].(map[string]any)["memory"]; got != "1Gi" {
		t.Errorf("memory limit %v", got)
	}
	if len(r.ofKind("Lease")) != 0 || len(r.ofKind("Role")) != 1 { // the watched namespace's, no leader election
		t.Errorf("with leader election off and one namespace: %d Roles, want 1", len(r.ofKind("Role")))
	}
	plain := renderChart(t, clusterRelease, clusterNS, nil)
	pc := nested(t, plain.get(t, "Deployment", clusterNS, "jo-journey-operator-controller-manager"), "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
	if _, ok := pc["env"]; ok {
		t.Errorf("no tracing endpoint, yet env %v", pc["env"])
	}
	if slices.Contains(pc["args"].([]any), any("--tracing")) {
		t.Errorf("no tracing endpoint, yet args %v", pc["args"])
	}
}

// TestChartAuditValues: audit.persistentVolumeClaim mounts the claim and appends the
// records to a file on it, audit.stdout writes them to standard output,
// audit.otlpEndpoint sends them over OTLP; by default there is no audit sink.
func TestChartAuditValues(t *testing.T) {
	container := func(values map[string]any) (map[string]any, map[string]any) {
		r := renderChart(t, clusterRelease, clusterNS, values)
		pod := nested(t, r.get(t, "Deployment", clusterNS, "jo-journey-operator-controller-manager"), "spec", "template", "spec").(map[string]any)
		return pod, pod["containers"].([]any)[0].(map[string]any)
	}
	auditArgs := func(c map[string]any) []string {
		var out []string
		for _, a := range c["args"].([]any) {
			if s := fmt.Sprint(a); strings.HasPrefix(s, "--audit") {
				out = append(out, s)
			}
		}
		return out
	}
	if _, c := container(nil); len(auditArgs(c)) != 0 {
		t.Errorf("default values: audit args %v, want none", auditArgs(c))
	}
	pod, c := container(map[string]any{"audit": map[string]any{"persistentVolumeClaim": "audit-log", "otlpEndpoint": "http://otel:4318/v1/logs"}})
	if got := auditArgs(c); !slices.Equal(got, []string{"--audit-log=/var/lib/journey-audit/audit.jsonl", "--audit-otlp"}) {
		t.Errorf("audit args %v", got)
	}
	mounted := false
	for _, m := range c["volumeMounts"].([]any) {
		mounted = mounted || (m.(map[string]any)["name"] == "audit" && m.(map[string]any)["mountPath"] == "/var/lib/journey-audit")
	}
	claimed := false
	for _, v := range pod["volumes"].([]any) {
		if pvc, ok := v.(map[string]any)["persistentVolumeClaim"].(map[string]any); ok {
			claimed = pvc["claimName"] == "audit-log" && v.(map[string]any)["name"] == "audit"
		}
	}
	if !mounted || !claimed {
		t.Errorf("the claim is not mounted: mounts %v, volumes %v", c["volumeMounts"], pod["volumes"])
	}
	env, _ := c["env"].([]any)
	if len(env) != 1 || env[0].(map[string]any)["name"] != "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT" {
		t.Errorf("env %v, want OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", env)
	}
	if _, c := container(map[string]any{"audit": map[string]any{"stdout": true}}); !slices.Equal(auditArgs(c), []string{"--audit-log=-"}) {
		t.Errorf("audit.stdout: args %v", auditArgs(c))
	}
}
