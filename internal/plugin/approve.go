package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

const approveExample = `  # Approve the decision the Session waits for, as decided
  kubectl journey approve deploy-42

  # Approve it but send the Session to another allowed destination
  kubectl journey approve deploy-42 --to rollback --reason "error budget exhausted"

  # Reject a specific decision
  kubectl journey approve deploy-42 --decision d-17 --reject --reason "not during the freeze"`

type approveOptions struct {
	*Options
	decision string
	to       string
	reject   bool
	reason   string
}

func newApproveCommand(o *Options) *cobra.Command {
	ao := &approveOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "approve SESSION",
		Short: "Approve or reject the decision a Session waits for",
		Long: `Append an approval to spec.approvals for the decision a Session waits on
(status.lastDecision while its state is Pending or Escalated).

--decision defaults to that decision's id; naming another decision is refused. --to
overrides the destination and must be one of the decision's allowedDestinations; it is
checked before anything is sent. --reject rejects the decision instead.

The approval records who gave it (the user the API server authenticates you as, when it
can tell) and when; an admission webhook, when installed, stamps the user itself.`,
		Example: approveExample,
		Args:    exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ao.run(cmd.Context(), args[0])
		},
	}
	cmd.Flags().StringVar(&ao.decision, "decision", "", "Id of the decision to answer (default: the pending decision in status.lastDecision)")
	cmd.Flags().StringVar(&ao.to, "to", "", "Destination pathway; must be one of the decision's allowedDestinations")
	cmd.Flags().BoolVar(&ao.reject, "reject", false, "Reject the decision instead of approving it")
	cmd.Flags().StringVar(&ao.reason, "reason", "", "Why, recorded with the approval")
	return cmd
}

// validateFlags checks what can be checked without the cluster.
func (ao *approveOptions) validateFlags() error {
	if ao.reject && ao.to != "" {
		return errors.New("--to and --reject cannot be used together: a rejection has no destination")
	}
	if len(ao.reason) > 1024 {
		return fmt.Errorf("--reason is %d characters; at most 1024 are kept", len(ao.reason))
	}
	if len(ao.decision) > 128 {
		return fmt.Errorf("--decision %q is longer than 128 characters", ao.decision)
	}
	return nil
}

func (ao *approveOptions) run(ctx context.Context, name string) error {
	if err := ao.validateFlags(); err != nil {
		return err
	}
	key, err := ao.sessionKey(name)
	if err != nil {
		return err
	}
	c, err := ao.NewClient()
	if err != nil {
		return err
	}
	s, err := ao.getSession(ctx, c, key)
	if err != nil {
		return err
	}
	// Refuse before anything is sent.
	if _, err := CheckApproval(s, ao.decision, ao.to, ao.reject); err != nil {
		return err
	}
	approval, err := Approve(ctx, c, key, ApprovalRequest{
		DecisionID: ao.decision, To: ao.to, Reject: ao.reject, Reason: ao.reason,
		By: currentUser(ctx, c, ao.Options), At: ao.Now(),
	})
	if err != nil {
		return err
	}
	verb := "approved"
	if ao.reject {
		verb = "rejected"
	}
	what := "decision " + approval.DecisionID
	if d := s.Status.PendingDecision(); d != nil && d.ID == approval.DecisionID {
		if tool, ok := d.ToolCall(); ok {
			what = fmt.Sprintf("tool call %s (%s)", d.ID, tool)
		}
	}
	fmt.Fprintf(ao.Out, "%s %s on session/%s", what, verb, name)
	if approval.Destination != "" {
		fmt.Fprintf(ao.Out, " (destination %s)", approval.Destination)
	}
	fmt.Fprintln(ao.Out)
	return nil
}

// ApprovalRequest answers the decision a Session waits for.
type ApprovalRequest struct {
	// DecisionID is the decision answered; empty means the pending one.
	DecisionID string
	// To overrides the destination; it must be one of the decision's allowed ones.
	To string
	// Reject rejects the decision instead of approving it.
	Reject bool
	// Reason is recorded with the approval.
	Reason string
	// By is who answers, as far as the caller can tell; the approval webhook, when
	// installed, stamps the user the API server authenticated instead.
	By string
	// At is when; it is kept to the second.
	At time.Time
}

// Approve appends r to spec.approvals of the Session key, acting with c (and so with
// c's identity and permissions). It is checked with CheckApproval against the latest
// Session before it is sent and again on every retry, so nothing is sent for a decision
// that is not pending. It returns the approval as sent.
func Approve(ctx context.Context, c client.Client, key types.NamespacedName, r ApprovalRequest) (flowv1alpha1.Approval, error) {
	if len(r.Reason) > 1024 {
		return flowv1alpha1.Approval{}, fmt.Errorf("the reason is %d characters; at most 1024 are kept", len(r.Reason))
	}
	var approval flowv1alpha1.Approval
	_, err := appendToSession(ctx, c, key, "approvals", func(s *flowv1alpha1.Session) (any, error) {
		id, err := CheckApproval(s, r.DecisionID, r.To, r.Reject)
		if err != nil {
			return nil, err
		}
		approval = flowv1alpha1.Approval{
			DecisionID:  id,
			Approve:     ptr.To(!r.Reject),
			Destination: flowv1alpha1.Name(r.To),
			By:          r.By,
			Reason:      r.Reason,
		}
		if !r.At.IsZero() {
			at := metav1.NewTime(r.At.UTC().Truncate(time.Second))
			approval.At = &at
		}
		return approval, nil
	})
	return approval, err
}

// CheckApproval checks an approval (or, with reject, a rejection) of decisionID, sending
// the Session to destination to, against the decision s waits on. An empty decisionID
// means that decision; an empty to keeps its destination. It returns the decision id.
func CheckApproval(s *flowv1alpha1.Session, decisionID, to string, reject bool) (string, error) {
	if reject && to != "" {
		return "", errors.New("--to and --reject cannot be used together: a rejection has no destination")
	}
	d := s.Status.PendingDecision()
	if d == nil {
		msg := fmt.Sprintf("session/%s has no decision waiting for approval (phase %s)", s.Name, orNone(string(s.Status.Phase)))
		if ld := s.Status.LastDecision; ld != nil && ld.ID != "" {
			msg += fmt.Sprintf("; its last decision %s is %s", ld.ID, orNone(string(ld.State)))
		}
		return "", errors.New(msg)
	}
	if decisionID != "" && decisionID != d.ID {
		return "", fmt.Errorf("decision %q is not pending: session/%s waits on decision %s", decisionID, s.Name, d.ID)
	}
	if to != "" && to != d.To {
		switch {
		case len(d.AllowedDestinations) == 0:
			return "", fmt.Errorf("decision %s allows no other destination: approve it as is (to %s) or --reject it", d.ID, orNone(d.To))
		case !slices.Contains(d.AllowedDestinations, to):
			return "", fmt.Errorf("destination %q is not allowed for decision %s; allowed destinations: %s", to, d.ID, strings.Join(d.AllowedDestinations, ", "))
		}
	}
	if i := s.Spec.ApprovalIndex(d.ID); i >= 0 {
		a := s.Spec.Approvals[i]
		verb := "an approval"
		if !a.Approves() {
			verb = "a rejection"
		}
		if a.By != "" {
			verb += " by " + a.By
		}
		return "", fmt.Errorf("decision %s already has %s; approvals are append-only and the first one counts", d.ID, verb)
	}
	return d.ID, nil
}

// currentUser is who the API server says we are (a SelfSubjectReview), else the user
// name of the kubeconfig's credentials, else empty.
func currentUser(ctx context.Context, c client.Client, o *Options) string {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err == nil && review.Status.UserInfo.Username != "" {
		return review.Status.UserInfo.Username
	}
	if o.ConfigFlags != nil {
		if cfg, err := o.restConfig(); err == nil && cfg.Username != "" {
			return cfg.Username
		}
	}
	return ""
}
