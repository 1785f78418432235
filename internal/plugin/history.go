package plugin

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/printers"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

const historyExample = `  # The transitions a Session took, oldest first
  kubectl journey history patient-12345

  # With step, iteration, rule name and message id
  kubectl journey history patient-12345 -o wide

  # The Session's OpenTelemetry trace id, to open the trace in a tracing UI
  kubectl journey history patient-12345 --trace`

type historyOptions struct {
	*Options
	output string
	trace  bool
}

func newHistoryCommand(o *Options) *cobra.Command {
	ho := &historyOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "history SESSION",
		Short: "Show the transitions a Session took",
		Long: `Print status.history of a Session as a table, oldest first: when each transition
happened, between which pathways, what it meant (ACTION), who decided it (SOURCE), with
which confidence, and why.

status.history keeps the last limits.maxHistory transitions; the full audit trail is the
Session's Events (kubectl events --for session/NAME).

With --trace, print only the id of the Session's OpenTelemetry trace (status.traceContext),
which every step of the Session belongs to when the manager runs with --tracing.`,
		Example: historyExample,
		Args:    exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ho.run(cmd.Context(), args[0])
		},
	}
	cmd.Flags().StringVarP(&ho.output, "output", "o", "", "Output format: '' (table) or wide")
	cmd.Flags().BoolVar(&ho.trace, "trace", false, "Print the Session's trace id instead of the transitions")
	return cmd
}

func (ho *historyOptions) run(ctx context.Context, name string) error {
	if ho.output != "" && ho.output != "wide" {
		return fmt.Errorf("--output %q is not supported; use wide or leave it out", ho.output)
	}
	key, err := ho.sessionKey(name)
	if err != nil {
		return err
	}
	c, err := ho.NewClient()
	if err != nil {
		return err
	}
	s, err := ho.getSession(ctx, c, key)
	if err != nil {
		return err
	}
	if ho.trace {
		tc := s.Status.TraceContext
		if tc == nil {
			return fmt.Errorf("session/%s in namespace %s has no trace: the manager records traces only with --tracing", name, key.Namespace)
		}
		_, err := fmt.Fprintln(ho.Out, tc.TraceID)
		return err
	}
	if len(s.Status.History) == 0 {
		fmt.Fprintf(ho.ErrOut, "No transitions recorded for session/%s in namespace %s.\n", name, key.Namespace)
		return nil
	}
	return PrintHistory(ho.Out, s.Status.History, ho.output == "wide")
}

// PrintHistory writes history entries as a kubectl-style table: TIME, FROM, TO, ACTION,
// SOURCE, CONFIDENCE, REASON; wide adds STEP, ITERATION, TRANSITION and MESSAGE.
func PrintHistory(out io.Writer, history []flowv1alpha1.HistoryEntry, wide bool) error {
	w := printers.GetNewTabWriter(out)
	cols := []string{"TIME", "FROM", "TO", "ACTION", "SOURCE", "CONFIDENCE"}
	if wide {
		cols = append(cols, "STEP", "ITERATION", "TRANSITION", "MESSAGE")
	}
	cols = append(cols, "REASON")
	fmt.Fprintln(w, strings.Join(cols, "\t"))
	for _, h := range history {
		t := "<unknown>"
		if !h.Time.IsZero() {
			t = h.Time.UTC().Format(time.RFC3339)
		}
		row := []string{t, orNone(h.From), orNone(h.To), orNone(string(h.Action)), orNone(string(h.Source)), orNone(string(h.Confidence))}
		if wide {
			row = append(row, strconv.FormatInt(h.Step, 10), strconv.Itoa(int(h.Iteration)), orNone(h.Transition), orNone(h.MessageID))
		}
		row = append(row, orNone(oneLine(h.Reason)))
		fmt.Fprintln(w, strings.Join(row, "\t"))
	}
	return w.Flush()
}
