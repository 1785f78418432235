package reliability

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/journeyops/journey-operator/internal/testenv"
)

var (
	buildOnce   sync.Once
	managerPath string
	buildErr    error
)

// managerBinary builds cmd/manager once per test run: the chaos tests run the real
// binary, so that a restart is a new process and a kill is a real SIGKILL. It is the
// binary the other test packages of the checkout run (testenv.Binary): linked once,
// not by each package.
func managerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		managerPath, buildErr = testenv.Binary("./cmd/manager")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return managerPath
}

// kubeconfig writes a kubeconfig for the control plane, for the manager process.
func kubeconfig(t *testing.T) string {
	t.Helper()
	return env.Kubeconfig(t, testenv.Admin("reliability-admin"))
}

// managerProcess runs cmd/manager and restarts it on demand. It fails the test if the
// manager exits by itself.
type managerProcess struct {
	t    *testing.T
	bin  string
	args []string
	log  *os.File

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	stopping bool
	crashes  []string
	starts   int
}

func newManagerProcess(t *testing.T, args ...string) *managerProcess {
	t.Helper()
	bin := managerBinary(t)
	logFile, err := os.Create(filepath.Join(t.TempDir(), "manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	m := &managerProcess{t: t, bin: bin, log: logFile,
		args: append([]string{"--kubeconfig", kubeconfig(t), "--health-probe-bind-address=0", "--metrics-bind-address=0", "--enable-webhooks=false"}, args...)}
	t.Cleanup(func() {
		m.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("manager log (tail):\n%s", m.tail(60))
		}
		logFile.Close()
	})
	return m
}

func (m *managerProcess) start() {
	m.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	cmd := exec.Command(m.bin, m.args...)
	cmd.Stdout, cmd.Stderr = m.log, m.log
	if err := cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	fmt.Fprintf(m.log, "=== manager started (pid %d)\n", cmd.Process.Pid)
	m.cmd, m.stopping, m.exited = cmd, false, make(chan struct{})
	m.starts++
	exited := m.exited
	go func() {
		err := cmd.Wait()
		m.mu.Lock()
		if !m.stopping {
			m.crashes = append(m.crashes, fmt.Sprintf("pid %d exited by itself: %v", cmd.Process.Pid, err))
		}
		m.mu.Unlock()
		close(exited)
	}()
}

// stop sends sig (SIGKILL: a crash; SIGTERM: a graceful stop) and waits for the exit.
func (m *managerProcess) stop(sig syscall.Signal) {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.stopping = true
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(40 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
	fmt.Fprintf(m.log, "=== manager stopped with %s\n", sig)
}

// crashed lists the times the manager exited without being asked to.
func (m *managerProcess) crashed() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.crashes...)
}

// panics counts the panics the manager logged (controller-runtime recovers them).
func (m *managerProcess) panics() int {
	raw, _ := os.ReadFile(m.log.Name())
	return bytes.Count(raw, []byte("Observed a panic")) + bytes.Count(raw, []byte("panic: "))
}

func (m *managerProcess) tail(lines int) string {
	raw, _ := os.ReadFile(m.log.Name())
	all := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}
