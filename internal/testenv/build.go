package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"syscall"
)

// Binary builds the main package pkg of this module ("./cmd/kubectl-journey") into
// bin/test/ of the repository, named after the package's directory, and returns the
// binary's path.
//
// The test packages of a run share that binary instead of each linking one of their
// own: the build holds a lock on the binary's directory, so a package that needs the
// same binary waits for the one building it, and go build then finds the binary up to
// date and does not link it again. A binary that is being run stays as it is when
// another build replaces it: go build writes a new file, not into the old one.
//
// The binary is built with CGO_ENABLED=0, as `make image` builds it and the tests
// outside the race set run, whatever the calling package's environment: a package of
// the race set (cgo on) gets the same binary as one of the other set, so neither links
// it again. It is linked with -s -w, as `make image` links it: a test reads no debug
// information, and the link takes less work.
func Binary(pkg string) (string, error) {
	dir := filepath.Join(RepoRoot(), "bin", "test")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	out := filepath.Join(dir, path.Base(pkg))
	build := exec.Command("go", "build", "-ldflags=-s -w", "-o", out, pkg)
	build.Dir = RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}
