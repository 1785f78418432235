package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/journeyops/journey-operator/internal/journeytest"
)

// record and replay read the ControllerRevision a Session is pinned to.
func init() {
	utilruntime.Must(appsv1.AddToScheme(Scheme))
}

// journeyTestCommands are test, record and replay: journey tests run offline.
func journeyTestCommands(o *Options) []*cobra.Command {
	return []*cobra.Command{newTestCommand(o), newRecordCommand(o), newReplayCommand(o), newDiffCommand(o)}
}

func newTestCommand(o *Options) *cobra.Command {
	var junit string
	var coverage bool
	var minCoverage float64
	cmd := &cobra.Command{
		Use:   "test FILE|DIR...",
		Short: "Run journey tests offline",
		Long: `Run journey tests: scripts of messages, External outcomes and approvals sent to a
Session of a journey, with expectations after each step (docs/testing-journeys.md).

Tests run offline, without a cluster: the Journey and Pathway manifests are compiled
the way the Journey controller compiles them, and the engine is driven the way the
Session controller drives it, with a fixed clock. LLM (openai) agents answer from the
answers recorded in the test. A directory runs every *.yaml file in it.

The command prints a table per test and a summary, and exits non-zero when a test fails.

--coverage adds, per journey, the share of what it declares that the tests reached:
its transitions (each destination of an outcome transition or a decision, next,
a detour's return, each global transition), its decisions' confidence bands
(autoAdvance, retryWithFeedback, requireApproval, escalate, as its thresholds leave
them) and its pathways' outcomes (onSuccess, onFailure, onPartialSuccess,
onUnclear), and lists what no test reached. --min-coverage fails the command when a
journey's total coverage is below it (a percentage).`,
		Example: `  # Run the sample journeys' tests
  kubectl journey test config/samples/tests

  # Run one test and write JUnit XML for CI
  kubectl journey test config/samples/tests/healthcare-referral.yaml --junit journeys.xml

  # Show what the tests leave uncovered, and fail under 40%
  kubectl journey test config/samples/tests --coverage --min-coverage 40`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if minCoverage < 0 || minCoverage > 100 {
				return fmt.Errorf("--min-coverage: %g is not a percentage between 0 and 100", minCoverage)
			}
			files, err := testFiles(args)
			if err != nil {
				return err
			}
			results := journeytest.RunFiles(files)
			for _, r := range results {
				journeytest.PrintResult(o.Out, r)
			}
			failed := journeytest.PrintSummary(o.Out, results)
			if junit != "" {
				f, err := os.Create(junit)
				if err != nil {
					return err
				}
				werr := journeytest.WriteJUnit(f, results)
				if cerr := f.Close(); werr == nil {
					werr = cerr
				}
				if werr != nil {
					return fmt.Errorf("writing %s: %w", junit, werr)
				}
			}
			var low []string
			if coverage || cmd.Flags().Changed("min-coverage") {
				low = printCoverage(o, results, minCoverage)
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d journey tests failed", failed, len(results))
			}
			if len(low) > 0 {
				return fmt.Errorf("coverage below --min-coverage %g%%: %s", minCoverage, strings.Join(low, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&junit, "junit", "", "Also write the results as JUnit XML to this file")
	cmd.Flags().BoolVar(&coverage, "coverage", false, "Also report the transitions, decision bands and outcomes of each journey that the tests reached")
	cmd.Flags().Float64Var(&minCoverage, "min-coverage", 0, "Fail when a journey's total coverage is below this percentage (implies --coverage)")
	return cmd
}

// printCoverage writes the tests' coverage and returns the journeys below min, with
// their coverage.
func printCoverage(o *Options, results []*journeytest.Result, minCoverage float64) []string {
	cov := journeytest.Coverage(results)
	fmt.Fprintln(o.Out)
	journeytest.PrintCoverage(o.Out, cov)
	var low []string
	for _, c := range cov {
		if c.Percent() < minCoverage {
			low = append(low, fmt.Sprintf("%s %.1f%%", c.Journey, c.Percent()))
		}
	}
	return low
}

// testFiles expands directories into their *.yaml and *.yml files, sorted.
func testFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			out = append(out, a)
			continue
		}
		var found []string
		for _, pattern := range []string{"*.yaml", "*.yml"} {
			m, err := filepath.Glob(filepath.Join(a, pattern))
			if err != nil {
				return nil, err
			}
			found = append(found, m...)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s holds no *.yaml journey tests", a)
		}
		slices.Sort(found)
		out = append(out, found...)
	}
	return out, nil
}

func newRecordCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "record SESSION",
		Short: "Turn a Session into a journey test",
		Long: `Write a journey test (YAML, to standard output) that replays a Session: the Journey
revision the Session is pinned to as inline manifests, its messages, outcomes and
approvals as steps, and what the Session did as expectations.

The conversation is read from status.transcript, which keeps each message with its
reply, and each External outcome and approval as it was sent, so what kubectl journey
say, outcome and approve dropped from the spec is recorded too; the spec gives the ones
still pending. When the transcript dropped the exchanges of inputs that also left the
spec (it keeps the newest within limits.maxTranscriptBytes), the Session can no longer
be replayed from its start: record refuses, naming what is lost.

LLM and server tool answers are recorded from the Session's journal (status.journal,
the last limits.maxJournal answers); builtin tools are computed, so none is recorded
for them. A step that needs an answer the Session no longer holds is reported on
standard error, and the test needs it added before it can pass.`,
		Example: `  # Record a Session as a regression test
  kubectl journey record patient-12345 > config/samples/tests/patient-12345.yaml
  kubectl journey test config/samples/tests/patient-12345.yaml`,
		Args: exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			live, err := fetchLive(cmd, o, args[0])
			if err != nil {
				return err
			}
			c, notes, err := journeytest.Record(live)
			if err != nil {
				return err
			}
			out, err := journeytest.Marshal(c)
			if err != nil {
				return err
			}
			for _, n := range notes {
				fmt.Fprintf(o.ErrOut, "Note: %s\n", n)
			}
			header := fmt.Sprintf("# Journey test recorded from session %s/%s with kubectl journey record.\n# Run it with: kubectl journey test FILE\n",
				live.Session.Namespace, live.Session.Name)
			_, err = fmt.Fprint(o.Out, header+string(out))
			return err
		},
	}
}

func newReplayCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "replay SESSION",
		Short: "Re-run a Session offline and report where today's engine diverges",
		Long: `Re-run a Session's messages, outcomes and approvals offline, on the Journey revision
it is pinned to, with the engine of this kubectl-journey, and report the first step
where the engine does something else than the Session did (another transition, or
another final status), or "No divergence".

The conversation is read from status.transcript (and the pending messages from
spec.messages), as record reads it; a Session that no longer holds some of its inputs
is refused, naming them. LLM and server tool answers come from the Session's journal
(status.journal), each used for the very question or call it answered: a question the
Session never asked is a divergence. Builtin tools are computed, as kubectl journey test
computes them. The replay stops at a step that needs an answer the journal no longer
holds (it keeps the last limits.maxJournal). The command exits non-zero on a
divergence or an incomplete replay.`,
		Example: `  # Check that an engine upgrade does what a finished Session did
  kubectl journey replay patient-12345`,
		Args: exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			live, err := fetchLive(cmd, o, args[0])
			if err != nil {
				return err
			}
			rep, err := journeytest.Replay(live)
			if err != nil {
				return err
			}
			rep.Print(o.Out)
			switch {
			case rep.Step > 0:
				return fmt.Errorf("session %s diverges at step %d", rep.Session, rep.Step)
			case rep.Incomplete != nil:
				return fmt.Errorf("session %s could not be replayed completely", rep.Session)
			}
			return nil
		},
	}
}

func fetchLive(cmd *cobra.Command, o *Options, name string) (*journeytest.LiveSession, error) {
	key, err := o.sessionKey(strings.TrimPrefix(name, "session/"))
	if err != nil {
		return nil, err
	}
	c, err := o.NewClient()
	if err != nil {
		return nil, err
	}
	return journeytest.Fetch(cmd.Context(), c, key)
}
