package journeytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/revision"
	protocol "github.com/journeyops/journey-operator/internal/step"
)

// RevisionData is what a Journey ControllerRevision holds, as the controllers store it.
type RevisionData = revision.Data

// objects are the Journeys and Pathways of a test's manifests.
type objects struct {
	journeys []*flowv1.Journey
	pathways []*flowv1.Pathway
}

// Resolve reads the case's manifests and resolves its Journey the way the Journey
// controller does: the Pathways it references by pathwayRef, in its namespace, with the
// defaults the API server applies. It sets c.Data.
func (c *Case) Resolve() error {
	var objs objects
	dir := "."
	if c.Path != "" {
		dir = filepath.Dir(c.Path)
	}
	for i, m := range c.Manifests {
		if m.Object != nil {
			if err := objs.add(fmt.Sprintf("manifests[%d]", i), m.Object); err != nil {
				return err
			}
			continue
		}
		path := m.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("manifests[%d]: %w", i, err)
		}
		err = objs.read(m.Path, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	j, err := objs.journey(c.Journey)
	if err != nil {
		return err
	}
	c.Journey = j.Name
	data, err := objs.resolve(j)
	if err != nil {
		return err
	}
	if len(c.ServerTools) > 0 {
		data.Tools = maps.Clone(c.ServerTools)
	}
	c.Data = data
	return nil
}

// read adds the objects of a multi-document YAML stream.
func (o *objects) read(name string, r io.Reader) error {
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for n := 1; ; n++ {
		doc, err := yr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		raw, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", name, n, err)
		}
		if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
			continue
		}
		if err := o.add(fmt.Sprintf("%s: document %d", name, n), raw); err != nil {
			return err
		}
	}
}

// add decodes one manifest strictly: a misspelt field is an error, as with
// kubectl apply --validate=strict. Objects that are not Journeys or Pathways are ignored.
func (o *objects) add(where string, raw []byte) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if !strings.HasPrefix(meta.APIVersion, flowv1.GroupVersion.Group+"/") {
		return nil
	}
	if meta.APIVersion != flowv1.GroupVersion.String() {
		return fmt.Errorf("%s: apiVersion %s is not %s", where, meta.APIVersion, flowv1.GroupVersion)
	}
	switch meta.Kind {
	case "Journey":
		j := &flowv1.Journey{}
		if err := protocol.StrictJSON(raw, j); err != nil {
			return fmt.Errorf("%s: Journey: %w", where, err)
		}
		defaultJourney(&j.Spec)
		o.journeys = append(o.journeys, j)
	case "Pathway":
		p := &flowv1.Pathway{}
		if err := protocol.StrictJSON(raw, p); err != nil {
			return fmt.Errorf("%s: Pathway: %w", where, err)
		}
		defaultPathway(&p.Spec)
		o.pathways = append(o.pathways, p)
	}
	return nil
}

func (o *objects) journey(name string) (*flowv1.Journey, error) {
	var names []string
	for _, j := range o.journeys {
		if j.Name == name {
			return j, nil
		}
		names = append(names, j.Name)
	}
	switch {
	case len(o.journeys) == 0:
		return nil, errors.New("the manifests hold no Journey")
	case name == "" && len(o.journeys) == 1:
		return o.journeys[0], nil
	case name == "":
		return nil, fmt.Errorf("the manifests hold several Journeys (%s): say which with the journey field", strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("journey %q is not in the manifests (they hold %s)", name, strings.Join(names, ", "))
}

// resolve mirrors the Journey controller: each pathways entry resolves to the Pathway
// named by its pathwayRef in the Journey's namespace; the graph is validated.
func (o *objects) resolve(j *flowv1.Journey) (*RevisionData, error) {
	data := &RevisionData{Journey: *j.Spec.DeepCopy(), Pathways: map[string]*flowv1.PathwaySpec{}}
	var missing []string
	for _, entry := range j.Spec.Pathways {
		var found *flowv1.Pathway
		for _, p := range o.pathways {
			if p.Name == entry.PathwayRef && (p.Namespace == j.Namespace || p.Namespace == "" || j.Namespace == "") {
				found = p
			}
		}
		if found == nil {
			missing = append(missing, fmt.Sprintf("pathway %q: Pathway %q is not in the manifests", entry.Name, entry.PathwayRef))
			continue
		}
		data.Pathways[string(entry.Name)] = found.Spec.DeepCopy()
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("journey %s: %s", j.Name, strings.Join(missing, "; "))
	}
	return data, nil
}

// Compile turns revision data into the snapshot the Session controller runs, exactly as
// the controllers do, and returns the revision name.
func Compile(journey string, data *RevisionData) (*engine.Snapshot, string, error) {
	return revision.Build(journey, data)
}

// Pathway returns the resolved spec of the pathway with local name name, for tests that
// change a journey in memory before they run it.
func (c *Case) Pathway(name string) *flowv1.PathwaySpec {
	if c.Data == nil {
		return nil
	}
	return c.Data.Pathways[name]
}

// manifestsOf writes revision data as inline manifests: the Journey named journey and
// one Pathway per pathwayRef.
func manifestsOf(journey, namespace string, data *RevisionData) ([]Manifest, error) {
	var out []Manifest
	j := flowv1.Journey{Spec: data.Journey}
	j.APIVersion, j.Kind = flowv1.GroupVersion.String(), "Journey"
	j.Name, j.Namespace = journey, namespace
	raw, err := json.Marshal(struct {
		APIVersion string             `json:"apiVersion"`
		Kind       string             `json:"kind"`
		Metadata   map[string]string  `json:"metadata"`
		Spec       flowv1.JourneySpec `json:"spec"`
	}{j.APIVersion, j.Kind, meta(journey, namespace), j.Spec})
	if err != nil {
		return nil, err
	}
	out = append(out, Manifest{Object: raw})
	var done []string
	for _, e := range data.Journey.Pathways {
		if slices.Contains(done, e.PathwayRef) {
			continue
		}
		done = append(done, e.PathwayRef)
		spec := data.Pathways[string(e.Name)]
		if spec == nil {
			continue
		}
		raw, err := json.Marshal(struct {
			APIVersion string             `json:"apiVersion"`
			Kind       string             `json:"kind"`
			Metadata   map[string]string  `json:"metadata"`
			Spec       flowv1.PathwaySpec `json:"spec"`
		}{flowv1.GroupVersion.String(), "Pathway", meta(e.PathwayRef, namespace), *spec})
		if err != nil {
			return nil, err
		}
		out = append(out, Manifest{Object: raw})
	}
	return out, nil
}

func meta(name, namespace string) map[string]string {
	m := map[string]string{"name": name}
	if namespace != "" {
		m["namespace"] = namespace
	}
	return m
}
