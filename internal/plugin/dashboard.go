package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/console"
)

const dashboardExample = `  # Serve the console on http://127.0.0.1:8765/ until Ctrl-C
  kubectl journey dashboard

  # Any free port, only namespace team-a
  kubectl journey dashboard --port 0 -n team-a`

type dashboardOptions struct {
	*Options
	address string
	port    int
}

func newDashboardCommand(o *Options) *cobra.Command {
	do := &dashboardOptions{Options: o}
	cmd := &cobra.Command{
		Use:     "dashboard",
		Aliases: []string{"ui"},
		Short:   "Serve a local web console: Journeys as pictures, Sessions live, approvals",
		Long: `Serve a web console on a local address and print its URL. Its pages show the
Journeys as pictures with the number of Sessions in each pathway, the Sessions in a
table that follows them live, each Session's path, turns, context, usage and
conditions, and every decision waiting for approval, with buttons to approve or
reject it.

Like kubectl proxy, the console has no credentials of its own: it talks to the API
server as you, with your kubeconfig, so the cluster's RBAC decides what it shows and
what you may approve, and the approval webhook records you as the approver. It binds
127.0.0.1 unless --address says otherwise; every change must carry a per-process
token (in a cookie and in the form) and come from the console's own origin.

By default it shows every namespace you may list Sessions in; -n limits it to one.`,
		Example: dashboardExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return do.run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&do.address, "address", "127.0.0.1", "The IP address to serve on; other than a loopback address, anyone who can reach it acts as you")
	cmd.Flags().IntVar(&do.port, "port", 8765, "The port to serve on; 0 picks a free one")
	return cmd
}

func (do *dashboardOptions) run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg, err := do.restConfig()
	if err != nil {
		return err
	}
	copts := console.Options{Config: cfg, DOT: drawDOT, Now: do.Now}
	if ns := do.explicitNamespace(); ns != "" {
		copts.Namespaces = []string{ns}
	} else if copts.DefaultNamespace, err = do.namespace(); err != nil {
		return err
	}
	copts.Approve = func(ctx context.Context, c client.Client, key types.NamespacedName, a console.Answer) error {
		_, err := Approve(ctx, c, key, ApprovalRequest{
			DecisionID: a.DecisionID, To: a.To, Reject: a.Reject, Reason: a.Reason,
			By: currentUser(ctx, c, do.Options), At: do.Now(),
		})
		return err
	}
	copts.Act = consoleAction
	srv, err := console.New(ctx, copts)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(do.address, strconv.Itoa(do.port)))
	if err != nil {
		return err
	}
	url := "http://" + l.Addr().String() + "/"
	if w := exposureWarning(l.Addr(), srv.User()); w != "" {
		fmt.Fprintln(do.ErrOut, w)
	}
	fmt.Fprintf(do.Out, "Journey console at %s (acting as %s; Ctrl-C to stop)\n", url, orNone(srv.User()))
	return srv.Serve(ctx, l)
}

// consoleAction resumes, retries or cancels a Session for the console, as cancel,
// resume and retry do.
func consoleAction(ctx context.Context, c client.Client, key types.NamespacedName, a console.Action) (string, error) {
	switch a.Kind {
	case console.ActionCancel:
		sent, err := cancelSession(ctx, c, key, dryRunNone, a.Reason)
		if err != nil {
			return "", err
		}
		if !sent {
			return "already cancelled", nil
		}
		return "cancelled", nil
	case console.ActionResume, console.ActionRetry:
		r := InterventionRequest{Action: flowv1alpha1.InterventionAction(a.Kind), Reason: a.Reason, Feedback: a.Feedback, DryRun: dryRunNone}
		sent, err := Intervene(ctx, c, key, r)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("intervention %s (%s) sent", sent.Intervention.ID, a.Kind), nil
	case console.ActionAnswer:
		r := InterventionRequest{Action: flowv1alpha1.InterventionAnswer, Reason: a.Reason, DryRun: dryRunNone,
			Call: a.Call, Outcome: flowv1alpha1.AnswerOutcome(a.Outcome), Fields: a.Fields}
		switch {
		case a.Result == "":
		case a.Outcome != string(flowv1alpha1.AnswerDone):
			return "", errors.New("a result goes with Done: it is what the call gave")
		case json.Valid([]byte(a.Result)) && strings.HasPrefix(a.Result, "{"):
			r.Content = &apiextensionsv1.JSON{Raw: []byte(a.Result)}
		default:
			r.Result = a.Result
		}
		sent, err := Intervene(ctx, c, key, r)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("intervention %s (Answer %s to %s) sent", sent.Intervention.ID, a.Outcome, a.Call), nil
	}
	return "", fmt.Errorf("unknown action %q", a.Kind)
}

// exposureWarning warns, when the console listens on addr other than a loopback
// address, that anyone who reaches it acts as user; "" on a loopback address.
func exposureWarning(addr net.Addr, user string) string {
	tcp, ok := addr.(*net.TCPAddr)
	if ok && tcp.IP.IsLoopback() {
		return ""
	}
	return fmt.Sprintf("Warning: the console listens on %s, not a loopback address: anyone who can reach it acts as %s, "+
		"with your kubeconfig's credentials (they read what you may read and approve what you may approve); "+
		"the console has no login of its own. Use --address 127.0.0.1 unless that is what you want.", addr, orNone(user))
}

// explicitNamespace is the namespace given with -n, or "".
func (do *dashboardOptions) explicitNamespace() string {
	if do.ConfigFlags.Namespace != nil {
		return *do.ConfigFlags.Namespace
	}
	return ""
}

func drawDOT(j flowv1alpha1.JourneySpec, pathways map[string]flowv1alpha1.PathwaySpec, current string) string {
	return BuildGraph(j, pathways, current).DOT()
}
