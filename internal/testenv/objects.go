package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Namespace creates a namespace for one test, named "t-" and a random suffix, and
// returns its name. Tests in their own namespaces can share a control plane.
func (e *Environment) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	return ns.Name
}

// CreateNamespace creates the namespace name.
func (e *Environment) CreateNamespace(name string) error {
	return e.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// Create creates objs as the admin, in order, and fails t on the first error.
func (e *Environment) Create(t testing.TB, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := e.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// Get reads namespace/name into obj as the admin and returns it; an error fails t.
func Get[T client.Object](t testing.TB, e *Environment, namespace, name string, obj T) T {
	t.Helper()
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		t.Fatalf("get %T %s/%s: %v", obj, namespace, name, err)
	}
	return obj
}
