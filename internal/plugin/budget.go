package plugin

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

const budgetExample = `  # What each Budget of the namespace spent in its current window
  kubectl journey budget

  # One Budget, with what each journey and Session spent in it
  kubectl journey budget care-daily`

func newBudgetCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "budget [BUDGET]",
		Short: "Show what Budgets spent, by journey and Session",
		Long: `Print the Budgets of the namespace: their window, and for each limit what the
selected Sessions spent and what is left, as the manager last wrote it in the Budget's
status (every few seconds), with the Sessions that spent and those waiting for room.

Given a Budget, also print each manager shard's lease in its current window (what
the shard's Sessions spent and hold, and the slice of the limits it was granted),
and what each journey and each Session spent in it, from the Sessions'
status.budgets (written with each answer, so exact).`,
		Example: budgetExample,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.budgets(cmd.Context(), args)
		},
	}
}

func (o *Options) budgets(ctx context.Context, args []string) error {
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	c, err := o.NewClient()
	if err != nil {
		return err
	}
	var list flowv1alpha1.BudgetList
	if len(args) == 1 {
		var b flowv1alpha1.Budget
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: args[0]}, &b); err != nil {
			return fmt.Errorf("getting budget %q in namespace %q: %w", args[0], ns, err)
		}
		list.Items = []flowv1alpha1.Budget{b}
	} else if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing budgets in namespace %q: %w", ns, err)
	}
	if len(list.Items) == 0 {
		_, err := fmt.Fprintf(o.Out, "No budgets found in %s namespace.\n", ns)
		return err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	w := printers.GetNewTabWriter(o.Out)
	fmt.Fprintln(w, "BUDGET\tWINDOW\tCOST (USD)\tTOKENS\tMODEL CALLS\tTOOL CALLS\tSESSIONS\tWAITING")
	for _, b := range list.Items {
		st, l := b.Status, b.Spec.Limits
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", b.Name, orDefault(b.Spec.Window, "Day"),
			used(st.Spent.CostUSD, string(l.CostUSD)), usedInt(st.Spent.Tokens, l.Tokens), usedInt(st.Spent.ModelCalls, l.ModelCalls),
			usedInt(st.Spent.ToolCalls, l.ToolCalls), st.Sessions, st.Waiting)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(args) == 1 {
		if err := o.budgetShards(&list.Items[0]); err != nil {
			return err
		}
		return o.budgetSessions(ctx, c, &list.Items[0])
	}
	return nil
}

// budgetShards prints the lease of each manager shard in Budget b's current window:
// what its Sessions spent and hold, and the slice of the limits it was granted.
func (o *Options) budgetShards(b *flowv1alpha1.Budget) error {
	var shards []flowv1alpha1.BudgetShard
	for _, e := range b.Status.Shards {
		if b.Status.WindowStart == nil || e.WindowStart.Equal(b.Status.WindowStart) {
			shards = append(shards, e)
		}
	}
	if len(shards) == 0 {
		return nil
	}
	fmt.Fprintln(o.Out)
	w := printers.GetNewTabWriter(o.Out)
	fmt.Fprintln(w, "SHARD\tSPENT\tRESERVED\tGRANTED\tSESSIONS\tWAITING\tRENEWED")
	for _, e := range shards {
		l := b.Spec.Limits
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", e.Shard, amounts(e.Spent, l), amounts(e.Reserved, l), amounts(e.Granted, l),
			e.Sessions, e.Waiting, e.RenewTime.UTC().Format(time.RFC3339))
	}
	return w.Flush()
}

// amounts are the amounts of a that limits l limits, as "USD 0.01, 3 model calls".
func amounts(a flowv1alpha1.BudgetAmounts, l flowv1alpha1.BudgetLimits) string {
	var parts []string
	count := func(v *int64, limit int64, unit string) {
		if limit > 0 {
			parts = append(parts, strconv.FormatInt(ptr.Deref(v, 0), 10)+" "+unit)
		}
	}
	if l.CostUSD != "" {
		parts = append(parts, "USD "+orDefault(a.CostUSD, "0"))
	}
	count(a.Tokens, l.Tokens, "tokens")
	count(a.ModelCalls, l.ModelCalls, "model calls")
	count(a.ToolCalls, l.ToolCalls, "tool calls")
	return strings.Join(parts, ", ")
}

// budgetSessions prints what each journey and Session spent in Budget b's window.
func (o *Options) budgetSessions(ctx context.Context, c client.Client, b *flowv1alpha1.Budget) error {
	var sessions flowv1alpha1.SessionList
	if err := c.List(ctx, &sessions, client.InNamespace(b.Namespace)); err != nil {
		return fmt.Errorf("listing sessions in namespace %q: %w", b.Namespace, err)
	}
	type row struct {
		journey, session string
		c                flowv1alpha1.BudgetCharge
	}
	var rows []row
	for _, s := range sessions.Items {
		for _, ch := range s.Status.Budgets {
			if ch.Name == b.Name && (b.Status.WindowStart == nil || ch.WindowStart.Equal(b.Status.WindowStart)) {
				rows = append(rows, row{s.Spec.JourneyRef.Name, s.Name, ch})
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].journey != rows[j].journey {
			return rows[i].journey < rows[j].journey
		}
		return rows[i].session < rows[j].session
	})
	fmt.Fprintln(o.Out)
	if len(rows) == 0 {
		_, err := fmt.Fprintf(o.Out, "No session spent in budget %s's current window.\n", b.Name)
		return err
	}
	return printCharges(o.Out, func(add func(journey, session string, c flowv1alpha1.BudgetCharge)) {
		for _, r := range rows {
			add(r.journey, r.session, r.c)
		}
	})
}

func printCharges(out io.Writer, each func(add func(journey, session string, c flowv1alpha1.BudgetCharge))) error {
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "JOURNEY\tSESSION\tCOST (USD)\tTOKENS\tMODEL CALLS\tTOOL CALLS")
	each(func(journey, session string, c flowv1alpha1.BudgetCharge) {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\n", journey, session, orDefault(c.CostUSD, "0"), c.Tokens, c.ModelCalls, c.ToolCalls)
	})
	return w.Flush()
}

// used is "spent/limit", or spent alone without a limit.
func used(spent, limit string) string {
	spent = orDefault(spent, "0")
	if limit == "" {
		return spent
	}
	return spent + "/" + limit
}

func usedInt(spent *int64, limit int64) string {
	s := "0"
	if spent != nil {
		s = strconv.FormatInt(*spent, 10)
	}
	if limit == 0 {
		return s
	}
	return s + "/" + strconv.FormatInt(limit, 10)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
