package plugin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/truncate"
)

const watchExample = `  # Follow a Session until it completes, fails or is cancelled
  kubectl journey watch patient-12345

  # Give up after five minutes
  kubectl journey watch deploy-42 --timeout 5m -n ci

  # Follow every Session of the namespace, or of all namespaces
  kubectl journey watch
  kubectl journey watch -A`

type watchOptions struct {
	*Options
	timeout       time.Duration
	allNamespaces bool
}

func newWatchCommand(o *Options) *cobra.Command {
	wo := &watchOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "watch [SESSION]",
		Short: "Follow a Session as it runs",
		Long: `Print a line each time a Session's phase, pathway, iteration, confidence, last reply,
pending decision or stall reason changes, until it reaches a terminal phase (Completed,
Failed or Cancelled), --timeout passes, or you interrupt it.

Without SESSION it follows every Session of the namespace (of all namespaces with -A),
one line per change prefixed with the Session, until --timeout or an interrupt.`,
		Example: watchExample,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return fmt.Errorf("watch takes at most one SESSION (got %d arguments)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return wo.runAll(cmd.Context())
			}
			if wo.allNamespaces {
				return errors.New("-A/--all-namespaces follows every Session; leave out SESSION")
			}
			return wo.run(cmd.Context(), args[0])
		},
	}
	cmd.Flags().DurationVar(&wo.timeout, "timeout", 0, "Stop watching after this long; 0 watches until the Session ends")
	cmd.Flags().BoolVarP(&wo.allNamespaces, "all-namespaces", "A", false, "Without SESSION: follow the Sessions of all namespaces")
	return cmd
}

func (wo *watchOptions) run(ctx context.Context, name string) error {
	if wo.timeout < 0 {
		return errors.New("--timeout must not be negative")
	}
	key, err := wo.sessionKey(name)
	if err != nil {
		return err
	}
	c, err := wo.NewClient()
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx, wo.timeout)
	defer cancel()
	p := &watchPrinter{out: wo.Out}
	err = observeSession(ctx, c, key, wo.PollInterval, func(s *flowv1alpha1.Session) (bool, error) {
		p.print(s, time.Now())
		return s.Status.Phase.IsTerminal(), nil
	})
	if errors.Is(err, context.DeadlineExceeded) && wo.timeout > 0 {
		return fmt.Errorf("session/%s did not finish within %s", name, wo.timeout)
	}
	return err
}

// runAll follows every Session of the namespace (or all namespaces) until ctx ends.
func (wo *watchOptions) runAll(ctx context.Context) error {
	if wo.timeout < 0 {
		return errors.New("--timeout must not be negative")
	}
	ns := ""
	if !wo.allNamespaces {
		var err error
		if ns, err = wo.namespace(); err != nil {
			return err
		}
	}
	c, err := wo.NewClient()
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx, wo.timeout)
	defer cancel()
	p := &watchPrinter{out: wo.Out, withName: true, namespace: wo.allNamespaces}
	err = observeSessions(ctx, c, ns, wo.PollInterval, func(list []flowv1alpha1.Session) {
		for _, s := range list {
			name := s.Name
			if p.namespace {
				name = s.Namespace + "/" + s.Name
			}
			p.nameWidth = max(p.nameWidth, len(name))
		}
	}, func(s *flowv1alpha1.Session) {
		p.print(s, time.Now())
	})
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// watchPrinter prints one line per visible change of a Session.
type watchPrinter struct {
	out io.Writer
	// withName prefixes lines with the Session's name; namespace adds its namespace.
	withName, namespace bool
	header              bool
	last                map[types.NamespacedName]string
	// nameWidth is the SESSION column's width: the longest name so far, at least 24.
	nameWidth int
}

// watchFormat lays out the columns after TIME (and SESSION); LAST REPLY takes the rest.
const watchFormat = "%-16s  %-20s  %-9s  %-10s  %s\n"

func (p *watchPrinter) print(s *flowv1alpha1.Session, now time.Time) {
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	line := WatchLine(s)
	if p.last == nil {
		p.last = map[types.NamespacedName]string{}
	}
	if prev, ok := p.last[key]; ok && prev == line {
		return
	}
	p.last[key] = line
	name := s.Name
	if p.namespace {
		name = s.Namespace + "/" + s.Name
	}
	p.nameWidth = max(p.nameWidth, 24, len(name))
	if !p.header {
		p.header = true
		fmt.Fprintf(p.out, "%-8s  ", "TIME")
		if p.withName {
			fmt.Fprintf(p.out, "%-*s  ", p.nameWidth, "SESSION")
		}
		fmt.Fprintf(p.out, watchFormat, "PHASE", "PATHWAY", "ITERATION", "CONFIDENCE", "LAST REPLY")
	}
	fmt.Fprintf(p.out, "%-8s  ", now.Format("15:04:05"))
	if p.withName {
		fmt.Fprintf(p.out, "%-*s  ", p.nameWidth, name)
	}
	fmt.Fprint(p.out, line)
}

// WatchLine is the watch line of a Session without its time: phase, pathway, iteration,
// confidence and the last reply (or, when stalled, why).
func WatchLine(s *flowv1alpha1.Session) string {
	st := s.Status
	phase := orNone(string(st.Phase))
	if s.Spec.Suspend && !st.Phase.IsTerminal() {
		phase += "(suspended)"
	}
	last := "<none>"
	if t := st.LastTurn; t != nil && t.AssistantText != "" {
		last = truncate.Line(t.AssistantText, 80)
		if t.MessageID != "" {
			last = t.MessageID + ": " + last
		}
	}
	if c := stalled(s); c != nil {
		last = fmt.Sprintf("stalled: %s: %s", c.Reason, truncate.Line(c.Message, 80))
	} else if d := s.Status.PendingDecision(); d != nil {
		last = fmt.Sprintf("decision %s %s -> %s awaits approval", d.ID, orNone(d.From), orNone(d.To))
	}
	iter := "<none>"
	if st.Iteration > 0 {
		iter = fmt.Sprint(st.Iteration)
	}
	return fmt.Sprintf(watchFormat, phase, orNone(st.CurrentPathway), iter, orNone(string(st.Confidence)), last)
}

// withTimeout is ctx bounded by timeout (a --timeout flag), or ctx itself when
// timeout is 0.
func withTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(ctx, timeout)
	}
	return ctx, func() {}
}

// observeSession calls fn with the Session key now and after every change, until fn
// returns true or an error, or ctx ends. It watches the Session; when the API server
// refuses a watch it polls every interval instead.
func observeSession(ctx context.Context, c client.WithWatch, key types.NamespacedName, interval time.Duration,
	fn func(*flowv1alpha1.Session) (bool, error)) error {
	for {
		s := &flowv1alpha1.Session{}
		if err := c.Get(ctx, key, s); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("getting session %s: %w", describeKey(key), err)
		}
		if done, err := fn(s); done || err != nil {
			return err
		}
		w, err := c.Watch(ctx, &flowv1alpha1.SessionList{}, &client.ListOptions{
			Namespace:     key.Namespace,
			FieldSelector: fields.OneTermEqualSelector("metadata.name", key.Name),
			Raw:           &metav1.ListOptions{ResourceVersion: s.ResourceVersion, AllowWatchBookmarks: true},
		})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return pollSession(ctx, c, key, interval, fn)
		}
		done, err := drainWatch(ctx, w, key, fn, false)
		w.Stop()
		if done || err != nil {
			return err
		}
		// The watch ended (server timeout, expired resourceVersion): read again and
		// rewatch, after a pause so a server that keeps closing watches is not hammered.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// drainWatch feeds the Sessions of w's events to fn until fn is done, the watch ends
// (false, nil) or ctx ends. A deletion is an error unless ignoreDeleted.
func drainWatch(ctx context.Context, w watch.Interface, key types.NamespacedName, fn func(*flowv1alpha1.Session) (bool, error), ignoreDeleted bool) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				s, ok := ev.Object.(*flowv1alpha1.Session)
				if !ok {
					continue
				}
				if done, err := fn(s); done || err != nil {
					return true, err
				}
			case watch.Deleted:
				if ignoreDeleted {
					continue
				}
				return true, fmt.Errorf("session %s was deleted", describeKey(key))
			case watch.Error:
				return false, nil
			}
		}
	}
}

// observeSessions calls fn with every Session of namespace ns (all namespaces when
// empty) now and after every change, until ctx ends. Deleted Sessions are not reported.
// listed, when not nil, sees each full list first.
func observeSessions(ctx context.Context, c client.WithWatch, ns string, interval time.Duration,
	listed func([]flowv1alpha1.Session), fn func(*flowv1alpha1.Session)) error {
	for {
		list := &flowv1alpha1.SessionList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("listing sessions: %w", err)
		}
		slices.SortFunc(list.Items, func(a, b flowv1alpha1.Session) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		if listed != nil {
			listed(list.Items)
		}
		for i := range list.Items {
			fn(&list.Items[i])
		}
		w, err := c.Watch(ctx, &flowv1alpha1.SessionList{}, &client.ListOptions{
			Namespace: ns,
			Raw:       &metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true},
		})
		if err == nil {
			_, err = drainWatch(ctx, w, types.NamespacedName{}, func(s *flowv1alpha1.Session) (bool, error) {
				fn(s)
				return false, nil
			}, true)
			w.Stop()
			if err != nil {
				return err
			}
		}
		// Relist after the watch ended or could not start, after a pause.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

func pollSession(ctx context.Context, c client.Client, key types.NamespacedName, interval time.Duration,
	fn func(*flowv1alpha1.Session) (bool, error)) error {
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		s := &flowv1alpha1.Session{}
		if err := c.Get(ctx, key, s); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("session %s was deleted", describeKey(key))
			}
			continue
		}
		if done, err := fn(s); done || err != nil {
			return err
		}
	}
}
