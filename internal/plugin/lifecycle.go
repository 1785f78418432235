package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// The annotations that keep the --reason of the last cancel, suspend, unsuspend and
// limits change of a Session, written in the same patch as the change.
const (
	AnnotationCancelReason    = "flow.journey.dev/cancel-reason"
	AnnotationSuspendReason   = "flow.journey.dev/suspend-reason"
	AnnotationUnsuspendReason = "flow.journey.dev/unsuspend-reason"
	AnnotationLimitsReason    = "flow.journey.dev/limits-reason"
)

// maxReason is how long a --reason may be, as for approvals.
const maxReason = 1024

// dryRun is kubectl's --dry-run strategy.
type dryRun string

const (
	dryRunNone   dryRun = "none"
	dryRunClient dryRun = "client"
	dryRunServer dryRun = "server"
)

// suffix is what kubectl appends to the line of a change made in a dry run.
func (d dryRun) suffix() string {
	switch d {
	case dryRunClient:
		return " (dry run)"
	case dryRunServer:
		return " (server dry run)"
	}
	return ""
}

// changeOptions are the flags of the commands that change how a Session runs: the
// reason recorded with the change, --wait and its --timeout, and --dry-run.
type changeOptions struct {
	*Options
	reason  string
	wait    bool
	timeout time.Duration
	dryRun  string
}

func (co *changeOptions) addFlags(cmd *cobra.Command, waitHelp string) {
	cmd.Flags().StringVar(&co.reason, "reason", "", "Why, recorded with the change")
	cmd.Flags().BoolVar(&co.wait, "wait", false, waitHelp)
	cmd.Flags().DurationVar(&co.timeout, "timeout", 60*time.Second, "How long --wait waits; 0 waits forever")
	cmd.Flags().StringVar(&co.dryRun, "dry-run", string(dryRunNone),
		`Must be "none", "server", or "client". If client strategy, only print what would be sent. If server strategy, submit a server-side request (admission webhooks included) without persisting it.`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = string(dryRunClient)
}

// strategy checks the shared flags and returns the dry-run strategy.
func (co *changeOptions) strategy() (dryRun, error) {
	d := dryRun(co.dryRun)
	switch d {
	case dryRunNone, dryRunClient, dryRunServer:
	default:
		return "", fmt.Errorf(`--dry-run=%q: must be "none", "server", or "client"`, co.dryRun)
	}
	if co.wait && d != dryRunNone {
		return "", errors.New("--wait cannot be used with --dry-run: a dry run changes nothing to wait for")
	}
	if co.timeout < 0 {
		return "", errors.New("--timeout must not be negative")
	}
	if len(co.reason) > maxReason {
		return "", fmt.Errorf("--reason is %d characters; at most %d are kept", len(co.reason), maxReason)
	}
	return d, nil
}

// errUnchanged tells patchSession that the Session already is as asked: nothing is sent.
var errUnchanged = errors.New("unchanged")

// patchSession applies to the Session key the spec fields build returns, with a JSON
// merge patch that also records reason under the annotation reasonKey (when both are
// set). build sees the latest Session and may refuse it, or return errUnchanged. The
// patch carries the resourceVersion build saw, so it applies only to that object; on a
// conflict it is built again on the fresh one. A client dry run sends nothing; a
// server dry run sends the patch for the API server to admit, webhooks included,
// without storing it. It returns the Session (as patched, unless nothing was stored)
// and whether a change was sent.
func patchSession(ctx context.Context, c client.Client, key types.NamespacedName, mode dryRun, reasonKey, reason string,
	build func(s *flowv1alpha1.Session) (map[string]any, error)) (*flowv1alpha1.Session, bool, error) {
	var (
		result *flowv1alpha1.Session
		sent   bool
	)
	err := retry.RetryOnConflict(appendBackoff, func() error {
		s := &flowv1alpha1.Session{}
		if err := c.Get(ctx, key, s); err != nil {
			return sessionError(key, err)
		}
		spec, err := build(s)
		if errors.Is(err, errUnchanged) {
			result, sent = s, false
			return nil
		}
		if err != nil {
			return err
		}
		result, sent = s, true
		if mode == dryRunClient {
			return nil
		}
		meta := map[string]any{"resourceVersion": s.ResourceVersion}
		if reason != "" && reasonKey != "" {
			meta["annotations"] = map[string]any{reasonKey: reason}
		}
		patch, err := json.Marshal(map[string]any{"metadata": meta, "spec": spec})
		if err != nil {
			return err
		}
		var opts []client.PatchOption
		if mode == dryRunServer {
			opts = append(opts, client.DryRunAll)
		}
		if err := c.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch), opts...); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("session/%s: %w", key.Name, err)
		}
		return nil
	})
	if apierrors.IsConflict(err) {
		return nil, false, fmt.Errorf("session %s changed too often while patching it; try again: %w", describeKey(key), err)
	}
	return result, sent, err
}

// sessionError says that the Session key cannot be read, naming it plainly when it
// does not exist.
func sessionError(key types.NamespacedName, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("session %q not found in namespace %q", key.Name, key.Namespace)
	}
	return fmt.Errorf("getting session %s: %w", describeKey(key), err)
}

// notEnded refuses to change a Session that has ended: nothing would read the change.
func notEnded(s *flowv1alpha1.Session, verb string) error {
	if s.Status.Phase.IsTerminal() {
		return fmt.Errorf("session/%s is %s: it has ended, there is nothing to %s", s.Name, s.Status.Phase, verb)
	}
	if s.Spec.Cancel {
		return fmt.Errorf("session/%s is being cancelled: there is nothing to %s", s.Name, verb)
	}
	return nil
}

// waitUntil waits, up to timeout, until done says the Session key is where the change
// that produced generation gen should bring it, and returns the Session then. A
// timeout says where the Session stands.
func (co *changeOptions) waitUntil(ctx context.Context, c client.WithWatch, key types.NamespacedName, what string,
	done func(s *flowv1alpha1.Session) bool) (*flowv1alpha1.Session, error) {
	waitCtx, cancel := withTimeout(ctx, co.timeout)
	defer cancel()
	var last *flowv1alpha1.Session
	err := observeSession(waitCtx, c, key, co.PollInterval, func(s *flowv1alpha1.Session) (bool, error) {
		last = s
		return done(s), nil
	})
	if err != nil && last != nil && errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("timed out after %s waiting for session/%s %s: %s", co.timeout, key.Name, what, stateSummary(last))
	}
	return last, err
}

// observed reports whether the controller has acted on generation gen of s.
func observed(s *flowv1alpha1.Session, gen int64) bool {
	return s.Status.ObservedGeneration >= gen
}

// settled reports whether a Session that observed generation gen has stopped working:
// it ended, is stalled or cannot start, or waits (for a message, an outcome, a person).
func settled(s *flowv1alpha1.Session, gen int64) bool {
	if !observed(s, gen) {
		return false
	}
	if s.Status.Phase.IsTerminal() || stalled(s) != nil || cannotStart(s) != nil {
		return true
	}
	return s.Status.Phase.HasStarted() && s.Status.Phase != flowv1alpha1.PhaseRunning
}

// suspended reports whether the controller says s is suspended.
func suspended(s *flowv1alpha1.Session) bool {
	c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1alpha1.ConditionReady)
	return c != nil && c.Reason == flowv1alpha1.ReasonSuspended
}

// stateSummary says where a Session stands, for timeouts.
func stateSummary(s *flowv1alpha1.Session) string {
	if s.Status.Phase == "" {
		return "the Session has no status yet; is the journey-operator controller running?"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s, pathway %s", s.Status.Phase, orNone(s.Status.CurrentPathway))
	if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1alpha1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue && c.Message != "" {
		fmt.Fprintf(&b, " (%s: %s)", c.Reason, c.Message)
	}
	if s.Status.ObservedGeneration < s.Generation {
		fmt.Fprintf(&b, "; the controller has not seen generation %d yet", s.Generation)
	}
	return b.String()
}

// printState prints where a Session stands after a change: its phase and pathway, the
// decision it waits on, and why it is stalled. It returns an error when the Session is
// stalled, failed or cannot start: the change did not get it going.
func printState(w io.Writer, s *flowv1alpha1.Session) error {
	writeField(w, "Phase", orNone(string(s.Status.Phase)))
	writeField(w, "Pathway", orNone(s.Status.CurrentPathway))
	if suspended(s) && !s.Status.Phase.IsTerminal() {
		writeField(w, "Suspended", "yes: no step runs until 'kubectl journey unsuspend "+s.Name+"'")
	}
	if d := s.Status.PendingDecision(); d != nil {
		writeField(w, "Decision", describePending(s.Name, d))
	}
	if c := cannotStart(s); c != nil {
		return fmt.Errorf("session/%s cannot start (%s): %s", s.Name, c.Reason, c.Message)
	}
	if c := stalled(s); c != nil && !s.Status.Phase.IsTerminal() {
		writeField(w, "Stalled", fmt.Sprintf("%s: %s", c.Reason, c.Message))
		return fmt.Errorf("session/%s is stalled (%s): it goes on once a person acts; the Stalled line names the command", s.Name, c.Reason)
	}
	if s.Status.Phase == flowv1alpha1.PhaseFailed {
		reason := ""
		if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1alpha1.ConditionReady); c != nil && c.Message != "" {
			reason = ": " + c.Message
		}
		return fmt.Errorf("session/%s failed%s", s.Name, reason)
	}
	return nil
}

const cancelExample = `  # End a Session as Cancelled
  kubectl journey cancel patient-12345 --reason "duplicate of patient-12346"

  # Cancel it and wait until the controller has stopped it
  kubectl journey cancel patient-12345 --wait

  # See whether the API server (and its admission webhooks) would accept it
  kubectl journey cancel patient-12345 --dry-run=server`

func newCancelCommand(o *Options) *cobra.Command {
	co := &changeOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "cancel SESSION",
		Short: "End a Session as Cancelled",
		Long: `Set spec.cancel on a Session: the controller ends it as Cancelled at its next step,
dropping any turn in progress. A cancel cannot be undone.

A Session that already ended (Completed, Failed) is refused; one already cancelled or
being cancelled is left as it is. --reason is kept in the Session's
flow.journey.dev/cancel-reason annotation. With --wait the command waits until the
Session is Cancelled.`,
		Example: cancelExample,
		Args:    exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return co.runCancel(cmd.Context(), args[0])
		},
	}
	co.addFlags(cmd, "Wait until the Session is Cancelled")
	return cmd
}

func (co *changeOptions) runCancel(ctx context.Context, name string) error {
	mode, err := co.strategy()
	if err != nil {
		return err
	}
	key, c, err := co.target(name)
	if err != nil {
		return err
	}
	sent, err := cancelSession(ctx, c, key, mode, co.reason)
	if err != nil {
		return err
	}
	if sent {
		fmt.Fprintf(co.Out, "session/%s cancelled%s\n", name, mode.suffix())
	} else {
		fmt.Fprintf(co.Out, "session/%s already cancelled\n", name)
	}
	if !co.wait {
		return nil
	}
	s, err := co.waitUntil(ctx, c, key, "to be cancelled", func(s *flowv1alpha1.Session) bool { return s.Status.Phase.IsTerminal() })
	if err != nil {
		return err
	}
	writeField(co.Out, "Phase", string(s.Status.Phase))
	if s.Status.Phase != flowv1alpha1.PhaseCancelled {
		return fmt.Errorf("session/%s ended as %s before the cancel was processed", name, s.Status.Phase)
	}
	return nil
}

// cancelSession sets spec.cancel of the Session key, keeping reason in its annotation,
// acting with c. It reports whether it sent the change: a Session already cancelled,
// or being cancelled, is left as it is; one that ended otherwise is refused.
func cancelSession(ctx context.Context, c client.Client, key types.NamespacedName, mode dryRun, reason string) (bool, error) {
	_, sent, err := patchSession(ctx, c, key, mode, AnnotationCancelReason, reason, func(s *flowv1alpha1.Session) (map[string]any, error) {
		if s.Spec.Cancel || s.Status.Phase == flowv1alpha1.PhaseCancelled {
			return nil, errUnchanged
		}
		if s.Status.Phase.IsTerminal() {
			return nil, fmt.Errorf("session/%s is %s: it has ended, there is nothing to cancel", s.Name, s.Status.Phase)
		}
		return map[string]any{"cancel": true}, nil
	})
	return sent, err
}

// target resolves the Session name and builds the client.
func (co *changeOptions) target(name string) (types.NamespacedName, client.WithWatch, error) {
	key, err := co.sessionKey(name)
	if err != nil {
		return key, nil, err
	}
	c, err := co.NewClient()
	return key, c, err
}

const suspendExample = `  # Pause a Session: no step runs until it is unsuspended
  kubectl journey suspend patient-12345 --reason "waiting for the clinic's answer"

  # Pause it and wait until the controller says it is suspended
  kubectl journey suspend patient-12345 --wait`

const unsuspendExample = `  # Let a suspended Session run again, and wait until it has caught up
  kubectl journey unsuspend patient-12345 --wait`

func newSuspendCommand(o *Options, suspend bool) *cobra.Command {
	co := &changeOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "suspend SESSION",
		Short: "Pause a Session: no step runs until it is unsuspended",
		Long: `Set spec.suspend on a Session: from its next step on, the controller runs nothing
(no agent or tool call, no transition) and the Ready condition says Suspended. Messages,
outcomes and approvals sent meanwhile wait; 'kubectl journey unsuspend' lets it go on.

A Session that has ended or is being cancelled is refused; one already suspended is
left as it is. --reason is kept in the flow.journey.dev/suspend-reason annotation.
With --wait the command waits until the controller reports the Session suspended.`,
		Example: suspendExample,
		Args:    exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return co.runSuspend(cmd.Context(), args[0], suspend)
		},
	}
	waitHelp := "Wait until the controller reports the Session suspended"
	if !suspend {
		cmd.Use = "unsuspend SESSION"
		cmd.Short = "Let a suspended Session run again"
		cmd.Long = `Clear spec.suspend on a Session, so that its steps run again: what was sent while it
was suspended is processed in order.

A Session that has ended or is being cancelled is refused; one that is not suspended
is left as it is. --reason is kept in the flow.journey.dev/unsuspend-reason annotation.
With --wait the command waits until the Session has caught up (it waits for input or
a person, is stalled, or ended) and prints where it stands; it fails when the Session
is stalled or failed.`
		cmd.Example = unsuspendExample
		waitHelp = "Wait until the Session has caught up and print where it stands"
	}
	co.addFlags(cmd, waitHelp)
	return cmd
}

func (co *changeOptions) runSuspend(ctx context.Context, name string, suspend bool) error {
	mode, err := co.strategy()
	if err != nil {
		return err
	}
	key, c, err := co.target(name)
	if err != nil {
		return err
	}
	verb, annotation := "suspend", AnnotationSuspendReason
	if !suspend {
		verb, annotation = "unsuspend", AnnotationUnsuspendReason
	}
	s, sent, err := patchSession(ctx, c, key, mode, annotation, co.reason, func(s *flowv1alpha1.Session) (map[string]any, error) {
		if err := notEnded(s, verb); err != nil {
			return nil, err
		}
		if s.Spec.Suspend == suspend {
			return nil, errUnchanged
		}
		if suspend {
			return map[string]any{"suspend": true}, nil
		}
		return map[string]any{"suspend": nil}, nil
	})
	if err != nil {
		return err
	}
	switch {
	case sent:
		fmt.Fprintf(co.Out, "session/%s %sed%s\n", name, verb, mode.suffix())
	case suspend:
		fmt.Fprintf(co.Out, "session/%s already suspended\n", name)
	default:
		fmt.Fprintf(co.Out, "session/%s is not suspended\n", name)
	}
	if !co.wait {
		return nil
	}
	gen := s.Generation
	if suspend {
		s, err = co.waitUntil(ctx, c, key, "to be suspended", func(s *flowv1alpha1.Session) bool {
			return s.Status.Phase.IsTerminal() || observed(s, gen) && suspended(s)
		})
	} else {
		s, err = co.waitUntil(ctx, c, key, "to catch up", func(s *flowv1alpha1.Session) bool {
			return settled(s, gen) && !suspended(s)
		})
	}
	if err != nil {
		return err
	}
	return printState(co.Out, s)
}

// limitFlags are the fields of spec.limits (SessionLimits), as flags.
type limitFlags struct {
	maxTurns       int32
	maxIterations  int32
	maxTransitions int32
	maxTokens      int64
	maxCostUSD     string
	maxToolCalls   int64
}

func (lf *limitFlags) add(fs *pflag.FlagSet) {
	fs.Int32Var(&lf.maxTurns, "max-turns", 0, "Turns the Session may take in all (spec.limits.maxTurns)")
	fs.Int32Var(&lf.maxIterations, "max-iterations", 0, "Iterations (JumpBack cycles) the Session may run (spec.limits.maxIterations)")
	fs.Int32Var(&lf.maxTransitions, "max-transitions", 0, "Transitions the Session may take in all (spec.limits.maxTransitions)")
	fs.Int64Var(&lf.maxTokens, "max-tokens", 0, "Prompt plus completion tokens the Session may use (spec.limits.budget.maxTokens)")
	fs.StringVar(&lf.maxCostUSD, "max-cost-usd", "", `US dollars the Session may spend, a decimal such as "2.50" (spec.limits.budget.maxCostUSD)`)
	fs.Int64Var(&lf.maxToolCalls, "max-tool-calls", 0, "Tool calls the Session may make (spec.limits.budget.maxToolCalls)")
}

// limits checks the flags and returns the limits they set, or nil when none is set.
func (lf *limitFlags) limits(fs *pflag.FlagSet) (*flowv1alpha1.SessionLimits, error) {
	l := &flowv1alpha1.SessionLimits{}
	set := false
	if fs.Changed("max-turns") {
		if lf.maxTurns < 1 || lf.maxTurns > 100000 {
			return nil, fmt.Errorf("--max-turns must be between 1 and 100000, got %d", lf.maxTurns)
		}
		l.MaxTurns, set = lf.maxTurns, true
	}
	if fs.Changed("max-iterations") {
		if lf.maxIterations < 1 || lf.maxIterations > 10000 {
			return nil, fmt.Errorf("--max-iterations must be between 1 and 10000, got %d", lf.maxIterations)
		}
		l.MaxIterations, set = lf.maxIterations, true
	}
	if fs.Changed("max-transitions") {
		if lf.maxTransitions < 1 || lf.maxTransitions > 100000 {
			return nil, fmt.Errorf("--max-transitions must be between 1 and 100000, got %d", lf.maxTransitions)
		}
		l.MaxTransitions, set = lf.maxTransitions, true
	}
	budget := &flowv1alpha1.SessionBudget{}
	if fs.Changed("max-tokens") {
		if lf.maxTokens < 1 {
			return nil, fmt.Errorf("--max-tokens must be 1 or more, got %d", lf.maxTokens)
		}
		budget.MaxTokens, l.Budget = lf.maxTokens, budget
	}
	if fs.Changed("max-cost-usd") {
		if !validDecimal(lf.maxCostUSD) {
			return nil, fmt.Errorf(`--max-cost-usd %q must be a non-negative decimal such as "2.50" (at most 9 digits before and after the point)`, lf.maxCostUSD)
		}
		budget.MaxCostUSD, l.Budget = flowv1alpha1.Decimal(lf.maxCostUSD), budget
	}
	if fs.Changed("max-tool-calls") {
		if lf.maxToolCalls < 1 {
			return nil, fmt.Errorf("--max-tool-calls must be 1 or more, got %d", lf.maxToolCalls)
		}
		budget.MaxToolCalls, l.Budget = lf.maxToolCalls, budget
	}
	if !set && l.Budget == nil {
		return nil, nil
	}
	return l, nil
}

// validDecimal is the Decimal type's rule: digits, optionally a point and more digits,
// at most nine on each side.
func validDecimal(s string) bool {
	whole, frac, hasPoint := strings.Cut(s, ".")
	digits := func(p string) bool {
		if len(p) < 1 || len(p) > 9 {
			return false
		}
		for _, r := range p {
			if r < '0' || r > '9' {
				return false
			}
		}
		return true
	}
	return digits(whole) && (!hasPoint || digits(frac))
}

// limitsPatch is the merge patch of spec.limits that sets the fields l sets and keeps
// the others, and the changes it makes ("maxTurns=200"); none when cur has them all.
func limitsPatch(cur, l *flowv1alpha1.SessionLimits) (map[string]any, []string) {
	if cur == nil {
		cur = &flowv1alpha1.SessionLimits{}
	}
	curBudget := cur.Budget
	if curBudget == nil {
		curBudget = &flowv1alpha1.SessionBudget{}
	}
	patch := map[string]any{}
	var changes []string
	if l.MaxTurns != 0 && l.MaxTurns != cur.MaxTurns {
		patch["maxTurns"] = l.MaxTurns
		changes = append(changes, "maxTurns="+strconv.Itoa(int(l.MaxTurns)))
	}
	if l.MaxIterations != 0 && l.MaxIterations != cur.MaxIterations {
		patch["maxIterations"] = l.MaxIterations
		changes = append(changes, "maxIterations="+strconv.Itoa(int(l.MaxIterations)))
	}
	if l.MaxTransitions != 0 && l.MaxTransitions != cur.MaxTransitions {
		patch["maxTransitions"] = l.MaxTransitions
		changes = append(changes, "maxTransitions="+strconv.Itoa(int(l.MaxTransitions)))
	}
	if b := l.Budget; b != nil {
		budget := map[string]any{}
		if b.MaxTokens != 0 && b.MaxTokens != curBudget.MaxTokens {
			budget["maxTokens"] = b.MaxTokens
			changes = append(changes, "budget.maxTokens="+strconv.FormatInt(b.MaxTokens, 10))
		}
		if b.MaxCostUSD != "" && !sameDecimal(b.MaxCostUSD, curBudget.MaxCostUSD) {
			budget["maxCostUSD"] = b.MaxCostUSD
			changes = append(changes, "budget.maxCostUSD="+string(b.MaxCostUSD))
		}
		if b.MaxToolCalls != 0 && b.MaxToolCalls != curBudget.MaxToolCalls {
			budget["maxToolCalls"] = b.MaxToolCalls
			changes = append(changes, "budget.maxToolCalls="+strconv.FormatInt(b.MaxToolCalls, 10))
		}
		if len(budget) > 0 {
			patch["budget"] = budget
		}
	}
	return patch, changes
}

// sameDecimal reports whether two decimals are the same number ("2.5" and "2.50").
func sameDecimal(a, b flowv1alpha1.Decimal) bool {
	x, okA := new(big.Rat).SetString(string(a))
	y, okB := new(big.Rat).SetString(string(b))
	return okA && okB && x.Cmp(y) == 0
}

const limitsExample = `  # Let a Session that maxTurns stalled take more turns
  kubectl journey limits patient-12345 --max-turns 200 --reason "long intake, on purpose"

  # Raise its budget and wait until it has gone on
  kubectl journey limits patient-12345 --max-cost-usd 5 --max-tokens 400000 --wait`

type limitsOptions struct {
	changeOptions
	limitFlags
}

func newLimitsCommand(o *Options) *cobra.Command {
	lo := &limitsOptions{changeOptions: changeOptions{Options: o}}
	cmd := &cobra.Command{
		Use:   "limits SESSION [--max-turns N] [--max-iterations N] [--max-transitions N] [--max-tokens N] [--max-cost-usd USD] [--max-tool-calls N]",
		Short: "Override the Journey's limits for one Session",
		Long: `Set fields of spec.limits, the Session's own override of its Journey's caps; fields
not given keep their value. A Session that a cap stalled
(TurnLimit, IterationLimit, TransitionLimit, BudgetExceeded) goes on at its next step
when the override lifts the cap.

A limit may only be set at or above what the Session has used: the admission webhook
refuses a lower one, naming what was used. --reason is kept in the
flow.journey.dev/limits-reason annotation. With --wait the command waits until the
Session has acted on the new limits (it waits for input or a person, is stalled, or
ended) and prints where it stands; it fails when it is still stalled.`,
		Example: limitsExample,
		Args:    exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return lo.run(cmd.Context(), cmd.Flags(), args[0])
		},
	}
	lo.limitFlags.add(cmd.Flags())
	lo.addFlags(cmd, "Wait until the Session has acted on the new limits and print where it stands")
	return cmd
}

func (lo *limitsOptions) run(ctx context.Context, fs *pflag.FlagSet, name string) error {
	mode, err := lo.strategy()
	if err != nil {
		return err
	}
	l, err := lo.limits(fs)
	if err != nil {
		return err
	}
	if l == nil {
		return errors.New("limits takes at least one of --max-turns, --max-iterations, --max-transitions, --max-tokens, --max-cost-usd and --max-tool-calls")
	}
	key, c, err := lo.target(name)
	if err != nil {
		return err
	}
	var changes []string
	s, sent, err := patchSession(ctx, c, key, mode, AnnotationLimitsReason, lo.reason, func(s *flowv1alpha1.Session) (map[string]any, error) {
		if err := notEnded(s, "limit"); err != nil {
			return nil, err
		}
		var patch map[string]any
		patch, changes = limitsPatch(s.Spec.Limits, l)
		if len(patch) == 0 {
			return nil, errUnchanged
		}
		return map[string]any{"limits": patch}, nil
	})
	if err != nil {
		return err
	}
	if !sent {
		fmt.Fprintf(lo.Out, "session/%s limits unchanged\n", name)
		return nil
	}
	fmt.Fprintf(lo.Out, "session/%s limits set: %s%s\n", name, strings.Join(changes, ", "), mode.suffix())
	if !lo.wait {
		return nil
	}
	gen := s.Generation
	s, err = lo.waitUntil(ctx, c, key, "to act on its new limits", func(s *flowv1alpha1.Session) bool { return settled(s, gen) })
	if err != nil {
		return err
	}
	return printState(lo.Out, s)
}
