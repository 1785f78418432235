package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// serveMCP serves server on loopback over streamable HTTP until the test ends.
func serveMCP(t *testing.T, server *mcp.Server) string {
	t.Helper()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// deskJourney is the journey "desk": its one pathway, "work", runs on entry with the
// builtin agent, calls the tools named, in order, with empty arguments, and keeps
// their results in the context under the tools' names.
func deskJourney(ns, url string, tools ...string) (*flowv1.Pathway, *flowv1.Journey) {
	p := &flowv1.Pathway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work"},
		Spec:       flowv1.PathwaySpec{RunOn: flowv1.RunOnEntry, Builtin: &flowv1.BuiltinPathway{Reply: "done"}},
	}
	j := &flowv1.Journey{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "desk"},
		Spec: flowv1.JourneySpec{
			EntryPathway: "work",
			Pathways:     []flowv1.PathwayEntry{{Name: "work", PathwayRef: "work"}},
			ToolServers:  []flowv1.ToolServer{{Name: "desk", URL: url, Timeout: &metav1.Duration{Duration: 30 * time.Second}}},
		},
	}
	for _, name := range tools {
		p.Spec.Tools = append(p.Spec.Tools, flowv1.ToolName(name))
		p.Spec.Builtin.ToolCalls = append(p.Spec.Builtin.ToolCalls, flowv1.BuiltinToolCall{Tool: flowv1.ToolName(name), Args: "{}"})
		p.Spec.Builtin.Outputs = append(p.Spec.Builtin.Outputs, flowv1.BuiltinOutput{Name: name, Expression: flowv1.Expression("tools." + name)})
		p.Spec.Accumulate = append(p.Spec.Accumulate, name)
		j.Spec.Tools = append(j.Spec.Tools, flowv1.Tool{Name: flowv1.ToolName(name), Server: "desk", Approval: flowv1.ToolApprovalNever})
	}
	return p, j
}

// progressLog watches Session name and keeps every status.toolProgress it sees.
func progressLog(t *testing.T, ns, name string) func() []flowv1.ToolProgress {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := wc.Watch(ctx, &flowv1.SessionList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen []flowv1.ToolProgress
	go func() {
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*flowv1.Session)
			if !ok || s.Name != name || ev.Type != watch.Modified || s.Status.ToolProgress == nil {
				continue
			}
			mu.Lock()
			if n := len(seen); n == 0 || seen[n-1] != *s.Status.ToolProgress {
				seen = append(seen, *s.Status.ToolProgress)
			}
			mu.Unlock()
		}
	}()
	return func() []flowv1.ToolProgress {
		mu.Lock()
		defer mu.Unlock()
		return append([]flowv1.ToolProgress(nil), seen...)
	}
}

// TestToolProgressIsShownThrottled: a long call's server sends 50 progress
// notifications; within one progress interval the Session's status shows the first
// of them, written once, not once per notification; the call's answer removes it.
// A result over the size limit is stored cut, with a note, and the Session
// completes.
func TestToolProgressIsShownThrottled(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	sent, release := make(chan struct{}), make(chan struct{})
	server := mcp.NewServer(&mcp.Implementation{Name: "desk"}, nil)
	server.AddTool(&mcp.Tool{Name: "report", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i := 1; i <= 50; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
					Progress: float64(i), Total: 50, Message: fmt.Sprintf("page %d of 50", i)}); err != nil {
					return nil, err
				}
			}
			close(sent)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "50 pages"}}, StructuredContent: map[string]any{"pages": 50}}, nil
		})
	server.AddTool(&mcp.Tool{Name: "export", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			rows := make([]any, 20000)
			for i := range rows {
				rows[i] = map[string]any{"row": i, "name": "patient record"}
			}
			return &mcp.CallToolResult{StructuredContent: map[string]any{"rows": rows}}, nil
		})
	url := serveMCP(t, server)
	startManager(t, ns, Options{ToolProgressInterval: time.Hour})
	p, j := deskJourney(ns, url, "report", "export")
	seen := progressLog(t, ns, "s1")
	create(t, p, j, sessionOf(ns, "s1", "desk"))

	select {
	case <-sent:
	case <-time.After(60 * time.Second):
		t.Fatal("report was never called")
	}
	eventually(t, 30*time.Second, func() error {
		if s := get(t, ns, "s1", &flowv1.Session{}); s.Status.ToolProgress == nil {
			return fmt.Errorf("no tool progress in status; turn %+v", s.Status.Turn)
		}
		return nil
	})
	s := get(t, ns, "s1", &flowv1.Session{})
	tp := s.Status.ToolProgress
	if tp.Tool != "report" || tp.Call != s.Status.Turn.ToolCalls[0].ID || tp.Total != "50" || !strings.HasPrefix(tp.Message, "page ") || tp.Progress == "" {
		t.Errorf("tool progress %+v", tp)
	}
	close(release)
	eventually(t, 60*time.Second, func() error {
		s = get(t, ns, "s1", &flowv1.Session{})
		if s.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %s, conditions %+v", s.Status.Phase, s.Status.Conditions)
		}
		return nil
	})
	if s.Status.ToolProgress != nil {
		t.Errorf("tool progress %+v after the call was answered", s.Status.ToolProgress)
	}
	if got := seen(); len(got) != 1 || got[0] != *tp {
		t.Errorf("progress written %d times for 50 notifications within one interval: %+v", len(got), got)
	}
	ctx := s.Status.Context
	if !strings.Contains(string(ctx.Raw), `"report":{"pages":50}`) {
		t.Errorf("context %s does not hold the structured result of report", ctx.Raw)
	}
	if !strings.Contains(string(ctx.Raw), `[cut: the tool's result was`) || len(ctx.Raw) > 2*flowv1.MaxToolResultBytes {
		t.Errorf("the export's result is not cut in the context (%d bytes): %.200s", len(ctx.Raw), ctx.Raw)
	}
}

// TestSamplingIsAnsweredByTheNamedAgent: a tool server asks for a completion during a
// call; the journey's toolServers[].sampling names an agent, whose model (the chat
// server) answers under the call's token cap; the tool gets the completion, and the
// tokens it used are journaled with the call's answer and counted in the Session's
// usage.
func TestSamplingIsAnsweredByTheNamedAgent(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	model := testenv.NewChatServer(t, testenv.Always(testenv.Reply{Content: "Three doctors, one free slot tomorrow.", Usage: testenv.Usage{Prompt: 40, Completion: 9}}))
	server := mcp.NewServer(&mcp.Implementation{Name: "desk"}, nil)
	server.AddTool(&mcp.Tool{Name: "summarize", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5000, SystemPrompt: "You summarize clinic data.", //nolint:staticcheck // servers still send sampling requests
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Summarize: dr-lee, dr-okafor, dr-silva"}}}}) //nolint:staticcheck // servers still send sampling requests
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "sampling: " + err.Error()}}}, nil
			}
			text := res.Content.(*mcp.TextContent).Text
			return &mcp.CallToolResult{StructuredContent: map[string]any{"summary": text, "model": res.Model}}, nil
		})
	url := serveMCP(t, server)
	startManager(t, ns, Options{})
	p, j := deskJourney(ns, url, "summarize")
	j.Spec.Agents = []flowv1.AgentSpec{{Name: "writer", Provider: flowv1.ProviderOpenAI, Model: "test-model", BaseURL: model.BaseURL(),
		Instructions: "Be brief.", MaxRetries: ptr.To[int32](0)}}
	j.Spec.ToolServers[0].Sampling = &flowv1.ToolServerSampling{Agent: "writer", MaxTokens: ptr.To[int32](200)}
	create(t, p, j, sessionOf(ns, "s1", "desk"))

	var s *flowv1.Session
	eventually(t, 60*time.Second, func() error {
		s = get(t, ns, "s1", &flowv1.Session{})
		if s.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %s, conditions %+v", s.Status.Phase, s.Status.Conditions)
		}
		return nil
	})
	if !strings.Contains(string(s.Status.Context.Raw), `"summary":"Three doctors, one free slot tomorrow."`) {
		t.Errorf("context %s does not hold the sampled summary", s.Status.Context.Raw)
	}
	if model.Calls() != 1 {
		t.Fatalf("the model was asked %d times", model.Calls())
	}
	req := model.Request(t, 1)
	body, _ := req.Decode()
	if got := body["max_tokens"]; got != float64(200) {
		t.Errorf("max_tokens %v, want the call's cap 200 (the server asked for 5000)", got)
	}
	if len(req.Messages) != 2 || req.Messages[0].Role != "system" || !strings.Contains(req.Messages[0].Content, "Be brief.") ||
		!strings.Contains(req.Messages[0].Content, "You summarize clinic data.") || req.Messages[1].Content != "Summarize: dr-lee, dr-okafor, dr-silva" {
		t.Errorf("the model was asked %+v", req.Messages)
	}
	if u := s.Status.Usage; u.PromptTokens != 40 || u.CompletionTokens != 9 || u.ToolCalls != 1 {
		t.Errorf("usage %+v, want the sampling's 40+9 tokens and one tool call", u)
	}
	var journaled *flowv1.EffectRecord
	for i := range s.Status.Journal {
		if s.Status.Journal[i].Kind == flowv1.EffectCallTool {
			journaled = &s.Status.Journal[i]
		}
	}
	if journaled == nil || journaled.Result.Usage.PromptTokens != 40 || journaled.Result.Usage.CompletionTokens != 9 {
		t.Errorf("the call's journaled answer does not hold the sampling's usage: %+v", journaled)
	}
}

// TestSamplingIsOffByDefault: without toolServers[].sampling a server's sampling
// request is refused, and the tool answers what it makes of that.
func TestSamplingIsOffByDefault(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	server := mcp.NewServer(&mcp.Implementation{Name: "desk"}, nil)
	server.AddTool(&mcp.Tool{Name: "summarize", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if _, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 100, //nolint:staticcheck // servers still send sampling requests
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}); err != nil { //nolint:staticcheck // servers still send sampling requests
				return &mcp.CallToolResult{StructuredContent: map[string]any{"sampled": false}}, nil
			}
			return &mcp.CallToolResult{StructuredContent: map[string]any{"sampled": true}}, nil
		})
	url := serveMCP(t, server)
	startManager(t, ns, Options{})
	p, j := deskJourney(ns, url, "summarize")
	create(t, p, j, sessionOf(ns, "s1", "desk"))
	eventually(t, 60*time.Second, func() error {
		s := get(t, ns, "s1", &flowv1.Session{})
		if s.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %s, conditions %+v", s.Status.Phase, s.Status.Conditions)
		}
		if !strings.Contains(string(s.Status.Context.Raw), `"sampled":false`) {
			return fmt.Errorf("context %s", s.Status.Context.Raw)
		}
		return nil
	})
}
