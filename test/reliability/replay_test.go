package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/revision"
)

// errNoReplay says a Session cannot be replayed exactly: its journal was truncated,
// or a tool call's outcome was unknown (a restart between its send and its answer
// decided it, and the journal holds no answer for it).
var errNoReplay = fmt.Errorf("journal truncated or an outcome unknown")

// replay runs the Session's inputs through the pure engine from an empty status, from
// its pinned Journey revision, answering each agent call with the next entry of
// status.journal (whose input hash must match the call), until a step changes nothing.
// It returns "" when the replayed status equals the Session's, else what differs. A
// message processed twice, a transition applied twice or an answer applied that was
// never journaled shows up as a difference.
func replay(ctx context.Context, c client.Reader, s *flowv1.Session) (string, error) {
	if s.Status.JournalDropped > 0 || unknownOutcomes(s) > 0 {
		return "", errNoReplay
	}
	var rev appsv1.ControllerRevision
	if err := c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Status.JourneyRevision}, &rev); err != nil {
		return "", err
	}
	// As the controller compiles it: the tool schemas the revision pinned included.
	snap, err := revision.Compile(rev.Name, rev.Data.Raw)
	if err != nil {
		return "", err
	}
	journal := s.Status.Journal
	st := &flowv1.SessionStatus{}
	used := 0
	now := time.Now()
	for range 10000 {
		next, eff := engine.Step(snap, engine.Input{
			Spec: &s.Spec, Status: st, Now: now,
			SessionName: s.Name, SessionUID: string(s.UID), CreationTime: s.CreationTimestamp.Time,
		})
		if eff != nil {
			if used >= len(journal) {
				return fmt.Sprintf("step %d asks for a %s call that was never journaled", next.Step, eff.Kind), nil
			}
			rec := journal[used]
			if rec.InputHash != eff.InputHash {
				return fmt.Sprintf("journal entry %d (%s) answers another question than step %d asks (%s)", used, rec.Kind, next.Step, eff.Kind), nil
			}
			next.PendingEffect = rec.DeepCopy()
			next.Journal = append(next.Journal, rec)
			used++
		} else if equality.Semantic.DeepEqual(next, st) {
			break
		}
		st = next
	}
	if used != len(journal) {
		return fmt.Sprintf("the replay used %d of %d journal entries", used, len(journal)), nil
	}
	want, got := comparable(&s.Status), comparable(st)
	if !reflect.DeepEqual(want, got) {
		return fmt.Sprintf("replayed status differs:\n  actual:   %v\n  replayed: %v", diffKeys(want, got, "actual"), diffKeys(got, want, "replayed")), nil
	}
	return "", nil
}

// comparable is a status without what depends on the clock or the controller (times,
// conditions, observedGeneration, the count of status writes), as generic JSON.
func comparable(st *flowv1.SessionStatus) map[string]any {
	c := st.DeepCopy()
	for i := range c.History {
		c.History[i].Time = metav1.Time{}
	}
	c.Conditions, c.StartTime, c.CompletionTime, c.LastActivityTime, c.ObservedGeneration = nil, nil, nil, nil, 0
	c.Writes = 0
	raw, _ := json.Marshal(c)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

// diffKeys renders the top-level fields of a whose value differs from b's.
func diffKeys(a, b map[string]any, _ string) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		if !reflect.DeepEqual(v, b[k]) {
			out[k] = v
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out[k] = nil
		}
	}
	return out
}
