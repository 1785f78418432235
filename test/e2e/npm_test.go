package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// npmPackages is the directory whose node_modules holds the npm packages of hack/npm,
// installed by hack/setup-npm.sh (instant once cached; `make test` runs it ahead).
// Without Node.js or npm the test fails with the command that installs them.
var npmPackages = sync.OnceValues(func() (string, error) {
	cmd := exec.Command("bash", "hack/setup-npm.sh")
	cmd.Dir = strings.TrimSuffix(mustGetwd(), "/test/e2e")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", &setupError{err: err, stderr: stderr.String()}
	}
	return strings.TrimSpace(string(out)), nil
})

type setupError struct {
	err    error
	stderr string
}

func (e *setupError) Error() string {
	return "bash hack/setup-npm.sh: " + e.err.Error() + "\n" + e.stderr
}

func mustGetwd() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return wd
}

// nodeTimeout bounds one run of a Node.js script.
const nodeTimeout = 90 * time.Second

// runNode runs the script testdata/<script> with Node.js, next to the node_modules of
// hack/npm (ES modules resolve packages from the script's own directory), with env
// added to the environment, and returns its standard output.
func runNode(t *testing.T, script string, env []string, args ...string) []byte {
	t.Helper()
	dir := t.TempDir()
	prepareNode(t, dir, script)
	ctx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(dir, script)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", script, err, out, stderr.String())
	}
	return out
}

// prepareNode copies testdata/<script> into dir beside a node_modules link to the
// installed packages.
func prepareNode(t *testing.T, dir, script string) {
	t.Helper()
	pkgs, err := npmPackages()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("testdata", script))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, script), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(pkgs, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
}
