package testenv

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Scheme holds the Kubernetes built-in types and the project's API: the scheme of
// Environment.Client and of the managers the harness starts.
var Scheme = NewScheme()

// NewScheme returns a new scheme with the built-in types and the project's API.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(flowv1.AddToScheme(s))
	return s
}
