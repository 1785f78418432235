// Package validation checks the CRDs' schema and CEL validation on a real
// kube-apiserver: invalid Journeys, Pathways and Sessions (and updates that break
// append-only or immutable fields) are rejected with a message naming the field, and
// every object of config/samples is accepted.
package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/journeyops/journey-operator/internal/testenv"
)

// k is the client of the package's control plane, started once in TestMain.
var k client.Client

// ns is the namespace the table tests create their objects in; samplesNamespace is the
// one the samples go to (they name none themselves).
const (
	ns               = "validation"
	samplesNamespace = "samples"
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(env *testenv.Environment) error {
		k = env.Client
		if err := env.CreateNamespace(ns); err != nil {
			return err
		}
		return env.CreateNamespace(samplesNamespace)
	})
}

// decodeOne decodes a manifest that holds exactly one object.
func decodeOne(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	objs, err := testenv.DecodeManifests([]byte(manifest))
	if err != nil {
		t.Fatalf("decoding manifest: %v\n%s", err, manifest)
	}
	if len(objs) != 1 {
		t.Fatalf("want one object in the manifest, got %d", len(objs))
	}
	return objs[0]
}
