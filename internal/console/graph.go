package console

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/picture"
)

// journeyObjects is a Journey with the specs of its pathways by local name.
type journeyObjects struct {
	journey  *flowv1alpha1.Journey
	pathways map[string]flowv1alpha1.PathwaySpec
	// missing lists declared pathways whose Pathway object was not found.
	missing []string
}

// loadJourney reads a Journey and its Pathways as the caller.
func (s *Server) loadJourney(ctx context.Context, key types.NamespacedName) (*journeyObjects, error) {
	j := &flowv1alpha1.Journey{}
	if err := s.client.Get(ctx, key, j); err != nil {
		return nil, err
	}
	var list flowv1alpha1.PathwayList
	if err := s.client.List(ctx, &list, client.InNamespace(key.Namespace)); err != nil {
		return nil, err
	}
	return journeyWithPathways(j, list.Items), nil
}

func journeyWithPathways(j *flowv1alpha1.Journey, all []flowv1alpha1.Pathway) *journeyObjects {
	byName := map[string]flowv1alpha1.PathwaySpec{}
	for _, p := range all {
		if p.Namespace == j.Namespace {
			byName[p.Name] = p.Spec
		}
	}
	jo := &journeyObjects{journey: j, pathways: map[string]flowv1alpha1.PathwaySpec{}}
	for _, e := range j.Spec.Pathways {
		spec, ok := byName[e.PathwayRef]
		if !ok {
			jo.missing = append(jo.missing, fmt.Sprintf("%s (Pathway %s not found)", e.Name, e.PathwayRef))
			continue
		}
		jo.pathways[string(e.Name)] = spec
	}
	return jo
}

// marks are what a picture shows on top of the Journey's graph.
type marks struct {
	// counts are the Sessions in each pathway, written under its name.
	counts map[string]int
	// path is a Session's transitions, oldest first: visited pathways are drawn bold
	// and marked "visited", the edges taken are bold and numbered in order.
	path []flowv1alpha1.HistoryEntry
	// current is the pathway the Session is in, marked "current".
	current string
}

// draw renders the Journey as an inline SVG element with a text label for screen
// readers.
func (s *Server) draw(ctx context.Context, jo *journeyObjects, m marks, label string) (template.HTML, error) {
	dot := s.opts.DOT(jo.journey.Spec, jo.pathways, m.current)
	svg, err := picture.Render(ctx, dot, picture.SVG, m.annotate)
	if err != nil {
		return "", err
	}
	if i := bytes.Index(svg, []byte("<svg")); i >= 0 {
		svg = svg[i:]
	}
	attrs := fmt.Sprintf(`<svg role="img" aria-label="%s" class="graph"`, template.HTMLEscapeString(label))
	svg = bytes.Replace(svg, []byte("<svg"), []byte(attrs), 1)
	return template.HTML(svg), nil //nolint:gosec // Graphviz escapes every label it writes.
}

// annotate applies the marks to the parsed graph: element ids (pw-<pathway>) for
// pathways, counts, and the Session's path.
func (m marks) annotate(g *picture.Graph) error {
	edges, err := edgesOf(g)
	if err != nil {
		return err
	}
	visited := map[string]bool{}
	steps := map[[2]string][]string{}
	for i, h := range m.path {
		visited[h.From], visited[h.To] = true, true
		k := [2]string{h.From, h.To}
		if !edges[k] {
			// A global transition is drawn from the "any pathway" node.
			k = [2]string{"*", h.To}
		}
		steps[k] = append(steps[k], strconv.Itoa(i+1))
	}
	for n, err := g.FirstNode(); n != nil && err == nil; n, err = g.NextNode(n) {
		name, err := n.Name()
		if err != nil {
			return err
		}
		if name != "(start)" && name != "*" && name != "(end)" {
			if err := m.annotateNode(n, name, visited[name]); err != nil {
				return err
			}
		}
		for e, err := g.FirstOut(n); e != nil && err == nil; e, err = g.NextOut(e) {
			head, err := e.Head()
			if err != nil {
				return err
			}
			to, _ := head.Name()
			if nums := steps[[2]string{name, to}]; len(nums) > 0 {
				label := "step " + strings.Join(nums, ", ")
				if l := e.GetStr("label"); l != "" {
					label += ": " + l
				}
				if err := setAll(e.SafeSet, "label", label, "penwidth", "3", "class", "taken"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// edgesOf lists the graph's edges as (from, to) node names.
func edgesOf(g *picture.Graph) (map[[2]string]bool, error) {
	edges := map[[2]string]bool{}
	for n, err := g.FirstNode(); n != nil && err == nil; n, err = g.NextNode(n) {
		from, err := n.Name()
		if err != nil {
			return nil, err
		}
		for e, err := g.FirstOut(n); e != nil && err == nil; e, err = g.NextOut(e) {
			head, err := e.Head()
			if err != nil {
				return nil, err
			}
			to, _ := head.Name()
			edges[[2]string{from, to}] = true
		}
	}
	return edges, nil
}

func (m marks) annotateNode(n *picture.Node, name string, visited bool) error {
	label := n.GetStr("label")
	if label == "" || label == `\N` {
		label = name
	}
	var classes []string
	if c, ok := m.counts[name]; ok && c > 0 {
		label += `\n` + plural(c, "session")
		classes = append(classes, "busy")
	}
	switch {
	case name == m.current && m.path != nil:
		label += `\n(current)`
		classes = append(classes, "current")
	case visited:
		label += `\n(visited)`
		classes = append(classes, "visited")
	}
	attrs := []string{"label", label, "id", "pw-" + name}
	if visited || name == m.current && m.path != nil {
		attrs = append(attrs, "penwidth", "3")
	}
	if len(classes) > 0 {
		attrs = append(attrs, "class", strings.Join(classes, " "))
	}
	return setAll(n.SafeSet, attrs...)
}

func setAll(set func(name, value, def string) error, kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if err := set(kv[i], kv[i+1], ""); err != nil {
			return fmt.Errorf("setting %s: %w", kv[i], err)
		}
	}
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// pathwayNames are the Journey's declared pathways in order.
func pathwayNames(j *flowv1alpha1.Journey) []string {
	var names []string
	for _, p := range j.Spec.Pathways {
		names = append(names, string(p.Name))
	}
	return slices.Clip(names)
}
