package testenv

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func post(t *testing.T, ctx context.Context, url, body string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), nil
}

const intentReq = `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"},{"role":"user","content":"bye"}],` +
	`"response_format":{"type":"json_schema","json_schema":{"name":"intent"}}}`

func TestChatServerScriptRulesAndCapture(t *testing.T) {
	s := NewChatServer(t, Always(Answer("default")))
	s.On(BySchema("decision"), Always(Answer("decided")))
	s.Script(APIError(429, "slow down", "rate_limit_exceeded").With("Retry-After", "3"), Answer("scripted"))
	ctx := context.Background()

	resp, body, err := post(t, ctx, s.BaseURL(), intentReq)
	if err != nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || !strings.Contains(body, "slow down") {
		t.Fatalf("first answer %v %v %q: want the scripted 429 with Retry-After", resp, err, body)
	}
	contents := []string{}
	for _, b := range []string{intentReq, strings.Replace(intentReq, `"intent"`, `"decision"`, 1), intentReq} {
		resp, body, err := post(t, ctx, s.BaseURL(), b)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		var c struct {
			Choices []struct{ Message ChatMessage }
			Usage   struct {
				PromptTokens int `json:"prompt_tokens"`
			}
		}
		if err := json.Unmarshal([]byte(body), &c); err != nil || len(c.Choices) != 1 || c.Usage.PromptTokens != 100 {
			t.Fatalf("not a chat completion: %q (%v)", body, err)
		}
		contents = append(contents, c.Choices[0].Message.Content)
	}
	if got := strings.Join(contents, ","); got != "scripted,decided,default" {
		t.Errorf("answers %s: want the script first, then the rule, then the default", got)
	}
	r := s.Request(t, 1)
	if s.Calls() != 4 || r.N != 1 || r.Model != "m" || r.Schema != "intent" || r.Format != "json_schema" ||
		r.User() != "hi\nbye" || r.Bearer() != "Bearer k" || string(r.Body) != intentReq {
		t.Errorf("captured %d calls, first %+v", s.Calls(), r)
	}
}

func TestChatServerHangsUntilTheClientGivesUp(t *testing.T) {
	s := NewChatServer(t, Always(Reply{Hang: true}))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := post(t, ctx, s.BaseURL(), intentReq); err == nil {
		t.Fatal("a hanging answer arrived")
	}
	s.Respond(Always(Reply{Drop: true}))
	if _, _, err := post(t, context.Background(), s.BaseURL(), intentReq); err == nil {
		t.Fatal("a dropped connection gave an answer")
	}
	// A request still hanging when the server closes is released.
	s.Respond(Always(Reply{Hang: true}))
	go func() { _, _, _ = post(t, context.Background(), s.BaseURL(), intentReq) }()
	Eventually(t, 5*time.Second, func() error {
		if s.Calls() < 3 {
			return io.ErrNoProgress
		}
		return nil
	})
	s.Close()
}

func TestChatServerConcurrentUse(t *testing.T) {
	s := NewChatServer(t, Always(Reply{Content: "x", Latency: time.Millisecond}))
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if resp, _, err := post(t, context.Background(), s.BaseURL(), intentReq); err != nil || resp.StatusCode != 200 {
				t.Errorf("%v %v", resp, err)
			}
		})
		wg.Go(func() { s.SetLatency(0); _ = s.Requests() })
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, r := range s.Requests() {
		seen[r.N] = true
	}
	if len(seen) != 20 {
		t.Errorf("%d distinct request numbers, want 20", len(seen))
	}
}
