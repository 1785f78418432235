package testenv

import (
	"fmt"
	"testing"
	"time"
)

// PollInterval is how often Eventually and Poll check their condition.
const PollInterval = 25 * time.Millisecond

// Poll calls cond until it returns nil or timeout passes; it then returns an error that
// says how long it waited and what cond said last.
func Poll(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("condition not met after %s: %w", timeout, err)
		}
		time.Sleep(PollInterval)
	}
}

// Eventually polls cond until it returns nil and fails t, with cond's last error, if
// timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := Poll(timeout, cond); err != nil {
		t.Fatal(err)
	}
}
