package tools

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
)

// interactiveServer serves server on loopback over streamable HTTP.
func interactiveServer(t *testing.T, server *mcp.Server) *flowv1.ToolServer {
	t.Helper()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	return &flowv1.ToolServer{Name: "interactive", URL: srv.URL}
}

// TestProgressAndStructuredContent: the progress notifications a server sends while
// its call is in flight reach the call's Progress hook in order, and a result with
// structured content is that content, not its text. (A notification still queued
// when the result arrives is dropped, never told after the call: the server here
// answers once the hook has had all three.)
func TestProgressAndStructuredContent(t *testing.T) {
	told := make(chan struct{}, 3)
	s := mcp.NewServer(&mcp.Implementation{Name: "reports"}, nil)
	s.AddTool(&mcp.Tool{Name: "report", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i := 1; i <= 3; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
					Progress: float64(i), Total: 3, Message: fmt.Sprintf("page %d of 3", i)}); err != nil {
					return nil, err
				}
			}
			for range 3 {
				select {
				case <-told:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: "3 pages, see the structured result"}},
				StructuredContent: map[string]any{"pages": 3, "ok": true},
			}, nil
		})
	server := interactiveServer(t, s)
	var mu sync.Mutex
	var got []agent.ToolProgress
	res, err := (&Caller{}).CallTool(context.Background(), "ns", agent.ToolRequest{ID: "t-1-0", Tool: "report", ServerTool: "report",
		Server: server, IdempotencyKey: "k-report", Hooks: &agent.ToolHooks{Progress: func(p agent.ToolProgress) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, p)
			told <- struct{}{}
		}}})
	if err != nil || res.Error != "" {
		t.Fatalf("report: %v %q", err, res.Error)
	}
	if want := map[string]any{"pages": float64(3), "ok": true}; !reflect.DeepEqual(res.Result, want) {
		t.Errorf("result %#v, want the structured content %#v", res.Result, want)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []agent.ToolProgress{{Progress: 1, Total: 3, Message: "page 1 of 3"}, {Progress: 2, Total: 3, Message: "page 2 of 3"}, {Progress: 3, Total: 3, Message: "page 3 of 3"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("progress %+v, want %+v", got, want)
	}
}
