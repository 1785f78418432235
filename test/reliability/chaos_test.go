package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// TestRestartsAndFaults runs Sessions of the support-desk journey while the manager is
// killed (SIGKILL) or stopped (SIGTERM) every few seconds and the chat completions
// server fails a fifth of the calls, and the billing clerk's refund tools fail a
// fifth of theirs and hold some answers past a restart, then checks that every
// message was processed exactly once, no transition was applied twice, every Session
// finished or is waiting, no decision left allowedDestinations, no refund was paid
// twice, and no call to the shop that ignores keys was sent twice.
//
// Short: 50 Sessions, 2 restarts. RELIABILITY_FULL=1: 500 Sessions, a restart every
// 2-5 seconds until they settle.
func TestRestartsAndFaults(t *testing.T) {
	var (
		n        = pick(50, 500)
		restarts = pick(2, 1000) // the long run restarts until the Sessions settle
		every    = pick(1500*time.Millisecond, 2*time.Second)
		jitter   = pick(time.Duration(0), 3*time.Second)
		timeout  = pick(3*time.Minute, 20*time.Minute)
	)
	ns := newNamespace(t)
	srv := newFaultServer(t, 0.2, 20261122)
	shops := newToolShops(t, 20261126, 2*time.Second)
	for _, o := range supportDeskObjects(t, ns, srv.URL+"/v1", shops.keyed.URL, shops.unkeyed.URL) {
		create(t, o)
	}
	shard := "journey.dev/shard=" + ns
	mgr := newManagerProcess(t, "--shard-selector", shard, "--max-concurrent-reconciles=8", "--kube-api-qps=200", "--kube-api-burst=400")

	// Each Session starts with its first two messages; the other two arrive during the run.
	ctx := context.Background()
	names := make([]string, n)
	err := testenv.Parallel(16, n, func(i int) error {
		names[i] = fmt.Sprintf("chat-%04d", i)
		s := &flowv1.Session{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[i], Labels: map[string]string{"journey.dev/shard": ns}},
			Spec:       flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "support-desk"}},
		}
		for k, text := range conversation(i)[:2] {
			s.Spec.Messages = append(s.Spec.Messages, flowv1.Message{ID: fmt.Sprintf("m%d", k+1), Text: text})
		}
		return k8sClient.Create(ctx, s)
	})
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	mgr.start()
	rng := rand.New(rand.NewPCG(7, 11))
	appendAt := map[int]time.Duration{2: every / 2, 3: every + every/2} // message index -> when
	var appendWG sync.WaitGroup
	appendErrs := make(chan error, 2)
	for k, at := range appendAt {
		appendWG.Add(1)
		time.AfterFunc(at, func() {
			defer appendWG.Done()
			if err := testenv.Parallel(8, n, func(i int) error { return appendMessage(ctx, ns, names[i], k, conversation(i)[k]) }); err != nil {
				appendErrs <- err
			}
		})
	}

	done := func() bool {
		for _, s := range listSessions(t, ns) {
			if len(s.Spec.Messages) < 4 || !settled(&s) || int(s.Status.ProcessedMessages) < len(s.Spec.Messages) {
				return false
			}
		}
		return true
	}
	restarted := 0
	next := time.Now().Add(every)
	for {
		if c := mgr.crashed(); len(c) > 0 {
			t.Fatalf("the manager crashed: %v", c)
		}
		if time.Since(start) > timeout {
			break
		}
		if restarted >= restarts && done() {
			break
		}
		if restarted < restarts && time.Now().After(next) {
			if restarted >= 2 && done() { // the long run stops restarting once all is settled
				break
			}
			sig := syscall.SIGKILL
			if restarted%2 == 1 {
				sig = syscall.SIGTERM
			}
			mgr.stop(sig)
			restarted++
			mgr.start()
			next = time.Now().Add(every + time.Duration(rng.Int64N(int64(jitter)+1)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	appendWG.Wait()
	close(appendErrs)
	for err := range appendErrs {
		t.Fatalf("appending messages: %v", err)
	}
	// Settle with the manager running; then one last restart must change nothing.
	eventually(t, timeout, func() error {
		if c := mgr.crashed(); len(c) > 0 {
			t.Fatalf("the manager crashed: %v", c)
		}
		if !done() {
			return fmt.Errorf("not settled: %s", phaseSummary(listSessions(t, ns)))
		}
		return nil
	})
	before := map[string]string{}
	for _, s := range listSessions(t, ns) {
		before[s.Name] = s.ResourceVersion
	}
	mgr.stop(syscall.SIGKILL)
	mgr.start()
	time.Sleep(3 * time.Second)
	mgr.stop(syscall.SIGTERM)
	sessions := listSessions(t, ns)
	rewritten := 0
	for _, s := range sessions {
		if before[s.Name] != s.ResourceVersion {
			rewritten++
		}
	}

	v := check(sessions)
	// Exact replay from the journal: the Session's status must be what its inputs and
	// the answers it journaled produce, step for step.
	diverged, skipped := 0, 0
	for i := range sessions {
		diff, err := replay(ctx, k8sClient, &sessions[i])
		switch {
		case errors.Is(err, errNoReplay):
			skipped++
		case err != nil:
			t.Fatalf("replaying %s: %v", sessions[i].Name, err)
		case diff != "":
			diverged++
			if diverged <= 10 {
				t.Errorf("%s: %s", sessions[i].Name, diff)
			}
		}
	}
	// The replay check itself must be able to fail: a transition applied twice, or an
	// answer used that the journal does not hold, is a difference.
	if len(sessions) > 0 && len(sessions[0].Status.History) > 0 {
		twice := sessions[0].DeepCopy()
		twice.Status.History = append(twice.Status.History, twice.Status.History[len(twice.Status.History)-1])
		forgotten := sessions[0].DeepCopy()
		forgotten.Status.Journal = nil
		for name, bad := range map[string]*flowv1.Session{"a transition applied twice": twice, "an unjournaled answer": forgotten} {
			if diff, err := replay(ctx, k8sClient, bad); err != nil || diff == "" {
				t.Errorf("the replay does not notice %s (err %v)", name, err)
			}
		}
	}
	tv := shops.check(sessions)
	toolFailed, held, cut := shops.counts()
	calls, faults, schemas := srv.counts()
	injected := 0
	for _, c := range faults {
		injected += c
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n| sessions | messages | restarts | agent calls | faults injected | lost | duplicated | escaped | unsettled | replay diverged (skipped) | rewritten after settling | crashes | panics | duration |\n")
	fmt.Fprintf(&table, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&table, "| %d | %d | %d | %d | %d | %d | %d | %d | %d | %d (%d) | %d | %d | %d | %s |\n",
		v.sessions, v.messages, restarted+1, calls, injected, v.lost, v.duplicated, v.escaped, v.unsettled, diverged, skipped, rewritten,
		len(mgr.crashed()), mgr.panics(), time.Since(start).Round(time.Second))
	fmt.Fprintf(&table, "\n| tool calls | requests to the shops | failed by the shops | answers held (cut by a restart) | keys paid | effects per key (max) | paid twice | sent again without a key | OutcomeUnknown |\n")
	fmt.Fprintf(&table, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&table, "| %d | %d | %d | %d (%d) | %d | %d | %d | %d | %d |\n",
		tv.calls, tv.deliveries, toolFailed, held, cut, tv.paid, tv.maxEffects, tv.twice, tv.resent, tv.unknown)
	fmt.Fprintf(&table, "\nfaults by kind: %v; calls by schema: %s; phases: %s\n", faults, schemas, phaseSummary(sessions))
	t.Log(table.String())

	for _, p := range v.problems {
		t.Error(p)
	}
	for _, p := range tv.problems {
		t.Error(p)
	}
	if tv.paid == 0 || tv.maxEffects != 1 {
		t.Errorf("the refunds paid %d keys, at most %d times each: want some, each once", tv.paid, tv.maxEffects)
	}
	if c := mgr.crashed(); len(c) > 0 {
		t.Errorf("the manager crashed: %v", c)
	}
	if p := mgr.panics(); p > 0 {
		t.Errorf("the manager logged %d panics", p)
	}
	if rewritten > 0 {
		t.Errorf("%d settled Sessions were written again after a restart", rewritten)
	}
	if restarted < min(restarts, 2) {
		t.Errorf("only %d restarts happened", restarted)
	}
	if injected == 0 || faults[faultOutOfList] == 0 {
		t.Errorf("the server injected too few faults to test anything: %v of %d calls", faults, calls)
	}
}

// appendMessage adds message k (0-based) to the Session, as kubectl journey say does.
func appendMessage(ctx context.Context, ns, name string, k int, text string) error {
	op := []map[string]any{{"op": "add", "path": "/spec/messages/-", "value": flowv1.Message{ID: fmt.Sprintf("m%d", k+1), Text: text}}}
	raw, err := json.Marshal(op)
	if err != nil {
		return err
	}
	s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	return k8sClient.Patch(ctx, s, client.RawPatch(types.JSONPatchType, raw))
}

func phaseSummary(sessions []flowv1.Session) string {
	counts := map[string]int{}
	for _, s := range sessions {
		key := string(s.Status.Phase)
		if key == "" {
			key = "none"
		}
		key += "@" + s.Status.CurrentPathway
		counts[key]++
	}
	return fmt.Sprint(counts)
}
