package rebuild_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/rebuild"
)

var clock = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// journey is the spec of a journey with pathway talk, which agent gpt runs (and
// pathway done, a builtin reply, when talk has transitions): change edits them before
// they are compiled.
type journey struct {
	name   string
	change func(j *flowv1.JourneySpec, talk *flowv1.PathwaySpec)
}

func compile(t *testing.T, j journey) *engine.Snapshot {
	t.Helper()
	spec := &flowv1.JourneySpec{EntryPathway: "talk", Pathways: []flowv1.PathwayEntry{{Name: "talk", PathwayRef: "talk"}},
		Agents: []flowv1.AgentSpec{{Name: "gpt", Provider: flowv1.ProviderOpenAI, Model: "test-model"}}}
	talk := &flowv1.PathwaySpec{Agents: []flowv1.Name{"gpt"}, Signature: flowv1.Signature{Instructions: "Answer the user."}}
	pathways := map[string]*flowv1.PathwaySpec{"talk": talk}
	if j.change != nil {
		j.change(spec, talk)
	}
	if talk.Transitions != nil {
		spec.Pathways = append(spec.Pathways, flowv1.PathwayEntry{Name: "done", PathwayRef: "done"})
		pathways["done"] = &flowv1.PathwaySpec{Builtin: &flowv1.BuiltinPathway{Reply: "Anything else?"}}
	}
	snap, err := engine.NewSnapshot(j.name, spec, pathways)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// decides makes talk's success move to done by a rule of confidence 0.9, advanced
// without approval at autoAdvance.
func decides(autoAdvance flowv1.Confidence) func(*flowv1.JourneySpec, *flowv1.PathwaySpec) {
	return func(_ *flowv1.JourneySpec, talk *flowv1.PathwaySpec) {
		talk.Transitions = &flowv1.OutcomeTransitions{OnSuccess: &flowv1.OutcomeTransition{Decision: &flowv1.Decision{
			AllowedDestinations:  []flowv1.Name{"done"},
			Rules:                []flowv1.DecisionRule{{When: "true", To: "done", Confidence: "0.9"}},
			ConfidenceThresholds: &flowv1.ConfidenceThresholds{AutoAdvance: autoAdvance, RequireApproval: "0.5"},
		}}}
	}
}

// live is a Session as the controller steps it, through the engine, its agent
// answering every pathway run with "Noted.": at keeps its status after each step.
type live struct {
	t       *testing.T
	s       *flowv1.Session
	revs    map[string]*engine.Snapshot
	at      map[int64]*flowv1.SessionStatus
	upgrade *engine.ReplayCheck
}

// start creates Session name on snap with msgs in its spec (none: created empty, as
// kubectl journey start does) and steps it until it waits.
func start(t *testing.T, snap *engine.Snapshot, name string, msgs ...string) *live {
	t.Helper()
	l := &live{t: t, s: &flowv1.Session{}, revs: map[string]*engine.Snapshot{snap.Revision(): snap}, at: map[int64]*flowv1.SessionStatus{}}
	l.s.Name, l.s.UID, l.s.CreationTimestamp = name, types.UID("uid-"+name), metav1.NewTime(clock)
	l.s.Spec.JourneyRef.Name = "chat"
	l.add(msgs...)
	return l
}

// add sends msgs, as kubectl journey say does, and steps the Session until it waits.
func (l *live) add(msgs ...string) *live {
	for _, m := range msgs {
		n := l.s.Spec.MessageCount() + 1
		l.s.Spec.Messages = append(l.s.Spec.Messages, flowv1.Message{ID: fmt.Sprintf("m%d", n), Text: m})
	}
	l.settle()
	return l
}

func (l *live) settle() {
	l.t.Helper()
	for range 200 {
		st := &l.s.Status
		rev := st.JourneyRevision
		if rev == "" {
			for r := range l.revs {
				rev = r
			}
		}
		snap := l.revs[rev]
		next, eff := engine.Step(snap, engine.Input{Spec: &l.s.Spec, Status: st, Now: clock,
			SessionName: l.s.Name, SessionUID: string(l.s.UID), CreationTime: clock, Upgrade: l.upgrade})
		if eff == nil && next.Step == st.Step {
			return
		}
		if eff != nil {
			if eff.Kind != flowv1.EffectRunPathway {
				l.t.Fatalf("step %d asks a %s call", next.Step, eff.Kind)
			}
			res := agent.PathwayResponse{Reply: "Noted.", ResultType: flowv1.ResultSuccess, Complete: eff.Pathway.Spec.Transitions != nil}
			engine.Journal(next, eff.Record(string(l.s.UID), next.Step, res, nil), snap.Journey().Limits.MaxJournal, clock)
		}
		next.AgentRetry = nil
		l.s.Status = *next
		l.at[next.Step] = next.DeepCopy()
	}
	l.t.Fatal("the Session never waits")
}

// intervene sends iv; an Upgrade's replay verdict is check, and it moves to snap.
func (l *live) intervene(iv flowv1.Intervention, check *engine.ReplayCheck, snap *engine.Snapshot) *live {
	iv.ID = fmt.Sprintf("i-%d", l.s.Spec.InterventionCount()+1)
	iv.By = "alice"
	l.s.Spec.Interventions = append(l.s.Spec.Interventions, iv)
	if snap != nil {
		l.revs[snap.Revision()] = snap
	}
	l.upgrade = check
	l.settle()
	l.upgrade = nil
	return l
}

// dropInterventions drops the processed interventions from spec.interventions, as
// kubectl journey does when it appends the next one.
func (l *live) dropInterventions() *live {
	n := l.s.Status.ProcessedInterventions - l.s.Spec.InterventionsDropped
	l.s.Spec.Interventions = l.s.Spec.Interventions[n:]
	l.s.Spec.InterventionsDropped += n
	return l
}

func (l *live) source() rebuild.Source {
	l.t.Helper()
	src, err := rebuild.SourceOf(l.s)
	if err != nil {
		l.t.Fatal(err)
	}
	return src
}

func upgrade(to string) flowv1.Intervention {
	return flowv1.Intervention{Action: flowv1.InterventionUpgrade, Revision: to}
}

func reproduces(to string) *engine.ReplayCheck {
	return &engine.ReplayCheck{Revision: to, Reproduces: true}
}

func diverges(to string) *engine.ReplayCheck {
	return &engine.ReplayCheck{Revision: to, Step: 1, Field: "journal", Message: "differs"}
}

// results are the results of the records of processed interventions, in order.
func results(records []flowv1.InterventionRecord) string {
	var out []string
	for _, rec := range records {
		out = append(out, string(rec.Result))
	}
	return strings.Join(out, " ")
}

// Replayed on the revision it ran on, a Session's journal rebuilds its status after
// every step it took, with no call, whichever way it was given its inputs: created
// with its first message (the first step takes it), started then sent messages, moved
// by a decision, upgraded twice with the first Upgrade dropped from its spec.
func TestReplayRebuildsEveryStep(t *testing.T) {
	r1 := compile(t, journey{name: "chat-1"})
	decide := compile(t, journey{name: "chat-1", change: decides("0.8")})
	builtin := compile(t, journey{name: "chat-1", change: func(_ *flowv1.JourneySpec, talk *flowv1.PathwaySpec) {
		*talk = flowv1.PathwaySpec{Builtin: &flowv1.BuiltinPathway{Reply: "ok", Complete: "false"}}
	}})
	r2 := compile(t, journey{name: "chat-2", change: func(j *flowv1.JourneySpec, _ *flowv1.PathwaySpec) { j.FallbackReply = "Sorry." }})
	r3 := compile(t, journey{name: "chat-3", change: func(j *flowv1.JourneySpec, _ *flowv1.PathwaySpec) { j.FallbackReply = "Sorry again." }})
	for _, tc := range []struct {
		name string
		live func(t *testing.T) *live
		// on is the revision the Session ends on.
		on *engine.Snapshot
	}{
		{"created with its first message", func(t *testing.T) *live { return start(t, r1, "s", "First.").add("Second.") }, r1},
		{"created with two messages", func(t *testing.T) *live { return start(t, r1, "s", "First.", "Second.") }, r1},
		{"started, then sent its messages", func(t *testing.T) *live { return start(t, r1, "s").add("First.").add("Second.") }, r1},
		{"a builtin reply, created with its messages", func(t *testing.T) *live { return start(t, builtin, "s", "First.", "Second.") }, builtin},
		{"moved by a decision", func(t *testing.T) *live { return start(t, decide, "s", "Book me.").add("Thanks.") }, decide},
		{"upgraded twice, the first Upgrade dropped", func(t *testing.T) *live {
			l := start(t, r1, "s", "First.").intervene(upgrade("chat-2"), reproduces("chat-2"), r2).add("Second.")
			return l.dropInterventions().intervene(upgrade("chat-3"), reproduces("chat-3"), r3).add("Third.")
		}, r3},
		{"an Upgrade refused, then one that applies", func(t *testing.T) *live {
			l := start(t, r1, "s", "First.").intervene(upgrade("chat-2"), diverges("chat-2"), r2).add("Second.")
			return l.intervene(upgrade("chat-3"), reproduces("chat-3"), r3).add("Third.")
		}, r3},
		{"an Upgrade refused and dropped, then one that applies", func(t *testing.T) *live {
			l := start(t, r1, "s", "First.").intervene(upgrade("chat-2"), diverges("chat-2"), r2).add("Second.")
			return l.dropInterventions().intervene(upgrade("chat-3"), reproduces("chat-3"), r3).add("Third.")
		}, r3},
		{"Goto, Retry, Rewind, Resume and Answer, applied or refused, all dropped", func(t *testing.T) *live {
			l := start(t, decide, "s", "Book me.")
			l.intervene(flowv1.Intervention{Action: flowv1.InterventionGoto, Pathway: "talk", Reason: "not yet"}, nil, nil)
			l.intervene(flowv1.Intervention{Action: flowv1.InterventionGoto, Pathway: "nowhere"}, nil, nil)
			l.dropInterventions().add("Again.")
			l.intervene(flowv1.Intervention{Action: flowv1.InterventionRewind, Step: ptr.To(int32(1))}, nil, nil)
			l.intervene(flowv1.Intervention{Action: flowv1.InterventionAnswer, Call: "t-2-1", Outcome: flowv1.AnswerDone, Result: "booked"}, nil, nil)
			l.dropInterventions().add("Once more.")
			l.intervene(flowv1.Intervention{Action: flowv1.InterventionRetry, Feedback: "Say it in French."}, nil, nil)
			l.intervene(flowv1.Intervention{Action: flowv1.InterventionResume}, nil, nil)
			l.dropInterventions()
			if got := results(l.s.Status.Interventions); got != "Applied Refused Applied Refused Applied Refused" {
				t.Fatalf("set-up: the interventions were %s: %+v", got, l.s.Status.Interventions)
			}
			return l
		}, decide},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.live(t)
			if l.s.Status.JourneyRevision != tc.on.Revision() || len(l.s.Status.Journal) == 0 && tc.on != builtin {
				t.Fatalf("the Session is on %s with journal %+v", l.s.Status.JourneyRevision, l.s.Status.Journal)
			}
			src := l.source()
			for k := int64(1); k <= l.s.Status.Step; k++ {
				res, err := rebuild.Replay(tc.on, tc.on.Revision(), src, k)
				if err != nil {
					t.Fatalf("step %d: %v", k, err)
				}
				if !res.Check.Reproduces {
					t.Fatalf("step %d: %s", k, res.Check)
				}
				want := l.at[k].DeepCopy()
				got := res.Status.DeepCopy()
				// A replay on the Session's last revision runs there from step 1, and
				// its UpgradeBlocked condition names the revisions as the replay moved.
				want.JourneyRevision, got.JourneyRevision = "", ""
				apimeta.RemoveStatusCondition(&want.Conditions, flowv1.ConditionUpgradeBlocked)
				apimeta.RemoveStatusCondition(&got.Conditions, flowv1.ConditionUpgradeBlocked)
				if want.Phase == flowv1.PhaseRunning && got.Phase == flowv1.PhaseWaitingForInput && want.Turn == nil {
					// The Session had a message it had not taken yet; the replay is given
					// only what the Session had taken by step k.
					want.Phase, want.Reason, want.Conditions = got.Phase, got.Reason, got.Conditions
				}
				// Conditions come in the order they were first set, and a replay that
				// waited where the Session had input pending says it no longer waits:
				// the conditions that hold are compared.
				if w, g := holding(want), holding(got); !reflect.DeepEqual(w, g) {
					t.Fatalf("step %d: conditions %v hold on the rebuilt status, %v on the Session's", k, g, w)
				}
				want.Conditions, got.Conditions = nil, nil
				if f := firstDifference(want, got); f != "" {
					t.Fatalf("step %d: the rebuilt status differs at %s\nrebuilt %s\nlive    %s", k, f, toJSON(got), toJSON(want))
				}
			}
			if res, err := rebuild.Replay(tc.on, tc.on.Revision(), src, 0); err != nil || res.Status.Step != l.s.Status.Step || !res.Check.Reproduces {
				t.Errorf("up to step 0 (the Session's): %v, %+v", err, res)
			}
		})
	}
}

// A replay on another revision reports the first step that replays differently, and
// the field: a question the agents are asked differently, a call the revision does not
// make, a decision that needs approval there. Given the Session's own revision, a
// question that differs only in what the agents never see (the pathway's transitions)
// is still answered by the journal.
func TestReplayReportsTheFirstDivergence(t *testing.T) {
	r1 := compile(t, journey{name: "chat-1"})
	decide := compile(t, journey{name: "chat-1", change: decides("0.8")})
	chat := start(t, r1, "s", "First.").add("Second.")
	booked := start(t, decide, "b").add("Book me.")
	// Goto done is refused on chat-1, which has no pathway done.
	gone := start(t, r1, "g").intervene(flowv1.Intervention{Action: flowv1.InterventionGoto, Pathway: "done"}, nil, nil).add("First.")
	firstCall := func(l *live) flowv1.EffectRecord { return l.s.Status.Journal[0] }
	decidedAt := func(l *live) int64 {
		for _, h := range l.s.Status.History {
			if h.To == "done" {
				return h.Step
			}
		}
		t.Fatalf("no move to done: %+v", l.s.Status.History)
		return 0
	}
	for _, tc := range []struct {
		name    string
		l       *live
		own     *engine.Snapshot // the Session's revision, when given
		to      journey
		step    int64
		field   string
		message string // "" when it reproduces
	}{
		{name: "a new fallback reply asks nothing else", l: chat,
			to: journey{name: "chat-2", change: func(j *flowv1.JourneySpec, _ *flowv1.PathwaySpec) { j.FallbackReply = "Sorry." }}},
		{name: "new instructions ask the first question differently", l: chat,
			to: journey{name: "chat-2", change: func(_ *flowv1.JourneySpec, talk *flowv1.PathwaySpec) {
				talk.Signature.Instructions = "Answer in French."
			}},
			step: firstCall(chat).Step, field: "journal " + firstCall(chat).ID, message: "asks a RunPathway call of agent gpt another question than the Session did"},
		{name: "a builtin reply makes no call", l: chat,
			to: journey{name: "chat-2", change: func(_ *flowv1.JourneySpec, talk *flowv1.PathwaySpec) {
				*talk = flowv1.PathwaySpec{Builtin: &flowv1.BuiltinPathway{Reply: "Noted.", Complete: "false"}}
			}},
			step: firstCall(chat).Step, field: "journal " + firstCall(chat).ID, message: "the Session made a RunPathway call of gpt here; on this revision it is not made"},
		{name: "a higher autoAdvance changes what the pathway run carries", l: booked,
			to:   journey{name: "chat-2", change: decides("0.95")},
			step: firstCall(booked).Step, field: "journal " + firstCall(booked).ID, message: "another question than the Session did"},
		{name: "given the Session's revision, a higher autoAdvance asks approval for the decision", l: booked, own: decide,
			to:   journey{name: "chat-2", change: decides("0.95")},
			step: decidedAt(booked), field: fmt.Sprintf("history[step %d]", decidedAt(booked)), message: "the Session took talk -> done (Advance) by onSuccess, this revision takes no transition"},
		{name: "given the Session's revision, a lower autoAdvance asks nothing else", l: booked, own: decide,
			to: journey{name: "chat-2", change: decides("0.7")}},
		{name: "a Goto the Session refused applies where its pathway exists", l: gone,
			to:   journey{name: "chat-2", change: decides("0.8")},
			step: gone.s.Status.Interventions[0].Step, field: "status.interventions[i-1].result",
			message: `the Session refused Goto i-1 (pathway "done" is not in journey revision chat-1), this revision applies it`},
		{name: "a refused Goto is refused again", l: gone,
			to: journey{name: "chat-2", change: func(j *flowv1.JourneySpec, _ *flowv1.PathwaySpec) { j.FallbackReply = "Sorry." }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.l.source()
			src.Revision = tc.own
			res, err := rebuild.Replay(compile(t, tc.to), tc.to.name, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			c := res.Check
			if c.Revision != tc.to.name {
				t.Errorf("checked revision %s, want %s", c.Revision, tc.to.name)
			}
			if tc.step == 0 {
				if !c.Reproduces {
					t.Errorf("%s; want every step to replay the same", c)
				}
				return
			}
			if c.Reproduces || c.Step != tc.step || !strings.HasPrefix(c.Field, tc.field) || !strings.Contains(c.Message, tc.message) {
				t.Errorf("got step %d field %q message %q (reproduces %v)\nwant step %d field %q... message with %q", c.Step, c.Field, c.Message, c.Reproduces, tc.step, tc.field, tc.message)
			}
			if !strings.HasPrefix(c.String(), fmt.Sprintf("step %d replays differently on revision %s: %s: ", c.Step, tc.to.name, c.Field)) {
				t.Errorf("String() = %q", c.String())
			}
		})
	}
}

// A replay refuses, replaying nothing, what it cannot replay, and says why.
func TestReplayRefuses(t *testing.T) {
	r1 := compile(t, journey{name: "chat-1"})
	r2 := compile(t, journey{name: "chat-2", change: func(_ *flowv1.JourneySpec, talk *flowv1.PathwaySpec) {
		talk.Signature.Instructions = "Answer in French."
	}})
	for _, tc := range []struct {
		name string
		src  func(t *testing.T) rebuild.Source
		upTo int64
		want string
	}{
		{"a step it has not taken", func(t *testing.T) rebuild.Source { return start(t, r1, "s", "First.").source() }, 9,
			"step 9 is not a step session s has taken (it is at step 2)"},
		{"no step yet", func(t *testing.T) rebuild.Source {
			l := start(t, r1, "s")
			l.s.Status = flowv1.SessionStatus{}
			return l.source()
		}, 0, "session s has taken no step yet"},
		{"inputs not read", func(t *testing.T) rebuild.Source {
			l := start(t, r1, "s", "First.")
			return rebuild.Source{Name: "s", Spec: &l.s.Spec, Status: &l.s.Status}
		}, 0, "its inputs were not read"},
		{"journal answers dropped", func(t *testing.T) rebuild.Source {
			l := start(t, r1, "s", "First.")
			l.s.Status.JournalDropped = 1
			return l.source()
		}, 0, "session s dropped its 1 oldest journal answers (limits.maxJournal)"},
		{"a dropped Goto whose record was dropped", func(t *testing.T) rebuild.Source {
			l := start(t, r1, "s", "First.")
			l.intervene(flowv1.Intervention{Action: flowv1.InterventionGoto, Pathway: "talk"}, nil, nil).dropInterventions()
			l.s.Status.Interventions = nil // as status.interventions drops its oldest records
			return l.source()
		}, 0, "session s dropped its processed intervention i-1 (Goto) from spec.interventions (spec.interventionsDropped is 1) and status.interventions no longer keeps its record"},
		{"a refused Upgrade whose record was dropped", func(t *testing.T) rebuild.Source {
			l := start(t, r1, "s", "First.")
			l.intervene(upgrade("chat-2"), diverges("chat-2"), r2)
			l.s.Status.Interventions = nil
			return l.source()
		}, 0, "intervention i-1 (Upgrade) of session s was processed at a step neither status.interventions (its newest 0 records) nor status.history keeps any longer"},
		{"a dropped refused Upgrade whose record was dropped", func(t *testing.T) rebuild.Source {
			l := start(t, r1, "s", "First.")
			l.intervene(upgrade("chat-2"), diverges("chat-2"), r2).dropInterventions()
			l.s.Status.Interventions = nil
			return l.source()
		}, 0, "session s dropped 1 processed interventions from spec.interventions, and status.interventions and status.history hold 0 of them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := rebuild.Replay(r1, "chat-1", tc.src(t), tc.upTo)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %+v, error %v; want an error with %q", res, err, tc.want)
			}
		})
	}
}

// InputsOf reads a Session's messages from the first ever sent: the ones kubectl
// journey say dropped from spec.messages are read back from status.transcript; one
// that left both is lost, and the error says which.
func TestInputsOf(t *testing.T) {
	r1 := compile(t, journey{name: "chat-1"})
	dropMessages := func(l *live) *live {
		n := l.s.DroppableMessages() - l.s.Spec.MessagesDropped
		l.s.Spec.Messages = l.s.Spec.Messages[n:]
		l.s.Spec.MessagesDropped += n
		return l
	}
	ids := func(in *rebuild.Inputs) []string {
		var out []string
		for _, m := range in.Messages {
			out = append(out, m.ID+"="+m.Text)
		}
		return out
	}
	t.Run("dropped messages are read from the transcript", func(t *testing.T) {
		l := dropMessages(start(t, r1, "s", "First.").add("Second."))
		l.s.Spec.Messages = append(l.s.Spec.Messages, flowv1.Message{ID: "m3", Text: "Pending."})
		in, err := rebuild.InputsOf(l.s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ids(in), []string{"m1=First.", "m2=Second.", "m3=Pending."}; !reflect.DeepEqual(got, want) || l.s.Spec.MessagesDropped != 2 {
			t.Errorf("messages %v (dropped %d), want %v", got, l.s.Spec.MessagesDropped, want)
		}
	})
	t.Run("a message that left the spec and the transcript is lost", func(t *testing.T) {
		l := dropMessages(start(t, r1, "s", "First.").add("Second."))
		l.s.Status.Transcript = l.s.Status.Transcript[1:]
		l.s.Status.TranscriptDropped = 1
		_, err := rebuild.InputsOf(l.s)
		var lost *rebuild.ConversationLostError
		if !errors.As(err, &lost) {
			t.Fatalf("error %v, want a ConversationLostError", err)
		}
		if lost.Messages != [2]int32{1, 1} || lost.Held != [2]int32{2, 2} || lost.Total != 2 || lost.MessagesDropped != 2 || lost.TranscriptDropped != 1 {
			t.Errorf("%+v", lost)
		}
		want := "session s cannot be replayed from its start: it no longer holds message 1 of its 2: it left spec.messages (spec.messagesDropped is 2) and status.transcript, which dropped its 1 oldest exchanges"
		if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "(of the dropped messages it holds message 2)") {
			t.Errorf("error %q\nwant it to start %q", err, want)
		}
		if _, err := rebuild.SourceOf(l.s); !errors.As(err, &lost) {
			t.Errorf("SourceOf: %v, want the ConversationLostError", err)
		}
	})
}

// holding are the conditions of st that are True (but AwaitingInput), with their
// reasons, sorted.
func holding(st *flowv1.SessionStatus) []string {
	var out []string
	for _, c := range st.Conditions {
		if c.Status == metav1.ConditionTrue && c.Type != flowv1.ConditionAwaitingInput {
			out = append(out, c.Type+"="+c.Reason)
		}
	}
	slices.Sort(out)
	return out
}

// firstDifference is the first JSON path where a and b differ, "" when they do not.
func firstDifference(a, b any) string {
	var x, y any
	_ = json.Unmarshal([]byte(toJSON(a)), &x)
	_ = json.Unmarshal([]byte(toJSON(b)), &y)
	return diff("", x, y)
}

func diff(path string, a, b any) string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for k := range am {
			if d := diff(path+"."+k, am[k], bm[k]); d != "" {
				return d
			}
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				return path + "." + k
			}
		}
		return ""
	}
	if !reflect.DeepEqual(a, b) {
		return path
	}
	return ""
}

func toJSON(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

// A fork's steps up to the fork step were its source's: a replay of the fork asks
// them in the source's name and gives the source's interventions (their records,
// which the fork keeps) at their steps, so a fork of a Session whose upgrade was
// blocked, then applied, replays the same and can be upgraded and forked in turn.
func TestReplayOfAFork(t *testing.T) {
	r1 := compile(t, journey{name: "chat-1"})
	r2 := compile(t, journey{name: "chat-2", change: func(_ *flowv1.JourneySpec, talk *flowv1.PathwaySpec) {
		talk.Signature.Instructions = "Answer in French."
	}})
	r3 := compile(t, journey{name: "chat-3", change: func(j *flowv1.JourneySpec, _ *flowv1.PathwaySpec) { j.FallbackReply = "Sorry." }})
	r4 := compile(t, journey{name: "chat-4", change: func(j *flowv1.JourneySpec, _ *flowv1.PathwaySpec) { j.FallbackReply = "Sorry again." }})
	src := start(t, r1, "s", "First.").intervene(upgrade("chat-2"), diverges("chat-2"), r2).add("Second.")
	src.dropInterventions().intervene(upgrade("chat-3"), reproduces("chat-3"), r3)
	at := src.s.Status.Step
	rebuilt, err := rebuild.Replay(r3, "chat-3", src.source(), at)
	if err != nil || !rebuilt.Check.Reproduces {
		t.Fatalf("the source replays: %v, %+v", err, rebuilt)
	}
	f := &live{t: t, s: &flowv1.Session{}, revs: map[string]*engine.Snapshot{"chat-3": r3}, at: map[int64]*flowv1.SessionStatus{}}
	f.s.Name, f.s.UID, f.s.CreationTimestamp = "f", "uid-f", metav1.NewTime(clock)
	f.s.Spec = flowv1.SessionSpec{JourneyRef: src.s.Spec.JourneyRef, Messages: slices.Clone(src.s.Spec.Messages),
		ForkOf: &flowv1.ForkSource{Session: "s", UID: string(src.s.UID), Step: at}}
	f.s.Status = *engine.Fork(rebuilt.Status, "chat-3", nil, false, clock)
	if got := results(f.s.Status.Interventions); got != "Refused Applied" || f.s.Status.ProcessedInterventions != 0 {
		t.Fatalf("the fork's records %s, processed %d; want the source's two records and none of its own", got, f.s.Status.ProcessedInterventions)
	}
	f.add("Third.")
	if f.s.Status.Step <= at || f.s.Status.ProcessedMessages != 3 {
		t.Fatalf("set-up: the fork took step %d, %d messages", f.s.Status.Step, f.s.Status.ProcessedMessages)
	}
	for _, rev := range []*engine.Snapshot{r3, r4} {
		res, err := rebuild.Replay(rev, rev.Revision(), f.source(), 0)
		if err != nil || !res.Check.Reproduces {
			t.Errorf("the fork on %s: %v, %+v", rev.Revision(), err, res)
			continue
		}
		if res.Status.Step != f.s.Status.Step || res.Status.ProcessedMessages != 3 {
			t.Errorf("the fork replayed on %s to step %d, %d messages", rev.Revision(), res.Status.Step, res.Status.ProcessedMessages)
		}
	}
	// Its own Goto after the fork step is given at its step too.
	f.intervene(flowv1.Intervention{Action: flowv1.InterventionGoto, Pathway: "talk"}, nil, nil).add("Fourth.")
	if res, err := rebuild.Replay(r4, "chat-4", f.source(), 0); err != nil || !res.Check.Reproduces {
		t.Errorf("the fork with its own Goto: %v, %+v", err, res)
	}
}
