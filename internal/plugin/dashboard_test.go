package plugin

import (
	"net"
	"strings"
	"testing"
)

// TestDashboardWarnsWhenNotOnLoopback: on a loopback address the console says
// nothing more; on any other (0.0.0.0, a LAN address) it warns that whoever reaches it
// acts as the user.
func TestDashboardWarnsWhenNotOnLoopback(t *testing.T) {
	for _, ip := range []string{"127.0.0.1", "::1"} {
		if w := exposureWarning(&net.TCPAddr{IP: net.ParseIP(ip), Port: 8765}, "alice"); w != "" {
			t.Errorf("%s: warned %q", ip, w)
		}
	}
	for _, ip := range []string{"0.0.0.0", "::", "192.168.1.20"} {
		w := exposureWarning(&net.TCPAddr{IP: net.ParseIP(ip), Port: 8765}, "alice")
		for _, want := range []string{"not a loopback address", "anyone who can reach it acts as alice", "--address 127.0.0.1"} {
			if !strings.Contains(w, want) {
				t.Errorf("%s: warning %q does not say %q", ip, w, want)
			}
		}
	}
}
