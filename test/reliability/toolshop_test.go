package reliability

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// toolShops are the support desk's tool servers, go-sdk MCP servers that count their
// payments by idempotency key: shop honours the keys, old-shop does not. Each fails a
// fifth of the calls it receives (a tool error, nothing paid), and holds the answer
// of one key in six for a while after paying, long enough for some of them to be cut
// by a manager restart.
type toolShops struct {
	keyed, unkeyed *testenv.EffectServer
	holdFor        time.Duration

	mu           sync.Mutex
	rng          *rand.Rand
	failed, held int
	cut          int // held answers whose caller went away first (a restart)
}

func newToolShops(t *testing.T, seed uint64, holdFor time.Duration) *toolShops {
	t.Helper()
	s := &toolShops{rng: rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d)), holdFor: holdFor}
	s.keyed = testenv.NewEffectServer(t, testenv.EffectOptions{Keyed: true, Fail: s.fail, Hold: s.hold})
	s.unkeyed = testenv.NewEffectServer(t, testenv.EffectOptions{Fail: s.fail, Hold: s.hold})
	return s
}

func (s *toolShops) fail(string, int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rng.Float64() < 0.2 {
		s.failed++
		return true
	}
	return false
}

func (s *toolShops) hold(ctx context.Context, key, _ string) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	if h.Sum32()%6 != 0 {
		return
	}
	s.mu.Lock()
	s.held++
	s.mu.Unlock()
	select {
	case <-time.After(s.holdFor):
	case <-ctx.Done():
		s.mu.Lock()
		s.cut++
		s.mu.Unlock()
	}
}

// refundTool is the tool the clerk calls for Session name (chat-NNNN): in the long
// run, refund_once, on the shop without keys, for one Session in four; else refund.
func refundTool(name string) string {
	var i int
	if _, err := fmt.Sscanf(name, "chat-%d", &i); err == nil && i%4 == 0 && full() {
		return "refund_once"
	}
	return "refund"
}

// unknownOutcomes counts the calls of Session s to the shop without keys whose
// outcome was unknown: planned in a model answer its journal holds, and never
// answered in it (the manager stopped between marking the call sent and writing its
// answer; the tool's onUnknown, Fail, then told the model).
func unknownOutcomes(s *flowv1.Session) int {
	planned, answered := 0, 0
	for _, e := range s.Status.Journal {
		switch e.Kind {
		case flowv1.EffectRunPathway:
			for _, c := range e.Result.ToolCalls {
				if c.Name == "refund_once" {
					planned++
				}
			}
		case flowv1.EffectCallTool:
			if e.Agent == "refund_once" {
				answered++
			}
		}
	}
	return planned - answered
}

// toolVerdict is what the tool servers and the Sessions say about the tool calls.
type toolVerdict struct {
	// calls are the tool calls the Sessions counted (status.usage.toolCalls),
	// deliveries the requests the shops received, paid the keys paid.
	calls, deliveries, paid int
	// maxEffects is the most payments one key got (must be 1); twice counts the keys
	// paid more than once, resent the calls without keys delivered more than once.
	maxEffects, twice, resent int
	// unknown counts the calls whose outcome was unknown.
	unknown  int
	problems []string
}

// check checks the shops' payments: no key paid twice, no call to the shop without
// keys sent twice.
func (s *toolShops) check(sessions []flowv1.Session) toolVerdict {
	var v toolVerdict
	for i := range sessions {
		v.calls += int(sessions[i].Status.Usage.ToolCalls)
		v.unknown += unknownOutcomes(&sessions[i])
	}
	for name, shop := range map[string]*testenv.EffectServer{"shop": s.keyed, "old-shop": s.unkeyed} {
		for key, n := range shop.Effects() {
			v.paid++
			v.maxEffects = max(v.maxEffects, n)
			if n > 1 {
				v.twice++
				v.problems = append(v.problems, fmt.Sprintf("%s paid key %s %d times", name, key, n))
			}
		}
		for key, n := range shop.Deliveries() {
			v.deliveries += n
			if shop == s.unkeyed && n > 1 {
				v.resent++
				v.problems = append(v.problems, fmt.Sprintf("%s, which ignores keys, got the call of key %s %d times", name, key, n))
			}
		}
	}
	return v
}

// counts returns the deliveries failed, held, and held until a restart cut them.
func (s *toolShops) counts() (failed, held, cut int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed, s.held, s.cut
}
