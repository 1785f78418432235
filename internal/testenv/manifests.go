package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SamplesDir is config/samples of the repository.
func SamplesDir() string { return filepath.Join(RepoRoot(), "config", "samples") }

// DecodeManifests decodes every object of a multi-document YAML (or JSON) stream,
// skipping empty documents.
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

// ReadManifests decodes the objects of the file at path.
func ReadManifests(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := DecodeManifests(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// Typed converts u to the Go type Scheme registers for its kind (a *flowv1.Journey for
// a Journey, and so on).
func Typed(u *unstructured.Unstructured) (client.Object, error) {
	obj, err := Scheme.New(u.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	o, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not an object", u.GetKind())
	}
	return o, nil
}

// Manifests is ReadManifests for a test: an error fails t.
func Manifests(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := ReadManifests(path)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
