package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

const sayExample = `  # Send a message; its id (m-<n>) is printed
  kubectl journey say patient-12345 "I need a cardiologist"

  # Send a message and wait for the Session's reply
  kubectl journey say patient-12345 "another option please" --wait --timeout 2m

  # Choose the message id yourself; sending the same id and text again is a no-op
  kubectl journey say patient-12345 "yes, book it" --id confirm-1 -n clinic

  # Read the text from standard input
  echo "I need a cardiologist" | kubectl journey say patient-12345 -`

type sayOptions struct {
	*Options
	id      string
	wait    bool
	timeout time.Duration
}

func newSayCommand(o *Options) *cobra.Command {
	so := &sayOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "say SESSION TEXT",
		Short: "Send a message to a Session",
		Long: `Append a message to spec.messages of a Session. TEXT "-" reads it from standard input.

The message gets the id m-<n> (n is its position, from 1) unless --id is given; when that
id is taken a short random suffix is added. Concurrent senders never overwrite each other:
the append is conditional on the Session's resourceVersion and retried on conflict.

With --wait the command waits until the Session has processed the message and stopped
running, then prints every reply of the message's turn (the pathways it led through
included), the pathway, the transitions and failures of the turn, and the phase. Exit
codes: 0 the turn answered; 2 the turn failed (its reply is the fallback, the Session
goes on); 1 anything else: a usage or API error, a Session that failed, was cancelled
or stalled, or no answer within --timeout.`,
		Example: sayExample,
		Args:    exactArgs(2, "SESSION and TEXT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return so.run(cmd.Context(), args[0], args[1])
		},
	}
	cmd.Flags().StringVar(&so.id, "id", "", "Message id (default m-<position>); letters, digits, '-', '_' and '.'")
	cmd.Flags().BoolVar(&so.wait, "wait", false, "Wait for the Session to process the message and print the reply")
	cmd.Flags().DurationVar(&so.timeout, "timeout", 60*time.Second, "How long --wait waits; 0 waits forever")
	return cmd
}

func (so *sayOptions) run(ctx context.Context, name, text string) error {
	if text == "-" {
		b, err := io.ReadAll(io.LimitReader(so.In, 8193))
		if err != nil {
			return fmt.Errorf("reading TEXT from standard input: %w", err)
		}
		text = strings.TrimRight(string(b), "\n")
	}
	if strings.TrimSpace(text) == "" {
		return errors.New("TEXT must not be empty")
	}
	if len(text) > 8192 {
		return fmt.Errorf("TEXT is %d bytes; a message holds at most 8192", len(text))
	}
	if so.id != "" {
		if err := validateMessageID(so.id); err != nil {
			return err
		}
	}
	if so.timeout < 0 {
		return errors.New("--timeout must not be negative")
	}
	key, err := so.sessionKey(name)
	if err != nil {
		return err
	}
	c, err := so.NewClient()
	if err != nil {
		return err
	}
	id, s, err := SendMessage(ctx, c, key, so.id, text)
	if err != nil {
		return err
	}
	fmt.Fprintf(so.Out, "message %s sent to session/%s\n", id, name)
	if s.Spec.Suspend {
		fmt.Fprintf(so.ErrOut, "warning: session/%s is suspended; the message waits until spec.suspend is false\n", name)
	}
	if !so.wait {
		return nil
	}
	waitCtx, cancel := withTimeout(ctx, so.timeout)
	defer cancel()
	sentGen := s.Generation
	var last *flowv1alpha1.Session
	err = observeSession(waitCtx, c, key, so.PollInterval, func(s *flowv1alpha1.Session) (bool, error) {
		last = s
		if !replyReady(s, id, sentGen) {
			return false, nil
		}
		pending, err := journeyPending(waitCtx, c, s)
		return !pending, err
	})
	if err != nil && last != nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("timed out after %s waiting for session/%s to process message %s: %s", so.timeout, name, id, progressSummary(last, id))
	}
	if err != nil {
		return err
	}
	return printReply(so.Out, last, id)
}

// SendMessage appends a message with the given text to the Session key and returns the
// message id and the patched Session. An empty id is generated (m-<n+1> for a Session
// with n messages, with a random suffix if taken). Sending an id that already holds the
// same text is a no-op, so a retried command does not send twice; the same id with other
// text is an error.
func SendMessage(ctx context.Context, c client.Client, key types.NamespacedName, id, text string) (string, *flowv1alpha1.Session, error) {
	var sent string
	s, err := appendToSession(ctx, c, key, "messages", func(s *flowv1alpha1.Session) (any, error) {
		if err := acceptsInput(s); err != nil {
			return nil, err
		}
		if id != "" {
			for _, m := range s.Spec.Messages {
				if m.ID != id {
					continue
				}
				if m.Text == text {
					sent = id
					return nil, errAlreadyThere
				}
				return nil, fmt.Errorf("message id %q is already used in session/%s by another message", id, s.Name)
			}
			sent = id
		} else {
			sent = nextMessageID(&s.Spec)
		}
		return flowv1alpha1.Message{ID: sent, Text: text}, nil
	})
	if err != nil {
		return "", nil, err
	}
	return sent, s, nil
}

// acceptsInput refuses to send to a Session that has ended: nothing would read it.
func acceptsInput(s *flowv1alpha1.Session) error {
	if s.Status.Phase.IsTerminal() || s.Spec.Cancel {
		phase := s.Status.Phase
		if !phase.IsTerminal() {
			phase = "being cancelled"
		}
		return fmt.Errorf("session/%s is %s and takes no more input", s.Name, phase)
	}
	return nil
}

// nextMessageID is m-<n+1> for a conversation of n messages (dropped ones included),
// or that with a random suffix when taken.
func nextMessageID(spec *flowv1alpha1.SessionSpec) string {
	msgs := spec.Messages
	used := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		used[m.ID] = true
	}
	n := int(spec.MessageCount()) + 1
	id := "m-" + strconv.Itoa(n)
	for used[id] {
		id = fmt.Sprintf("m-%d-%s", n, randomSuffix(5))
	}
	return id
}

func randomSuffix(n int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

func validateMessageID(id string) error {
	if len(id) > 64 {
		return fmt.Errorf("--id %q is longer than 64 characters", id)
	}
	for i, r := range id {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if alnum || (i > 0 && (r == '-' || r == '_' || r == '.')) {
			continue
		}
		return fmt.Errorf("--id %q must start with a letter or digit and contain only letters, digits, '-', '_' and '.'", id)
	}
	return nil
}

// replyReady reports whether waiting for message id is over: the Session processed it
// and stopped running, reached a terminal phase, or is stalled on a spec at least as new
// as generation gen (the one that carries the message).
func replyReady(s *flowv1alpha1.Session, id string, gen int64) bool {
	if s.Status.Phase.IsTerminal() {
		return true
	}
	if (stalled(s) != nil || cannotStart(s) != nil) && s.Status.ObservedGeneration >= gen {
		return true
	}
	idx := s.Spec.MessageNumber(id)
	processed := idx >= 0 && s.Status.ProcessedMessages > idx
	return processed && s.Status.Phase.HasStarted() && s.Status.Phase != flowv1alpha1.PhaseRunning
}

// cannotStart returns the Ready condition of a Session that has not started because
// its Journey does not exist or is not Ready: waiting for a reply cannot help.
func cannotStart(s *flowv1alpha1.Session) *metav1.Condition {
	if s.Status.Phase.HasStarted() {
		return nil
	}
	c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1alpha1.ConditionReady)
	if c != nil && (c.Reason == flowv1alpha1.ReasonJourneyNotFound || c.Reason == flowv1alpha1.ReasonJourneyNotReady) {
		return c
	}
	return nil
}

// journeyPending reports whether a Session that cannot start is only waiting for its
// Journey to be validated: the Journey exists and its controller has not yet said
// Ready=False about its current generation (the Session reported it before the Journey
// was created or validated). Waiting helps then; a missing or invalid Journey is final.
func journeyPending(ctx context.Context, c client.Client, s *flowv1alpha1.Session) (bool, error) {
	if cannotStart(s) == nil {
		return false, nil
	}
	var j flowv1alpha1.Journey
	err := c.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.JourneyRef.Name}, &j)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ready := apimeta.FindStatusCondition(j.Status.Conditions, flowv1alpha1.ConditionReady)
	return ready == nil || ready.ObservedGeneration < j.Generation || ready.Status == metav1.ConditionTrue, nil
}

func stalled(s *flowv1alpha1.Session) *metav1.Condition {
	c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1alpha1.ConditionStalled)
	if c != nil && c.Status == metav1.ConditionTrue {
		return c
	}
	return nil
}

// progressSummary says where a Session is, for timeouts.
func progressSummary(s *flowv1alpha1.Session, id string) string {
	phase := string(s.Status.Phase)
	if phase == "" {
		return "the Session has no status yet; is the journey-operator controller running?"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s, pathway %s, %d of %d messages processed", phase, orNone(s.Status.CurrentPathway), s.Status.ProcessedMessages, s.Spec.MessageCount())
	if s.Spec.Suspend {
		b.WriteString(", suspended")
	}
	if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1alpha1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue && c.Message != "" {
		fmt.Fprintf(&b, " (%s: %s)", c.Reason, c.Message)
	}
	if s.Status.ObservedGeneration < s.Generation {
		fmt.Fprintf(&b, "; the controller has not seen generation %d yet", s.Generation)
	}
	return b.String()
}

// ledInto reports whether message id caused a transition into pathway.
func ledInto(s *flowv1alpha1.Session, id, pathway string) bool {
	for _, h := range s.Status.History {
		if h.MessageID == id && h.To == pathway {
			return true
		}
	}
	return false
}

// printReply prints what message id led to: every reply of its turn, the pathway, the
// transitions it caused, its failures and the phase. It returns an error when the
// Session failed, was cancelled or stalled, and an ExitError with ExitTurnFailed when
// the message's turn failed and the Session goes on.
func printReply(w io.Writer, s *flowv1alpha1.Session, id string) error {
	t := s.Status.LastTurn
	mine := t != nil && t.MessageID == id
	switch {
	case mine:
		writeReplies(w, t)
	case t != nil && t.Trigger == flowv1alpha1.TurnEntry && t.AssistantText != "" && ledInto(s, id, t.Pathway):
		// A status written before entry runs were part of the message's turn: the
		// entry run's reply is what the person sees next.
		writeField(w, "Reply", t.AssistantText)
	case t != nil && t.Trigger == "" && len(t.Replies) > 0 && stalled(s) != nil:
		// A cap stopped the Session before the message's turn could start: its
		// answer says so.
		writeReplies(w, t)
	case t != nil && t.MessageID != "" && s.Spec.MessageNumber(t.MessageID) > s.Spec.MessageNumber(id):
		writeField(w, "Reply", fmt.Sprintf("<superseded: the last turn answered message %s>", t.MessageID))
	default:
		writeField(w, "Reply", "<none>")
	}
	pathway := s.Status.CurrentPathway
	if mine && t.Pathway != "" && t.Pathway != pathway {
		pathway = fmt.Sprintf("%s (answered in %s)", orNone(pathway), t.Pathway)
	}
	writeField(w, "Pathway", orNone(pathway))
	for _, h := range s.Status.History {
		if h.MessageID != id {
			continue
		}
		writeField(w, "Transition", describeHistory(h))
	}
	if mine {
		for _, f := range t.Failures {
			writeField(w, "Failure", f.Summary())
		}
	}
	writeField(w, "Phase", orNone(string(s.Status.Phase)))
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
	switch s.Status.Phase {
	case flowv1alpha1.PhaseFailed:
		reason := ""
		if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1alpha1.ConditionReady); c != nil && c.Message != "" {
			reason = ": " + c.Message
		}
		return fmt.Errorf("session/%s failed%s", s.Name, reason)
	case flowv1alpha1.PhaseCancelled:
		return fmt.Errorf("session/%s was cancelled", s.Name)
	}
	if mine && t.Failed() {
		why := string(t.FinishReason)
		if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1alpha1.ConditionTurnFailed); c != nil && c.Status == metav1.ConditionTrue {
			why = c.Reason
		}
		return &ExitError{Code: ExitTurnFailed, Err: fmt.Errorf("the turn of message %s in session/%s failed (%s); the Session goes on", id, s.Name, why)}
	}
	return nil
}

// writeReplies writes every reply of turn t, in order: one Reply line each, naming the
// pathway that replied when several did. A status written before turns kept their
// replies has only assistantText.
func writeReplies(w io.Writer, t *flowv1alpha1.TurnOutcome) {
	switch {
	case len(t.Replies) == 1:
		writeField(w, "Reply", t.Replies[0].Text)
	case len(t.Replies) > 1:
		for _, r := range t.Replies {
			writeField(w, "Reply", fmt.Sprintf("[%s] %s", orNone(r.Pathway), r.Text))
		}
	case t.AssistantText != "":
		writeField(w, "Reply", t.AssistantText)
	default:
		writeField(w, "Reply", "<none>")
	}
}

func describeHistory(h flowv1alpha1.HistoryEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s -> %s", orNone(h.From), orNone(h.To))
	var parts []string
	if h.Transition != "" {
		parts = append(parts, "via "+h.Transition)
	}
	if h.Action != "" {
		parts = append(parts, string(h.Action))
	}
	if h.Source != "" {
		parts = append(parts, "by "+string(h.Source))
	}
	if h.Confidence != "" {
		parts = append(parts, "confidence "+string(h.Confidence))
	}
	if len(parts) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	if h.Reason != "" {
		fmt.Fprintf(&b, ": %s", oneLine(h.Reason))
	}
	return b.String()
}

func describePending(session string, d *flowv1alpha1.DecisionRecord) string {
	s := fmt.Sprintf("%s is %s: %s -> %s", d.ID, d.State, orNone(d.From), orNone(d.To))
	if d.Confidence != "" {
		s += fmt.Sprintf(" (confidence %s)", d.Confidence)
	}
	s += fmt.Sprintf("; run 'kubectl journey approve %s'", session)
	if len(d.AllowedDestinations) > 0 {
		s += fmt.Sprintf(" (--to one of %s, or --reject)", strings.Join(d.AllowedDestinations, ", "))
	}
	return s
}

// writeField writes "Name:  value" in kubectl describe style, indenting continuation lines.
func writeField(w io.Writer, name, value string) {
	const width = 12
	label := name + ":"
	lines := strings.Split(strings.TrimRight(value, "\n"), "\n")
	fmt.Fprintf(w, "%-*s%s\n", width, label, lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(w, "%*s%s\n", width, "", l)
	}
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// exactArgs is cobra.ExactArgs with a message naming the arguments.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("%s takes %s (got %d arguments); see '%s --help'", cmd.Name(), what, len(args), cmd.CommandPath())
		}
		return nil
	}
}
