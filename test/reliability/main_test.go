// Package reliability runs the operator under stress on a real control plane: managers
// killed and restarted mid-flight, a chat-completions endpoint that fails a fifth of
// its calls, Sessions sharded across managers, and malformed or hostile input at scale.
//
// The default run is short enough for make test; RELIABILITY_FULL=1 (make
// test-reliability) runs the long version. See docs/RELIABILITY.md.
package reliability

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

var (
	env       *testenv.Environment
	k8sClient client.Client
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Environment) error {
		env, k8sClient = e, e.Client
		return nil
	})
}

// full reports whether the long version was asked for (RELIABILITY_FULL=1).
func full() bool {
	v, _ := strconv.ParseBool(os.Getenv("RELIABILITY_FULL"))
	return v
}

// pick returns long under RELIABILITY_FULL=1, else short.
func pick[T any](short, long T) T {
	if full() {
		return long
	}
	return short
}

func newNamespace(t *testing.T) string { return env.Namespace(t) }

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	env.Create(t, objs...)
}

// eventually polls cond until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	testenv.Eventually(t, timeout, cond)
}

func listSessions(t *testing.T, namespace string) []flowv1.Session {
	t.Helper()
	var list flowv1.SessionList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}
