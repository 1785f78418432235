package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// ChatMessage is one message of a chat-completions request.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatRequest is a request the ChatServer received, as captured.
type ChatRequest struct {
	// N numbers the requests from 1, in the order they arrived.
	N      int
	Header http.Header
	// Body is the raw request body.
	Body     []byte
	Model    string
	Messages []ChatMessage
	// Schema is the name of the response_format's json_schema (the agents name it
	// decision, intent or pathway_turn); Format is the response_format type.
	Schema, Format string
}

// User joins the contents of the request's user messages with newlines.
func (r ChatRequest) User() string {
	var user []string
	for _, m := range r.Messages {
		if m.Role == "user" {
			user = append(user, m.Content)
		}
	}
	return strings.Join(user, "\n")
}

// Bearer is the request's Authorization header.
func (r ChatRequest) Bearer() string { return r.Header.Get("Authorization") }

// Decode decodes the request body as a JSON object.
func (r ChatRequest) Decode() (map[string]any, error) {
	var m map[string]any
	err := json.Unmarshal(r.Body, &m)
	return m, err
}

// Usage is the token usage an answer reports.
type Usage struct{ Prompt, Completion int }

// Reply is what the ChatServer answers to one request. The zero Reply is a 200 chat
// completion with empty content.
type Reply struct {
	// Content is the assistant message of a 200 chat completion, with Usage.
	Content string
	Usage   Usage
	// Status, when set, is the HTTP status; Body, when set, replaces the chat
	// completion (ContentType, default application/json).
	Status      int
	Body        string
	ContentType string
	// Header is added to the response (for example Retry-After).
	Header http.Header
	// Latency delays the answer (or the fault); the client may give up first.
	Latency time.Duration
	// Hang holds the request until the client gives up or the server closes.
	Hang bool
	// Drop closes the connection without an answer.
	Drop bool
	// Write, when set, writes the whole response itself.
	Write func(w http.ResponseWriter, r *http.Request)
}

// Answer is a 200 chat completion whose assistant message is content.
func Answer(content string) Reply {
	return Reply{Content: content, Usage: Usage{Prompt: 100, Completion: 20}}
}

// JSONReply is an answer with status and v encoded as JSON.
func JSONReply(status int, v any) Reply {
	body, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return Reply{Status: status, Body: string(body)}
}

// APIError is an OpenAI-style error answer: {"error": {"message", "type", "code"}}.
func APIError(status int, message, typ string) Reply {
	return JSONReply(status, map[string]any{"error": map[string]any{"message": message, "type": typ, "code": typ}})
}

// With returns r with header key set to value.
func (r Reply) With(key, value string) Reply {
	h := r.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set(key, value)
	r.Header = h
	return r
}

// Responder answers a request. The ChatServer calls it concurrently: a Responder that
// keeps state must guard it.
type Responder func(ChatRequest) Reply

// Always answers every request with r.
func Always(r Reply) Responder { return func(ChatRequest) Reply { return r } }

// Sequence answers the requests it is asked about with replies in order, then keeps
// answering with the last one: with On, "the first two intent calls fail, then the
// classifier answers".
func Sequence(replies ...Reply) Responder {
	var mu sync.Mutex
	next := 0
	return func(ChatRequest) Reply {
		mu.Lock()
		defer mu.Unlock()
		r := replies[min(next, len(replies)-1)]
		next++
		return r
	}
}

// BySchema matches requests whose response_format json_schema is named name.
func BySchema(name string) func(ChatRequest) bool {
	return func(r ChatRequest) bool { return r.Schema == name }
}

type rule struct {
	match   func(ChatRequest) bool
	respond Responder
}

// ChatServer is a local OpenAI-compatible endpoint (POST /v1/chat/completions) for the
// real go-openai client. Each request is captured, then answered by, in order: the next
// scripted Reply (Script), the first rule whose matcher accepts it (On), or the
// default Responder. It is safe for concurrent use.
type ChatServer struct {
	*httptest.Server

	mu       sync.Mutex
	requests []ChatRequest
	script   []Reply
	rules    []rule
	respond  Responder
	latency  time.Duration
	closing  chan struct{}
	closed   bool
	conns    int
}

// NewChatServer starts a chat server that answers with respond what nothing scripted
// answers (nil: a 500 saying so); it closes when the test ends.
func NewChatServer(t testing.TB, respond Responder) *ChatServer {
	t.Helper()
	s := NewChatServerNoCleanup(respond)
	t.Cleanup(s.Close)
	return s
}

// NewChatServerNoCleanup is NewChatServer for programs and benchmarks that close the
// server themselves.
func NewChatServerNoCleanup(respond Responder) *ChatServer {
	s := &ChatServer{respond: respond, closing: make(chan struct{})}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.handle))
	s.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	s.Start()
	return s
}

// BaseURL is the server's OpenAI base URL (the agents' baseURL).
func (s *ChatServer) BaseURL() string { return s.URL + "/v1" }

// Script queues replies: the next requests get them, one each, in order.
func (s *ChatServer) Script(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// On answers the requests match accepts with respond (rules are tried in the order
// they were added, after the script).
func (s *ChatServer) On(match func(ChatRequest) bool, respond Responder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, rule{match, respond})
}

// Respond replaces the default Responder.
func (s *ChatServer) Respond(respond Responder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.respond = respond
}

// SetLatency delays every later answer by d, on top of a Reply's own Latency.
func (s *ChatServer) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// Requests returns a copy of every request received so far, in order.
func (s *ChatServer) Requests() []ChatRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ChatRequest(nil), s.requests...)
}

// Calls is the number of requests received so far.
func (s *ChatServer) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Connections is the number of connections clients opened so far.
func (s *ChatServer) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Request returns request n (from 1); a missing request fails t.
func (s *ChatServer) Request(t testing.TB, n int) ChatRequest {
	t.Helper()
	reqs := s.Requests()
	if n < 1 || n > len(reqs) {
		t.Fatalf("chat request %d: the server received %d", n, len(reqs))
	}
	return reqs[n-1]
}

// Close releases the requests that hang and shuts the server down.
func (s *ChatServer) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
	s.mu.Unlock()
	s.Server.Close()
}

func (s *ChatServer) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeReply(w, r, APIError(http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path, "invalid_request_error"))
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	req := parseRequest(body, r.Header.Clone())
	reply, latency := s.next(&req)
	if d := latency + reply.Latency; d > 0 && !s.wait(r, d) {
		return
	}
	if reply.Hang {
		s.wait(r, 0)
		return
	}
	if reply.Content != "" || reply.Body == "" && reply.Write == nil && !reply.Drop {
		reply = completion(req, reply)
	}
	writeReply(w, r, reply)
}

// next captures req and picks its reply.
func (s *ChatServer) next(req *ChatRequest) (Reply, time.Duration) {
	s.mu.Lock()
	req.N = len(s.requests) + 1
	s.requests = append(s.requests, *req)
	latency := s.latency
	if len(s.script) > 0 {
		r := s.script[0]
		s.script = s.script[1:]
		s.mu.Unlock()
		return r, latency
	}
	respond := s.respond
	for _, ru := range s.rules {
		if ru.match(*req) {
			respond = ru.respond
			break
		}
	}
	s.mu.Unlock()
	if respond == nil {
		return APIError(http.StatusInternalServerError, fmt.Sprintf("the test scripted no answer to request %d", req.N), "test_error"), latency
	}
	return respond(*req), latency
}

// wait waits d (0: for ever) and reports whether the request is still wanted.
func (s *ChatServer) wait(r *http.Request, d time.Duration) bool {
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-timer:
		return true
	case <-r.Context().Done():
	case <-s.closing:
	}
	return false
}

func parseRequest(body []byte, header http.Header) ChatRequest {
	var in struct {
		Model          string        `json:"model"`
		Messages       []ChatMessage `json:"messages"`
		ResponseFormat struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Name string `json:"name"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	_ = json.Unmarshal(body, &in) // a body that is not JSON is still captured
	return ChatRequest{Header: header, Body: body, Model: in.Model, Messages: in.Messages,
		Schema: in.ResponseFormat.JSONSchema.Name, Format: in.ResponseFormat.Type}
}

// completion turns reply into a chat completion answering req.
func completion(req ChatRequest, reply Reply) Reply {
	model := req.Model
	if model == "" {
		model = "test-model"
	}
	u := reply.Usage
	out := JSONReply(http.StatusOK, map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", req.N), "object": "chat.completion", "created": 1, "model": model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": reply.Content}}},
		"usage": map[string]any{"prompt_tokens": u.Prompt, "completion_tokens": u.Completion, "total_tokens": u.Prompt + u.Completion},
	})
	if reply.Status != 0 {
		out.Status = reply.Status
	}
	out.Header = reply.Header
	return out
}

func writeReply(w http.ResponseWriter, r *http.Request, reply Reply) {
	switch {
	case reply.Write != nil:
		reply.Write(w, r)
		return
	case reply.Drop:
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.Close()
		}
		return
	}
	for k, v := range reply.Header {
		w.Header()[k] = v
	}
	ct := reply.ContentType
	if ct == "" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, reply.Body)
}
