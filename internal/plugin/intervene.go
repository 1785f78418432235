package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// InterventionRequest is a person's act on a Session: the action and the field that
// action takes.
type InterventionRequest struct {
	// Action is Resume, Retry, Goto or Rewind.
	Action flowv1alpha1.InterventionAction
	// Reason says why; it goes into the Session's history and Events.
	Reason string
	// Limits raise the Session's caps as it resumes (Resume only).
	Limits *flowv1alpha1.SessionLimits
	// Feedback is what the agents are told when the turn runs again (Retry only).
	Feedback string
	// Pathway is where the Session goes (Goto only).
	Pathway string
	// Step is the step the Session is restored to (Rewind only).
	Step *int32
	// Revision is the Journey revision the Session moves to (Upgrade only); Force
	// moves it even when the replay of its journal diverges there.
	Revision string
	Force    bool
	// Call is the tool call answered, Outcome what became of it, Result and Content
	// its result for Done (Answer only).
	Call    string
	Outcome flowv1alpha1.AnswerOutcome
	Result  string
	Content *apiextensionsv1.JSON
	// Fields are a form's fields as FIELD=VALUE, for Accept: each value is given the
	// type the form's schema asks for, over Content's fields.
	Fields []string
	// DryRun, when server, has the API server admit the intervention without storing
	// it; when client, nothing is sent.
	DryRun dryRun
}

// Sent is an intervention as sent: the intervention, its position over the whole
// Session (from 0, as status.processedInterventions counts), and the Session it was
// appended to, as the API server returned it.
type Sent struct {
	Intervention flowv1alpha1.Intervention
	Index        int32
	Session      *flowv1alpha1.Session
	// StepBefore is status.step when it was sent: history entries it makes come after.
	StepBefore int64
	// At is when it was sent.
	At time.Time
}

// Intervene appends r to spec.interventions of the Session key, acting with c (and so
// with c's identity and permissions; the admission webhook stamps who). The
// intervention gets the id i-<n> (n its position, from 1; a short random suffix when
// taken). Processed interventions leave the front of the list in the same patch. It is
// checked against the latest Session first: a Session that is cancelled takes none, a
// Goto must name a pathway of the Session's journey, and a Rewind a step the Session
// has taken.
func Intervene(ctx context.Context, c client.Client, key types.NamespacedName, r InterventionRequest) (*Sent, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	var sent Sent
	build := func(s *flowv1alpha1.Session) (any, error) {
		r := r
		if err := r.formContent(s); err != nil {
			return nil, err
		}
		if err := acceptsIntervention(ctx, c, s, r); err != nil {
			return nil, err
		}
		sent = Sent{
			Intervention: flowv1alpha1.Intervention{
				ID: nextInterventionID(&s.Spec), Action: r.Action, Reason: r.Reason,
				Limits: r.Limits, Feedback: r.Feedback, Pathway: flowv1alpha1.Name(r.Pathway), Step: r.Step,
				Revision: r.Revision, Force: r.Force,
				Call: r.Call, Outcome: r.Outcome, Result: r.Result, Content: r.Content,
			},
			Index:      s.Spec.InterventionCount(),
			StepBefore: s.Status.Step,
			At:         time.Now(),
			Session:    s,
		}
		return sent.Intervention, nil
	}
	if r.DryRun == dryRunClient {
		s := &flowv1alpha1.Session{}
		if err := c.Get(ctx, key, s); err != nil {
			return nil, sessionError(key, err)
		}
		if _, err := build(s); err != nil {
			return nil, err
		}
		return &sent, nil
	}
	var opts []client.PatchOption
	if r.DryRun == dryRunServer {
		opts = append(opts, client.DryRunAll)
	}
	s, err := appendToSession(ctx, c, key, "interventions", build, opts...)
	if apierrors.IsNotFound(err) {
		return nil, sessionError(key, err)
	}
	if err != nil {
		return nil, err
	}
	sent.Session = s
	return &sent, nil
}

// validate checks what can be checked without the cluster.
func (r *InterventionRequest) validate() error {
	if len(r.Reason) > 512 {
		return fmt.Errorf("--reason is %d characters; at most 512 are kept", len(r.Reason))
	}
	if len(r.Feedback) > 1024 {
		return fmt.Errorf("--feedback is %d characters; at most 1024 are kept", len(r.Feedback))
	}
	if r.Step != nil && *r.Step < 0 {
		return fmt.Errorf("--to-step must be 0 or more, got %d", *r.Step)
	}
	if len(r.Result) > 1024 {
		return fmt.Errorf("--done is %d characters; at most 1024 are kept (a larger result goes in --content)", len(r.Result))
	}
	return nil
}

// acceptsIntervention refuses what the Session could only refuse: an intervention on
// a Session that is cancelled (a cancel cannot be undone), a Goto to a pathway its
// journey does not have, a Rewind to a step it has not taken. Whether the action
// applies to the Session as it stands (is there anything to resume?) is for the
// admission webhook and the controller to say.
func acceptsIntervention(ctx context.Context, c client.Client, s *flowv1alpha1.Session, r InterventionRequest) error {
	if s.Status.Phase == flowv1alpha1.PhaseCancelled || s.Spec.Cancel {
		return fmt.Errorf("session/%s is cancelled: a cancel cannot be undone, there is nothing to %s", s.Name, strings.ToLower(string(r.Action)))
	}
	switch r.Action {
	case flowv1alpha1.InterventionGoto:
		return journeyHasPathway(ctx, c, s, r.Pathway)
	case flowv1alpha1.InterventionRewind:
		if int64(*r.Step) >= s.Status.Step {
			return fmt.Errorf("session/%s is at step %d: --to-step %d is not a step it has taken and left", s.Name, s.Status.Step, *r.Step)
		}
	case flowv1alpha1.InterventionUpgrade:
		return upgradeTarget(ctx, c, s, r.Revision)
	case flowv1alpha1.InterventionAnswer:
		c := s.Status.TurnToolCall(r.Call)
		if c == nil || (c.State != flowv1alpha1.ToolCallOutcomeUnknown && c.WaitingElicitation() == nil) {
			var ids []string
			for c := range s.Status.AnswerableToolCalls() {
				ids = append(ids, c.ID)
			}
			waiting := "no tool call of it waits for an answer"
			if len(ids) > 0 {
				waiting = "waiting for an answer: " + strings.Join(ids, ", ")
			}
			return fmt.Errorf("tool call %s of session/%s does not wait for an answer (%s)", r.Call, s.Name, waiting)
		}
		if why := c.AnswerFits(r.Outcome, r.Content); why != "" {
			return fmt.Errorf("session/%s: %s", s.Name, why)
		}
	}
	return nil
}

// formContent makes r.Fields, FIELD=VALUE pairs, the content of an Accept: each
// value of the type the form call r.Call waits on asks for, over the fields of
// --content.
func (r *InterventionRequest) formContent(s *flowv1alpha1.Session) error {
	if len(r.Fields) == 0 {
		return nil
	}
	e := s.Status.TurnToolCall(r.Call).WaitingElicitation()
	if e == nil {
		return fmt.Errorf("tool call %s of session/%s waits for no form: FIELD=VALUE answers a form its server asked for", r.Call, s.Name)
	}
	fields := map[string]any{}
	if r.Content != nil {
		if err := json.Unmarshal(r.Content.Raw, &fields); err != nil {
			return fmt.Errorf("--content must be a JSON object: %w", err)
		}
	}
	for _, kv := range r.Fields {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return fmt.Errorf("%q is not FIELD=VALUE", kv)
		}
		v, err := e.ParseField(name, value)
		if err != nil {
			return err
		}
		fields[name] = v
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	r.Content = &apiextensionsv1.JSON{Raw: raw}
	return nil
}

// upgradeTarget refuses a revision that is not one of the Session's journey, or the
// one it runs on already. A revision that cannot be read (RBAC) is for the controller
// to check.
func upgradeTarget(ctx context.Context, c client.Client, s *flowv1alpha1.Session, revision string) error {
	j := s.Spec.JourneyRef.Name
	if !strings.HasPrefix(revision, j+"-") {
		return fmt.Errorf("%s is not a revision of journey %s: its revisions are named %s-<hash> (kubectl get journey %s -o wide shows the latest and the ready one)", revision, j, j, j)
	}
	if revision == s.Status.JourneyRevision {
		return fmt.Errorf("session/%s already runs on revision %s", s.Name, revision)
	}
	var rev appsv1.ControllerRevision
	if err := c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: revision}, &rev); apierrors.IsNotFound(err) {
		return fmt.Errorf("revision %s of journey %s does not exist in namespace %s", revision, j, s.Namespace)
	}
	return nil
}

// journeyHasPathway refuses a pathway the Session's Journey does not have, naming the
// ones it has. When the Journey cannot be read there is nothing to check against.
func journeyHasPathway(ctx context.Context, c client.Client, s *flowv1alpha1.Session, pathway string) error {
	var j flowv1alpha1.Journey
	if err := c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Spec.JourneyRef.Name}, &j); err != nil {
		return nil
	}
	names := make([]string, 0, len(j.Spec.Pathways))
	for _, p := range j.Spec.Pathways {
		if string(p.Name) == pathway {
			return nil
		}
		names = append(names, string(p.Name))
	}
	return fmt.Errorf("pathway %q is not a pathway of journey %q (it has %s)", pathway, j.Name, strings.Join(names, ", "))
}

// nextInterventionID is i-<n+1> for a Session sent n interventions, or that with a
// random suffix when taken.
func nextInterventionID(spec *flowv1alpha1.SessionSpec) string {
	n := int(spec.InterventionCount()) + 1
	id := "i-" + strconv.Itoa(n)
	for slices.ContainsFunc(spec.Interventions, func(i flowv1alpha1.Intervention) bool { return i.ID == id }) {
		id = fmt.Sprintf("i-%d-%s", n, randomSuffix(5))
	}
	return id
}

// Outcome is what became of an intervention: refused (with the controller's reason),
// or applied, with the history entries it made.
type Outcome struct {
	Refused string
	Entries []flowv1alpha1.HistoryEntry
}

// interventionComponent prefixes, in status.lastTurn.failures, the component of the
// failure that records why an earlier version of the controller refused an
// intervention ("intervention i-3").
const interventionComponent = "intervention "

// outcomeOf says what became of sent once s has processed it. The history entries it
// made come after the step it was sent at and name its action; a refusal is its
// record in status.interventions (or, from an earlier version of the controller, the
// last turn's failure of component "intervention <id>"), else a Warning Event about
// the Session, from when it was sent on, that names the intervention (its id, or a
// reason about interventions). Events are written after the status, so the Event is
// looked for until ctx ends.
func outcomeOf(ctx context.Context, c client.Client, s *flowv1alpha1.Session, sent *Sent, interval time.Duration) (Outcome, error) {
	var o Outcome
	for _, h := range s.Status.History {
		if h.Step > sent.StepBefore && h.Intervention == sent.Intervention.Action {
			o.Entries = append(o.Entries, h)
		}
	}
	if len(o.Entries) > 0 {
		return o, nil
	}
	if rec := s.Status.InterventionRecord(sent.Intervention.ID); rec != nil && rec.Step > sent.StepBefore {
		o.Refused = rec.Refusal()
		return o, nil
	}
	if lt := s.Status.LastTurn; lt != nil {
		for _, f := range lt.Failures {
			if f.Component == interventionComponent+sent.Intervention.ID {
				o.Refused = f.Message
				return o, nil
			}
		}
	}
	for {
		msg, err := refusal(ctx, c, s, sent)
		if errors.Is(err, errNoEvents) {
			return o, nil
		}
		if err != nil || msg != "" {
			o.Refused = msg
			return o, err
		}
		select {
		case <-ctx.Done():
			return o, nil
		case <-time.After(interval):
		}
	}
}

// errNoEvents says that the caller may not read Events: a refusal cannot be told.
var errNoEvents = errors.New("may not list Events")

// refusal is the note of the Warning Event that refused sent, or "".
func refusal(ctx context.Context, c client.Client, s *flowv1alpha1.Session, sent *Sent) (string, error) {
	var list eventsv1.EventList
	err := c.List(ctx, &list, client.InNamespace(s.Namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("regarding.name", s.Name)})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return "", nil
	case apierrors.IsForbidden(err):
		return "", errNoEvents
	default:
		return "", fmt.Errorf("reading the Events of session/%s: %w", s.Name, err)
	}
	since := sent.At.Add(-2 * time.Second)
	for _, e := range list.Items {
		if e.Type != corev1.EventTypeWarning || e.Regarding.UID != s.UID || e.EventTime.Time.Before(since) {
			continue
		}
		if strings.Contains(e.Note, sent.Intervention.ID) || e.Reason == flowv1alpha1.ReasonInterventionRefused {
			return e.Note, nil
		}
	}
	return "", nil
}

// interveneOptions are the flags of resume, retry, goto, rewind and answer.
type interveneOptions struct {
	changeOptions
	limitFlags
	feedback string
	step     int32
	revision string
	force    bool
	done     string
	notDone  bool
	fail     bool
	accept   bool
	decline  bool
	cancel   bool
	content  string
}

const resumeExample = `  # Resume a Session that a cap, loop prevention or a timeout stopped
  kubectl journey resume patient-12345 --reason "the loop was a false alarm"

  # Resume it with more turns and a larger budget, and wait until it has gone on
  kubectl journey resume patient-12345 --max-turns 200 --max-cost-usd 5 --wait

  # Ask the API server (and its admission webhooks) whether it would take it
  kubectl journey resume patient-12345 --dry-run=server`

const retryExample = `  # Run the current pathway's last turn again, telling its agents what to do better
  kubectl journey retry patient-12345 --feedback "use the patient's insurance id" --wait`

const gotoExample = `  # Move a Session to another pathway of its journey
  kubectl journey goto patient-12345 booking --reason "intake is done, the form was on paper"`

const upgradeExample = `  # Move a Session to the journey's ready revision when its journal replays the same there
  kubectl journey upgrade patient-12345 --to-revision healthcare-referral-7c9d5f6b8 --wait

  # Move it even though a step would have gone otherwise, saying why
  kubectl journey upgrade patient-12345 --to-revision healthcare-referral-7c9d5f6b8 --force --reason "the old prompt was wrong"`

const answerExample = `  # A booking call whose outcome is unknown was in fact made: give the model its result
  kubectl journey answer patient-12345 t-7-0 --done "booked slot 10:30, confirmation C-881" --wait

  # It was not made: send it again (with the same idempotency key)
  kubectl journey answer patient-12345 t-7-0 --not-done

  # Give up on it: the model is told the call failed, and why
  kubectl journey answer patient-12345 t-7-0 --fail --reason "the clinic's system is down"

  # The clinic's server asks who the appointment is for: fill in its form
  kubectl journey answer patient-12345 t-9-0 --accept name="Ada Lovelace" age=36 --wait

  # The same, the fields as JSON
  kubectl journey answer patient-12345 t-9-0 --accept --content '{"name": "Ada Lovelace", "age": 36}'

  # The server asked to visit a page (a URL): say it was visited, or decline
  kubectl journey answer patient-12345 t-9-0 --accept
  kubectl journey answer patient-12345 t-9-0 --decline`

const rewindExample = `  # Restore a Session to how it was after step 12 (see kubectl journey history -o wide)
  kubectl journey rewind patient-12345 --to-step 12 --reason "wrong doctor booked" --wait`

func newInterventionCommand(o *Options, action flowv1alpha1.InterventionAction) *cobra.Command {
	io := &interveneOptions{changeOptions: changeOptions{Options: o}}
	cmd := &cobra.Command{Args: exactArgs(1, "SESSION")}
	waitHelp := "Wait until the Session has processed the intervention, then print what it did"
	io.describe(cmd, action)
	cmd.Long += `

The intervention gets the id i-<n>; the admission webhook records who sent it, and may
refuse it (there is nothing to resume, say): the command then fails with its message.
--dry-run=server asks the API server, webhooks included, without storing anything.
With --wait the command waits until the controller has processed it, then prints the
history entries it made and where the Session stands; it fails when the controller
refused it (printing why), when the Session is still stalled, or after --timeout.`
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return io.run(cmd.Context(), cmd.Flags(), action, args)
	}
	io.addFlags(cmd, waitHelp)
	return cmd
}

// describe gives cmd, the command of action, its use, help, example and own flags.
func (io *interveneOptions) describe(cmd *cobra.Command, action flowv1alpha1.InterventionAction) {
	switch action {
	case flowv1alpha1.InterventionResume:
		cmd.Use = "resume SESSION [--max-turns N] [--max-iterations N] [--max-transitions N] [--max-tokens N] [--max-cost-usd USD] [--max-tool-calls N]"
		cmd.Short = "Let a blocked Session go on: lift a cap, loop prevention, a timeout or a failure"
		cmd.Long = `Append a Resume intervention to spec.interventions: the controller lifts what blocks
the Session (a cap on turns, iterations, transitions, budget or time, loop prevention,
the retry limit, a timeout, a failure) and it goes on. --max-turns and the budget flags
raise its limits in the same act (they become spec.limits), so the cap that stopped
it does not stop it again at once.`
		cmd.Example = resumeExample
		io.limitFlags.add(cmd.Flags())
	case flowv1alpha1.InterventionRetry:
		cmd.Use = "retry SESSION [--feedback TEXT]"
		cmd.Short = "Run the current pathway's last turn again"
		cmd.Long = `Append a Retry intervention to spec.interventions: the controller runs the current
pathway's last turn again, and its agents are told --feedback, as when a decision
retries a pathway with feedback.`
		cmd.Example = retryExample
		cmd.Flags().StringVar(&io.feedback, "feedback", "", "What the pathway's agents are told when the turn runs again")
	case flowv1alpha1.InterventionGoto:
		cmd.Use = "goto SESSION PATHWAY"
		cmd.Short = "Move a Session to another pathway of its journey"
		cmd.Long = `Append a Goto intervention to spec.interventions: the controller moves the Session
to PATHWAY, which must be a pathway of its journey (checked before anything is sent).`
		cmd.Example = gotoExample
		cmd.Args = exactArgs(2, "SESSION and PATHWAY")
	case flowv1alpha1.InterventionRewind:
		cmd.Use = "rewind SESSION --to-step N"
		cmd.Short = "Restore a Session to how it was after an earlier step"
		cmd.Long = `Append a Rewind intervention to spec.interventions: the controller restores the
Session's pathway, pathway stack, iteration and context to what they were after step N
(a status.step its history still keeps; 'kubectl journey history -o wide' shows the
steps). The exchanges and answers after it stay on record, marked rewound.`
		cmd.Example = rewindExample
		cmd.Flags().Int32Var(&io.step, "to-step", 0, "The step to restore the Session to (required)")
		_ = cmd.MarkFlagRequired("to-step")
	case flowv1alpha1.InterventionUpgrade:
		cmd.Use = "upgrade SESSION --to-revision REVISION [--force]"
		cmd.Short = "Move a running Session to another revision of its journey"
		cmd.Long = `Append an Upgrade intervention to spec.interventions: the controller replays the
Session's journal on REVISION through the engine, offline (every agent and tool call is
answered from the journal; no model or tool is called). When every step reproduces (the
same transitions, questions, replies and status), the Session moves to REVISION, an
Upgraded Event says so, and its next turns run on it. Otherwise it stays where it is and
its UpgradeBlocked condition names the first step that diverges and the field; --force
moves it anyway, and its history records that it was forced and by whom.`
		cmd.Example = upgradeExample
		cmd.Flags().StringVar(&io.revision, "to-revision", "", "The Journey revision to move the Session to (required; the Journey's status.readyRevision is the newest valid one)")
		cmd.Flags().BoolVar(&io.force, "force", false, "Move the Session even when the replay of its journal diverges on the revision")
		_ = cmd.MarkFlagRequired("to-revision")
	case flowv1alpha1.InterventionAnswer:
		io.describeAnswer(cmd)
	}
}

// describeAnswer gives cmd, the answer command, its use, help, example and flags.
func (io *interveneOptions) describeAnswer(cmd *cobra.Command) {
	cmd.Use = "answer SESSION CALL (--done RESULT | --not-done | --fail [--reason TEXT] | --accept [FIELD=VALUE...] | --decline | --cancel)"
	cmd.Short = "Answer a tool call that waits on a person: its outcome is unknown, or its server asks for input"
	cmd.Long = `Append an Answer intervention to spec.interventions for the tool call CALL (its id,
t-<step>-<index>, as the Session's conditions and 'kubectl journey history' show it).

A call to a tool server whose idempotency is None that was sent but never answered
has an unknown outcome, and is not sent again on its own: say what became of it.
--done RESULT: it was done, RESULT is its result (--content gives a JSON object instead);
--not-done: it was not, send it again (with the same idempotency key); --fail: the call
fails, and the model is told so, with --reason.

A tool server may ask the user for input during a call (MCP elicitation): a form to
fill in, or a page to visit. The Session waits (its AwaitingInput condition shows the
question, the form's fields and this command). --accept gives the form's fields, as
FIELD=VALUE arguments (each value of the type the form asks for) or as --content JSON,
or says the page was visited; --decline and --cancel refuse. The call is then sent
again, with the same idempotency key, and the server given the answer; what it
answers goes back to the model. The fields are checked against the form before
anything is sent.`
	cmd.Example = answerExample
	cmd.Args = answerArgs
	cmd.Flags().StringVar(&io.done, "done", "", "The call was done: RESULT is its result, as text")
	cmd.Flags().BoolVar(&io.notDone, "not-done", false, "The call was not done: send it again, with the same idempotency key")
	cmd.Flags().BoolVar(&io.fail, "fail", false, "The call fails: the model is told so, with --reason")
	cmd.Flags().BoolVar(&io.accept, "accept", false, "Give the input the call's server asked for: a form's fields (FIELD=VALUE arguments or --content), or a page visited")
	cmd.Flags().BoolVar(&io.decline, "decline", false, "Decline to give the input the call's server asked for")
	cmd.Flags().BoolVar(&io.cancel, "cancel", false, "Dismiss the server's request for input without a choice")
	cmd.Flags().StringVar(&io.content, "content", "", "With --done: the call's result as a JSON object, instead of text; with --accept: the form's fields as a JSON object")
	cmd.MarkFlagsMutuallyExclusive("done", "not-done", "fail", "accept", "decline", "cancel")
	cmd.MarkFlagsOneRequired("done", "not-done", "fail", "accept", "decline", "cancel")
}

func (io *interveneOptions) run(ctx context.Context, fs *pflag.FlagSet, action flowv1alpha1.InterventionAction, args []string) error {
	mode, err := io.strategy()
	if err != nil {
		return err
	}
	r := InterventionRequest{Action: action, Reason: io.reason, DryRun: mode}
	switch action {
	case flowv1alpha1.InterventionResume:
		if r.Limits, err = io.limits(fs); err != nil {
			return err
		}
	case flowv1alpha1.InterventionRetry:
		r.Feedback = io.feedback
	case flowv1alpha1.InterventionGoto:
		r.Pathway = args[1]
		if r.Pathway == "" {
			return errors.New("PATHWAY must not be empty")
		}
	case flowv1alpha1.InterventionRewind:
		r.Step = &io.step
	case flowv1alpha1.InterventionUpgrade:
		if io.revision == "" {
			return errors.New("--to-revision must not be empty")
		}
		r.Revision, r.Force = io.revision, io.force
	case flowv1alpha1.InterventionAnswer:
		if err := io.answer(fs, &r, args[1], args[2:]); err != nil {
			return err
		}
	}
	name := args[0]
	key, c, err := io.target(name)
	if err != nil {
		return err
	}
	sent, err := Intervene(ctx, c, key, r)
	if err != nil {
		return err
	}
	fmt.Fprintf(io.Out, "intervention %s (%s) sent to session/%s%s\n", sent.Intervention.ID, action, name, mode.suffix())
	if !io.wait {
		return nil
	}
	gen := sent.Session.Generation
	s, err := io.waitUntil(ctx, c, key, "to process intervention "+sent.Intervention.ID, func(s *flowv1alpha1.Session) bool {
		return s.Status.ProcessedInterventions > sent.Index && settled(s, gen)
	})
	if err != nil {
		return err
	}
	// The Event that says why an intervention was refused may lag the status a little.
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	o, err := outcomeOf(octx, c, s, sent, io.PollInterval)
	if err != nil {
		return err
	}
	return printOutcome(io.Out, s, sent, o)
}

// answerArgs are SESSION and CALL, and FIELD=VALUE arguments after them.
func answerArgs(cmd *cobra.Command, args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("%s takes SESSION and CALL, and FIELD=VALUE arguments with --accept (got %d arguments); see '%s --help'", cmd.Name(), len(args), cmd.CommandPath())
	}
	return nil
}

// answer fills r with the Answer the flags give for call; fields are FIELD=VALUE
// arguments, for --accept.
func (io *interveneOptions) answer(fs *pflag.FlagSet, r *InterventionRequest, call string, fields []string) error {
	if call == "" {
		return errors.New("CALL must not be empty")
	}
	r.Call = call
	switch {
	case fs.Changed("done"):
		r.Outcome, r.Result = flowv1alpha1.AnswerDone, io.done
	case io.notDone:
		r.Outcome = flowv1alpha1.AnswerNotDone
	case io.fail:
		r.Outcome = flowv1alpha1.AnswerFail
	case io.accept:
		r.Outcome = flowv1alpha1.AnswerAccept
	case io.decline:
		r.Outcome = flowv1alpha1.AnswerDecline
	case io.cancel:
		r.Outcome = flowv1alpha1.AnswerCancel
	}
	if len(fields) > 0 && r.Outcome != flowv1alpha1.AnswerAccept {
		return fmt.Errorf("FIELD=VALUE arguments (%s) go with --accept: they fill in the form a call's server asked for", strings.Join(fields, " "))
	}
	r.Fields = fields
	if io.content == "" {
		return nil
	}
	if r.Outcome != flowv1alpha1.AnswerDone && r.Outcome != flowv1alpha1.AnswerAccept {
		return errors.New("--content goes with --done (the result of a call that was done) or --accept (a form's fields)")
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(io.content), &obj); err != nil || obj == nil {
		return fmt.Errorf("--content must be a JSON object: %s", io.content)
	}
	r.Content = &apiextensionsv1.JSON{Raw: []byte(io.content)}
	return nil
}

// printOutcome prints what became of an intervention and where the Session stands.
func printOutcome(w io.Writer, s *flowv1alpha1.Session, sent *Sent, o Outcome) error {
	id, action := sent.Intervention.ID, sent.Intervention.Action
	if o.Refused != "" {
		writeField(w, "Refused", o.Refused)
		writeField(w, "Phase", orNone(string(s.Status.Phase)))
		return fmt.Errorf("session/%s refused intervention %s (%s): %s", s.Name, id, action, oneLine(o.Refused))
	}
	for _, h := range o.Entries {
		writeField(w, "Transition", describeHistory(h))
	}
	if action == flowv1alpha1.InterventionUpgrade {
		writeField(w, "Revision", orNone(s.Status.JourneyRevision))
	}
	return printState(w, s)
}
