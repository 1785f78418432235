package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/journeyops/journey-operator/internal/testenv"
)

// chartDir is the chart, kubebuilder's helm plugin layout.
var chartDir = filepath.Join(testenv.RepoRoot(), "dist", "chart")

// rendered is a rendered install: its objects by kind/namespace/name.
type rendered struct {
	objs  []*unstructured.Unstructured
	byKey map[string]*unstructured.Unstructured
}

func key(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

func (r *rendered) get(t *testing.T, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	u, ok := r.byKey[key(kind, namespace, name)]
	if !ok {
		t.Fatalf("renders no %s %s/%s", kind, namespace, name)
	}
	return u
}

func (r *rendered) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range r.objs {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

func decode(t *testing.T, manifest []byte) *rendered {
	t.Helper()
	r := &rendered{byKey: map[string]*unstructured.Unstructured{}}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding rendered manifests: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		k := key(u.GetKind(), u.GetNamespace(), u.GetName())
		if _, dup := r.byKey[k]; dup {
			t.Fatalf("renders %s twice", k)
		}
		r.objs = append(r.objs, u)
		r.byKey[k] = u
	}
	return r
}

// renderChartErr renders the chart as `helm install --dry-run` does, with the values
// checked against values.schema.json.
func renderChartErr(release, namespace string, values map[string]any) ([]byte, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = release, namespace
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.37.1", Major: "1", Minor: "37"}
	rel, err := install.Run(chrt, values)
	if err != nil {
		return nil, err
	}
	return []byte(rel.Manifest), nil
}

// renderChart renders the chart with values (renderChartErr) and decodes it; it fails
// the test when the chart does not render.
func renderChart(t *testing.T, release, namespace string, values map[string]any) *rendered {
	t.Helper()
	key, err := json.Marshal([]any{release, namespace, values})
	if err != nil {
		t.Fatal(err)
	}
	out, err := renders.get("chart "+string(key), func() ([]byte, error) { return renderChartErr(release, namespace, values) })
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	return decode(t, out)
}

// renderKustomize builds a kustomization with the kustomize API (what
// `kubectl apply -k` runs) and decodes it.
func renderKustomize(t *testing.T, dir string) *rendered {
	t.Helper()
	out, err := renders.get("kustomize "+dir, func() ([]byte, error) {
		resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
		}
		return resMap.AsYaml()
	})
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

// renders keeps each install's rendered manifests: several tests check the same install
// (the chart with the same values, the same kustomization), and rendering is the same
// every time within a run. Each caller decodes objects of its own, which it may change.
var renders = &renderCache{done: map[string]*renderOnce{}}

type renderCache struct {
	mu   sync.Mutex
	done map[string]*renderOnce
}

type renderOnce struct {
	once sync.Once
	out  []byte
	err  error
}

// get returns what render returned for key, calling it once per key.
func (c *renderCache) get(key string, render func() ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	r, ok := c.done[key]
	if !ok {
		r = &renderOnce{}
		c.done[key] = r
	}
	c.mu.Unlock()
	r.once.Do(func() { r.out, r.err = render() })
	return r.out, r.err
}
