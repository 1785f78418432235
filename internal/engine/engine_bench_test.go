package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine/match"
	"github.com/journeyops/journey-operator/internal/expr"
)

// bigJourney has 50 builtin pathways in a chain and 20 global transitions (15 intent
// triggers with 4 patterns each, 5 CEL conditions).
func bigJourney() def {
	specs := map[string]*flowv1.PathwaySpec{}
	for i := range 50 {
		p := &flowv1.PathwaySpec{
			Signature:  flowv1.Signature{Intent: fmt.Sprintf("Step %d", i)},
			Accumulate: []string{"visits", "last"},
			Builtin: &flowv1.BuiltinPathway{
				Outputs: []flowv1.BuiltinOutput{
					{Name: "visits", Expression: `[session.pathway]`},
					{Name: "last", Expression: `{"pathway": session.pathway, "turn": session.turns}`},
				},
				Reply: `Done with {{ .session.pathway }} ({{ len .context }} keys).`,
			},
		}
		if i < 49 {
			p.Next = flowv1.Name(fmt.Sprintf("p%02d", i+1))
		}
		specs[fmt.Sprintf("p%02d", i)] = p
	}
	return journeyOf("p00", specs, func(j *flowv1.JourneySpec) {
		for i := range 15 {
			j.Transitions = append(j.Transitions, flowv1.GlobalTransition{
				Name: flowv1.Name(fmt.Sprintf("intent-%d", i)), From: "*", To: fmt.Sprintf("p%02d", (i*3)%50), Priority: int32(i % 4),
				Trigger: flowv1.Trigger{Intent: &flowv1.IntentTrigger{Patterns: []string{
					fmt.Sprintf("topic %d", i), fmt.Sprintf("question about %d", i), "zebra" + strings.Repeat("x", i), fmt.Sprintf("don't want %d", i)}}},
			})
		}
		for i := range 5 {
			j.Transitions = append(j.Transitions, flowv1.GlobalTransition{
				Name: flowv1.Name(fmt.Sprintf("cond-%d", i)), From: "*", To: fmt.Sprintf("p%02d", 40+i),
				Trigger: flowv1.Trigger{Condition: flowv1.Expression(fmt.Sprintf(`has(context.flag%d) && context.flag%d > 3`, i, i))},
			})
		}
	})
}

// stepInput is a Session in p10 with history and context, and one new message.
func stepInput(b testing.TB) (*Snapshot, Input) {
	d := bigJourney()
	snap, err := NewSnapshot("rev", d.j, d.p)
	if err != nil {
		b.Fatal(err)
	}
	s := &session{t: b, snap: snap, st: &flowv1.SessionStatus{}, now: t0}
	for i := range 10 {
		s.say(fmt.Sprintf("m%d", i), "tell me more about the next step please")
	}
	s.settle()
	if s.st.CurrentPathway != "p10" {
		b.Fatalf("in %s", s.st.CurrentPathway)
	}
	s.say("m10", "I would like to continue with the next step please")
	return snap, s.input()
}

func BenchmarkStep(b *testing.B) {
	snap, in := stepInput(b)
	st, _ := Step(snap, in)
	if st.CurrentPathway != "p11" {
		b.Fatalf("step went to %s", st.CurrentPathway)
	}
	durations := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		start := time.Now()
		Step(snap, in)
		if len(durations) < cap(durations) {
			durations = append(durations, time.Since(start))
		}
	}
	cpu.report(b)
	slices.Sort(durations)
	if n := len(durations); n > 0 {
		b.ReportMetric(float64(durations[n*99/100].Nanoseconds()), "p99-ns")
	}
}

// BenchmarkStepBlocked is the common reconcile: nothing to do.
func BenchmarkStepBlocked(b *testing.B) {
	snap, in := stepInput(b)
	st, _ := Step(snap, in)
	st, _ = Step(snap, Input{Spec: in.Spec, Status: st, Now: in.Now, CreationTime: in.CreationTime})
	in.Status = st
	if out, _ := Step(snap, in); out.Step != st.Step {
		b.Fatal("not blocked")
	}
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		Step(snap, in)
	}
	cpu.report(b)
}

func BenchmarkPatternMatch(b *testing.B) {
	d := bigJourney()
	var patterns [][]string
	for _, t := range d.j.Transitions {
		if t.Trigger.Intent != nil {
			patterns = append(patterns, t.Trigger.Intent.Patterns)
		}
	}
	msg := "Hi, I don’t want Dr. Smith. Could you tell me more about the next available appointment?"
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		for _, p := range patterns {
			if match.Index(msg, p) >= 0 {
				b.Fatal("matched")
			}
		}
	}
	cpu.report(b)
}

// context64K is a context of about 64 KiB: lists of objects and strings, nested maps.
func context64K() map[string]any {
	ctx := map[string]any{}
	var doctors, notes []any
	for i := range 300 {
		doctors = append(doctors, map[string]any{"id": fmt.Sprintf("dr%d", i), "name": fmt.Sprintf("Doctor %d", i), "rating": float64(i%5) + 0.5})
		notes = append(notes, fmt.Sprintf("note %d: %s", i, strings.Repeat("lorem ipsum ", 10)))
	}
	ctx["rejected_doctors"] = doctors
	ctx["notes"] = notes
	prefs := map[string]any{}
	for i := range 100 {
		prefs[fmt.Sprintf("pref%d", i)] = map[string]any{"value": fmt.Sprintf("v%d", i), "weight": float64(i)}
	}
	ctx["preferences"] = prefs
	return ctx
}

func BenchmarkMerge64KiB(b *testing.B) {
	base := context64K()
	size := sizeOf(base)
	if size < 56<<10 || size > 72<<10 {
		b.Fatalf("context is %d bytes", size)
	}
	upd := map[string]any{
		"rejected_doctors": []any{map[string]any{"id": "dr7", "name": "Doctor 7", "rating": 2.5}, map[string]any{"id": "dr-new", "name": "New", "rating": 5.0}},
		"notes":            []any{"a new note"},
		"preferences":      map[string]any{"pref3": map[string]any{"value": "changed"}, "pref-new": map[string]any{"value": "x"}},
		"selected_doctor":  map[string]any{"id": "dr-new"},
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		m := mergeObject(base, upd)
		if sizeOf(m) > 1<<20 {
			b.Fatal("too large")
		}
	}
	cpu.report(b)
}

// BenchmarkMerge64KiBEncode adds the canonical encoding stored in status (the whole
// commit of a context change).
func BenchmarkMerge64KiBEncode(b *testing.B) {
	base := context64K()
	upd := map[string]any{"notes": []any{"a new note"}, "selected_doctor": map[string]any{"id": "dr-new"}}
	b.SetBytes(int64(sizeOf(base)))
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		m := mergeObject(base, upd)
		n := sizeOf(m)
		if n > 1<<20 {
			b.Fatal("too large")
		}
		_ = appendJSON(make([]byte, 0, n), m)
	}
	cpu.report(b)
}

func BenchmarkCELCondition(b *testing.B) {
	vars := expr.Vars{
		Context: map[string]any{"escalation_count": float64(3), "rejected_doctors": []any{"dr1"}},
		Message: "I don't want Dr. Smith",
		Session: map[string]any{"pathway": "booking", "iteration": int64(1)},
	}
	src := "has(context.escalation_count) && context.escalation_count >= 3"
	if ok, err := expr.Bool(src, vars); err != nil || !ok {
		b.Fatal(ok, err)
	}
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		if _, err := expr.Bool(src, vars); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}
