package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync/atomic"
	"time"

	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// The model and the tool server run in a child process of their own (this binary with
// -serve-models), so the CPU they spend answering is not counted as the cluster's: the
// cluster is the kube-apiserver, etcd and the manager, whatever model it talks to.

// endpoints are the URLs the child serves.
type endpoints struct {
	Chat   string `json:"chat"`   // OpenAI base URL of the chat server
	Clinic string `json:"clinic"` // the clinic MCP server (streamable HTTP)
	Stats  string `json:"stats"`  // GET: callStats as JSON
}

// callStats is what the child has answered so far.
type callStats struct {
	Model int `json:"model"` // chat completion requests
	Tools int `json:"tools"` // MCP tools/call requests
}

// modelServers is the child process, seen from the bench.
type modelServers struct {
	endpoints
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startModelServers starts the child with a chat server answering after latency.
func startModelServers(latency time.Duration) (*modelServers, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-serve-models", latency.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	m := &modelServers{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &m.endpoints)
	}
	if err != nil {
		m.stop()
		return nil, fmt.Errorf("model servers: %w", err)
	}
	return m, nil
}

// stats reads how many model and tool calls the child has answered.
func (m *modelServers) stats() (callStats, error) {
	var s callStats
	resp, err := http.Get(m.Stats)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// stop ends the child: it exits when its stdin closes.
func (m *modelServers) stop() {
	_ = m.stdin.Close()
	done := make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = m.cmd.Process.Kill()
		<-done
	}
}

// serveModels is the child: a chat server answering every request after latency as
// the bench's journeys need (modelAnswer), the clinic MCP server, and the stats
// endpoint. It prints the endpoints as one JSON line and serves until stdin closes.
func serveModels(latency time.Duration) {
	chat := testenv.NewChatServerNoCleanup(modelAnswer)
	chat.SetLatency(latency)
	var toolCalls atomic.Int64
	mcp := clinic.New().Handler()
	clinicSrv := serveHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if body, err := io.ReadAll(r.Body); err == nil {
				var rpc struct {
					Method string `json:"method"`
				}
				if json.Unmarshal(body, &rpc) == nil && rpc.Method == "tools/call" {
					toolCalls.Add(1)
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
		}
		mcp.ServeHTTP(w, r)
	}))
	stats := serveHTTP(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(callStats{Model: chat.Calls(), Tools: int(toolCalls.Load())})
	}))
	out, _ := json.Marshal(endpoints{Chat: chat.BaseURL(), Clinic: clinicSrv + "/mcp", Stats: stats})
	fmt.Println(string(out))
	_, _ = io.Copy(io.Discard, os.Stdin)
	chat.Close()
}

// serveHTTP serves h on a loopback port and returns its base URL.
func serveHTTP(h http.Handler) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatal(err)
	}
	go func() { _ = http.Serve(l, h) }()
	return "http://" + l.Addr().String()
}

// modelAnswer plays the model of the bench's journeys:
//   - a decision: the first allowed destination, confidence 0.95;
//   - a pathway turn offered tools (ReAct): a find_doctors call, then, once the request
//     ends with the tool's result, the answer, the turn incomplete (the conversation
//     goes on in the same pathway);
//   - any other pathway turn: the answer, the turn complete and successful (the
//     pathway's decision picks the next pathway).
func modelAnswer(r testenv.ChatRequest) testenv.Reply {
	if r.Schema == "decision" {
		dest := decisionEnum(r.Body)
		b, _ := json.Marshal(map[string]any{"destination": dest, "confidence": 0.95, "reasoning": "The user moves on."})
		return testenv.Answer(string(b))
	}
	last := ""
	if len(r.Messages) > 0 {
		last = r.Messages[len(r.Messages)-1].Role
	}
	if len(r.Functions()) > 0 {
		if last != "tool" {
			id := fmt.Sprintf("call_%d", callIDs.Add(1))
			return testenv.CallTools(testenv.ToolCall{ID: id, Name: "find_doctors", Arguments: `{"specialty":"cardiology"}`})
		}
		return pathwayAnswer("Dr. Lee has a free slot on 1 December at 9:00.", nil, false)
	}
	return pathwayAnswer("Noted, thank you.", map[string]any{"topic": "appointment"}, true)
}

var callIDs atomic.Int64

func pathwayAnswer(reply string, outputs map[string]any, complete bool) testenv.Reply {
	a := map[string]any{"reply": reply, "outcome": "success", "complete": complete}
	if outputs != nil {
		a["outputs"] = outputs
	}
	b, _ := json.Marshal(a)
	return testenv.Answer(string(b))
}

// decisionEnum is the first allowed destination of a decision request: the enum of
// its JSON schema's destination property.
func decisionEnum(body []byte) string {
	var req struct {
		ResponseFormat struct {
			JSONSchema struct {
				Schema struct {
					Properties struct {
						Destination struct {
							Enum []string `json:"enum"`
						} `json:"destination"`
					} `json:"properties"`
				} `json:"schema"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	if json.Unmarshal(body, &req) == nil {
		if e := req.ResponseFormat.JSONSchema.Schema.Properties.Destination.Enum; len(e) > 0 {
			return e[0]
		}
	}
	return ""
}
