package plugin

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// sampleJourney is a small journey with every kind of node and edge: an entry with a
// next, a global "*" detour, a pathway-scoped global transition, outcome transitions
// with actions, decisions, an External pathway that can close the journey.
func sampleJourney() (flowv1alpha1.JourneySpec, map[string]flowv1alpha1.PathwaySpec) {
	j := flowv1alpha1.JourneySpec{
		EntryPathway: "intake",
		Pathways: []flowv1alpha1.PathwayEntry{
			{Name: "intake", PathwayRef: "intake"},
			{Name: "booking", PathwayRef: "booking-v2"},
			{Name: "faq", PathwayRef: "faq"},
			{Name: "test", PathwayRef: "test"},
			{Name: "escalation", PathwayRef: "escalation"},
		},
		Transitions: []flowv1alpha1.GlobalTransition{
			{Name: "reject-doctor", From: "booking", To: "booking", Trigger: flowv1alpha1.Trigger{Condition: "true"}},
			{Name: "faq-detour", From: "*", To: "faq", Priority: 10, Trigger: flowv1alpha1.Trigger{Intent: &flowv1alpha1.IntentTrigger{Patterns: []string{"what is"}}}},
		},
	}
	decision := func(dests ...flowv1alpha1.Name) *flowv1alpha1.OutcomeTransition {
		return &flowv1alpha1.OutcomeTransition{Decision: &flowv1alpha1.Decision{AllowedDestinations: dests}}
	}
	p := map[string]flowv1alpha1.PathwaySpec{
		"intake": {Next: "booking"},
		"booking": {Transitions: &flowv1alpha1.OutcomeTransitions{
			OnSuccess:        &flowv1alpha1.OutcomeTransition{To: "test"},
			OnFailure:        &flowv1alpha1.OutcomeTransition{To: "booking", Action: flowv1alpha1.ActionJumpBack},
			OnPartialSuccess: decision("escalation", "booking"),
		}},
		"faq": {ReturnBehavior: &flowv1alpha1.ReturnBehavior{Type: flowv1alpha1.ReturnToPrevious}},
		"test": {Executor: flowv1alpha1.ExecutorExternal, Transitions: &flowv1alpha1.OutcomeTransitions{
			OnSuccess: &flowv1alpha1.OutcomeTransition{Action: flowv1alpha1.ActionClose},
			OnUnclear: decision("escalation"),
		}},
		"escalation": {},
	}
	return j, p
}

const wantDOT = `digraph "referral" {
  rankdir=LR;
  node [shape=box, style=rounded, fontname="Helvetica"];
  edge [fontname="Helvetica", fontsize=10];
  "(start)" [shape=point, width=0.15];
  "*" [label="any pathway (*)", shape=plaintext, fontcolor="#2563eb"];
  "booking" [label="booking", fillcolor="#fde68a", style="rounded,filled"];
  "escalation" [label="escalation"];
  "faq" [label="faq", style="rounded,dashed"];
  "intake" [label="intake", penwidth=2];
  "test" [label="test", shape=hexagon];
  "(end)" [label="end", shape=doublecircle, width=0.3];
  "(start)" -> "intake";
  "*" -> "faq" [label="faq-detour", style=bold, color="#2563eb", fontcolor="#2563eb"];
  "booking" -> "booking" [label="onFailure (JumpBack)"];
  "booking" -> "test" [label="onSuccess"];
  "booking" -> "booking" [label="onPartialSuccess (decision)", style=dotted, color="#d97706", fontcolor="#d97706"];
  "booking" -> "escalation" [label="onPartialSuccess (decision)", style=dotted, color="#d97706", fontcolor="#d97706"];
  "booking" -> "booking" [label="reject-doctor", style=bold, color="#2563eb", fontcolor="#2563eb"];
  "intake" -> "booking" [label="next", style=dashed, color="#6b7280", fontcolor="#6b7280"];
  "test" -> "(end)" [label="onSuccess (Close)"];
  "test" -> "escalation" [label="onUnclear (decision)", style=dotted, color="#d97706", fontcolor="#d97706"];
}
`

const wantMermaid = `flowchart LR
  %% journey referral
  start((start))
  any(["any pathway (*)"])
  p_booking("booking")
  p_escalation("escalation")
  p_faq("faq")
  p_intake("intake")
  p_test{{"test"}}
  done(((end)))
  start --> p_intake
  any ==>|"faq-detour"| p_faq
  p_booking -->|"onFailure (JumpBack)"| p_booking
  p_booking -->|"onSuccess"| p_test
  p_booking -.->|"onPartialSuccess (decision)"| p_booking
  p_booking -.->|"onPartialSuccess (decision)"| p_escalation
  p_booking ==>|"reject-doctor"| p_booking
  p_intake -->|"next"| p_booking
  p_test -->|"onSuccess (Close)"| done
  p_test -.->|"onUnclear (decision)"| p_escalation
  classDef entry stroke-width:3px
  classDef detour stroke-dasharray:5 5
  classDef current fill:#fde68a
  classDef missing stroke:#dc2626,color:#dc2626
  class p_intake entry
  class p_faq detour
  class p_booking current
  linkStyle 7 stroke:#6b7280,stroke-dasharray:4 4,color:#6b7280
  linkStyle 4,5,9 stroke:#d97706,color:#d97706
  linkStyle 1,6 stroke:#2563eb,color:#2563eb
`

func TestGraphDOTGolden(t *testing.T) {
	j, p := sampleJourney()
	g := BuildGraph(j, p, "booking")
	g.Name = "referral"
	if got := g.DOT(); got != wantDOT {
		t.Errorf("DOT output differs:\n%s", lineDiff(wantDOT, got))
	}
}

func TestGraphMermaidGolden(t *testing.T) {
	j, p := sampleJourney()
	g := BuildGraph(j, p, "booking")
	g.Name = "referral"
	if got := g.Mermaid(); got != wantMermaid {
		t.Errorf("Mermaid output differs:\n%s", lineDiff(wantMermaid, got))
	}
}

// The drawing must not depend on declaration order, so committed pictures stay stable.
func TestGraphIsDeterministic(t *testing.T) {
	j, p := sampleJourney()
	want := BuildGraph(j, p, "").DOT()
	for i := range 20 {
		j2 := *j.DeepCopy()
		// rotate pathways and transitions
		r := i % len(j2.Pathways)
		j2.Pathways = append(j2.Pathways[r:], j2.Pathways[:r]...)
		if i%2 == 1 {
			j2.Transitions[0], j2.Transitions[1] = j2.Transitions[1], j2.Transitions[0]
		}
		if got := BuildGraph(j2, p, "").DOT(); got != want {
			t.Fatalf("order %d draws differently:\n%s", i, lineDiff(want, got))
		}
	}
}

func TestGraphMarksMissingPathways(t *testing.T) {
	j, p := sampleJourney()
	delete(p, "escalation")
	j.Transitions = append(j.Transitions, flowv1alpha1.GlobalTransition{Name: "lost", From: "*", To: "nowhere"})
	g := BuildGraph(j, p, "")
	var unresolved, undeclared []string
	for _, n := range g.Nodes {
		if n.Unresolved {
			unresolved = append(unresolved, n.ID)
		}
		if n.Undeclared {
			undeclared = append(undeclared, n.ID)
		}
	}
	if strings.Join(unresolved, ",") != "escalation" || strings.Join(undeclared, ",") != "nowhere" {
		t.Fatalf("unresolved %v, undeclared %v; want [escalation] and [nowhere]", unresolved, undeclared)
	}
	dot := g.DOT()
	for _, want := range []string{
		`"escalation" [label="escalation\n(Pathway not found)", color="#dc2626", fontcolor="#dc2626"];`,
		`"nowhere" [label="nowhere\n(not in journey)", color="#dc2626", fontcolor="#dc2626"];`,
	} {
		if !strings.Contains(dot, want) {
			t.Errorf("DOT lacks %s:\n%s", want, dot)
		}
	}
}

func TestGraphUnknownFormat(t *testing.T) {
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut})
	called := false
	o.NewClient = func() (client.WithWatch, error) { called = true; return nil, errors.New("no cluster in this test") }
	cmd := NewCommandWithOptions(o)
	cmd.SetArgs([]string{"graph", "referral", "--format", "jpeg"})
	err := cmd.Execute()
	if err == nil || err.Error() != `--format "jpeg" is not supported; use dot, mermaid, svg or png` {
		t.Fatalf("got error %v", err)
	}
	if called {
		t.Error("the cluster was contacted although the format is unknown")
	}
}

// lineDiff shows the first differing line of two texts.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl + "\nfull output:\n" + got
		}
	}
	return "(equal)"
}
