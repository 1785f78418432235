package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// serveEverything runs the MCP reference server (@modelcontextprotocol/server-everything
// from hack/npm) over streamable HTTP on a free loopback port until the test ends, and
// returns its MCP endpoint.
func serveEverything(t *testing.T) string {
	t.Helper()
	pkgs, err := npmPackages()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	// Its README: `npx @modelcontextprotocol/server-everything streamableHttp`, on PORT.
	cmd := exec.Command("node", filepath.Join(pkgs, "node_modules", ".bin", "mcp-server-everything"), "streamableHttp")
	cmd.Env = append(cmd.Environ(), fmt.Sprintf("PORT=%d", port))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server-everything's output:\n%s", out.String())
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := testenv.Poll(30*time.Second, func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err
	}); err != nil {
		t.Fatalf("server-everything does not listen on %s: %v\n%s", addr, err, out.String())
	}
	return "http://" + addr + "/mcp"
}

// everythingModel is the journey's model behind a server without a tool-call parser:
// it writes its tool calls as Hermes <tool_call> text. Asked to add, it calls get-sum;
// asked for a haiku, trigger-sampling-request; with the tool's result it answers with
// it. As the writer agent, it answers the server's sampling request with a haiku.
func everythingModel(r testenv.ChatRequest) testenv.Reply {
	user := r.User()
	if strings.Contains(user, "trigger-sampling-request context:") {
		return testenv.Reply{Content: "Paths fork and rejoin", Usage: testenv.Usage{Prompt: 30, Completion: 5}}
	}
	if results := r.ToolResults(); len(results) > 0 {
		// A text result comes to the model as a JSON string.
		var text string
		if json.Unmarshal([]byte(results[0].Content), &text) != nil {
			text = results[0].Content
		}
		b, _ := json.Marshal(map[string]any{"reply": text, "outcome": "success", "complete": true})
		return testenv.Answer(string(b))
	}
	call := testenv.ToolCall{ID: "call-1", Name: "get-sum", Arguments: `{"a": 2, "b": 3}`}
	switch {
	case strings.Contains(user, "haiku"):
		call = testenv.ToolCall{ID: "call-1", Name: "trigger-sampling-request", Arguments: `{"prompt": "a haiku about journeys", "maxTokens": 50}`}
	case strings.Contains(user, "form"):
		call = testenv.ToolCall{ID: "call-1", Name: "trigger-elicitation-request", Arguments: `{}`}
	}
	return testenv.CallToolsAs(testenv.DialectHermes, call)
}

// The protocol's reference server, @modelcontextprotocol/server-everything (pinned in
// hack/npm), is a journey's tool server over streamable HTTP: a model that writes its
// calls as text (Hermes <tool_call>) adds with get-sum, and the server's sampling
// request during trigger-sampling-request is answered by the agent
// toolServers[].sampling names, under its token cap.
func TestMCPReferenceServer(t *testing.T) {
	t.Parallel()
	ns := "e2e-mcp-everything"
	mcpURL := serveEverything(t)
	model := testenv.NewChatServer(t, everythingModel)
	kubectl(t, "create", "namespace", ns)
	create(t, ns, fmt.Sprintf(`apiVersion: flow.journey.dev/v1alpha1
kind: Pathway
metadata: {name: ask}
spec:
  signature: {instructions: Answer with the tools.}
  agents: [assistant]
  tools: [get-sum, trigger-sampling-request, trigger-elicitation-request]
---
apiVersion: flow.journey.dev/v1alpha1
kind: Journey
metadata: {name: everything}
spec:
  entryPathway: ask
  pathways: [{name: ask, pathwayRef: ask}]
  agents:
    - {name: assistant, provider: openai, model: test-model, baseURL: %[1]q, maxRetries: 0}
    - {name: writer, provider: openai, model: test-model, baseURL: %[1]q, maxRetries: 0}
  toolServers:
    - name: everything
      url: %[2]q
      timeout: 20s
      sampling: {agent: writer, maxTokens: 40}
  tools:
    - {name: get-sum, server: everything, approval: Never}
    - {name: trigger-sampling-request, server: everything, approval: Never}
    - {name: trigger-elicitation-request, server: everything, approval: Never}
`, model.BaseURL(), mcpURL))
	kubectl(t, "-n", ns, "wait", "--for=condition=Ready", "--timeout=30s", "journey/everything")

	get := func(t *testing.T, session string) *flowv1.Session {
		t.Helper()
		s := &flowv1.Session{}
		if err := cluster.Env.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: session}, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	ask := func(t *testing.T, session, text string) *flowv1.Session {
		t.Helper()
		create(t, ns, fmt.Sprintf("apiVersion: flow.journey.dev/v1alpha1\nkind: Session\nmetadata: {name: %s}\nspec: {journeyRef: {name: everything}}\n", session))
		journey(t, ns, "say", session, text, "--wait", "--timeout", "40s")
		waitPhase(t, ns, session, "Completed")
		return get(t, session)
	}

	t.Run("get-sum through a text-dialect model", func(t *testing.T) {
		s := ask(t, "sum", "What is 2 plus 3?")
		lt := s.Status.LastTurn
		if lt.AssistantText != "The sum of 2 and 3 is 5." {
			t.Errorf("reply %q, want get-sum's result", lt.AssistantText)
		}
		if len(lt.ToolCalls) != 1 || lt.ToolCalls[0].Tool != "get-sum" || lt.ToolCalls[0].State != flowv1.ToolCallDone || len(lt.Failures) != 0 {
			t.Errorf("lastTurn.toolCalls %+v failures %+v, want one get-sum call, done", lt.ToolCalls, lt.Failures)
		}
	})

	t.Run("trigger-sampling-request answered by the sampling agent", func(t *testing.T) {
		before := len(model.Requests())
		s := ask(t, "haiku", "Write me a haiku.")
		lt := s.Status.LastTurn
		if !strings.Contains(lt.AssistantText, "LLM sampling result") || !strings.Contains(lt.AssistantText, "Paths fork and rejoin") {
			t.Errorf("reply %q, want the server's result holding the writer's completion", lt.AssistantText)
		}
		if len(lt.ToolCalls) != 1 || lt.ToolCalls[0].Tool != "trigger-sampling-request" || lt.ToolCalls[0].State != flowv1.ToolCallDone {
			t.Errorf("lastTurn.toolCalls %+v, want one trigger-sampling-request call, done", lt.ToolCalls)
		}
		var sampling []testenv.ChatRequest
		for _, r := range model.Requests()[before:] {
			if strings.Contains(r.User(), "trigger-sampling-request context: a haiku about journeys") {
				sampling = append(sampling, r)
			}
		}
		if len(sampling) != 1 {
			t.Fatalf("the model got %d sampling requests, want 1", len(sampling))
		}
		body, _ := sampling[0].Decode()
		if got := body["max_tokens"]; got != float64(40) {
			t.Errorf("the sampling request's max_tokens %v, want the journey's cap 40 (the server asked for 50)", got)
		}
		if !strings.Contains(sampling[0].Messages[0].Content, "You are a helpful test server.") {
			t.Errorf("the sampling request's system message %q lacks the server's system prompt", sampling[0].Messages[0].Content)
		}
		// The writer's 30+5 tokens on top of the assistant's two calls (100+20 each).
		if u := s.Status.Usage; u.PromptTokens != 230 || u.CompletionTokens != 45 || u.ToolCalls != 1 {
			t.Errorf("usage %+v, want 230 prompt and 45 completion tokens (the sampling's counted) and one tool call", u)
		}
	})

	t.Run("trigger-elicitation-request answered with kubectl journey answer", func(t *testing.T) {
		create(t, ns, "apiVersion: flow.journey.dev/v1alpha1\nkind: Session\nmetadata: {name: form}\nspec: {journeyRef: {name: everything}}\n")
		journey(t, ns, "say", "form", "Fill in the form, please.")
		// The server's form (2.4 KB of schema, required "name") waits for the user.
		if out, err := cluster.Kubectl("-n", ns, "wait", "session/form", "--timeout=40s", "--for=condition=AwaitingInput"); err != nil {
			st, _ := cluster.Kubectl("-n", ns, "get", "session", "form", "-o", "jsonpath={.status}")
			t.Fatalf("the Session does not await input: %v\n%s\nstatus: %s", err, out, st)
		}
		call := kubectl(t, "-n", ns, "get", "session", "form", "-o", `jsonpath={.status.turn.toolCalls[?(@.state=="AwaitingInput")].id}`)
		if call == "" {
			t.Fatalf("no tool call awaits input: %+v", get(t, "form").Status.Turn)
		}
		if _, err := cluster.Kubectl("journey", "answer", "form", call, "--accept", "check=true", "-n", ns); err == nil {
			t.Error("an answer without the form's required field name was accepted")
		}
		journey(t, ns, "answer", "form", call, "--accept", "name=Ada Lovelace", "check=true", "--wait", "--timeout", "40s")
		waitPhase(t, ns, "form", "Completed")
		lt := get(t, "form").Status.LastTurn
		if !strings.Contains(lt.AssistantText, "User provided the requested information") ||
			!strings.Contains(lt.AssistantText, "- Name: Ada Lovelace") || !strings.Contains(lt.AssistantText, "- Agreed to terms: true") {
			t.Errorf("reply %q, want the server's result holding the answer", lt.AssistantText)
		}
		if len(lt.ToolCalls) != 1 || lt.ToolCalls[0].Tool != "trigger-elicitation-request" || lt.ToolCalls[0].State != flowv1.ToolCallDone {
			t.Errorf("lastTurn.toolCalls %+v, want one trigger-elicitation-request call, done", lt.ToolCalls)
		}
	})
}
