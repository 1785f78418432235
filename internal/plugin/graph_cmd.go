package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/picture"
)

const graphExample = `  # Draw a Journey as Graphviz DOT
  kubectl journey graph healthcare-referral > journey.dot

  # As a Mermaid flowchart, for Markdown
  kubectl journey graph healthcare-referral --format mermaid

  # As an SVG picture, highlighting the pathway a Session is in
  kubectl journey graph --session patient-12345 --format svg > session.svg

  # As a PNG image
  kubectl journey graph healthcare-referral --format png > journey.png`

type graphOptions struct {
	*Options
	format  string
	session string
}

func newGraphCommand(o *Options) *cobra.Command {
	gro := &graphOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "graph [JOURNEY] [--session SESSION]",
		Short: "Draw a Journey's pathways and transitions",
		Long: `Draw a Journey and its Pathways as a graph, in Graphviz DOT (default), Mermaid, or as
an SVG or PNG picture.

Pathways are nodes: rounded boxes, hexagons for External executors, dashed for detours
(returnBehavior ReturnToPrevious); the entry pathway has a thick border and an arrow
from a start dot. Edges are styled by the rule they come from:
  next                  gray, dashed, labelled "next"
  outcome transitions   black, solid, labelled onSuccess/onFailure/... (and the action)
  decisions             orange, dotted, one edge per allowed destination
  global transitions    blue, bold, labelled with the transition's name; from "*" they
                        start at the "any pathway (*)" node
A decision or outcome with action Close goes to the "end" node.

--session fills the pathway the Session is in; JOURNEY defaults to the Session's
journey. The output is sorted, so the same Journey always draws the same text.
--format svg and png lay the DOT out with Graphviz built into the plugin (no dot
binary needed); kubectl journey dashboard shows the same pictures.`,
		Example: graphExample,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return fmt.Errorf("graph takes at most one JOURNEY (got %d arguments)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			journey := ""
			if len(args) == 1 {
				journey = args[0]
			}
			return gro.run(cmd.Context(), journey)
		},
	}
	cmd.Flags().StringVar(&gro.format, "format", "dot", "Output format: dot, mermaid, svg or png")
	cmd.Flags().StringVar(&gro.session, "session", "", "Highlight the pathway this Session is in")
	_ = cmd.RegisterFlagCompletionFunc("format", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"dot", "mermaid", "svg", "png"}, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func (gro *graphOptions) run(ctx context.Context, journey string) error {
	switch gro.format {
	case "dot", "mermaid", "svg", "png":
	default:
		return fmt.Errorf("--format %q is not supported; use dot, mermaid, svg or png", gro.format)
	}
	if journey == "" && gro.session == "" {
		return errors.New("name a JOURNEY, or a Session with --session")
	}
	ns, err := gro.namespace()
	if err != nil {
		return err
	}
	c, err := gro.NewClient()
	if err != nil {
		return err
	}
	current := ""
	if gro.session != "" {
		s, err := gro.getSession(ctx, c, types.NamespacedName{Namespace: ns, Name: gro.session})
		if err != nil {
			return err
		}
		if journey == "" {
			journey = s.Spec.JourneyRef.Name
		} else if journey != s.Spec.JourneyRef.Name {
			return fmt.Errorf("session/%s runs journey %s, not %s", gro.session, s.Spec.JourneyRef.Name, journey)
		}
		current = s.Status.CurrentPathway
	}
	j := &flowv1alpha1.Journey{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: journey}, j); err != nil {
		return fmt.Errorf("getting journey %q in namespace %q: %w", journey, ns, err)
	}
	pathways := map[string]flowv1alpha1.PathwaySpec{}
	var missing []string
	for _, p := range j.Spec.Pathways {
		pw := &flowv1alpha1.Pathway{}
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: p.PathwayRef}, pw)
		if apierrors.IsNotFound(err) {
			missing = append(missing, fmt.Sprintf("%s (pathwayRef %s)", p.Name, p.PathwayRef))
			continue
		}
		if err != nil {
			return fmt.Errorf("getting pathway %q in namespace %q: %w", p.PathwayRef, ns, err)
		}
		pathways[string(p.Name)] = pw.Spec
	}
	if len(missing) > 0 {
		fmt.Fprintf(gro.ErrOut, "warning: Pathway objects not found, drawn in red: %s\n", strings.Join(missing, ", "))
	}
	g := BuildGraph(j.Spec, pathways, current)
	g.Name = journey
	switch gro.format {
	case "mermaid":
		_, err = fmt.Fprint(gro.Out, g.Mermaid())
		return err
	case "svg", "png":
		pic, err := picture.Render(ctx, g.DOT(), picture.Format(gro.format), nil)
		if err != nil {
			return err
		}
		_, err = gro.Out.Write(pic)
		return err
	}
	_, err = fmt.Fprint(gro.Out, g.DOT())
	return err
}
