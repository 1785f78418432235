package audit

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
)

func TestCapVerbosity(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 10, LogCaller: funcr.All})
	l := CapVerbosity(base, MaxLogVerbosity).WithName("x").WithValues("k", "v")
	l.V(7).Info("kept")
	l.V(8).Info("request body", "body", "patient text")
	l.V(10).Info("whole body")
	l.Error(nil, "errors always")
	if l.V(8).Enabled() || !l.V(7).Enabled() {
		t.Errorf("V(8) enabled %v, V(7) enabled %v: want false, true", l.V(8).Enabled(), l.V(7).Enabled())
	}
	all := strings.Join(lines, "\n")
	if len(lines) != 2 || !strings.Contains(all, `"kept"`) || !strings.Contains(all, `"errors always"`) || strings.Contains(all, "patient") {
		t.Fatalf("logged %q, want the V(7) line and the error only", lines)
	}
	// The cap adds a frame; the line still names its caller.
	if !strings.Contains(lines[0], "logs_test.go") {
		t.Errorf("caller of %s is not this file", lines[0])
	}
}
