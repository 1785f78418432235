package testenv

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// QuietLogs sets controller-runtime's logger: discarded, unless TEST_VERBOSE_MANAGER is
// set, when managers log in development mode to stderr.
func QuietLogs() {
	if os.Getenv("TEST_VERBOSE_MANAGER") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
		return
	}
	ctrl.SetLogger(logr.Discard())
}

// Main is the TestMain of a package whose tests share one control plane: it quiets the
// logs, starts the control plane with opts, calls setup (which keeps env in package
// variables and may start what every test needs), runs the tests, stops the control
// plane and exits with the tests' code. A control plane that cannot start, or a setup
// that fails, fails the run: no test is skipped for want of one.
func Main(m *testing.M, setup func(env *Environment) error, opts ...Option) {
	QuietLogs()
	os.Exit(run(m, setup, opts))
}

func run(m *testing.M, setup func(*Environment) error, opts []Option) int {
	env, err := Start(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		}
	}()
	if setup != nil {
		if err := setup(env); err != nil {
			fmt.Fprintln(os.Stderr, "test setup:", err)
			return 1
		}
	}
	return m.Run()
}

// New starts a control plane for one test and stops it when the test ends; a control
// plane that cannot start fails the test.
func New(t testing.TB, opts ...Option) *Environment {
	t.Helper()
	env, err := Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping control plane: %v", err)
		}
	})
	return env
}
