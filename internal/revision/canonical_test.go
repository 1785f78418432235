package revision_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/revision"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// decode reads a multi-document YAML stream the way kubectl apply -f and kubectl
// journey test do (sigs.k8s.io/yaml to JSON, then the typed structs), and returns the
// revision name of its one Journey with its Pathways, as the Journey controller makes it.
func decode(t *testing.T, src, journey string) string {
	t.Helper()
	_, name := encode(t, src, journey)
	return name
}

// encode returns the stored form and the revision name of journey in src.
func encode(t *testing.T, src, journey string) ([]byte, string) {
	t.Helper()
	var j *flowv1.Journey
	pathways := map[string]*flowv1.PathwaySpec{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(src)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "Journey":
			candidate := &flowv1.Journey{}
			if err := yaml.UnmarshalStrict(doc, candidate); err != nil {
				t.Fatal(err)
			}
			if candidate.Name == journey {
				j = candidate
			}
		case "Pathway":
			p := &flowv1.Pathway{}
			if err := yaml.UnmarshalStrict(doc, p); err != nil {
				t.Fatal(err)
			}
			pathways[p.Name] = &p.Spec
		}
	}
	if j == nil {
		t.Fatalf("no Journey %s", journey)
	}
	data := &revision.Data{Journey: j.Spec, Pathways: map[string]*flowv1.PathwaySpec{}}
	for _, e := range j.Spec.Pathways {
		data.Pathways[string(e.Name)] = pathways[e.PathwayRef]
	}
	raw, name, err := revision.Encode(j.Name, data)
	if err != nil {
		t.Fatal(err)
	}
	return raw, name
}

const plain = `apiVersion: flow.journey.dev/v1alpha1
kind: Journey
metadata:
  name: counter
spec:
  entryPathway: count
  pathways:
    - name: count
      pathwayRef: counter-count
  transitions:
    - name: to-count
      trigger:
        condition: "context.count + 1 > 3 && message.contains('again')"
      to: count
      contextUpdate:
        - field: seen
          op: Set
          value: {a: 1, b: [red, blue]}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata:
  name: counter-count
spec:
  signature:
    instructions: Count the messages.
    outputs:
      - name: count
        type: integer
  builtin:
    outputs:
      - name: count
        expression: >-
          has(context.count)
            ? context.count + 1
            : 1
  accumulate: [count]
`

// The same Journey, written otherwise: flow style, keys in another order, other
// quoting, a literal block with other line breaks and a comment in an expression,
// a float written for a whole number, defaults written out.
const reformatted = `kind: Journey
apiVersion: "flow.journey.dev/v1alpha1"
metadata: {name: counter}
spec:
  errorRecovery: Graceful
  transitions:
  - to: count
    contextUpdate: [{op: Set, field: seen, value: {b: ["red", "blue"], a: 1.0}}]
    from: "*"
    name: to-count
    trigger:
      condition: |-
        context.count + 1 > 3   // more than three
          && message.contains("again")
  pathways: [{pathwayRef: counter-count, name: count}]
  entryPathway: 'count'
---
metadata: {name: counter-count}
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
spec:
  executor: Agent
  runOn: Message
  pipeline: Sequential
  accumulate:
  - count
  builtin: {outputs: [{expression: "has(context.count) ? context.count + 1 : 1", name: count}]}
  signature: {outputs: [{type: integer, name: count}], instructions: "Count the messages."}
`

func TestNameIgnoresFormatting(t *testing.T) {
	want := decode(t, plain, "counter")
	if got := decode(t, reformatted, "counter"); got != want {
		t.Errorf("the same Journey written otherwise names revision %s, want %s", got, want)
	}
	// How revisions roll out and how running Sessions move between them is not
	// what Sessions run.
	rolledOut := strings.Replace(plain, "  entryPathway: count\n",
		"  entryPathway: count\n  upgradePolicy: ReplayCompatible\n  rollout: {canary: {steps: [{weight: 20}]}}\n", 1)
	if rolledOut == plain {
		t.Fatal("the test's replacement changed nothing")
	}
	if got := decode(t, rolledOut, "counter"); got != want {
		t.Errorf("setting upgradePolicy and rollout names revision %s, want %s", got, want)
	}
	for change, src := range map[string]string{
		"an expression":    strings.Replace(plain, "context.count + 1\n", "context.count + 2\n", 1),
		"a string literal": strings.Replace(plain, "contains('again')", "contains('again ')", 1),
		"a prompt":         strings.Replace(plain, "Count the messages.", "Count the  messages.", 1),
		"a context value":  strings.Replace(plain, "{a: 1, b: [red, blue]}", "{a: 1.5, b: [red, blue]}", 1),
		"a quoted number":  strings.Replace(plain, "{a: 1, b: [red, blue]}", "{a: '1', b: [red, blue]}", 1),
		"a default":        strings.Replace(plain, "  entryPathway: count\n", "  entryPathway: count\n  errorRecovery: FailFast\n", 1),
	} {
		if src == plain {
			t.Fatalf("%s: the test's replacement changed nothing", change)
		}
		if got := decode(t, src, "counter"); got == want {
			t.Errorf("changing %s kept revision name %s", change, got)
		}
	}
}

// Kustomize reads folded YAML scalars with more-indented lines differently from
// kubectl apply -f (a blank line more before each more-indented line), so the samples
// applied with kubectl apply -k hold other expression text than the files kubectl
// journey test reads. Both name the same revisions.
func TestNameSameThroughKustomize(t *testing.T) {
	samples := testenv.SamplesDir()
	out, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), samples)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := out.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	differs := false
	for _, sample := range []string{"healthcare-referral", "review-loop", "planning", "delivery-pipeline"} {
		file, err := os.ReadFile(filepath.Join(samples, sample+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if fromFile, fromKustomize := decode(t, string(file), sample), decode(t, string(rendered), sample); fromFile != fromKustomize {
			t.Errorf("%s: revision %s from the file, %s through kustomize", sample, fromFile, fromKustomize)
		}
		stored, _ := encode(t, string(file), sample)
		storedK, _ := encode(t, string(rendered), sample)
		differs = differs || !bytes.Equal(stored, storedK)
	}
	if !differs {
		t.Fatal("kustomize renders the samples' expressions as written: this test no longer shows that names ignore the difference")
	}
}
