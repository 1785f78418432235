package journeytest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// crdSchema returns the structural schema of a CRD of config/crd/bases.
func crdSchema(t *testing.T, plural string) *structuralschema.Structural {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "flow.journey.dev_"+plural+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, &internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := structuralschema.NewStructural(&internal)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func defaultPaths(s *structuralschema.Structural, path string, out *[]string) {
	if s.Default.Object != nil {
		*out = append(*out, path)
	}
	for name, p := range s.Properties {
		child := name
		if path != "" {
			child = path + "." + name
		}
		defaultPaths(&p, child, out)
	}
	if s.Items != nil {
		defaultPaths(s.Items, path+"[]", out)
	}
}

// TestDefaultsMatchCRDs keeps the offline defaulting in step with the CRDs: the same
// fields are defaulted, to the same values, as the API server defaults them.
func TestDefaultsMatchCRDs(t *testing.T) {
	var found []string
	schemas := map[string]*structuralschema.Structural{}
	for _, plural := range []string{"journeys", "pathways"} {
		schemas[plural] = crdSchema(t, plural)
		var paths []string
		defaultPaths(schemas[plural], "", &paths)
		for _, p := range paths {
			found = append(found, plural+": "+p)
		}
	}
	slices.Sort(found)
	want := slices.Sorted(slices.Values(defaultedFields))
	if !slices.Equal(found, want) {
		t.Fatalf("the CRDs default %q,\ndefaults.go handles %q: update defaultJourney, defaultPathway and defaultedFields", found, want)
	}

	// Objects with every defaulted field left out, and the samples.
	docs := []string{`{"apiVersion":"flow.journey.dev/v1alpha1","kind":"Journey","metadata":{"name":"j"},"spec":{
		"entryPathway":"a","pathways":[{"name":"a","pathwayRef":"pa"}],
		"agents":[{"name":"x"}],
		"transitions":[{"name":"t","to":"a","trigger":{"condition":"true"}}]}}`,
		`{"apiVersion":"flow.journey.dev/v1alpha1","kind":"Pathway","metadata":{"name":"pa"},"spec":{
		"signature":{"inputs":[{"name":"i"}],"outputs":[{"name":"o"}]},"returnBehavior":{}}}`,
	}
	var samples objects
	files, _ := filepath.Glob(filepath.Join(samplesDir(), "*.yaml"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := samples.read(f, fh); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	// samples.read defaulted them already; the API server's defaulting must agree.
	for _, j := range samples.journeys {
		raw, _ := json.Marshal(j)
		docs = append(docs, string(raw))
	}
	for _, p := range samples.pathways {
		raw, _ := json.Marshal(p)
		docs = append(docs, string(raw))
	}
	for _, o := range docs {
		var ours objects
		if err := ours.add("object", []byte(o)); err != nil {
			t.Fatal(err)
		}
		var u map[string]any
		if err := json.Unmarshal([]byte(o), &u); err != nil {
			t.Fatal(err)
		}
		var plural string
		var got, want any
		switch u["kind"] {
		case "Journey":
			plural, got, want = "journeys", &flowv1.Journey{}, ours.journeys[0]
		default:
			plural, got, want = "pathways", &flowv1.Pathway{}, ours.pathways[0]
		}
		defaulting.Default(u, schemas[plural])
		raw, _ := json.Marshal(u)
		if err := json.Unmarshal(raw, got); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, want) {
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(want)
			t.Errorf("the API server defaults to\n%s\nthe runner to\n%s", a, b)
		}
	}
}
