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
	"github.com/journeyops/journey-operator/internal/toolview"
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
		Short: "Show the transitions a Session took and the tools it called",
		Long: `Print status.history of a Session as a table, oldest first: when each transition
happened, between which pathways, what it meant (ACTION), who decided it (SOURCE), with
which confidence, and why.

status.history keeps the last limits.maxHistory transitions; the full audit trail is the
Session's Events (kubectl events --for session/NAME).

When the Session called tools, a second table lists the calls, oldest first, each in the
turn that made it (STEP and PATHWAY): the tool, its arguments (as JSON while the turn is
in progress, else the start of their SHA-256 digest), its state (Pending, Done, Failed
or Rejected; awaiting approval or cached when so), how long it took, who approved it and
why it failed. Older calls come from status.journal (bounded by limits.maxJournal), the
last turn's from status.lastTurn.toolCalls, the turn in progress from status.turn.
-o wide adds each call's id and message.

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
	calls := toolview.Of(&s.Status)
	if len(s.Status.History) == 0 {
		fmt.Fprintf(ho.ErrOut, "No transitions recorded for session/%s in namespace %s.\n", name, key.Namespace)
	} else if err := PrintHistory(ho.Out, s.Status.History, ho.output == "wide"); err != nil {
		return err
	}
	if len(calls) == 0 {
		return nil
	}
	if len(s.Status.History) > 0 {
		fmt.Fprintln(ho.Out)
	}
	return PrintToolCalls(ho.Out, calls, ho.output == "wide")
}

// PrintToolCalls writes a Session's tool calls as a kubectl-style table: STEP, PATHWAY,
// TOOL, ARGS, STATE, DURATION, APPROVED BY, ERROR; wide adds ID and MESSAGE and does
// not cut the arguments.
func PrintToolCalls(out io.Writer, calls []toolview.Call, wide bool) error {
	w := printers.GetNewTabWriter(out)
	cols := []string{"STEP", "PATHWAY"}
	if wide {
		cols = append(cols, "ID", "MESSAGE")
	}
	cols = append(cols, "TOOL", "ARGS", "STATE", "DURATION", "APPROVED BY", "ERROR")
	fmt.Fprintln(w, strings.Join(cols, "\t"))
	argsWidth := 48
	if wide {
		argsWidth = 4096
	}
	for i := range calls {
		c := &calls[i]
		step := "<unknown>"
		if c.Step >= 0 {
			step = strconv.FormatInt(c.Step, 10)
		}
		row := []string{step, orNone(c.Pathway)}
		if wide {
			row = append(row, c.ID, orNone(c.MessageID))
		}
		row = append(row, c.Tool, orNone(c.ArgsPreview(argsWidth)), c.StateText(), orNone(c.Duration()), orNone(c.ApprovedBy), orNone(oneLine(c.Error)))
		fmt.Fprintln(w, strings.Join(row, "\t"))
	}
	return w.Flush()
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
