package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// createSessions creates sessions with workers in parallel and returns the rate.
func createSessions(ctx context.Context, c client.Client, workers int, sessions []*flowv1.Session) (float64, error) {
	start := time.Now()
	err := testenv.Parallel(workers, len(sessions), func(i int) error {
		return c.Create(ctx, sessions[i])
	})
	return float64(len(sessions)) / time.Since(start).Seconds(), err
}

// say sends message k of Session name as kubectl journey say does once the previous
// message is answered: the new message replaces the processed one in spec.messages
// and spec.messagesDropped counts it, so the spec stays one message long however long
// the conversation. The Session's validation checks that what is dropped was
// processed. The response (the Session as written) is decoded into into, when given.
func say(ctx context.Context, c client.Client, namespace, name string, k int, into *flowv1.Session) error {
	m := flowv1.Message{ID: fmt.Sprintf("m-%d", k), Text: messageText(name, k)}
	var op []map[string]any
	if k == 0 {
		op = []map[string]any{{"op": "add", "path": "/spec/messages", "value": []flowv1.Message{m}}}
	} else {
		op = []map[string]any{
			{"op": "replace", "path": "/spec/messages", "value": []flowv1.Message{m}},
			{"op": "add", "path": "/spec/messagesDropped", "value": k},
		}
	}
	raw, err := json.Marshal(op)
	if err != nil {
		return err
	}
	if into == nil {
		into = &flowv1.Session{}
	}
	into.Namespace, into.Name = namespace, name
	return c.Patch(ctx, into, client.RawPatch(types.JSONPatchType, raw))
}

// plainPair is the limit of turns on this API server: a plain client makes, for each
// turn, the user's write (say) and one status write of the bytes the operator wrote
// for that turn (the statuses of the calibration conversation, turn by turn), as the
// operator writes a status: a merge patch from the object as read, under the
// resourceVersion precondition. No cache, no informer, no engine, no agent, no
// Events: two writes a turn, the least a turn can cost.
type plainPair struct {
	c         client.Client
	namespace string
	// statuses[k] is the status after turn k (statuses[0] before the first).
	statuses []flowv1.SessionStatus
	objs     []*flowv1.Session
	// next is, by Session, the index of its next paced turn.
	next []int
}

// newPlainPair creates sessions plain Sessions <prefix><number> in namespace with
// spec, each waiting for its first message as the calibration Session did
// (statuses[0]).
func newPlainPair(ctx context.Context, c client.Client, namespace, prefix string, spec *flowv1.SessionSpec, statuses []flowv1.SessionStatus, sessions int) (*plainPair, error) {
	p := &plainPair{c: c, namespace: namespace, statuses: statuses, objs: make([]*flowv1.Session, sessions)}
	for i := range p.objs {
		p.objs[i] = &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("%s%05d", prefix, i)}}
		p.objs[i].Spec = *spec.DeepCopy()
		p.objs[i].Spec.Messages, p.objs[i].Spec.MessagesDropped = nil, 0
	}
	if _, err := createSessions(ctx, c, 16, p.objs); err != nil {
		return nil, err
	}
	return p, testenv.Parallel(16, sessions, func(i int) error {
		patch := client.MergeFrom(p.objs[i].DeepCopy())
		p.objs[i].Status = *statuses[0].DeepCopy()
		return c.Status().Patch(ctx, p.objs[i], patch)
	})
}

// delete deletes the plain Sessions, so the probes of a search do not pile up in etcd.
func (p *plainPair) delete(ctx context.Context) error {
	return testenv.Parallel(16, len(p.objs), func(i int) error {
		return client.IgnoreNotFound(p.c.Delete(ctx, p.objs[i]))
	})
}

// run has every plain Session take turns turns, with workers in parallel, and returns
// how long that took.
func (p *plainPair) run(ctx context.Context, turns, workers int) (time.Duration, error) {
	if len(p.statuses) < turns+1 {
		return 0, fmt.Errorf("plain pair: %d statuses for %d turns", len(p.statuses), turns)
	}
	start := time.Now()
	err := testenv.Parallel(workers, len(p.objs), func(i int) error {
		s := p.objs[i]
		for k := range turns {
			if err := say(ctx, p.c, p.namespace, s.Name, k, s); err != nil {
				return fmt.Errorf("plain pair, %s message %d: %w", s.Name, k, err)
			}
			patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
			s.Status = *p.statuses[k+1].DeepCopy()
			if err := p.c.Status().Patch(ctx, s, patch); err != nil {
				return fmt.Errorf("plain pair, %s status %d: %w", s.Name, k+1, err)
			}
		}
		return nil
	})
	return time.Since(start), err
}

// paced offers the plain pair's turns at rate per second for d, open loop (offer),
// each Session taking its turns in order, from one probe to the next, until it has
// taken all it has statuses for.
// A turn's latency runs from just before the user's write to the status write's
// answer: the operator's turn also waits for its informer to see the reply.
func (p *plainPair) paced(ctx context.Context, rate float64, d, limit time.Duration) (probeResult, error) {
	turns := len(p.statuses) - 1
	if p.next == nil {
		p.next = make([]int, len(p.objs))
	}
	next := p.next
	return offer(ctx, rate, d, len(p.objs), limit, func(ctx context.Context, i int) (time.Duration, bool, error) {
		s, k := p.objs[i], next[i]
		start := time.Now()
		if err := say(ctx, p.c, p.namespace, s.Name, k, s); err != nil {
			return 0, false, fmt.Errorf("plain pair, %s message %d: %w", s.Name, k, err)
		}
		patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
		s.Status = *p.statuses[k+1].DeepCopy()
		if err := p.c.Status().Patch(ctx, s, patch); err != nil {
			return 0, false, fmt.Errorf("plain pair, %s status %d: %w", s.Name, k+1, err)
		}
		next[i]++
		return time.Since(start), next[i] < turns, nil
	})
}
