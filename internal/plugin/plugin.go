// Package plugin implements kubectl-journey, the kubectl plugin for journey-operator:
// sending messages, approvals and External outcomes to Sessions, reading their history,
// watching them, and drawing Journey graphs.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/console"
)

// Scheme knows the journey types and the built-in types the plugin and its console use.
var Scheme = console.Scheme

// Options is what every subcommand shares: the kubeconfig flags, the streams, and how
// to reach the cluster.
type Options struct {
	// ConfigFlags are kubectl's connection flags (-n, --context, --kubeconfig, ...).
	ConfigFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	// NewClient builds the API client. Defaults to one built from ConfigFlags.
	NewClient func() (client.WithWatch, error)
	// Now is the clock used to stamp approvals. Defaults to time.Now.
	Now func() time.Time
	// PollInterval is how often a Session is re-read when it cannot be watched.
	PollInterval time.Duration
}

// NewOptions returns Options reading the kubeconfig the way kubectl does.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	o := &Options{
		ConfigFlags:  genericclioptions.NewConfigFlags(true),
		IOStreams:    streams,
		Now:          time.Now,
		PollInterval: 500 * time.Millisecond,
	}
	o.NewClient = o.clientFromFlags
	return o
}

func (o *Options) restConfig() (*rest.Config, error) {
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "kubectl-journey"
	return cfg, nil
}

func (o *Options) clientFromFlags() (client.WithWatch, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: Scheme})
}

// namespace is the namespace of -n, else the kubeconfig context's, else "default".
func (o *Options) namespace() (string, error) {
	ns, _, err := o.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", err
	}
	return ns, nil
}

// sessionKey resolves a Session name in the current namespace.
func (o *Options) sessionKey(name string) (types.NamespacedName, error) {
	ns, err := o.namespace()
	if err != nil {
		return types.NamespacedName{}, err
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

func (o *Options) getSession(ctx context.Context, c client.Client, key types.NamespacedName) (*flowv1alpha1.Session, error) {
	s := &flowv1alpha1.Session{}
	if err := c.Get(ctx, key, s); err != nil {
		return nil, fmt.Errorf("getting session %s: %w", describeKey(key), err)
	}
	return s, nil
}

func describeKey(key types.NamespacedName) string {
	return fmt.Sprintf("%q in namespace %q", key.Name, key.Namespace)
}

// NewCommand returns the root command, `kubectl journey`.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return NewCommandWithOptions(NewOptions(streams))
}

// NewCommandWithOptions returns the root command using o; tests replace parts of o.
func NewCommandWithOptions(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kubectl-journey",
		Short: "Talk to journey-operator Sessions and draw Journeys",
		Long: `kubectl journey sends messages, approvals and External outcomes to journey-operator
Sessions, shows their transition history, watches them run, and draws Journey graphs.

It talks to the cluster of your kubeconfig like kubectl does: -n/--namespace,
--context and --kubeconfig work as usual.`,
		Example: `  # Send a message and wait for the reply
  kubectl journey say patient-12345 "I need a cardiologist" --wait

  # Approve the decision the Session waits for, choosing a destination
  kubectl journey approve patient-12345 --to escalation --reason "needs a human"

  # Post the result of an External pathway
  kubectl journey outcome deploy-42 --pathway test --result success --data passed=12

  # Show the transitions a Session took
  kubectl journey history patient-12345

  # Draw a Journey, highlighting where a Session is
  kubectl journey graph healthcare-referral --session patient-12345 --format svg > journey.svg

  # Open a web console: Journeys, live Sessions, approvals
  kubectl journey dashboard`,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl journey",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	o.ConfigFlags.AddFlags(cmd.PersistentFlags())
	cmd.SetUsageTemplate(usageTemplate)
	cmd.SetIn(o.In)
	cmd.SetOut(o.Out)
	cmd.SetErr(o.ErrOut)
	cmd.AddCommand(
		newSayCommand(o),
		newApproveCommand(o),
		newOutcomeCommand(o),
		newInterventionCommand(o, flowv1alpha1.InterventionResume),
		newInterventionCommand(o, flowv1alpha1.InterventionRetry),
		newInterventionCommand(o, flowv1alpha1.InterventionGoto),
		newInterventionCommand(o, flowv1alpha1.InterventionRewind),
		newInterventionCommand(o, flowv1alpha1.InterventionUpgrade),
		newForkCommand(o),
		newInterventionCommand(o, flowv1alpha1.InterventionAnswer),
		newCancelCommand(o),
		newSuspendCommand(o, true),
		newSuspendCommand(o, false),
		newLimitsCommand(o),
		newForgetCommand(o),
		newHistoryCommand(o),
		newBudgetCommand(o),
		newGraphCommand(o),
		newWatchCommand(o),
		newDashboardCommand(o),
		newOptionsCommand(),
	)
	cmd.AddCommand(journeyTestCommands(o)...)
	cmd.AddCommand(newRolloutCommand(o))
	return cmd
}

// usageTemplate is cobra's, with kubectl's habit of listing the global (connection)
// flags only in `kubectl journey options`.
const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .LocalNonPersistentFlags.HasAvailableFlags}}

Flags:
{{.LocalNonPersistentFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}

Use "kubectl journey options" for a list of global command-line options (applies to all commands).{{if .HasAvailableSubCommands}}
Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

func newOptionsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "options",
		Short: "Print the list of flags inherited by all commands",
		Example: `  # Print flags inherited by all commands
  kubectl journey options`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "The following options can be passed to any command:")
			fmt.Fprintln(out)
			fmt.Fprint(out, cmd.Root().PersistentFlags().FlagUsages())
			return nil
		},
	}
}

// ExitTurnFailed is the exit code of `kubectl journey say --wait` when the message's
// turn failed and the Session goes on. Every other error exits 1.
const ExitTurnFailed = 2

// ExitError is an error that exits with Code instead of 1.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }

func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the process exit code of a command that returned err: 0 for nil, the
// code of an ExitError in its chain, else 1.
func ExitCode(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	}
	return 1
}
