package validation

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/util/compatibility"
	basecompatibility "k8s.io/component-base/compatibility"
	"sigs.k8s.io/yaml"

	"github.com/journeyops/journey-operator/internal/testenv"
)

// TestChartKubeVersionAcceptsTheCRDs holds the chart's kubeVersion floor to the CEL the
// CRDs' validation rules use. A kube-apiserver compiles the rules of a new CRD with
// the CEL libraries of the release before its own (its minimum compatibility
// version), so a rule written with a library a release added (two-variable
// comprehensions, the format library) is refused by the releases before the next
// one. The CRDs are validated as the API server validates a CRD it is sent, once as
// the floor release would and once as the release before it would: the first must
// accept every CRD, the second must refuse at least one (else the floor could be
// lower, and the README and chart would turn clusters away for nothing).
func TestChartKubeVersionAcceptsTheCRDs(t *testing.T) {
	root := testenv.RepoRoot()
	chart, err := os.ReadFile(filepath.Join(root, "dist", "chart", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^kubeVersion: ">=1\.(\d+)\.0-0"$`).FindSubmatch(chart)
	if m == nil {
		t.Fatalf("dist/chart/Chart.yaml has no kubeVersion of the form \">=1.N.0-0\"")
	}
	floor, _ := strconv.Atoi(string(m[1]))

	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	var crds []*apiextensions.CustomResourceDefinition
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v1 apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &v1); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var crd apiextensions.CustomResourceDefinition
		if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&v1, &crd, nil); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		// As the API server has it once it stored the CRD.
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
			}
		}
		crds = append(crds, &crd)
	}

	ev, ok := compatibility.DefaultComponentGlobalsRegistry.EffectiveVersionFor(basecompatibility.DefaultKubeComponent).(basecompatibility.MutableEffectiveVersion)
	if !ok {
		t.Fatal("the kube component's effective version cannot be set")
	}
	was := ev.MinCompatibilityVersion()
	t.Cleanup(func() { ev.SetMinCompatibilityVersion(was) })
	// refused lists, for a kube-apiserver 1.<release>, the CRDs it refuses and why.
	refused := func(release int) map[string]string {
		ev.SetMinCompatibilityVersion(version.MajorMinor(1, uint(release-1)))
		out := map[string]string{}
		for _, crd := range crds {
			if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), crd); len(errs) > 0 {
				out[crd.Name] = errs.ToAggregate().Error()
			}
		}
		return out
	}
	if bad := refused(floor); len(bad) > 0 {
		for name, why := range bad {
			t.Errorf("Kubernetes 1.%d (the chart's kubeVersion floor) would refuse %s:\n%s", floor, name, firstLines(why, 6))
		}
	}
	if bad := refused(floor - 1); len(bad) == 0 {
		t.Errorf("Kubernetes 1.%d accepts every CRD: lower the floor (dist/chart/Chart.yaml kubeVersion, README, docs/operations.md) to 1.%d", floor-1, floor-1)
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}
