package tools

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// serveClinicEnv, set, makes the test binary serve a clinic until it is killed
// instead of running tests: the benchmark's tool server, in a process of its own.
const serveClinicEnv = "JOURNEY_TOOLS_SERVE_CLINIC"

// TestMain runs the tests, or, in the child process BenchmarkCallTool starts, serves a
// clinic on a free loopback port, prints its URL and waits to be killed.
func TestMain(m *testing.M) {
	if os.Getenv(serveClinicEnv) == "" {
		os.Exit(m.Run())
	}
	l, err := clinic.Listen("127.0.0.1:0", false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clinic:", err)
		os.Exit(1)
	}
	fmt.Println("clinic", l.URL)
	select {}
}

// BenchmarkCallTool: one find_doctors call of the bench's ReAct journey, through
// Caller.CallTool to the clinic (a go-sdk MCP server over streamable HTTP) served by a
// child process, each call with its own idempotency key, as the manager makes them.
// cpu-ns/op is this process's CPU time per call (getrusage: the caller's goroutines
// and its GC, not the server's), which stays meaningful on a loaded machine where
// wall time does not.
func BenchmarkCallTool(b *testing.B) {
	server := &flowv1.ToolServer{Name: "clinic", URL: childClinic(b)}
	caller := &Caller{}
	ctx := context.Background()
	b.ReportAllocs()
	start := processCPU()
	i := 0
	for b.Loop() {
		i++
		res, err := caller.CallTool(ctx, "ns", agent.ToolRequest{ID: fmt.Sprintf("t-%d-0", i), Tool: "find", ServerTool: "find_doctors",
			Server: server, Args: map[string]any{"specialty": "cardiology"}, IdempotencyKey: fmt.Sprintf("k-%d", i)})
		if err != nil || res.Error != "" {
			b.Fatalf("call %d: %v %q", i, err, res.Error)
		}
	}
	b.ReportMetric(float64(processCPU()-start)/float64(i), "cpu-ns/op")
}

// childClinic starts this test binary as a clinic server (see TestMain) and returns
// the clinic's URL.
func childClinic(b *testing.B) string {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serveClinicEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if url, ok := strings.CutPrefix(lines.Text(), "clinic "); ok {
			go func() {
				for lines.Scan() {
				}
			}()
			return url
		}
	}
	b.Fatalf("the clinic process printed no URL: %v", lines.Err())
	return ""
}

// processCPU is the CPU time the process has used, user and system, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
