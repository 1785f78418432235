package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// patchStatusFixture is a Session status after turns turns of a chat: a transcript,
// a context, a turn outcome, history and conditions.
func patchStatusFixture(turns int) flowv1.SessionStatus {
	at := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	st := flowv1.SessionStatus{
		Phase: flowv1.PhaseWaitingForInput, CurrentPathway: "chat", Step: int64(2 * turns), Writes: int64(turns + 1),
		Turns: int32(turns), ProcessedMessages: int32(turns), JourneyRevision: "chat-abc123",
		Retries:  map[string]int32{"chat": 1},
		Context:  &apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf(`{"last":"message %d","n":%d}`, turns, turns))},
		LastTurn: &flowv1.TurnOutcome{Trigger: flowv1.TurnMessage, MessageID: fmt.Sprintf("m-%d", turns), Pathway: "chat"},
		Conditions: []metav1.Condition{{Type: flowv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "WaitingForInput",
			Message: "waiting", LastTransitionTime: at}},
	}
	for i := range turns {
		st.Transcript = append(st.Transcript, flowv1.Exchange{MessageID: fmt.Sprintf("m-%d", i), Pathway: "chat",
			User: fmt.Sprintf("Message %d: I would like to see a cardiologist next week.", i), Assistant: "Noted, thank you.", Step: int64(2*i + 1)})
	}
	return st
}

// statusPatchCases are pairs of statuses a step may write one after the other.
func statusPatchCases() map[string][2]flowv1.SessionStatus {
	cases := map[string][2]flowv1.SessionStatus{}
	a, b := patchStatusFixture(5), patchStatusFixture(6)
	cases["a turn"] = [2]flowv1.SessionStatus{a, b}
	c := patchStatusFixture(5)
	c.Phase, c.Turn = flowv1.PhaseRunning, &flowv1.TurnProgress{Trigger: flowv1.TurnMessage, Stage: flowv1.StageRun, Pathway: "chat", MessageID: "m-5"}
	c.Step++
	cases["a turn starts"] = [2]flowv1.SessionStatus{a, c}
	d := *c.DeepCopy()
	d.Turn.Stage, d.Step = flowv1.StageDecide, d.Step+1
	cases["a nested member changes"] = [2]flowv1.SessionStatus{c, d}
	e := *d.DeepCopy()
	e.Turn, e.Retries, e.LastTurn, e.Step = nil, nil, nil, e.Step+1
	cases["members removed"] = [2]flowv1.SessionStatus{d, e}
	f := *a.DeepCopy()
	f.Retries = map[string]int32{"chat": 2, "other/pathway~1": 1}
	f.Context = &apiextensionsv1.JSON{Raw: []byte(`{"last":"message 5","n":5,"nested":{"a":[1,2]}}`)}
	cases["map keys and a pointer-escaped key"] = [2]flowv1.SessionStatus{a, f}
	cases["unchanged but the count of writes"] = [2]flowv1.SessionStatus{a, *a.DeepCopy()}
	return cases
}

// TestSessionStatusPatchWritesTheNewStatus: the patch from a status to the next, as
// the API server applies it, stores exactly the next status, and fails when the
// stored status is no longer the one the step read.
func TestSessionStatusPatchWritesTheNewStatus(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	for name, tc := range statusPatchCases() {
		t.Run(name, func(t *testing.T) {
			s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "patch-"},
				Spec: flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "none"}}}
			if err := k8sClient.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
			base := s.DeepCopy()
			s.Status = tc[0]
			if err := k8sClient.Status().Patch(ctx, s, client.MergeFrom(base)); err != nil {
				t.Fatal(err)
			}
			before := s.DeepCopy()
			s.Status = *tc[1].DeepCopy()
			s.Status.Writes = before.Status.Writes + 1
			want := s.Status.DeepCopy()
			patch, err := sessionStatusPatch(before, s)
			if err != nil || patch == nil {
				t.Fatalf("patch: %v, %v", patch, err)
			}
			if err := k8sClient.Status().Patch(ctx, s, patch); err != nil {
				t.Fatal(err)
			}
			var got flowv1.Session
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(s), &got); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(&got.Status, want) {
				t.Fatalf("stored status differs from the one written:\n got %+v\nwant %+v", got.Status, *want)
			}
			// The same patch again: the stored status is not the one it was made from.
			if out, ok := patchStatus(ctx, k8sClient, s, patch); ok || out.kind != conflict {
				t.Fatalf("patch on a status that moved on: %+v, %v; want a conflict", out, ok)
			}
			// A status the API server refuses is an error, not a conflict.
			before = got.DeepCopy()
			got.Status.Phase = "Bogus"
			if patch, err = sessionStatusPatch(before, &got); err != nil {
				t.Fatal(err)
			}
			if out, ok := patchStatus(ctx, k8sClient, &got, patch); ok || out.kind != transient {
				t.Fatalf("an invalid status: %+v, %v; want an error", out, ok)
			}
		})
	}
}

// BenchmarkSessionStatusPatch is the CPU of building a turn's status patch.
func BenchmarkSessionStatusPatch(b *testing.B) {
	for _, turns := range []int{5, 50} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			before := &flowv1.Session{Status: patchStatusFixture(turns)}
			after := &flowv1.Session{Status: patchStatusFixture(turns + 1)}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sessionStatusPatch(before, after); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMembersSplitsEncodedObjects: an object as encoding/json writes it is split into
// its members whatever their values hold (quotes, escapes, brackets in strings,
// nesting), sorted by name; anything else is refused.
func TestMembersSplitsEncodedObjects(t *testing.T) {
	t.Parallel()
	in := map[string]any{
		"z":       `a "quoted" } ] , { [ string \ with a backslash`,
		"a/b~c":   []any{map[string]any{"x": []any{1.5, nil, true}}, "]"},
		"é\"name": map[string]any{"nested": map[string]any{"deep": "}"}, "empty": map[string]any{}},
		"n":       -12.5e3,
		"null":    nil,
		"f":       false,
		"e":       []any{},
	}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := members(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Fatalf("%d members, want %d: %+v", len(got), len(in), got)
	}
	for i, m := range got {
		if i > 0 && got[i-1].name >= m.name {
			t.Errorf("members not sorted: %q before %q", got[i-1].name, m.name)
		}
		want, _ := json.Marshal(in[m.name])
		if !bytes.Equal(m.value, want) {
			t.Errorf("member %q = %s, want %s", m.name, m.value, want)
		}
	}
	for _, bad := range []string{``, `[]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":"1}`, `{"a":{"b":1}`, `"x"`} {
		if _, err := members([]byte(bad)); err == nil {
			t.Errorf("members(%s): no error", bad)
		}
	}
}

// TestSessionStatusWriteReadsBackMetadataOnly: a step's status write asks the API
// server for the written object's metadata only, not the whole Session; the stored
// status is the one written, and the Session in hand keeps that status and the spec
// its step read, with the written resourceVersion. The same write again is a conflict.
func TestSessionStatusWriteReadsBackMetadataOnly(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	var mu sync.Mutex
	var accepts []string
	var answered []int
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/status") {
				body, _ := io.ReadAll(resp.Body)
				resp.Body = io.NopCloser(bytes.NewReader(body))
				mu.Lock()
				accepts, answered = append(accepts, req.Header.Get("Accept")), append(answered, len(body))
				mu.Unlock()
			}
			return resp, err
		})
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "meta"},
		Spec: flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "none"}}}
	if err := k8sClient.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	base := s.DeepCopy()
	s.Status = patchStatusFixture(20)
	if err := k8sClient.Status().Patch(ctx, s, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	before := s.DeepCopy()
	s.Status = patchStatusFixture(21)
	if out, ok := writeSessionStatus(ctx, c, c, before, s, false); !ok {
		t.Fatalf("write: %+v", out)
	}
	var got flowv1.Session
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(&got.Status, &s.Status) || !equality.Semantic.DeepEqual(&got.Spec, &before.Spec) {
		t.Fatalf("stored status or spec differs from the one in hand:\n got %+v\nwant %+v", got.Status, s.Status)
	}
	if s.ResourceVersion != got.ResourceVersion || s.ResourceVersion == before.ResourceVersion {
		t.Fatalf("resourceVersion in hand %s, stored %s, before the write %s", s.ResourceVersion, got.ResourceVersion, before.ResourceVersion)
	}
	mu.Lock()
	if len(accepts) != 1 || !strings.Contains(accepts[0], "as=PartialObjectMetadata") {
		t.Errorf("status writes asked for %q, want the metadata only", accepts)
	}
	stored := jsonSizeOf(t, &got)
	if len(answered) != 1 || answered[0] >= stored/2 {
		t.Errorf("status writes answered with %v bytes, for a Session of %d bytes", answered, stored)
	}
	t.Logf("a status write of a Session of %d bytes (JSON) was answered with %v bytes", stored, answered)
	mu.Unlock()
	// The same write again: the stored status is not the one it was made from.
	if out, ok := writeSessionStatus(ctx, c, c, before, before.DeepCopy(), false); ok || out.kind != conflict {
		t.Fatalf("a write on a status that moved on: %+v, %v; want a conflict", out, ok)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func jsonSizeOf(t *testing.T, o any) int {
	t.Helper()
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return len(raw)
}
