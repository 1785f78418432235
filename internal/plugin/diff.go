package plugin

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/journeyops/journey-operator/internal/journeytest"
	"github.com/journeyops/journey-operator/internal/revision"
)

func newDiffCommand(o *Options) *cobra.Command {
	var from, to string
	cmd := &cobra.Command{
		Use:   "diff --from R1 --to R2 DIR|FILE...",
		Short: "List the recorded Sessions that would behave otherwise on another journey revision",
		Long: `Replay recorded Sessions (journey tests written by kubectl journey record, or any
journey tests) on two revisions of their journey and list the Sessions whose path,
decisions or replies would change, each with the first step where the two replays
differ and what differs there.

The replays run offline with the recordings' own answers: no model and no tool
server is called. A step where one revision asks a model a question the recording
holds no answer to (a changed prompt, another pathway) is a difference: on that
revision a model would be asked something the Session was never asked.

A revision is either the name of a Journey revision in the cluster (the
ControllerRevisions that status.readyRevision and status.latestRevision of
kubectl get journey name, read in the current namespace), or a path: a manifest file,
or a directory of them, holding the Journey and its Pathways, as kubectl apply reads
them. A path needs no cluster.

The command exits non-zero when a Session changes or a recording cannot be replayed,
as kubectl diff does.`,
		Example: `  # Which recorded Sessions would an edit change, before it is applied
  kubectl journey diff --from healthcare-referral-8d3a5af22c --to edited/ recordings/

  # Compare the revision that serves with the latest one
  kubectl journey diff --from "$(kubectl get journey healthcare-referral -o jsonpath='{.status.readyRevision}')" \
    --to "$(kubectl get journey healthcare-referral -o jsonpath='{.status.latestRevision}')" recordings/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" || to == "" {
				return fmt.Errorf("--from and --to are required: a Journey revision name or a path of manifests each")
			}
			files, err := testFiles(args)
			if err != nil {
				return err
			}
			rf, err := diffRevision(cmd, o, "--from", from)
			if err != nil {
				return err
			}
			rt, err := diffRevision(cmd, o, "--to", to)
			if err != nil {
				return err
			}
			rep := journeytest.Diff(files, rf, rt)
			rep.Print(o.Out)
			changed, failed := len(rep.Changed()), len(rep.Errors())
			switch {
			case changed > 0:
				return fmt.Errorf("%d of %d recorded Sessions change from %s to %s", changed, len(rep.Sessions), from, to)
			case failed > 0:
				return fmt.Errorf("%d of %d recordings could not be replayed", failed, len(rep.Sessions))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "The revision the recordings are compared from: a Journey revision name, or a manifest file or directory")
	cmd.Flags().StringVar(&to, "to", "", "The revision the recordings are compared to: a Journey revision name, or a manifest file or directory")
	return cmd
}

// diffRevision reads the revision flag names: a path of manifests when one exists,
// else a ControllerRevision of a Journey in the namespace.
func diffRevision(cmd *cobra.Command, o *Options, flag, value string) (*journeytest.DiffRevision, error) {
	if _, err := os.Stat(value); err == nil || strings.ContainsRune(value, os.PathSeparator) {
		r, err := journeytest.ManifestRevision(value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		return r, nil
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	c, err := o.NewClient()
	if err != nil {
		return nil, err
	}
	var rev appsv1.ControllerRevision
	if err := c.Get(cmd.Context(), types.NamespacedName{Namespace: ns, Name: value}, &rev); err != nil {
		return nil, fmt.Errorf("%s: %q is no manifest path, and reading Journey revision %q in namespace %q: %w", flag, value, value, ns, err)
	}
	journey := rev.Labels[revision.LabelJourney]
	if journey == "" {
		return nil, fmt.Errorf("%s: ControllerRevision %q is not a Journey revision (it has no %s label)", flag, value, revision.LabelJourney)
	}
	r, err := journeytest.StoredRevision(journey, value, rev.Data.Raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return r, nil
}
