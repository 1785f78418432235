package plugin

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Node ids that are not pathways. Pathway local names are DNS labels, so these cannot
// collide with them.
const (
	// StartNode points at the entry pathway.
	StartNode = "(start)"
	// AnyNode is the source of global transitions whose from is "*".
	AnyNode = "*"
	// EndNode is where outcome transitions with action Close go.
	EndNode = "(end)"
)

// EdgeKind says which rule an edge comes from; each kind is drawn in its own style.
type EdgeKind string

const (
	// EdgeEntry goes from StartNode to the entry pathway.
	EdgeEntry EdgeKind = "entry"
	// EdgeNext is a pathway's default next pathway: gray, dashed.
	EdgeNext EdgeKind = "next"
	// EdgeOutcome is an outcome transition with a fixed destination (onSuccess: {to: x}):
	// black, solid.
	EdgeOutcome EdgeKind = "outcome"
	// EdgeDecision goes to one allowed destination of an outcome transition's decision:
	// orange, dotted.
	EdgeDecision EdgeKind = "decision"
	// EdgeGlobal is a global (Journey) transition: blue, bold.
	EdgeGlobal EdgeKind = "global"
)

var edgeKindOrder = map[EdgeKind]int{EdgeEntry: 0, EdgeNext: 1, EdgeOutcome: 2, EdgeDecision: 3, EdgeGlobal: 4}

// Node is a pathway, or one of StartNode, AnyNode and EndNode.
type Node struct {
	// ID is the pathway's local name, or StartNode, AnyNode or EndNode.
	ID string
	// Entry marks the journey's entryPathway.
	Entry bool
	// Detour marks a pathway with returnBehavior ReturnToPrevious.
	Detour bool
	// External marks a pathway run by an External executor.
	External bool
	// Current marks the pathway the highlighted Session is in.
	Current bool
	// Unresolved marks a declared pathway whose Pathway object was not found.
	Unresolved bool
	// Undeclared marks a name used by a rule but missing from the Journey's pathways.
	Undeclared bool
}

// Edge is one way to move between pathways.
type Edge struct {
	From, To string
	Kind     EdgeKind
	// Label names the rule: the global transition's name, on<Result> (with the action
	// when it is not Advance, and "(decision)" for decision edges), or "next".
	Label string
}

// Graph is a Journey's pathways and the rules between them, sorted: building the same
// Journey twice gives the same Graph, so rendered pictures can be committed and diffed.
type Graph struct {
	// Name titles the drawing (the Journey's name).
	Name  string
	Nodes []Node
	Edges []Edge
}

// BuildGraph builds the graph of a Journey: its spec, the specs of its pathways by local
// name (a declared pathway missing from the map is drawn as unresolved), and the
// pathway to highlight (empty for none). It reads no cluster and no clock.
func BuildGraph(journey flowv1alpha1.JourneySpec, pathways map[string]flowv1alpha1.PathwaySpec, current string) Graph {
	nodes := map[string]*Node{}
	for _, p := range journey.Pathways {
		name := string(p.Name)
		n := &Node{ID: name, Entry: p.Name == journey.EntryPathway}
		spec, ok := pathways[name]
		if !ok {
			n.Unresolved = true
		} else {
			n.Detour = spec.IsDetour()
			n.External = spec.IsExternal()
		}
		nodes[name] = n
	}
	node := func(id string) {
		if _, ok := nodes[id]; !ok {
			nodes[id] = &Node{ID: id, Undeclared: id != StartNode && id != AnyNode && id != EndNode}
		}
	}

	seen := map[Edge]bool{}
	var edges []Edge
	add := func(from, to string, kind EdgeKind, label string) {
		node(from)
		node(to)
		e := Edge{From: from, To: to, Kind: kind, Label: label}
		if !seen[e] {
			seen[e] = true
			edges = append(edges, e)
		}
	}

	if journey.EntryPathway != "" {
		add(StartNode, string(journey.EntryPathway), EdgeEntry, "")
	}
	for _, t := range journey.Transitions {
		from := t.From
		if from == "" {
			from = AnyNode
		}
		add(from, t.To, EdgeGlobal, string(t.Name))
	}
	for _, p := range journey.Pathways {
		from := string(p.Name)
		spec, ok := pathways[from]
		if !ok {
			continue
		}
		if spec.Next != "" {
			add(from, string(spec.Next), EdgeNext, "next")
		}
		outcomeEdges(from, spec.Transitions, add)
	}
	if current != "" {
		node(current)
		nodes[current].Current = true
	}

	g := Graph{}
	for _, n := range nodes {
		g.Nodes = append(g.Nodes, *n)
	}
	slices.SortFunc(g.Nodes, func(a, b Node) int {
		if c := cmp.Compare(nodeRank(a.ID), nodeRank(b.ID)); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	g.Edges = edges
	slices.SortFunc(g.Edges, func(a, b Edge) int {
		return cmp.Or(
			cmp.Compare(nodeRank(a.From), nodeRank(b.From)),
			cmp.Compare(a.From, b.From),
			cmp.Compare(edgeKindOrder[a.Kind], edgeKindOrder[b.Kind]),
			cmp.Compare(a.To, b.To),
			cmp.Compare(a.Label, b.Label),
		)
	})
	return g
}

// outcomeEdges adds the edges of a pathway's outcome transitions: to a fixed
// destination, to each allowed destination of a decision, or to EndNode for Close.
func outcomeEdges(from string, tr *flowv1alpha1.OutcomeTransitions, add func(from, to string, kind EdgeKind, label string)) {
	for name, t := range tr.All() {
		switch {
		case t.Decision != nil:
			label := name + " (decision)"
			if a := cmp.Or(t.Decision.Action, t.Action); a != "" && a != flowv1alpha1.ActionAdvance {
				label = fmt.Sprintf("%s (decision, %s)", name, a)
			}
			for _, d := range t.Decision.AllowedDestinations {
				add(from, string(d), EdgeDecision, label)
			}
		case t.To != "":
			add(from, string(t.To), EdgeOutcome, withAction(name, t.Action))
		case t.Action == flowv1alpha1.ActionClose:
			add(from, EndNode, EdgeOutcome, withAction(name, t.Action))
		}
	}
}

func withAction(label string, a flowv1alpha1.Action) string {
	if a == "" || a == flowv1alpha1.ActionAdvance {
		return label
	}
	return fmt.Sprintf("%s (%s)", label, a)
}

// nodeRank puts StartNode and AnyNode before the pathways and EndNode after them.
func nodeRank(id string) int {
	switch id {
	case StartNode:
		return 0
	case AnyNode:
		return 1
	case EndNode:
		return 3
	}
	return 2
}

// Colors of the edge kinds and the highlighted pathway, shared by both formats.
const (
	colorNext     = "#6b7280"
	colorDecision = "#d97706"
	colorGlobal   = "#2563eb"
	colorCurrent  = "#fde68a"
	colorMissing  = "#dc2626"
)

// DOT renders the graph in Graphviz's language: left to right, pathways as rounded
// boxes (External ones as hexagons, detours dashed, the entry with a thick border and an
// arrow from a start dot, the current one filled); next edges gray and dashed, outcome
// edges black, decision edges orange and dotted, global transitions blue and bold, from
// an "any pathway" node when their from is "*".
func (g Graph) DOT() string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", dotID(cmp.Or(g.Name, "journey")))
	b.WriteString("  rankdir=LR;\n")
	b.WriteString("  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n")
	b.WriteString("  edge [fontname=\"Helvetica\", fontsize=10];\n")
	for _, n := range g.Nodes {
		fmt.Fprintf(&b, "  %s [%s];\n", dotID(n.ID), strings.Join(dotNodeAttrs(n), ", "))
	}
	for _, e := range g.Edges {
		attrs := dotEdgeAttrs(e)
		if len(attrs) == 0 {
			fmt.Fprintf(&b, "  %s -> %s;\n", dotID(e.From), dotID(e.To))
			continue
		}
		fmt.Fprintf(&b, "  %s -> %s [%s];\n", dotID(e.From), dotID(e.To), strings.Join(attrs, ", "))
	}
	b.WriteString("}\n")
	return b.String()
}

func dotNodeAttrs(n Node) []string {
	switch n.ID {
	case StartNode:
		return []string{"shape=point", "width=0.15"}
	case AnyNode:
		return []string{`label="any pathway (*)"`, "shape=plaintext", dotAttr("fontcolor", colorGlobal)}
	case EndNode:
		return []string{`label="end"`, "shape=doublecircle", "width=0.3"}
	}
	label := n.ID
	switch {
	case n.Unresolved:
		label += `\n(Pathway not found)`
	case n.Undeclared:
		label += `\n(not in journey)`
	}
	attrs := []string{`label="` + dotEscape(label) + `"`}
	if n.External {
		attrs = append(attrs, "shape=hexagon")
	}
	style := []string{"rounded"}
	if n.Detour {
		style = append(style, "dashed")
	}
	if n.Current {
		style = append(style, "filled")
		attrs = append(attrs, dotAttr("fillcolor", colorCurrent))
	}
	if len(style) > 1 {
		attrs = append(attrs, dotAttr("style", strings.Join(style, ",")))
	}
	if n.Entry {
		attrs = append(attrs, "penwidth=2")
	}
	if n.Unresolved || n.Undeclared {
		attrs = append(attrs, dotAttr("color", colorMissing), dotAttr("fontcolor", colorMissing))
	}
	return attrs
}

func dotEdgeAttrs(e Edge) []string {
	var attrs []string
	if e.Label != "" {
		attrs = append(attrs, dotAttr("label", e.Label))
	}
	switch e.Kind {
	case EdgeNext:
		attrs = append(attrs, "style=dashed", dotAttr("color", colorNext), dotAttr("fontcolor", colorNext))
	case EdgeDecision:
		attrs = append(attrs, "style=dotted", dotAttr("color", colorDecision), dotAttr("fontcolor", colorDecision))
	case EdgeGlobal:
		attrs = append(attrs, "style=bold", dotAttr("color", colorGlobal), dotAttr("fontcolor", colorGlobal))
	}
	return attrs
}

func dotAttr(k, v string) string { return k + `="` + dotEscape(v) + `"` }

func dotID(id string) string { return `"` + dotEscape(id) + `"` }

// dotEscape escapes a DOT string; a `\n` already in s is kept as DOT's line break.
func dotEscape(s string) string {
	return strings.NewReplacer(`"`, `\"`, "\n", `\n`).Replace(s)
}

// Mermaid renders the graph as a Mermaid flowchart (left to right) with the same
// conventions as DOT: rounded pathways, External ones as hexagons, classes entry,
// detour, current and missing; next edges gray and dashed, outcome edges solid, decision
// edges dotted and orange, global transitions thick and blue.
func (g Graph) Mermaid() string {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	if g.Name != "" {
		fmt.Fprintf(&b, "  %%%% journey %s\n", oneLine(g.Name))
	}
	classes := map[string][]string{}
	for _, n := range g.Nodes {
		id := mermaidID(n.ID)
		switch n.ID {
		case StartNode:
			fmt.Fprintf(&b, "  %s((start))\n", id)
			continue
		case AnyNode:
			fmt.Fprintf(&b, "  %s([\"any pathway (*)\"])\n", id)
			continue
		case EndNode:
			fmt.Fprintf(&b, "  %s(((end)))\n", id)
			continue
		}
		label := n.ID
		switch {
		case n.Unresolved:
			label += "<br/>(Pathway not found)"
		case n.Undeclared:
			label += "<br/>(not in journey)"
		}
		if n.External {
			fmt.Fprintf(&b, "  %s{{\"%s\"}}\n", id, mermaidEscape(label))
		} else {
			fmt.Fprintf(&b, "  %s(\"%s\")\n", id, mermaidEscape(label))
		}
		for cls, on := range map[string]bool{"entry": n.Entry, "detour": n.Detour, "current": n.Current, "missing": n.Unresolved || n.Undeclared} {
			if on {
				classes[cls] = append(classes[cls], id)
			}
		}
	}
	styles := map[EdgeKind][]string{}
	for i, e := range g.Edges {
		arrow := "-->"
		switch e.Kind {
		case EdgeDecision:
			arrow = "-.->"
		case EdgeGlobal:
			arrow = "==>"
		}
		if e.Label == "" {
			fmt.Fprintf(&b, "  %s %s %s\n", mermaidID(e.From), arrow, mermaidID(e.To))
		} else {
			fmt.Fprintf(&b, "  %s %s|\"%s\"| %s\n", mermaidID(e.From), arrow, mermaidEscape(e.Label), mermaidID(e.To))
		}
		styles[e.Kind] = append(styles[e.Kind], fmt.Sprint(i))
	}
	b.WriteString("  classDef entry stroke-width:3px\n")
	b.WriteString("  classDef detour stroke-dasharray:5 5\n")
	fmt.Fprintf(&b, "  classDef current fill:%s\n", colorCurrent)
	fmt.Fprintf(&b, "  classDef missing stroke:%s,color:%s\n", colorMissing, colorMissing)
	for _, cls := range []string{"entry", "detour", "current", "missing"} {
		if ids := classes[cls]; len(ids) > 0 {
			fmt.Fprintf(&b, "  class %s %s\n", strings.Join(ids, ","), cls)
		}
	}
	for _, k := range []EdgeKind{EdgeNext, EdgeDecision, EdgeGlobal} {
		idx := styles[k]
		if len(idx) == 0 {
			continue
		}
		style := map[EdgeKind]string{
			EdgeNext:     "stroke:" + colorNext + ",stroke-dasharray:4 4,color:" + colorNext,
			EdgeDecision: "stroke:" + colorDecision + ",color:" + colorDecision,
			EdgeGlobal:   "stroke:" + colorGlobal + ",color:" + colorGlobal,
		}[k]
		fmt.Fprintf(&b, "  linkStyle %s %s\n", strings.Join(idx, ","), style)
	}
	return b.String()
}

// mermaidID maps node ids to Mermaid ids: pathways get a p_ prefix (so "end" and other
// keywords stay usable) with '-' as '_' (pathway names have no '_', so this is 1:1).
func mermaidID(id string) string {
	switch id {
	case StartNode:
		return "start"
	case AnyNode:
		return "any"
	case EndNode:
		return "done"
	}
	return "p_" + strings.ReplaceAll(id, "-", "_")
}

func mermaidEscape(s string) string {
	return strings.NewReplacer(`"`, "#quot;", "\n", "<br/>").Replace(s)
}
