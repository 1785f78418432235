package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Admin is a user in system:masters.
func Admin(name string) envtest.User {
	return envtest.User{Name: name, Groups: []string{"system:masters"}}
}

// WriteKubeconfig writes dir/kubeconfig for user, authenticated by the control plane,
// for kubectl, the kubectl-journey plugin or a manager process, and returns its path.
func (e *Environment) WriteKubeconfig(dir string, user envtest.User) (string, error) {
	au, err := e.AddUser(user, nil)
	if err != nil {
		return "", err
	}
	raw, err := au.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, raw, 0o600)
}

// Kubeconfig is WriteKubeconfig into a directory removed when the test ends.
func (e *Environment) Kubeconfig(t testing.TB, user envtest.User) string {
	t.Helper()
	path, err := e.WriteKubeconfig(t.TempDir(), user)
	if err != nil {
		t.Fatalf("kubeconfig for %s: %v", user.Name, err)
	}
	return path
}

// UserClient is a client (with Scheme) that authenticates as user: what it may do is
// what RBAC grants the user.
func (e *Environment) UserClient(user envtest.User) (client.Client, error) {
	au, err := e.AddUser(user, nil)
	if err != nil {
		return nil, err
	}
	return client.New(au.Config(), client.Options{Scheme: Scheme})
}
