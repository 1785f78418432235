package plugin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

const forgetExample = `  # Erase every Session of one person, after listing them and asking to confirm
  kubectl journey forget -l patient=p1 --reason "erasure request #42"

  # Erase two Sessions by name, without asking, and wait until they are gone
  kubectl journey forget patient-12345 patient-12346 --yes --wait

  # Ask the API server (admission webhooks included) without deleting anything
  kubectl journey forget -l patient=p1 --dry-run=server`

// forgetOptions are the flags of forget.
type forgetOptions struct {
	changeOptions
	selector string
	all      bool
	yes      bool
}

func newForgetCommand(o *Options) *cobra.Command {
	fo := &forgetOptions{changeOptions: changeOptions{Options: o}}
	cmd := &cobra.Command{
		Use:   "forget (SESSION... | -l SELECTOR | --all)",
		Short: "Delete Sessions on a person's request, with an erasure record",
		Long: `Delete Sessions, and everything they hold, on a person's request (right to erasure),
leaving one erasure record in the manager's audit sink: who asked (the authenticated
user, stamped by the admission webhook), when, which Sessions (namespace, name, UID)
and --reason; nothing the Sessions held.

Name the Sessions, or select them with -l/--selector in the namespace; --all erases
every Session of the namespace and must be given explicitly. The command lists the
Sessions and asks to confirm (--yes does not ask). Each Session is marked with the
annotations flow.journey.dev/forget, -by and -reason and the finalizer
flow.journey.dev/erasure, then deleted: the manager writes the erasure record, and no
archive, before it lets them go, so a manager that is down only delays the deletion.
With --wait the command waits until they are gone.`,
		Example: forgetExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fo.run(cmd.Context(), args)
		},
	}
	fo.addFlags(cmd, "Wait until the Sessions are deleted")
	cmd.Flags().StringVarP(&fo.selector, "selector", "l", "", "Label selector of the Sessions to erase (e.g. -l patient=p1)")
	cmd.Flags().BoolVar(&fo.all, "all", false, "Erase every Session in the namespace")
	cmd.Flags().BoolVarP(&fo.yes, "yes", "y", false, "Do not ask to confirm")
	return cmd
}

// checkArgs refuses a forget that does not say exactly which Sessions it erases.
func (fo *forgetOptions) checkArgs(names []string) (labels.Selector, error) {
	selector := strings.TrimSpace(fo.selector)
	switch {
	case fo.all && (len(names) > 0 || selector != ""):
		return nil, errors.New("--all erases every Session of the namespace: give it without Session names or -l/--selector")
	case len(names) > 0 && selector != "":
		return nil, errors.New("give Session names or -l/--selector, not both")
	case fo.all:
		return labels.Everything(), nil
	case len(names) == 0 && selector == "":
		return nil, errors.New("name the Sessions to forget, or select them with -l/--selector (e.g. -l patient=p1); " +
			"an empty selector would erase every Session of the namespace: pass --all for that")
	case selector == "":
		return nil, nil
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("--selector %q: %w", fo.selector, err)
	}
	if sel.Empty() {
		return nil, errors.New("--selector selects every Session of the namespace: pass --all for that")
	}
	return sel, nil
}

func (fo *forgetOptions) run(ctx context.Context, names []string) error {
	sel, err := fo.checkArgs(names)
	if err != nil {
		return err
	}
	mode, err := fo.strategy()
	if err != nil {
		return err
	}
	ns, err := fo.namespace()
	if err != nil {
		return err
	}
	c, err := fo.NewClient()
	if err != nil {
		return err
	}
	sessions, err := findSessions(ctx, c, ns, names, sel)
	if err != nil {
		return err
	}
	if len(sessions) == 0 {
		fmt.Fprintf(fo.Out, "No Sessions found in namespace %s\n", ns)
		return nil
	}
	fmt.Fprintf(fo.Out, "These %d Sessions in namespace %s will be deleted, with an erasure record:\n", len(sessions), ns)
	for _, s := range sessions {
		fmt.Fprintf(fo.Out, "  session/%s\t(uid %s)\n", s.Name, s.UID)
	}
	if mode == dryRunNone && !fo.yes {
		if ok, err := confirm(fo); !ok {
			return err
		}
	}
	request := fmt.Sprintf("forget-%s-%s", fo.Now().UTC().Format("20060102t150405"), rand.String(5))
	// Mark them all first, then delete: the manager waits for the marked Sessions of
	// a request to be deleted, so that one record names them all.
	for _, s := range sessions {
		if err := markForget(ctx, c, s, mode, request, fo.reason); err != nil {
			return err
		}
	}
	for _, s := range sessions {
		if mode != dryRunClient {
			opts := []client.DeleteOption{client.Preconditions{UID: &s.UID}}
			if mode == dryRunServer {
				opts = append(opts, client.DryRunAll)
			}
			if err := c.Delete(ctx, s, opts...); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting session/%s: %w", s.Name, err)
			}
		}
		fmt.Fprintf(fo.Out, "session/%s forgotten%s\n", s.Name, mode.suffix())
	}
	if !fo.wait {
		return nil
	}
	return fo.waitGone(ctx, c, sessions)
}

// findSessions are the Sessions names in ns, or those sel selects, sorted by name. A
// name that does not exist is an error: nothing is erased then.
func findSessions(ctx context.Context, c client.Client, ns string, names []string, sel labels.Selector) ([]*flowv1alpha1.Session, error) {
	var out []*flowv1alpha1.Session
	if sel != nil {
		var list flowv1alpha1.SessionList
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, fmt.Errorf("listing sessions in namespace %q: %w", ns, err)
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	}
	for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
		key := types.NamespacedName{Namespace: ns, Name: name}
		s := &flowv1alpha1.Session{}
		if err := c.Get(ctx, key, s); err != nil {
			return nil, sessionError(key, err)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *flowv1alpha1.Session) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// confirm asks on the command's streams whether to go on; no answer is no.
func confirm(fo *forgetOptions) (bool, error) {
	fmt.Fprint(fo.Out, "Delete them? Type yes to confirm: ")
	answer, _ := bufio.NewReader(fo.In).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return true, nil
	}
	fmt.Fprintln(fo.Out)
	return false, errors.New("not confirmed: nothing was deleted (answer yes, or pass --yes)")
}

// markForget marks s for erasure by request with reason: the annotations and the
// erasure finalizer, who asked being left for the admission webhook to stamp. A
// client dry run sends nothing.
func markForget(ctx context.Context, c client.Client, s *flowv1alpha1.Session, mode dryRun, request, reason string) error {
	if mode == dryRunClient {
		return nil
	}
	err := retry.RetryOnConflict(appendBackoff, func() error {
		cur := &flowv1alpha1.Session{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			return sessionError(client.ObjectKeyFromObject(s), err)
		}
		if cur.UID != s.UID {
			return fmt.Errorf("session/%s was replaced by another Session of the same name: nothing was erased from it", s.Name)
		}
		before := cur.DeepCopy()
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[flowv1alpha1.AnnotationForget] = request
		delete(cur.Annotations, flowv1alpha1.AnnotationForgetBy)
		delete(cur.Annotations, flowv1alpha1.AnnotationForgetReason)
		if reason != "" {
			cur.Annotations[flowv1alpha1.AnnotationForgetReason] = reason
		}
		if cur.DeletionTimestamp.IsZero() {
			controllerutil.AddFinalizer(cur, flowv1alpha1.FinalizerErasure)
		}
		opts := []client.PatchOption{}
		if mode == dryRunServer {
			opts = append(opts, client.DryRunAll)
		}
		return c.Patch(ctx, cur, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), opts...)
	})
	if err != nil {
		return fmt.Errorf("marking session/%s for erasure: %w", s.Name, err)
	}
	return nil
}

// waitGone waits, up to --timeout, until every Session of sessions is deleted.
func (fo *forgetOptions) waitGone(ctx context.Context, c client.Client, sessions []*flowv1alpha1.Session) error {
	waitCtx, cancel := withTimeout(ctx, fo.timeout)
	defer cancel()
	for _, s := range sessions {
		for {
			err := c.Get(waitCtx, client.ObjectKeyFromObject(s), &flowv1alpha1.Session{})
			if apierrors.IsNotFound(err) {
				break
			}
			if waitCtx.Err() != nil {
				return fmt.Errorf("timed out after %s waiting for session/%s to be deleted: is the manager running? "+
					"It writes the erasure record, then removes the finalizer %s", fo.timeout, s.Name, flowv1alpha1.FinalizerErasure)
			}
			if err != nil {
				return fmt.Errorf("waiting for session/%s to be deleted: %w", s.Name, err)
			}
			select {
			case <-waitCtx.Done():
			case <-time.After(fo.PollInterval):
			}
		}
	}
	fmt.Fprintf(fo.Out, "%d Sessions deleted\n", len(sessions))
	return nil
}
