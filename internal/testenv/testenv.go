// Package testenv starts a real control plane (kube-apiserver and etcd built by
// hack/setup-envtest.sh) with the project's CRDs installed, for tests and the demo.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// RepoRoot is the module root, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Assets returns the directory with kube-apiserver and etcd: $KUBEBUILDER_ASSETS when
// set, else bin/envtest, building the binaries with hack/setup-envtest.sh if needed.
func Assets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root := RepoRoot()
	dir := filepath.Join(root, "bin", "envtest")
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err == nil {
		return dir, nil
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack", "setup-envtest.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building envtest binaries: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Environment is a running control plane.
type Environment struct {
	*envtest.Environment
	Config *rest.Config
}

// Start starts kube-apiserver and etcd and installs the CRDs of config/crd/bases.
// Stop it with env.Stop().
func Start() (*Environment, error) {
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting control plane: %w", err)
	}
	// Tests create objects quickly; the client-side limiter would dominate timings.
	cfg.QPS, cfg.Burst = 1000, 2000
	return &Environment{Environment: env, Config: cfg}, nil
}
