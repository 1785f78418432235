// Package llmservers runs Sessions on a real control plane against the harness's chat
// server answering the way real OpenAI-compatible servers do, through the operator's
// own agent factory and go-openai client.
package llmservers

import (
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
)

var env *testenv.Environment

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Environment) error {
		env = e
		return nil
	})
}

// startManager runs the controllers with the default agents, restricted to namespace,
// until the test ends.
func startManager(t *testing.T, namespace string) {
	t.Helper()
	env.StartManager(t, testenv.ManagerOptions{
		Namespaces: []string{namespace},
		Setup:      func(mgr ctrl.Manager) error { return controller.Setup(mgr, controller.Options{}) },
	})
}
