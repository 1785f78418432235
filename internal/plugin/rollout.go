package plugin

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// newRolloutCommand is kubectl journey rollout status|promote|abort JOURNEY.
func newRolloutCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout status|promote|abort JOURNEY",
		Short: "Show, promote or abort the canary of a Journey with spec.rollout",
		Long: `A Journey with spec.rollout starts each new valid revision as a canary: a share of
new Sessions start on it, step by step, while the stable revision serves the others,
until it is promoted or aborted (docs/operations.md, "Rolling out a change").

status shows the stable and canary revisions, the step and weight, the Sessions each
revision counts and why the canary was promoted or aborted. promote makes the canary
the stable revision now (also an aborted canary, while no newer revision replaced it);
abort sends every new Session back to the stable revision (the canary's running
Sessions stay on it). Both annotate the Journey with the canary revision they are
about, and the Journey controller acts on it once.`,
		Example: `  # Where is the canary, and how do its Sessions do?
  kubectl journey rollout status healthcare-referral

  # Promote it now, or abort it
  kubectl journey rollout promote healthcare-referral
  kubectl journey rollout abort healthcare-referral`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		&cobra.Command{
			Use: "status JOURNEY", Short: "Show a Journey's stable and canary revisions and their counts",
			Example: "  kubectl journey rollout status healthcare-referral",
			Args:    exactArgs(1, "JOURNEY"),
			RunE: func(cmd *cobra.Command, args []string) error {
				_, j, err := getJourney(cmd, o, args[0])
				if err != nil {
					return err
				}
				printRollout(o, j)
				return nil
			},
		},
		rolloutActionCommand(o, "promote", flowv1alpha1.AnnotationRolloutPromote),
		rolloutActionCommand(o, "abort", flowv1alpha1.AnnotationRolloutAbort),
	)
	return cmd
}

func rolloutActionCommand(o *Options, verb, annotation string) *cobra.Command {
	short := "Make a Journey's canary revision the stable one now"
	if verb == "abort" {
		short = "Abort a Journey's canary: new Sessions start on the stable revision"
	}
	return &cobra.Command{
		Use: verb + " JOURNEY", Short: short,
		Example: fmt.Sprintf("  kubectl journey rollout %s healthcare-referral", verb),
		Args:    exactArgs(1, "JOURNEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, j, err := getJourney(cmd, o, args[0])
			if err != nil {
				return err
			}
			rev := j.Status.CanaryRevision
			if rev == "" && verb == "promote" {
				if r := j.Status.Rollout; r != nil && r.Phase == flowv1alpha1.RolloutAborted && r.Revision == j.Status.ReadyRevision {
					rev = r.Revision
				}
			}
			if rev == "" {
				return fmt.Errorf("journey %q has no canary to %s: status.canaryRevision is empty (see kubectl journey rollout status %s)", j.Name, verb, j.Name)
			}
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotation: rev}}})
			if err := c.Patch(cmd.Context(), j, client.RawPatch(types.MergePatchType, patch)); err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "journey/%s: %s of canary %s requested\n", j.Name, verb, rev)
			return nil
		},
	}
}

func getJourney(cmd *cobra.Command, o *Options, name string) (client.Client, *flowv1alpha1.Journey, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, nil, err
	}
	c, err := o.NewClient()
	if err != nil {
		return nil, nil, err
	}
	j := &flowv1alpha1.Journey{}
	key := types.NamespacedName{Namespace: ns, Name: strings.TrimPrefix(name, "journey/")}
	if err := c.Get(cmd.Context(), key, j); err != nil {
		return nil, nil, fmt.Errorf("getting journey %s: %w", describeKey(key), err)
	}
	return c, j, nil
}

func printRollout(o *Options, j *flowv1alpha1.Journey) {
	st := &j.Status
	tw := tabwriter.NewWriter(o.Out, 0, 8, 2, ' ', 0)
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	fmt.Fprintf(tw, "Journey:\t%s\n", j.Name)
	if j.Spec.Rollout == nil {
		fmt.Fprintf(tw, "Rollout:\tnone (spec.rollout is not set: revision %s serves every new Session)\n", dash(st.ReadyRevision))
		tw.Flush()
		return
	}
	fmt.Fprintf(tw, "Stable:\t%s\n", dash(st.StableRevision))
	fmt.Fprintf(tw, "Canary:\t%s\n", dash(st.CanaryRevision))
	if r := st.Rollout; r != nil {
		fmt.Fprintf(tw, "Phase:\t%s (revision %s)\n", r.Phase, r.Revision)
		fmt.Fprintf(tw, "Step:\t%d of %d, weight %d%%\n", r.Step+1, len(j.Spec.Rollout.Canary.Steps), r.Weight)
		if r.Message != "" {
			fmt.Fprintf(tw, "Message:\t%s\n", r.Message)
		}
		tw.Flush()
		fmt.Fprintln(o.Out)
		tw = tabwriter.NewWriter(o.Out, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "REVISION\tSTARTED\tFINISHED\tCOMPLETED\tFAILED\tESCALATED\tTURNS\tCOST USD")
		row := func(which, rev string, c flowv1alpha1.RevisionCounts) {
			fmt.Fprintf(tw, "%s %s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", which, dash(rev), c.Started, c.Finished, c.Completed, c.Failed, c.Escalated, c.Turns, dash(c.CostUSD))
		}
		// After a promotion the stable revision is the canary: the stable counts are
		// of the revision the canary was compared with.
		row("stable", cmp.Or(r.StableRevision, st.StableRevision), r.Counts.Stable)
		row("canary", r.Revision, r.Counts.Canary)
	}
	if c := apimeta.FindStatusCondition(st.Conditions, flowv1alpha1.ConditionCanary); c != nil {
		tw.Flush()
		fmt.Fprintln(o.Out)
		tw = tabwriter.NewWriter(o.Out, 0, 8, 2, ' ', 0)
		fmt.Fprintf(tw, "Canary condition:\t%s, %s: %s\n", c.Status, c.Reason, c.Message)
	}
	tw.Flush()
}
