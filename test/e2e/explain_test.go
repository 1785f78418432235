package e2e

import (
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/journeyops/journey-operator/internal/testenv"
)

// TestExplainKeepsDescriptionLines runs kubectl explain on every object of the three
// kinds' schemas (once for objects of the same schema, such as the four outcome
// transitions' decision) and checks that each line of each description is shown whole:
// kubectl explain wraps descriptions at 76 columns and keeps the line breaks of the
// API's Go comments, so a longer line would come out broken in two, ragged.
func TestExplainKeepsDescriptionLines(t *testing.T) {
	t.Parallel()
	for _, plural := range []string{"journeys", "pathways", "sessions"} {
		// Each kind has tens of objects, one kubectl run each: the three kinds run side
		// by side.
		t.Run(plural, func(t *testing.T) {
			t.Parallel()
			crd := testenv.Manifests(t, filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "flow.journey.dev_"+plural+".yaml"))[0]
			versions, _ := crd.Object["spec"].(map[string]any)["versions"].([]any)
			schema := versions[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
			// An object whose schema (its description, fields and everything under them)
			// is the same as one already explained is shown the same way: kubectl
			// explain draws a description from the schema alone, whatever the path.
			explained := map[string]string{}
			for _, n := range objectNodes(plural, schema) {
				if first, ok := explained[n.schema]; ok {
					t.Logf("%s: the same schema as %s", n.path, first)
					continue
				}
				explained[n.schema] = n.path
				out := kubectl(t, "explain", n.path)
				shown := map[string]bool{}
				for _, l := range strings.Split(out, "\n") {
					shown[strings.TrimSpace(l)] = true
				}
				for _, d := range n.descriptions {
					for _, l := range strings.Split(d, "\n") {
						if l = strings.TrimSpace(l); l != "" && !shown[l] {
							t.Errorf("kubectl explain %s does not show the description line %q whole:\n%s", n.path, l, out)
						}
					}
				}
			}
		})
	}
}

// node is a path for kubectl explain and the descriptions it shows: the object's own
// and those of its fields.
type node struct {
	path         string
	descriptions []string
	// schema is the object's schema as JSON (keys sorted): equal for two objects that
	// kubectl explain shows alike.
	schema string
}

// isCondition tells a list of metav1.Condition, described by Kubernetes.
func isCondition(schema map[string]any) bool {
	items, _ := schema["items"].(map[string]any)
	props, _ := items["properties"].(map[string]any)
	_, ok := props["lastTransitionTime"]
	return ok && len(props) == 6
}

// objectNodes lists the objects of schema under path (metadata and conditions excepted), arrays of
// objects included as kubectl explain names them: by the array field.
func objectNodes(path string, schema map[string]any) []node {
	props, _ := schema["properties"].(map[string]any)
	if items, ok := schema["items"].(map[string]any); ok {
		props, _ = items["properties"].(map[string]any)
	}
	if len(props) == 0 {
		return nil
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		panic(err) // decoded from YAML: strings, numbers, booleans, lists and maps
	}
	n := node{path: path, schema: string(raw)}
	if d, ok := schema["description"].(string); ok {
		n.descriptions = append(n.descriptions, d)
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	nodes := []node{}
	for _, name := range names {
		p := props[name].(map[string]any)
		if name == "apiVersion" || name == "kind" {
			continue // described by Kubernetes, not by this API
		}
		if d, ok := p["description"].(string); ok {
			n.descriptions = append(n.descriptions, d)
		}
		if name != "metadata" && !isCondition(p) {
			nodes = append(nodes, objectNodes(path+"."+name, p)...)
		}
	}
	return append([]node{n}, nodes...)
}
