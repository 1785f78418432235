package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// handled reports whether the manager has dealt with a Session: finished, waiting,
// stalled by a cap, or pending with a reason.
func handled(s *flowv1.Session) bool {
	if settled(s) {
		return true
	}
	if _, blocked := engine.Blocked(&s.Status); blocked && s.Status.Turn == nil {
		return true
	}
	if s.Status.Phase == "" || s.Status.Phase == flowv1.PhasePending {
		return apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionReady) != nil
	}
	return false
}

// hostile is a Journey whose pathways misbehave at run time: a CEL comprehension far
// over the evaluation cost limit, a division by zero, a field that does not exist, and
// a context that outgrows maxContextBytes (1 KiB) by accumulating what is said.
const hostile = `
apiVersion: flow.journey.dev/v1alpha1
kind: Journey
metadata: {name: hostile, namespace: %[1]s}
spec:
  entryPathway: start
  pathways:
    - {name: start, pathwayRef: h-start}
    - {name: spin, pathwayRef: h-spin}
    - {name: broken, pathwayRef: h-broken}
    - {name: hoard, pathwayRef: h-hoard}
  transitions:
    - {name: to-spin, from: "*", to: spin, trigger: {intent: {patterns: ["spin"]}}}
    - {name: to-broken, from: "*", to: broken, trigger: {intent: {patterns: ["break"]}}}
    - {name: to-hoard, from: "*", to: hoard, trigger: {intent: {patterns: ["hoard"]}}}
    - name: missing-field
      from: "*"
      to: broken
      trigger: {condition: "context.nothing.here.at_all > 3"}
  limits: {maxContextBytes: 1024, maxTurns: 100}
  errorRecovery: Graceful
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: h-start, namespace: %[1]s}
spec:
  builtin: {complete: "false", reply: "Say spin, break or hoard."}
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: h-spin, namespace: %[1]s}
spec:
  builtin:
    outputs:
      - name: cube
        expression: >-
          [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,64,65,66,67,68,69,70,71,72,73,74,75,76,77,78,79,80,81,82,83,84,85,86,87,88,89,90,91,92,93,94,95,96,97,98,99].map(a,
          [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,64,65,66,67,68,69,70,71,72,73,74,75,76,77,78,79,80,81,82,83,84,85,86,87,88,89,90,91,92,93,94,95,96,97,98,99].map(b,
          [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,64,65,66,67,68,69,70,71,72,73,74,75,76,77,78,79,80,81,82,83,84,85,86,87,88,89,90,91,92,93,94,95,96,97,98,99].map(c, a + b + c)))
    complete: "false"
    reply: "Spun."
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: h-broken, namespace: %[1]s}
spec:
  builtin:
    outputs:
      - {name: ratio, expression: "1 / (size(message) - size(message))"}
      - {name: number, expression: "int('not a number')"}
    complete: "false"
    reply: "Broken."
---
apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: h-hoard, namespace: %[1]s}
spec:
  accumulate: [said]
  builtin:
    outputs:
      - {name: said, expression: "[message]"}
    complete: "false"
    reply: "Kept."
`

// TestHostileRuntimeInput sends a Journey whose CEL loops or errors at run time and
// whose context outgrows its limit, and Sessions with an oversize or absurdly nested
// initial context: each turn must end with a typed failure (or the Session fail with a
// reason), quickly, with the manager still up and every other Session progressing.
func TestHostileRuntimeInput(t *testing.T) {
	ns := newNamespace(t)
	mgr := newManagerProcess(t, "--shard-selector", "journey.dev/shard="+ns)
	mgr.start()
	for _, o := range decodeObjects(t, fmt.Sprintf(hostile, ns)) {
		create(t, o)
	}
	ctx := context.Background()
	label := map[string]string{"journey.dev/shard": ns}
	session := func(name string, initial any, messages ...string) *flowv1.Session {
		s := &flowv1.Session{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: label},
			Spec:       flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "hostile"}},
		}
		if initial != nil {
			raw, _ := json.Marshal(initial)
			s.Spec.InitialContext = &apiextensionsv1.JSON{Raw: raw}
		}
		for i, m := range messages {
			s.Spec.Messages = append(s.Spec.Messages, flowv1.Message{ID: fmt.Sprintf("m%d", i+1), Text: m})
		}
		return s
	}
	nested := map[string]any{"leaf": true}
	for range 60 {
		nested = map[string]any{"n": nested}
	}
	hoard := []string{"hoard"}
	for i := range 12 {
		hoard = append(hoard, fmt.Sprintf("%03d %s", i, strings.Repeat("x", 120)))
	}
	create(t,
		session("spin", nil, "spin", "still there?"),
		session("broken", nil, "break", "still there?"),
		session("hoard", nil, hoard...),
		session("oversize", map[string]any{"blob": strings.Repeat("y", 4096)}, "hello"),
		session("nested", map[string]any{"deep": nested}, "hello", "spin"),
	)

	get := func(name string) *flowv1.Session {
		var s flowv1.Session
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	start := time.Now()
	eventually(t, 60*time.Second, func() error {
		if c := mgr.crashed(); len(c) > 0 {
			t.Fatalf("the manager crashed: %v", c)
		}
		for _, name := range []string{"spin", "broken", "hoard", "nested"} {
			s := get(name)
			if s.Status.ProcessedMessages != int32(len(s.Spec.Messages)) || !handled(s) {
				return fmt.Errorf("%s: %d of %d messages, phase %s", name, s.Status.ProcessedMessages, len(s.Spec.Messages), s.Status.Phase)
			}
		}
		if s := get("oversize"); s.Status.Phase != flowv1.PhaseFailed {
			return fmt.Errorf("oversize: phase %s", s.Status.Phase)
		}
		return nil
	})
	t.Logf("hostile Sessions handled in %s", time.Since(start).Round(time.Millisecond))

	// Every misbehaving turn left a typed failure behind: in history (a turn that moved)
	// or in the last turn, never a silent success.
	failuresOf := func(s *flowv1.Session) string {
		var b strings.Builder
		if s.Status.LastTurn != nil {
			for _, f := range s.Status.LastTurn.Failures {
				fmt.Fprintf(&b, "%s/%s: %s; ", f.Source, f.Kind, f.Message)
			}
		}
		return b.String()
	}
	for _, name := range []string{"spin", "broken", "hoard", "nested", "oversize"} {
		s := get(name)
		t.Logf("%s: phase %s, %d/%d messages, failures: %s", name, s.Status.Phase, s.Status.ProcessedMessages, len(s.Spec.Messages), failuresOf(s))
	}
	spin := get("spin")
	if s := failuresOf(spin); !strings.Contains(strings.ToLower(s), "cost") && !strings.Contains(strings.ToLower(s), "limit") {
		// The second message ran the pathway again; the first turn's failure is in events.
		t.Errorf("spin: the runaway comprehension left no failure: %q (last turn %+v)", s, spin.Status.LastTurn)
	}
	if s := failuresOf(get("broken")); s == "" {
		t.Errorf("broken: division by zero and int('not a number') left no failure")
	}
	hoarded := get("hoard")
	if s := failuresOf(hoarded); !strings.Contains(s, "maxContextBytes") && !strings.Contains(strings.ToLower(s), "context") {
		t.Errorf("hoard: a context over maxContextBytes left no failure: %q", s)
	}
	if hoarded.Status.Context != nil && len(hoarded.Status.Context.Raw) > 1024 {
		t.Errorf("hoard: context is %d bytes, over maxContextBytes 1024", len(hoarded.Status.Context.Raw))
	}
	oversize := get("oversize")
	if c := apimeta.FindStatusCondition(oversize.Status.Conditions, flowv1.ConditionReady); c == nil || c.Reason != flowv1.ReasonContextTooLarge {
		t.Errorf("oversize: Ready = %+v, want reason %s", c, flowv1.ReasonContextTooLarge)
	}
	if oversize.Status.Context != nil {
		t.Errorf("oversize: an initial context over the limit was kept (%d bytes), not refused", len(oversize.Status.Context.Raw))
	}
	if p := mgr.panics(); p > 0 {
		t.Errorf("the manager logged %d panics", p)
	}
}

// TestFuzzedManifests sends mutated Journey, Pathway and Session manifests (the
// healthcare-referral sample with fields deleted, retyped, oversized, duplicated or
// replaced by broken CEL) through the API server. Each must be rejected cleanly (a 4xx
// with a reason) or accepted and then handled by the manager (a Ready condition on a
// Journey, a status on a Session) without the manager crashing or panicking.
func TestFuzzedManifests(t *testing.T) {
	var (
		journeys = pick(80, 800)
		sessions = pick(150, 2000)
		seed     = uint64(20261122)
	)
	ns := newNamespace(t)
	mgr := newManagerProcess(t, "--shard-selector", "journey.dev/shard="+ns)
	mgr.start()
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "healthcare-referral.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var journey, sess *unstructured.Unstructured
	var pathways []*unstructured.Unstructured
	for _, o := range decodeObjects(t, string(raw)) {
		u := o.(*unstructured.Unstructured)
		u.SetNamespace(ns)
		switch u.GetKind() {
		case "Journey":
			journey = u
		case "Session":
			sess = u
		default:
			pathways = append(pathways, u)
			create(t, u.DeepCopy()) // the valid Pathways, for Journeys that still reference them
		}
	}
	valid := journey.DeepCopy()
	create(t, valid)

	rng := rand.New(rand.NewPCG(seed, seed+1))
	var mu sync.Mutex
	tally := map[string]int{}
	var unclean, rejections []string
	submit := func(kind string, u *unstructured.Unstructured) bool {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		err := k8sClient.Create(cctx, u)
		mu.Lock()
		defer mu.Unlock()
		var status apierrors.APIStatus
		switch {
		case err == nil:
			tally[kind+" accepted"]++
			return true
		case errors.As(err, &status) && status.Status().Code >= 400 && status.Status().Code < 500:
			tally[kind+" rejected"]++
			if len(rejections) < 6 && rng.IntN(8) == 0 {
				msg := status.Status().Message
				rejections = append(rejections, fmt.Sprintf("%s: %d %s", kind, status.Status().Code, msg[:min(len(msg), 160)]))
			}
		default:
			tally[kind+" unclean"]++
			if len(unclean) < 10 {
				unclean = append(unclean, fmt.Sprintf("%s %s: %v", kind, u.GetName(), err))
			}
		}
		return false
	}

	var accepted []string // Journey names
	for i := range journeys {
		f := newFuzzer(rng)
		if i%4 == 0 { // a mutated Pathway, referenced by the Journey
			p := pathways[rng.IntN(len(pathways))].DeepCopy()
			p.SetName(fmt.Sprintf("fz-p-%04d", i))
			f.mutate(p.Object, "spec", 1+rng.IntN(4))
			submit("pathway", p)
		}
		j := journey.DeepCopy()
		j.SetName(fmt.Sprintf("fz-j-%04d", i))
		f.mutate(j.Object, "spec", 1+rng.IntN(3))
		if i%4 == 0 {
			if entries, ok := j.Object["spec"].(map[string]any)["pathways"].([]any); ok && len(entries) > 0 {
				if e, ok := entries[rng.IntN(len(entries))].(map[string]any); ok {
					e["pathwayRef"] = fmt.Sprintf("fz-p-%04d", i)
				}
			}
		}
		if submit("journey", j) {
			accepted = append(accepted, j.GetName())
		}
	}
	for i := range sessions {
		f := newFuzzer(rng)
		s := sess.DeepCopy()
		s.SetName(fmt.Sprintf("fz-s-%04d", i))
		if rng.IntN(3) > 0 && len(accepted) > 0 {
			_ = unstructured.SetNestedField(s.Object, accepted[rng.IntN(len(accepted))], "spec", "journeyRef", "name")
		}
		f.mutate(s.Object, "spec", 1+rng.IntN(3))
		s.SetLabels(map[string]string{"journey.dev/shard": ns})
		submit("session", s)
	}

	// Accepted objects are handled: Journeys get a Ready condition for their generation,
	// Sessions a status.
	start := time.Now()
	var stuck []string
	eventually(t, pick(90*time.Second, 10*time.Minute), func() error {
		if c := mgr.crashed(); len(c) > 0 {
			t.Fatalf("the manager crashed: %v", c)
		}
		stuck = stuck[:0]
		var jl flowv1.JourneyList
		if err := k8sClient.List(ctx, &jl, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, j := range jl.Items {
			c := apimeta.FindStatusCondition(j.Status.Conditions, flowv1.ConditionReady)
			if c == nil || j.Status.ObservedGeneration != j.Generation {
				stuck = append(stuck, "journey "+j.Name)
			}
		}
		for _, s := range listSessions(t, ns) {
			if !handled(&s) {
				stuck = append(stuck, fmt.Sprintf("session %s (%s)", s.Name, s.Status.Phase))
			}
		}
		if len(stuck) > 0 {
			return fmt.Errorf("%d not handled, e.g. %v", len(stuck), stuck[:min(5, len(stuck))])
		}
		return nil
	})
	ready, notReady := 0, 0
	var jl flowv1.JourneyList
	_ = k8sClient.List(ctx, &jl, client.InNamespace(ns))
	for _, j := range jl.Items {
		if apimeta.IsStatusConditionTrue(j.Status.Conditions, flowv1.ConditionReady) {
			ready++
		} else {
			notReady++
		}
	}
	phases := map[flowv1.Phase]int{}
	for _, s := range listSessions(t, ns) {
		phases[s.Status.Phase]++
	}
	t.Logf("\n| kind | submitted | accepted | rejected (4xx) | unclean (5xx, timeouts) |\n|---|---:|---:|---:|---:|\n"+
		"| Journey | %d | %d | %d | %d |\n| Pathway | %d | %d | %d | %d |\n| Session | %d | %d | %d | %d |\n\n"+
		"Accepted Journeys: %d Ready, %d not Ready (with a reason). Sessions by phase: %v. Handled in %s; manager crashes %d, panics %d.\nSome rejections: %s",
		journeys, tally["journey accepted"], tally["journey rejected"], tally["journey unclean"],
		(journeys+3)/4, tally["pathway accepted"], tally["pathway rejected"], tally["pathway unclean"],
		sessions, tally["session accepted"], tally["session rejected"], tally["session unclean"],
		ready-1, notReady, phases, time.Since(start).Round(time.Second), len(mgr.crashed()), mgr.panics(), strings.Join(rejections, "\n  "))
	for _, u := range unclean {
		t.Errorf("not rejected cleanly: %s", u)
	}
	if p := mgr.panics(); p > 0 {
		t.Errorf("the manager logged %d panics", p)
	}
	if tally["journey accepted"] == 0 || tally["journey rejected"] == 0 || tally["session accepted"] == 0 || tally["session rejected"] == 0 {
		t.Errorf("the fuzzer is too tame or too wild to test both paths: %v", tally)
	}
}
