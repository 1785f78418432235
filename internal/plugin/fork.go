package plugin

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/rebuild"
	"github.com/journeyops/journey-operator/internal/revision"
	"github.com/journeyops/journey-operator/internal/revision/revdata"
)

const forkExample = `  # Try what a Session would have done from step 4 on, on the journey's ready revision
  kubectl journey fork patient-12345 --at-step 4 --revision healthcare-referral-7c9d5f6b8 --name patient-12345-try

  # Fork it with another model for its triage agent (a revision of its own is made)
  kubectl journey fork patient-12345 --at-step 4 --agent triage=gpt-4o`

// forkOptions are the flags of fork.
type forkOptions struct {
	*Options
	step     int64
	revision string
	agents   []string
	name     string
}

func newForkCommand(o *Options) *cobra.Command {
	fo := &forkOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "fork SESSION --at-step N [--revision REVISION] [--agent NAME=MODEL] [--name NEW]",
		Short: "Make a new Session that starts where another one was after a step",
		Long: `Create a new Session (spec.forkOf) whose status is the source Session's as it was
after step N ('kubectl journey history -o wide' shows the steps): the controller
rebuilds it from the source's journal through the engine, offline, with no model or
tool call; tool calls the source made by then are records of the fork, never sent
again. From step N on the fork runs live, on --revision (the source's revision when
not given). When the source's steps up to N replay differently on that revision, the
fork's ForkDiverged condition names the first one and the field. The source Session
is only read.

The fork carries the source's messages and External outcomes up to step N (send it new
ones with kubectl journey say); the source's approvals and interventions are part of
its rebuilt status, not of the fork's spec. --agent NAME=MODEL runs the fork with
another model for an agent: a revision of the journey with that change is created
(named by its content, like the controller's) and the fork runs on it.`,
		Example: forkExample,
		Args:    exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return fo.run(cmd.Context(), args[0])
		},
	}
	cmd.Flags().Int64Var(&fo.step, "at-step", 0, "The source's step the fork starts after (required)")
	cmd.Flags().StringVar(&fo.revision, "revision", "", "The Journey revision the fork runs on (default: the source's)")
	cmd.Flags().StringArrayVar(&fo.agents, "agent", nil, "NAME=MODEL: run the fork with MODEL for agent NAME (repeatable)")
	cmd.Flags().StringVar(&fo.name, "name", "", "The fork's name (default: SESSION-fork-<random>)")
	_ = cmd.MarkFlagRequired("at-step")
	return cmd
}

func (fo *forkOptions) run(ctx context.Context, name string) error {
	if fo.step < 1 {
		return fmt.Errorf("--at-step must be 1 or more, got %d", fo.step)
	}
	models, err := parseAgentModels(fo.agents)
	if err != nil {
		return err
	}
	key, err := fo.sessionKey(name)
	if err != nil {
		return err
	}
	c, err := fo.clientFromFlags()
	if err != nil {
		return err
	}
	src, err := fo.getSession(ctx, c, key)
	if err != nil {
		return err
	}
	f, err := Fork(ctx, c, src, ForkRequest{Step: fo.step, Revision: fo.revision, Models: models, Name: fo.name})
	if err != nil {
		return err
	}
	fmt.Fprintf(fo.Out, "session/%s created: a fork of session/%s after step %d, on revision %s\n", f.Session.Name, src.Name, fo.step, f.Revision)
	if f.Check != nil && !f.Check.Reproduces {
		fmt.Fprintf(fo.Out, "ForkDiverged: %s\n", f.Check)
	}
	return nil
}

// parseAgentModels reads NAME=MODEL flags.
func parseAgentModels(flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, a := range flags {
		n, m, ok := strings.Cut(a, "=")
		if !ok || n == "" || m == "" {
			return nil, fmt.Errorf("--agent %q: want NAME=MODEL", a)
		}
		out[n] = m
	}
	return out, nil
}

// ForkRequest is what a fork starts from and runs on.
type ForkRequest struct {
	// Step is the source's step the fork starts after.
	Step int64
	// Revision is the revision the fork runs on; empty: the source's.
	Revision string
	// Models replaces the model of agents (by name) in that revision: the fork runs on
	// a revision made with the change.
	Models map[string]string
	// Name is the fork's name; empty: <source>-fork-<random>.
	Name string
}

// Fork creates a fork of src: it checks, as the controller will, that the source's
// journal rebuilds its status after r.Step with no call, and creates the Session with
// spec.forkOf and the source's inputs up to that step.
func Fork(ctx context.Context, c client.Client, src *flowv1alpha1.Session, r ForkRequest) (*ForkResult, error) {
	if src.Status.JourneyRevision == "" {
		return nil, fmt.Errorf("session/%s has not started: there is no step to fork at", src.Name)
	}
	srcRev := src.Status.JourneyRevision
	raw, err := revdata.Read(ctx, c, src.Namespace, srcRev)
	if err != nil {
		return nil, fmt.Errorf("reading session/%s's revision %s: %w", src.Name, srcRev, err)
	}
	snap, err := revision.Compile(srcRev, raw)
	if err != nil {
		return nil, err
	}
	from, err := rebuild.SourceOf(src)
	if err != nil {
		return nil, fmt.Errorf("session/%s cannot be forked: %w", src.Name, err)
	}
	rebuilt, err := rebuild.Replay(snap, srcRev, from, r.Step)
	if err != nil {
		return nil, fmt.Errorf("session/%s cannot be forked at step %d: %w", src.Name, r.Step, err)
	}
	if !rebuilt.Check.Reproduces {
		return nil, fmt.Errorf("session/%s cannot be forked at step %d: its journal does not rebuild its steps: %s", src.Name, r.Step, rebuilt.Check)
	}
	to := srcRev
	if r.Revision != "" {
		to = r.Revision
	}
	j := src.Spec.JourneyRef.Name
	if !strings.HasPrefix(to, j+"-") {
		return nil, fmt.Errorf("--revision %s is not a revision of journey %s: its revisions are named %s-<hash>", to, j, j)
	}
	toRaw := raw
	if to != srcRev {
		if toRaw, err = revdata.Read(ctx, c, src.Namespace, to); err != nil {
			return nil, fmt.Errorf("reading revision %s: %w", to, err)
		}
	}
	if len(r.Models) > 0 {
		if to, toRaw, err = withModels(ctx, c, src.Namespace, j, to, toRaw, r.Models); err != nil {
			return nil, err
		}
	}
	res := &ForkResult{Revision: to}
	if to != srcRev {
		toSnap, err := revision.Compile(to, toRaw)
		if err != nil {
			return nil, err
		}
		onto := from
		onto.Revision = snap
		if rep, err := rebuild.Replay(toSnap, to, onto, r.Step); err == nil {
			res.Check = rep.Check
		}
	}
	name := r.Name
	if name == "" {
		name = fmt.Sprintf("%s-fork-%s", truncateName(src.Name, 253-11), randomSuffix(5))
	}
	fork := forkSession(src, from.Inputs, rebuilt.Status, name, r.Step, to)
	if err := c.Create(ctx, fork); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("session/%s already exists: choose another --name", name)
		}
		return nil, fmt.Errorf("creating the fork session/%s: %w", name, err)
	}
	res.Session = fork
	return res, nil
}

// forkSession is the fork of src named name after step (st, the source's status
// rebuilt up to it), on revision to: the source's inputs it had processed by then.
func forkSession(src *flowv1alpha1.Session, in *rebuild.Inputs, st *flowv1alpha1.SessionStatus, name string, step int64, to string) *flowv1alpha1.Session {
	fork := &flowv1alpha1.Session{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: src.Namespace},
		Spec: flowv1alpha1.SessionSpec{
			JourneyRef:              src.Spec.JourneyRef,
			InitialContext:          src.Spec.InitialContext.DeepCopy(),
			Messages:                append([]flowv1alpha1.Message(nil), in.Messages[:min(int(st.ProcessedMessages), len(in.Messages))]...),
			Limits:                  src.Spec.Limits.DeepCopy(),
			TTLSecondsAfterFinished: src.Spec.TTLSecondsAfterFinished,
			ForkOf:                  &flowv1alpha1.ForkSource{Session: src.Name, UID: string(src.UID), Step: step, Revision: to},
		},
	}
	for _, o := range in.Outcomes[:min(int(st.ProcessedOutcomes), len(in.Outcomes))] {
		fork.Spec.Outcomes = append(fork.Spec.Outcomes, *o.DeepCopy())
	}
	return fork
}

// ForkResult is a fork as created.
type ForkResult struct {
	// Session is the fork as the API server returned it.
	Session *flowv1alpha1.Session
	// Revision is the revision it runs on.
	Revision string
	// Check is the replay of the source's steps up to the fork step on Revision, nil
	// when Revision is the source's.
	Check *engine.ReplayCheck
}

// withModels makes (or finds) the revision of journey that is rev's data with the
// models of agents replaced, and returns its name and data. It is named by its
// content as the controller names revisions, labeled with the journey, and owned by
// the Journey, so it goes with it.
func withModels(ctx context.Context, c client.Client, namespace, journey, rev string, raw []byte, models map[string]string) (string, []byte, error) {
	data, err := revdata.Decode(rev, raw)
	if err != nil {
		return "", nil, err
	}
	for agent, model := range models {
		i := -1
		for k := range data.Journey.Agents {
			if string(data.Journey.Agents[k].Name) == agent {
				i = k
			}
		}
		if i < 0 {
			var names []string
			for _, a := range data.Journey.Agents {
				names = append(names, string(a.Name))
			}
			return "", nil, fmt.Errorf("--agent %s=%s: revision %s has no agent %q (it has %s)", agent, model, rev, agent, strings.Join(names, ", "))
		}
		data.Journey.Agents[i].Model = model
	}
	newRaw, name, err := revision.Encode(journey, data)
	if err != nil {
		return "", nil, err
	}
	var j flowv1alpha1.Journey
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: journey}, &j); err != nil {
		return "", nil, fmt.Errorf("reading journey %s: %w", journey, err)
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: map[string]string{revision.LabelJourney: journey},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: flowv1alpha1.GroupVersion.String(), Kind: "Journey",
				Name: j.Name, UID: j.UID, BlockOwnerDeletion: ptr.To(true)}},
		},
		Data:     runtime.RawExtension{Raw: newRaw},
		Revision: j.Generation,
	}
	if err := c.Create(ctx, cr); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", nil, fmt.Errorf("creating revision %s with the agents' models: %w", name, err)
	}
	return name, newRaw, nil
}

// truncateName keeps the first n bytes of a name, without a trailing '-' or '.'.
func truncateName(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.TrimRight(s, "-.")
}
