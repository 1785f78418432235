package controller

import (
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/journeyops/journey-operator/internal/testenv"
)

// One control plane for the package; each test gets its own namespace and, where it
// needs one, its own manager, and runs in parallel with the others (most of their time
// is spent waiting on the control plane). The few that read process-wide metrics run
// alone, before the parallel ones.
var (
	env       *testenv.Environment
	k8sClient client.Client
	scheme    = testenv.Scheme
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Environment) error {
		env, k8sClient = e, e.Client
		return nil
	})
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string { return env.Namespace(t) }

// managerOptions run the controllers with opts, restricted to namespace.
func managerOptions(namespace string, opts Options) testenv.ManagerOptions {
	return testenv.ManagerOptions{
		Namespaces: []string{namespace},
		Setup:      func(mgr ctrl.Manager) error { return Setup(mgr, opts) },
	}
}

// startManager runs the controllers, restricted to namespace, until the test ends.
func startManager(t *testing.T, namespace string, opts Options) *testenv.Manager {
	t.Helper()
	return env.StartManager(t, managerOptions(namespace, opts))
}

// eventually polls cond until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	testenv.Eventually(t, timeout, cond)
}

func get[T client.Object](t *testing.T, namespace, name string, obj T) T {
	t.Helper()
	return testenv.Get(t, env, namespace, name, obj)
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	env.Create(t, objs...)
}

func clientKey(namespace, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: name}
}
