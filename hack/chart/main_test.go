package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestChartIsUpToDate fails when dist/chart differs from what `make chart` writes from
// config/, so the chart cannot drift from the generated CRDs, RBAC and webhooks.
func TestChartIsUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 {
		t.Fatalf("generated %d files, want the CRDs, rules, user roles and webhooks", len(files))
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Errorf("%s: %v (run make chart)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run make chart", name)
		}
	}
	crds, _ := filepath.Glob(filepath.Join(root, ChartDir, "templates", "crd", "*.yaml"))
	for _, p := range crds {
		rel, _ := filepath.Rel(root, p)
		if _, ok := files[filepath.ToSlash(rel)]; !ok {
			t.Errorf("%s has no CRD in config/crd/bases: run make chart", rel)
		}
	}
}
