package deploy

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// budgetValues turns on defaultBudget, with more values when given.
func budgetValues(base map[string]any, budget map[string]any) map[string]any {
	b := map[string]any{"enabled": true}
	for k, v := range budget {
		b[k] = v
	}
	out := map[string]any{"defaultBudget": b}
	for k, v := range base {
		out[k] = v
	}
	return out
}

// budgets decodes the rendered Budgets strictly, so that a field the API does not
// have is an error, by namespace.
func budgets(t *testing.T, r *rendered) map[string]flowv1.Budget {
	t.Helper()
	out := map[string]flowv1.Budget{}
	for _, u := range r.ofKind("Budget") {
		raw, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		var b flowv1.Budget
		if err := yaml.UnmarshalStrict(raw, &b); err != nil {
			t.Fatalf("Budget %s/%s: %v", u.GetNamespace(), u.GetName(), err)
		}
		out[b.Namespace] = b
	}
	return out
}

// TestChartDefaultBudget: defaultBudget is off by default; turned on, it renders one
// Budget of the values in each watched namespace (or each of defaultBudget.namespaces),
// selecting every Session there; a cluster-wide install with no namespace to put it in
// is refused with a message saying what to set, and so are wrong values.
func TestChartDefaultBudget(t *testing.T) {
	for name, values := range map[string]map[string]any{"default": nil, "scoped": scopedValues()} {
		if got := renderChart(t, clusterRelease, clusterNS, values).ofKind("Budget"); len(got) != 0 {
			t.Errorf("%s values: %d Budgets rendered, want none (defaultBudget is off by default)", name, len(got))
		}
	}

	got := budgets(t, renderChart(t, scopedRelease, scopedNS, budgetValues(scopedValues(), nil)))
	if len(got) != len(watched) {
		t.Fatalf("scoped chart with defaultBudget: Budgets in %d namespaces, want one in each of %v", len(got), watched)
	}
	for _, ns := range watched {
		b, ok := got[ns]
		if !ok {
			t.Fatalf("no Budget in watched namespace %s", ns)
		}
		want := flowv1.BudgetSpec{Window: "Day", Limits: flowv1.BudgetLimits{CostUSD: "20.00"},
			SoftLimitPercent: ptr.To[int32](80), OnExhausted: flowv1.ExhaustedStall}
		if b.Name != "default" || !equalSpec(b.Spec, want) {
			t.Errorf("Budget %s/%s: spec %+v, want %+v", ns, b.Name, b.Spec, want)
		}
		if b.Labels["app.kubernetes.io/instance"] != scopedRelease {
			t.Errorf("Budget %s/%s: labels %v, want the release's", ns, b.Name, b.Labels)
		}
	}

	got = budgets(t, renderChart(t, clusterRelease, clusterNS, budgetValues(nil, map[string]any{
		"name": "team-cap", "namespaces": []any{"team-c"}, "window": "Month", "timeZone": "Europe/Berlin",
		"limits":           map[string]any{"costUSD": nil, "tokens": 5000000, "toolCalls": 20000, "modelCalls": 10000},
		"softLimitPercent": 90, "onExhausted": "Degrade", "degradeTo": "small",
	})))
	want := flowv1.BudgetSpec{Window: "Month", TimeZone: "Europe/Berlin",
		Limits:           flowv1.BudgetLimits{Tokens: 5000000, ToolCalls: 20000, ModelCalls: 10000},
		SoftLimitPercent: ptr.To[int32](90), OnExhausted: flowv1.ExhaustedDegrade, DegradeTo: &flowv1.DegradeTarget{Agent: "small"}}
	if b, ok := got["team-c"]; len(got) != 1 || !ok || b.Name != "team-cap" || !equalSpec(b.Spec, want) {
		t.Errorf("defaultBudget.namespaces [team-c]: Budgets %+v, want team-c/team-cap with %+v", got, want)
	}

	_, err := renderChartErr(clusterRelease, clusterNS, budgetValues(nil, nil))
	if err == nil || !strings.Contains(err.Error(), "set watchNamespaces or defaultBudget.namespaces") {
		t.Errorf("defaultBudget on a cluster-wide install with no namespaces: want refused naming what to set, got %v", err)
	}

	for name, budget := range map[string]map[string]any{
		"Degrade without degradeTo": {"onExhausted": "Degrade"},
		"a zero cost":               {"limits": map[string]any{"costUSD": "0.00"}},
		"a cost as a number":        {"limits": map[string]any{"costUSD": 20}},
		"a misspelt limit":          {"limits": map[string]any{"tokenz": 5}},
		"a window that is not":      {"window": "daily"},
		"an unknown onExhausted":    {"onExhausted": "Stop"},
	} {
		_, err := renderChartErr(scopedRelease, scopedNS, budgetValues(scopedValues(), budget))
		if err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("defaultBudget with %s: want a schema error, got %v", name, err)
		}
	}
}

func equalSpec(a, b flowv1.BudgetSpec) bool {
	x, _ := yaml.Marshal(a)
	y, _ := yaml.Marshal(b)
	return string(x) == string(y)
}

// checkDefaultBudgetExamples: the Budgets of the chart's defaultBudget and of
// config/budget are accepted by a real API server with the CRDs of config/crd/bases
// (schema, CEL rules, strict field validation). TestInstallsOnAControlPlane runs it
// once its installs created those CRDs (config/default's, the chart's being the same:
// TestChartIsConfig) and no manager runs, rather than start a control plane for it.
func checkDefaultBudgetExamples(ctx context.Context, t *testing.T, c client.Client) {
	var objs []*unstructured.Unstructured
	objs = append(objs, renderChart(t, scopedRelease, scopedNS, budgetValues(scopedValues(), nil)).ofKind("Budget")...)
	objs = append(objs, renderChart(t, clusterRelease, clusterNS, budgetValues(nil, map[string]any{
		"name": "degrading", "namespaces": []any{"team-a"}, "window": "168h",
		"limits":      map[string]any{"tokens": 5000000, "modelCalls": 10000},
		"onExhausted": "Degrade", "degradeTo": "small",
	})).ofKind("Budget")...)
	kust := renderKustomize(t, filepath.Join(testenv.RepoRoot(), "config", "budget")).ofKind("Budget")
	if len(kust) != 1 || kust[0].GetNamespace() != "" {
		t.Fatalf("config/budget: want one Budget naming no namespace (kubectl apply -n chooses it), got %d", len(kust))
	}
	kust[0].SetNamespace("outside")
	objs = append(objs, kust...)
	for _, ns := range append([]string{"outside"}, watched...) {
		ensureNamespace(ctx, t, c, ns)
	}
	for _, u := range objs {
		if err := c.Create(ctx, u, client.FieldValidation("Strict")); err != nil {
			t.Errorf("Budget %s/%s refused: %v", u.GetNamespace(), u.GetName(), err)
		}
	}
}

// helmConfig is what the helm command line uses to reach the API server of kubeconfig.
func helmConfig(t *testing.T, kubeconfig, namespace string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig, flags.Namespace, flags.CacheDir = &kubeconfig, &namespace, ptr.To(t.TempDir())
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, namespace, "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestHelmInstallsTheDefaultBudget runs `helm install` and `helm upgrade` with
// Helm's own client on a control plane with no CRDs. Helm maps every object of a
// release before it creates any, so a first install cannot create a Budget with the
// CRD it installs (docs/operations.md says so); an upgrade that turns defaultBudget on
// creates one in each watched namespace, the next upgrade applies changed limits, and
// turning it off deletes them.
func TestHelmInstallsTheDefaultBudget(t *testing.T) {
	t.Parallel() // on a control plane of its own, beside the other installs
	env := testenv.New(t, testenv.WithoutCRDs())
	ctx := t.Context()
	for _, ns := range append([]string{selfNS}, watched...) {
		ensureNamespace(ctx, t, env.Client, ns)
	}
	kubeconfig := env.Kubeconfig(t, testenv.Admin("helm"))
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]any{
		"watchNamespaces": []any{watched[0], watched[1]},
		// No cert-manager on this control plane.
		"webhook": map[string]any{"certificate": map[string]any{"source": self}},
	}
	first := action.NewInstall(helmConfig(t, kubeconfig, selfNS))
	first.ReleaseName, first.Namespace = selfRelease, selfNS
	_, err = first.RunWithContext(ctx, chrt, budgetValues(base, nil))
	if err == nil || !strings.Contains(err.Error(), "ensure CRDs are installed first") {
		t.Fatalf("helm install with defaultBudget on a control plane without the CRDs: want Helm's \"ensure CRDs are installed first\", got %v", err)
	}

	install := action.NewInstall(helmConfig(t, kubeconfig, selfNS))
	install.ReleaseName, install.Namespace = selfRelease, selfNS
	if _, err := install.RunWithContext(ctx, chrt, base); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	upgrade := func(values map[string]any) {
		t.Helper()
		u := action.NewUpgrade(helmConfig(t, kubeconfig, selfNS))
		u.Namespace = selfNS
		if _, err := u.RunWithContext(ctx, selfRelease, chrt, values); err != nil {
			t.Fatalf("helm upgrade: %v", err)
		}
	}
	check := func(when, cost string) {
		t.Helper()
		for _, ns := range watched {
			var b flowv1.Budget
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &b)
			switch {
			case cost == "" && !apierrors.IsNotFound(err):
				t.Errorf("%s: the default Budget in %s: %v, want none", when, ns, err)
			case cost == "":
			case err != nil:
				t.Errorf("%s: the default Budget in %s: %v", when, ns, err)
			case b.Spec.Limits.CostUSD != flowv1.Decimal(cost):
				t.Errorf("%s: Budget %s/default costUSD %q, want %q", when, ns, b.Spec.Limits.CostUSD, cost)
			}
		}
	}
	check("after helm install without defaultBudget", "")
	upgrade(budgetValues(base, nil))
	check("after helm upgrade --set defaultBudget.enabled=true", "20.00")
	upgrade(budgetValues(base, map[string]any{"limits": map[string]any{"costUSD": "35.50"}}))
	check("after helm upgrade --set defaultBudget.limits.costUSD=35.50", "35.50")
	upgrade(base)
	check("after helm upgrade --set defaultBudget.enabled=false", "")
}
