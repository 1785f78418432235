package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/plugin"
)

// chatJourney is a one-pathway builtin chat: every message is answered and kept as the
// context's "last" value, so every turn changes the context.
func chatJourney(t *testing.T, ns string, maxTurns int32) *flowv1.Journey {
	t.Helper()
	p := &flowv1.Pathway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"},
		Spec: flowv1.PathwaySpec{
			Accumulate: []string{"last"},
			Builtin: &flowv1.BuiltinPathway{Reply: "noted", Complete: "false",
				Outputs: []flowv1.BuiltinOutput{{Name: "last", Expression: "message"}}},
		},
	}
	j := journeyOf(ns, "chat", p)
	j.Spec.Limits.MaxTurns = maxTurns
	create(t, p, j)
	return j
}

// storedBytes is the Session's size as the API server stores it (JSON, metadata
// included). s is a Session as the API server returned it (a watch event or a write's
// response), so its encoding is what the API server stores.
func storedBytes(t *testing.T, s *flowv1.Session) int {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// sizes is the Session's stored size, and its size without spec.messages: what the
// Session keeps of a conversation, without the messages its clients have not dropped
// yet. Those are bounded by count and by the Session's byte bound; which of a round's
// messages are still there when it is read depends on which client wrote last.
func sizes(t *testing.T, s *flowv1.Session) (stored, kept int) {
	t.Helper()
	withoutPending := *s // a shallow copy: s keeps its messages
	withoutPending.Spec.Messages = nil
	return storedBytes(t, s), storedBytes(t, &withoutPending)
}

// watchClient is an admin client that can watch, made once for the package.
var watchClient = sync.OnceValues(func() (client.WithWatch, error) {
	return client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
})

// waitProcessed waits until the Session processed n messages and reports the last
// turn's message. It watches the Session instead of polling it: one decode per write,
// where a poll would read the whole object (up to its bound) every PollInterval and
// take the CPU the manager beside it needs. from, when not nil, is the Session as the
// caller's last write returned it: the watch starts there, so the Session is not read
// again; with nil it is read first.
func waitProcessed(t *testing.T, ns, name string, n int32, from *flowv1.Session) *flowv1.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check := func(s *flowv1.Session) error {
		if s.Status.ProcessedMessages < n || s.Status.Phase != flowv1.PhaseWaitingForInput {
			return fmt.Errorf("processed %d of %d, phase %s", s.Status.ProcessedMessages, n, s.Status.Phase)
		}
		return nil
	}
	c, err := watchClient()
	if err != nil {
		t.Fatal(err)
	}
	s := from
	for {
		// (Re)read, then watch from what was read: a watch that ends or expires
		// loses nothing.
		if s == nil {
			s = &flowv1.Session{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
				t.Fatalf("session %s: %v", name, err)
			}
		}
		last := check(s)
		if last == nil {
			return s
		}
		w, err := c.Watch(ctx, &flowv1.SessionList{}, &client.ListOptions{Namespace: ns,
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
			Raw:           &metav1.ListOptions{ResourceVersion: s.ResourceVersion}})
		if err != nil {
			t.Fatalf("watching session %s: %v", name, err)
		}
		s = nil
		for ev := range w.ResultChan() {
			got, ok := ev.Object.(*flowv1.Session)
			if !ok {
				break // an error event: read again
			}
			if last = check(got); last == nil {
				w.Stop()
				return got
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			t.Fatalf("session %s: condition not met after 30s: %v", name, last)
		}
	}
}

// A long conversation through kubectl journey say: the Session's size stays under the
// bound its limits give however long it runs, each message is processed exactly once
// across a manager restart, 8,000-character messages never meet an etcd error, and a
// message past the bound is refused with a message that says what to do.
//
// Past message 100 the Session, without the messages its clients have not dropped yet,
// may grow by growthPerMessage bytes a message at most (a counter's digits, longer
// ids), so any part that grows with every turn, however
// little, shows within total messages; each turn costs the API server and this
// race-instrumented process a decode of the whole object or more, so total is no larger
// than that needs.
func TestLongConversationStaysBounded(t *testing.T) {
	t.Parallel()
	const total, growthPerMessage = 1000, 8
	ns := newNamespace(t)
	mgr := startManager(t, ns, Options{})
	j := chatJourney(t, ns, total+10)
	create(t, sessionOf(ns, "long", "chat"))
	ctx := context.Background()
	key := types.NamespacedName{Namespace: ns, Name: "long"}
	bound := j.Spec.Limits.MaxObjectBytes()
	big := strings.Repeat("x", 8000)

	// One message in 20 is big: the first of the compacting client's batch, so the
	// message a round ends with is small whichever sender lands last, and the sizes
	// compared below hold the same kinds of content.
	text := func(i int, long bool) string {
		if long {
			return fmt.Sprintf("%d %s", i, big)
		}
		return fmt.Sprintf("message %d", i)
	}
	largest, at100 := 0, 0
	for sent := 0; sent < total; {
		from, to := sent+1, min(sent+20, total)
		// Two senders at once, as two browser tabs would: one through kubectl journey
		// say, one message at a time, the other a client of its own that appends the
		// rest in one patch and drops the processed messages in the same patch, as
		// any client may. Each retries on a conflict, and every message is processed
		// once whatever the order.
		var wg sync.WaitGroup
		wg.Go(func() {
			for k := from; k < from+2; k++ {
				if _, _, err := plugin.SendMessage(ctx, k8sClient, key, fmt.Sprintf("m-%d", k), text(k, false)); err != nil {
					t.Errorf("say %d: %v", k, err)
				}
			}
		})
		wg.Go(func() {
			var batch []flowv1.Message
			for k := from + 2; k <= to; k++ {
				batch = append(batch, flowv1.Message{ID: fmt.Sprintf("m-%d", k), Text: text(k, k == from+2)})
			}
			if err := sendCompacting(ctx, key, batch); err != nil {
				t.Errorf("sending messages %d to %d: %v", from+2, to, err)
			}
		})
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		sent = to
		s := waitProcessed(t, ns, "long", int32(sent), nil)
		if s.Status.Turns != int32(sent) || s.Spec.MessageCount() != int32(sent) {
			t.Fatalf("after message %d: %d turns, %d messages", sent, s.Status.Turns, s.Spec.MessageCount())
		}
		n, kept := sizes(t, s)
		largest = max(largest, n)
		if sent == 100 {
			at100 = kept
		}
		if sent == total/2 {
			// The manager stops; messages sent meanwhile wait, the pending ones count
			// against the bound, and the new manager processes each of them once.
			if err := mgr.Stop(); err != nil {
				t.Fatal(err)
			}
			refusedAtTheLimit(t, ctx, key, sent)
			mgr = startManager(t, ns, Options{})
			sent += 4
			if s = waitProcessed(t, ns, "long", int32(sent), nil); s.Status.Turns != int32(sent) {
				t.Fatalf("after the restart: %d turns for %d messages", s.Status.Turns, sent)
			}
		}
	}
	s := get(t, ns, "long", &flowv1.Session{})
	if s.Status.ProcessedMessages != total || s.Status.Turns != total || s.Spec.MessageCount() != total {
		t.Errorf("processed %d, %d turns, %d messages sent; want %d each", s.Status.ProcessedMessages, s.Status.Turns, s.Spec.MessageCount(), total)
	}
	if len(s.Spec.Messages) > 20 || s.Spec.MessagesDropped < total-20 {
		t.Errorf("spec.messages holds %d messages, %d dropped", len(s.Spec.Messages), s.Spec.MessagesDropped)
	}
	if largest > bound {
		t.Errorf("the Session took %d bytes, over its bound %d", largest, bound)
	}
	// The growth is measured without spec.messages: one round's big message may still be
	// there at one reading and dropped at another (8 KB either way), which is no growth.
	_, end := sizes(t, s)
	if end > at100+growthPerMessage*(total-100) {
		t.Errorf("the Session (without its pending messages) grew from %d bytes at message 100 to %d at message %d", at100, end, total)
	}
	trimmedOnce(t, ns, s)
	t.Logf("largest %d bytes (bound %d); without pending messages %d at message 100, %d at message %d", largest, bound, at100, end, total)
}

// trimmedOnce checks that a Session whose transcript lost its oldest exchanges says so:
// the TranscriptTrimmed condition, and one Event when it first happened, however many
// exchanges were dropped since.
func trimmedOnce(t *testing.T, ns string, s *flowv1.Session) {
	t.Helper()
	c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1.ConditionTranscriptTrimmed)
	if s.Status.TranscriptDropped == 0 || c == nil || c.Status != metav1.ConditionTrue || c.Reason != flowv1.ReasonOldestExchangesDropped ||
		!strings.Contains(c.Message, "pathway agents no longer see them") {
		t.Errorf("%d exchanges dropped, condition %+v", s.Status.TranscriptDropped, c)
	}
	eventually(t, 10*time.Second, func() error {
		var list eventsv1.EventList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		n := 0
		for _, e := range list.Items {
			if e.Regarding.Name == s.Name && e.Reason == flowv1.ConditionTranscriptTrimmed {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%d TranscriptTrimmed Events, want 1", n)
		}
		return nil
	})
}

// refusedAtTheLimit sends 8,000-character messages to a Session that processes none:
// four fit in spec.messages, the fifth is refused by the Session's validation with a
// message that says what to do, never an etcd error.
func refusedAtTheLimit(t *testing.T, ctx context.Context, key client.ObjectKey, last int) {
	t.Helper()
	big := strings.Repeat("y", 8000)
	for i := last + 1; i <= last+4; i++ {
		if _, _, err := plugin.SendMessage(ctx, k8sClient, key, fmt.Sprintf("m-%d", i), big); err != nil {
			t.Fatalf("pending message %d: %v", i, err)
		}
	}
	_, _, err := plugin.SendMessage(ctx, k8sClient, key, fmt.Sprintf("m-%d", last+5), big)
	switch {
	case err == nil:
		t.Fatal("a fifth pending 8,000-character message was accepted")
	case strings.Contains(err.Error(), "etcd") || strings.Contains(err.Error(), "too large"):
		t.Fatalf("refused by storage, not by the Session's validation: %v", err)
	case !strings.Contains(err.Error(), "more than 32 KiB") || !strings.Contains(err.Error(), "wait until the Session has processed the pending ones"):
		t.Fatalf("refusal without a clear message: %v", err)
	}
	// Dropping a message that was not processed is refused too.
	s := get(t, key.Namespace, key.Name, &flowv1.Session{})
	patch := client.MergeFrom(s.DeepCopy())
	s.Spec.MessagesDropped += int32(len(s.Spec.Messages) - 1)
	s.Spec.Messages = s.Spec.Messages[len(s.Spec.Messages)-1:]
	if err := k8sClient.Patch(ctx, s, patch); err == nil || !strings.Contains(err.Error(), "only processed messages can be dropped") {
		t.Fatalf("dropping pending messages: %v", err)
	}
}

// sendCompacting appends msgs to spec.messages of the Session key in one JSON patch
// and, in the same patch, drops its processed messages from the front, raising
// spec.messagesDropped by as many: the protocol any client may follow. The patch is
// conditional on the resourceVersion it was built from and built again on a conflict.
func sendCompacting(ctx context.Context, key client.ObjectKey, msgs []flowv1.Message) error {
	backoff := wait.Backoff{Steps: 20, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 0.5, Cap: time.Second}
	return retry.RetryOnConflict(backoff, func() error {
		s := &flowv1.Session{}
		if err := k8sClient.Get(ctx, key, s); err != nil {
			return err
		}
		drop := min(int(s.DroppableMessages()-s.Spec.MessagesDropped), len(s.Spec.Messages))
		kept := append(slices.Clone(s.Spec.Messages[max(drop, 0):]), msgs...)
		patch, err := json.Marshal([]map[string]any{
			{"op": "replace", "path": "/metadata/resourceVersion", "value": s.ResourceVersion},
			{"op": "add", "path": "/spec/messages", "value": kept},
			{"op": "add", "path": "/spec/messagesDropped", "value": int(s.Spec.MessagesDropped) + max(drop, 0)},
		})
		if err != nil {
			return err
		}
		return k8sClient.Patch(ctx, s, client.RawPatch(types.JSONPatchType, patch))
	})
}

// A conversation of 200 messages of 8,000 characters through kubectl journey say, one
// at a time: before Sessions were bounded, say failed at message 136 with
// "etcdserver: request is too large". Every say must succeed, every message be
// answered, and the Session stay under its bound. The messages hold 1.6 MB of text,
// more than etcd's 1.5 MiB request limit: a Session that kept each of them even once
// could not hold the conversation.
func TestBigMessagesNeverMeetEtcd(t *testing.T) {
	t.Parallel()
	const total, size = 200, 8000
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	j := chatJourney(t, ns, total+10)
	create(t, sessionOf(ns, "big", "chat"))
	ctx := context.Background()
	key := types.NamespacedName{Namespace: ns, Name: "big"}
	bound := j.Spec.Limits.MaxObjectBytes()
	largest := 0
	for i := 1; i <= total; i++ {
		text := fmt.Sprintf("%d %s", i, strings.Repeat("z", size))
		_, sent, err := plugin.SendMessage(ctx, k8sClient, key, fmt.Sprintf("m-%d", i), text)
		if err != nil {
			t.Fatalf("say %d: %v", i, err)
		}
		s := waitProcessed(t, ns, "big", int32(i), sent)
		if s.Status.Turns != int32(i) || s.Status.LastTurn == nil || s.Status.LastTurn.MessageID != fmt.Sprintf("m-%d", i) {
			t.Fatalf("after message %d: %d turns, last turn %+v", i, s.Status.Turns, s.Status.LastTurn)
		}
		if i%25 == 0 {
			// With the message pending, as say wrote it, and after its turn, both as
			// the API server returned them.
			largest = max(largest, storedBytes(t, sent), storedBytes(t, s))
		}
	}
	if largest > bound {
		t.Errorf("the Session took %d bytes, over its bound %d", largest, bound)
	}
	t.Logf("largest %d bytes (bound %d)", largest, bound)
}
