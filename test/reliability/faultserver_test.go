package reliability

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/journeyops/journey-operator/internal/testenv"
)

// Faults the chat server injects.
const (
	faultTimeout   = "timeout"     // no answer until the client gives up
	fault429       = "429"         // rate limited
	fault500       = "500"         // server error
	faultGarbage   = "garbage"     // 200 with a body or content that is not the JSON asked for
	faultOutOfList = "out-of-list" // 200 with a destination or intent outside the enum
)

// sessionInRequest finds the Session's name in a pathway turn's request.
var sessionInRequest = regexp.MustCompile(`"session":\{"name":"([^"]+)"`)

var faultKinds = []string{faultTimeout, fault429, fault500, faultGarbage, faultOutOfList}

// faultServer is the harness's chat server (POST /v1/chat/completions with a
// json_schema response format) failing a share of the calls. Its good answers are a
// function of the request: the intent is faq-detour when the message mentions a
// question, the decision is shipping when the order is late, else billing, a pathway
// turn offered tools first refunds the customer (refundTool) and answers once it has
// the result, and a pathway turn is complete when the customer says bye.
type faultServer struct {
	*testenv.ChatServer
	rate float64

	mu     sync.Mutex
	rng    *rand.Rand
	faults map[string]int
}

func newFaultServer(t *testing.T, rate float64, seed uint64) *faultServer {
	t.Helper()
	fs := &faultServer{rate: rate, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), faults: map[string]int{}}
	fs.ChatServer = testenv.NewChatServer(t, fs.respond)
	return fs
}

// fault picks the fault for the next call, or "".
func (fs *faultServer) fault() string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.rng.Float64() >= fs.rate {
		return ""
	}
	f := faultKinds[fs.rng.IntN(len(faultKinds))]
	fs.faults[f]++
	return f
}

func (fs *faultServer) respond(req testenv.ChatRequest) testenv.Reply {
	text := strings.ToLower(req.User())
	f := fs.fault()
	switch f {
	case faultTimeout:
		return testenv.Reply{Hang: true}
	case fault429:
		return testenv.APIError(http.StatusTooManyRequests, "rate limited", "rate_limit_error")
	case fault500:
		return testenv.APIError(http.StatusInternalServerError, "upstream overloaded", "server_error")
	case faultGarbage:
		if fs.coin() {
			return testenv.Reply{Body: `{"id": "chatcmpl-x", "choices": [{"message": {"content": `}
		}
		return testenv.Answer("Sure! I think the answer is shipping, probably.")
	}
	var content string
	switch req.Schema {
	case "intent":
		intent := "none"
		if strings.Contains(text, "question") {
			intent = "faq-detour"
		}
		if f == faultOutOfList {
			intent = "refund-everything"
		}
		content = fmt.Sprintf(`{"intent":%q,"confidence":0.9,"reasoning":"from the words used"}`, intent)
	case "decision":
		dest := "billing"
		if strings.Contains(text, "late") {
			dest = "shipping"
		}
		if f == faultOutOfList {
			dest = "refunds"
		}
		content = fmt.Sprintf(`{"destination":%q,"confidence":0.9,"reasoning":"the order says so"}`, dest)
	default: // a pathway turn
		if f == "" && len(req.Functions()) > 0 && len(req.ToolResults()) == 0 {
			if m := sessionInRequest.FindStringSubmatch(req.User()); m != nil {
				return testenv.CallTools(testenv.ToolCall{ID: "call_refund", Name: refundTool(m[1]),
					Arguments: fmt.Sprintf(`{"order":"o-%s","amount":1200}`, m[1])})
			}
		}
		outcome := "success"
		if f == faultOutOfList {
			outcome = "catastrophe"
		}
		content = fmt.Sprintf(`{"reply":"Your billing question is noted.","outputs":{"note":"noted"},"outcome":%q,"complete":%v}`,
			outcome, strings.Contains(text, "bye"))
	}
	return testenv.Answer(content)
}

func (fs *faultServer) coin() bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.rng.IntN(2) == 0
}

// counts returns the calls made and the faults injected, by kind.
func (fs *faultServer) counts() (calls int, faults map[string]int, schemas string) {
	byKind := map[string]int{}
	for _, r := range fs.Requests() {
		byKind[r.Schema]++
		calls++
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	faults = map[string]int{}
	for k, v := range fs.faults {
		faults[k] = v
	}
	keys := make([]string, 0, len(byKind))
	for k := range byKind {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, byKind[k]))
	}
	return calls, faults, strings.Join(parts, " ")
}
