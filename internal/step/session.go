// Package step is the Session step protocol, written once for every caller: the
// Session controller, `kubectl journey test`, record and replay. It owns the whole
// step: it asks the engine for the next status and effect (engine.Step), performs the
// effect through a Performer (Agents, built on the ports AgentFactory and ToolCaller,
// or a journey test's recorded answers), journals the answer and applies it in the
// same status, and hands back one status to write with what happened. A write carries
// at most one model call (see Loop.Step); a status equal to the Session's writes
// nothing.
//
// A kind of effect is described once, in Kinds: how agents perform it and how its
// answer is recorded in a journey test and read back from a journal.
package step

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/engine"
)

// Input is a Session as a step reads it: what the engine reads, and the generation
// the step observes.
type Input struct {
	engine.Input
	// Generation is the Session's metadata.generation: the status's observedGeneration
	// after the step.
	Generation int64
}

// InputOf is Session s as a step reads it at now.
func InputOf(s *flowv1.Session, now time.Time) Input {
	return Input{Generation: s.Generation, Input: engine.Input{
		Spec: &s.Spec, Status: &s.Status, Now: now,
		SessionName: s.Name, SessionUID: string(s.UID), CreationTime: s.CreationTimestamp.Time,
	}}
}

// Answer is a performer's answer to an effect.
type Answer struct {
	// Response is what the agents returned (agent.PathwayResponse, DecisionResponse or
	// IntentResponse), Err their error. A Transient error journals nothing (the step
	// is tried again), a Terminal one stalls the Session, an Invalid one is journaled.
	Response any
	Err      error
	// Record, when set, is a journaled answer to store as it is (a replayed Session).
	Record *flowv1.EffectRecord
}

// Performer performs the effect a step asks for. An error means there is no answer
// at all (a journey test without the recorded answer): the step stops, nothing is
// journaled.
type Performer interface {
	Perform(ctx context.Context, eff *engine.Effect) (Answer, error)
}

// PerformerFunc adapts a function to Performer.
type PerformerFunc func(ctx context.Context, eff *engine.Effect) (Answer, error)

// Perform calls f.
func (f PerformerFunc) Perform(ctx context.Context, eff *engine.Effect) (Answer, error) {
	return f(ctx, eff)
}

// Outcome is what a step did.
type Outcome string

const (
	// Unchanged: the step changed nothing (the Session waits for input); nothing to write.
	Unchanged Outcome = "Unchanged"
	// Changed: the step changed the status without calling an agent.
	Changed Outcome = "Changed"
	// Performed: the step called an agent and journaled its answer.
	Performed Outcome = "Performed"
	// AgentRetry: the agent failed transiently; nothing is journaled, the status only
	// says the agent is not available, and the same step is tried again.
	AgentRetry Outcome = "AgentRetry"
	// AgentStalled: the agent failed terminally; the status says the Session is
	// Stalled until a person fixes the agent or changes the Session.
	AgentStalled Outcome = "AgentStalled"
)

// Result is one step: the status to write and what led to it.
type Result struct {
	// Status is the Session's next status, deep-equal to the input when Outcome is
	// Unchanged (or when a failing agent changes nothing more).
	Status *flowv1.SessionStatus
	// Effect is the last effect the write performed (or the one that failed), nil
	// for none.
	Effect *engine.Effect
	// Calls counts the effects the write performed: at most one model call, and tool
	// calls.
	Calls int
	// Outcome is what the step did.
	Outcome Outcome
	// Reason, Message and Err say why the agent failed, for AgentRetry and
	// AgentStalled: the condition's reason and message, and the agent's error.
	Reason, Message string
	Err             error
}

// Loop steps Sessions, performing their effects with Performer.
type Loop struct {
	Performer Performer
	// StallRetry, when set, is how often the caller tries a Session stalled by a
	// terminal agent error again; the Stalled condition says so.
	StallRetry time.Duration
	// MoreSteps, when positive, is how many more engine steps one write may carry
	// after its first, besides the steps that apply a journaled answer (those are
	// always taken: see Step). Zero takes one step, and the step that applies its
	// answer, per write.
	MoreSteps int
	// Budgets, when set, is the ledger of the Budgets that select the Session (their
	// rooms are in the Input): each call's worst case is reserved in it before the call
	// is made, and each answer is charged to them in the status that journals it.
	Budgets Reserver
	// WriteFirst, when set, writes status before the effect returned with it is made,
	// when the engine asks for that (Effect.WriteFirst: a call to a server without
	// idempotency keys, marked sent); the step's own write then follows from the
	// status written. It must not keep status. An error stops the step, the call not
	// made. Without it the call is made with no write first (an offline run, which has
	// no second attempt to guard against).
	WriteFirst func(ctx context.Context, status *flowv1.SessionStatus) error
	// Fault, when set, is called at each point of an effect's life where a crash
	// could stop the step (see FaultPoint): an error stops the step there, with
	// nothing more performed and nothing to write, as if the process had died. Tests
	// of crash recovery set it; nil in production.
	Fault func(ctx context.Context, at FaultPoint, eff *engine.Effect) error
}

// FaultPoint is a point of an effect's life in a step, where Loop.Fault is called.
type FaultPoint string

const (
	// FaultBeforeCall: the effect's call is about to be made. A tool call's
	// write-ahead record is on the API server; a call to a server without
	// idempotency keys is not marked sent yet.
	FaultBeforeCall FaultPoint = "BeforeCall"
	// FaultAfterMarkedSent: the status marking a call to a server without
	// idempotency keys sent is written; the request is not sent yet.
	FaultAfterMarkedSent FaultPoint = "AfterMarkedSent"
	// FaultAfterAnswer: the call's answer (or its failure) arrived; nothing is
	// journaled.
	FaultAfterAnswer FaultPoint = "AfterAnswer"
	// FaultAfterJournal: the answer is journaled in the status the step will
	// write, which is not written yet.
	FaultAfterJournal FaultPoint = "AfterJournal"
)

// fault calls l.Fault at point at of eff, if set.
func (l *Loop) fault(ctx context.Context, at FaultPoint, eff *engine.Effect) error {
	if l.Fault == nil {
		return nil
	}
	return l.Fault(ctx, at, eff)
}

// Reserver is the Session's port to the ledger of its Budgets.
type Reserver interface {
	// Reserve holds need for call key in every Budget of the Session when it fits in
	// all of them; otherwise it holds nothing and returns the Budgets' rooms as they
	// are now. Reserving a key again replaces its hold.
	Reserve(key string, need engine.Spend) (rooms []engine.BudgetRoom, ok bool)
	// Wait says the Session waits for room for a call needing need.
	Wait(need engine.Spend)
}

// maxReserveTries bounds how often a step asks again for a call whose reservation
// another Session's took the room of.
const maxReserveTries = 4

// Step takes the engine steps of one status write, performing their effects, and
// returns the status to write. The write carries:
//
//   - at most one model call (a RunPathway, Decide or ClassifyIntent effect), its
//     answer journaled and applied in the same status: applying is pure, so a crash
//     before the write repeats that one call and nothing was acted on;
//   - the tool calls whose write-ahead records the Session had already written (a
//     model answer's calls are planned in the write that journals the answer, and
//     made in the next reconcile, each with the idempotency key of its record), and
//     builtin tool calls, which are pure;
//   - pure steps (builtin agents, an entry run after a transition, the next pending
//     message of a builtin chat), up to MoreSteps of them.
//
// It stops before a step whose effect it may not perform: that step is left for the
// next write, which takes it again from the written status (the engine is
// deterministic). So a turn with no model call is one write, and a turn with k model
// calls is k writes, whatever its tool calls.
func (l *Loop) Step(ctx context.Context, snap *engine.Snapshot, in Input) (Result, error) {
	res := Result{Outcome: Changed}
	status, modelCalls := in.Status, 0
	written := in.Status // what the Session has on the API server
steps:
	for taken := 0; taken < maxStepsPerWrite; taken++ {
		next := in.Input
		next.Status = status
		st, eff := engine.Step(snap, next)
		if eff != nil && l.Budgets != nil && len(next.Budgets) > 0 {
			var err error
			if st, eff, err = l.reserve(snap, &next, st, eff); err != nil {
				res.Status = status
				return res, err
			}
			in.Budgets = next.Budgets
		}
		if taken > 0 {
			switch {
			case eff == nil && st.Step == status.Step:
				break steps // nothing more to do
			case status.PendingEffect == nil && taken > l.MoreSteps:
				break steps // the write carries enough
			case eff != nil && !mayPerform(eff, written, modelCalls):
				break steps // left for the next write
			}
		}
		if eff != nil {
			ans, before, err := l.call(ctx, snap, in.Now, status, st, eff, &written)
			if err != nil {
				res.Status, res.Effect = st, eff
				return res, err
			}
			if failed, ok := l.agentFailed(snap, before, in, eff, &ans); ok {
				failed.Effect = eff
				return failed, nil
			}
			rec := ans.Record.DeepCopy()
			if rec == nil {
				rec = eff.Record(in.SessionUID, st.Step, ans.Response, ans.Err)
				if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
					rec.SpanID = sc.SpanID().String() // the traced step that obtained it
				}
			}
			engine.Journal(st, rec, snap.Journey().Limits.MaxJournal, in.Now)
			if l.Budgets != nil {
				engine.Charge(st, in.Budgets, engine.Spent(eff, rec))
			}
			if err := l.fault(ctx, FaultAfterJournal, eff); err != nil {
				res.Status, res.Effect = st, eff
				return res, err
			}
			res.Outcome, res.Effect = Performed, eff
			res.Calls++
			if isModelCall(eff) {
				modelCalls++
			}
		}
		status = st
	}
	if l.Budgets != nil && engine.IsWaitingForBudget(status) {
		l.Budgets.Wait(waitsFor(snap, in.Input, status))
	}
	// A retry count is about the call the Session waits on: answered, or no longer
	// asked, it is over.
	status.AgentRetry = nil
	engine.Observe(status, in.Generation)
	res.Status = status
	if equality.Semantic.DeepEqual(in.Status, status) {
		res.Outcome = Unchanged
	}
	return res, nil
}

// call makes the call of eff, which step st asks for after status: the status
// marking it sent is written first when the engine asks for that (written is then
// that status), and Fault is called around it. before is the status the write
// reached before the call.
func (l *Loop) call(ctx context.Context, snap *engine.Snapshot, now time.Time, status, st *flowv1.SessionStatus, eff *engine.Effect,
	written **flowv1.SessionStatus) (ans Answer, before *flowv1.SessionStatus, err error) {
	if err := l.fault(ctx, FaultBeforeCall, eff); err != nil {
		return Answer{}, nil, err
	}
	before = status
	if eff.WriteFirst && l.WriteFirst != nil {
		if err := l.WriteFirst(ctx, st); err != nil {
			return Answer{}, nil, err
		}
		*written, before = st.DeepCopy(), st.DeepCopy()
		if err := l.fault(ctx, FaultAfterMarkedSent, eff); err != nil {
			return Answer{}, nil, err
		}
	}
	if ans, err = l.perform(ctx, snap, before, now, eff); err != nil {
		return Answer{}, nil, err
	}
	return ans, before, l.fault(ctx, FaultAfterAnswer, eff)
}

// maxStepsPerWrite bounds the engine steps of one write, whatever they are: the
// engine makes progress at every step, so this only guards against a defect.
const maxStepsPerWrite = 256

// isModelCall reports whether eff asks a model (or any remote agent), as opposed to
// a tool.
func isModelCall(eff *engine.Effect) bool {
	return eff.Kind != flowv1.EffectCallTool
}

// mayPerform reports whether a write that already performed modelCalls model calls
// may also perform eff: a model call when it is the write's first; a server tool
// call when written holds its write-ahead record (the status the Session has
// written); a builtin tool call and a read-only probe always, as they change
// nothing.
func mayPerform(eff *engine.Effect, written *flowv1.SessionStatus, modelCalls int) bool {
	if isModelCall(eff) {
		return modelCalls == 0
	}
	if eff.Tool.Builtin != "" || eff.ReadOnly {
		return true
	}
	if written == nil || written.Turn == nil {
		return false
	}
	for i := range written.Turn.ToolCalls {
		if written.Turn.ToolCalls[i].ID == eff.Tool.ID {
			return true
		}
	}
	return false
}

// perform performs eff, within what is left of its timeout (the pathway's timeout,
// counted from the call's first attempt). A call whose time is up is not made: its
// answer is a timeout error.
func (l *Loop) perform(ctx context.Context, snap *engine.Snapshot, status *flowv1.SessionStatus, now time.Time, eff *engine.Effect) (Answer, error) {
	_, timeout := snap.CallLimits(eff)
	if timeout <= 0 {
		return l.Performer.Perform(ctx, eff)
	}
	left := retrySince(status, eff, now).Add(timeout).Sub(now)
	if left <= 0 {
		return Answer{Err: callTimedOut(eff, timeout)}, nil
	}
	cctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	ans, err := l.Performer.Perform(cctx, eff)
	if err == nil && ans.Err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		ans.Err = callTimedOut(eff, timeout)
	}
	return ans, err
}

// callTimedOut is the error of a call abandoned at its pathway's timeout.
func callTimedOut(eff *engine.Effect, timeout time.Duration) error {
	a := ""
	if len(eff.Agents) > 0 {
		a = string(eff.Agents[0].Name)
	}
	return &agent.Error{Class: agent.Invalid, Kind: flowv1.FailureTimeout, Source: flowv1.FailureTransport, Agent: a,
		Err: fmt.Errorf("no answer within the pathway timeout %s, retries included: %w", timeout, context.DeadlineExceeded)}
}

// retrySince is when the call eff was first tried: the start of its retries, else now.
func retrySince(st *flowv1.SessionStatus, eff *engine.Effect, now time.Time) time.Time {
	if st != nil && st.AgentRetry != nil && st.AgentRetry.InputHash == eff.InputHash {
		return st.AgentRetry.Since.Time
	}
	return now
}

// agentFailed returns the result of an answer that is a Transient or Terminal agent
// error: before, the status the write reached before the failing call, with the
// failure said in its conditions. A
// transient error that used up the call's attempts becomes the call's answer (ans.Err
// is then journaled, so the engine applies it as a failed call): ok is false.
func (l *Loop) agentFailed(snap *engine.Snapshot, before *flowv1.SessionStatus, in Input, eff *engine.Effect, ans *Answer) (Result, bool) {
	if ans.Record != nil || ans.Err == nil {
		return Result{}, false
	}
	status := before.DeepCopy()
	if status == nil {
		status = &flowv1.SessionStatus{}
	}
	res := Result{Status: status, Err: ans.Err}
	switch agent.ClassOf(ans.Err) {
	case agent.Transient:
		retry := flowv1.AgentRetry{InputHash: eff.InputHash, Attempts: 1, Since: metav1.NewTime(in.Now)}
		if old := status.AgentRetry; old != nil && old.InputHash == eff.InputHash {
			retry.Attempts, retry.Since = old.Attempts+1, old.Since
		}
		if attempts, _ := snap.CallLimits(eff); int(retry.Attempts) >= attempts {
			ans.Err = gaveUp(ans.Err, retry.Attempts)
			return Result{}, false
		}
		status.AgentRetry = &retry
		res.Outcome, res.Reason, res.Message = AgentRetry, retryReason(ans.Err), ans.Err.Error()
		engine.AgentUnavailable(status, res.Reason, res.Message, in.Now)
	case agent.Terminal:
		res.Outcome, res.Reason, res.Message = AgentStalled, flowv1.ReasonAgentTerminalError, l.stallMessage(ans.Err)
		engine.Stall(status, res.Reason, res.Message, in.Now)
	default:
		return Result{}, false
	}
	engine.Observe(status, in.Generation)
	return res, true
}

// gaveUp is the answer of a call whose transient error err used up its attempts: the
// same typed failure, journaled (Invalid) instead of tried again.
func gaveUp(err error, attempts int32) error {
	out := agent.Error{Kind: flowv1.FailureUnknown, Source: flowv1.FailureTransport}
	var ae *agent.Error
	if errors.As(err, &ae) {
		out = *ae
		err = ae.Err
	}
	out.Class = agent.Invalid
	out.Err = fmt.Errorf("gave up after %d attempts: %w", attempts, err)
	return &out
}

// stallMessage is the message of the Stalled condition of a terminal agent error.
func (l *Loop) stallMessage(err error) string {
	if l.StallRetry <= 0 {
		return err.Error()
	}
	// Retrying at once cannot help (a refused key, an unknown model), but a person can
	// fix it without touching the Session (the Secret, the endpoint): so the caller
	// tries again slowly.
	return fmt.Sprintf("%v (retried every %s, or at the next change to the Session or its Journey)", err, l.StallRetry)
}

// retryReason is the AgentAvailable reason of a transient agent error.
func retryReason(err error) string {
	var ae *agent.Error
	if errors.As(err, &ae) {
		switch ae.Kind {
		case flowv1.FailureRateLimit:
			return flowv1.ReasonRateLimited
		case flowv1.FailureTimeout:
			return flowv1.ReasonAgentTimeout
		}
	}
	return flowv1.ReasonAgentError
}

// reserve reserves the worst case of eff, the call step st asks for, in the ledger.
// When another Session took the room since the rooms were read, the step is taken
// again on the rooms as they are now (next.Budgets is updated): the engine then
// waits for room and says why, or asks for the call again (room freed meanwhile).
func (l *Loop) reserve(snap *engine.Snapshot, next *engine.Input, st *flowv1.SessionStatus, eff *engine.Effect) (*flowv1.SessionStatus, *engine.Effect, error) {
	for range maxReserveTries {
		rooms, ok := l.Budgets.Reserve(reserveKey(next.SessionUID, st.Step, eff), engine.WorstCase(eff))
		if ok {
			return st, eff, nil
		}
		next.Budgets = rooms
		if st, eff = engine.Step(snap, *next); eff == nil {
			return st, nil, nil
		}
	}
	return nil, nil, fmt.Errorf("no reservation for the %s call after %d tries: other Sessions took the Budgets' room each time", eff.Kind, maxReserveTries)
}

// reserveKey names a call in the ledger: the Session, the step and the call, so a
// call asked again (a retried step) replaces its own hold.
func reserveKey(uid string, step int64, eff *engine.Effect) string {
	id := eff.InputHash
	if eff.Tool != nil {
		id = eff.Tool.ID
	}
	return fmt.Sprintf("%s/%d/%s/%s", uid, step, eff.Kind, id)
}

// waitsFor is the worst case of the call a Session waiting for room would make: the
// call the step asks for without the Budgets (zero when it asks for none), or the
// smaller call a Budget with onExhausted: Degrade would make of it (each amount the
// least of them), so the Session is woken when either may fit.
func waitsFor(snap *engine.Snapshot, in engine.Input, status *flowv1.SessionStatus) engine.Spend {
	rooms := in.Budgets
	in.Budgets, in.Status = nil, status
	_, eff := engine.Step(snap, in)
	if eff == nil {
		return engine.Spend{}
	}
	need := engine.WorstCase(eff)
	for _, b := range rooms {
		if d, ok := snap.Degrade(eff, b.DegradeTo); ok {
			less := engine.WorstCase(d)
			need = engine.Spend{CostNano: min(need.CostNano, less.CostNano), Tokens: min(need.Tokens, less.Tokens),
				ToolCalls: min(need.ToolCalls, less.ToolCalls), ModelCalls: min(need.ModelCalls, less.ModelCalls)}
		}
	}
	return need
}
