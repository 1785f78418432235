package controller

import (
	"errors"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestComputeResult: the one policy of the three reconcilers, from a typed outcome.
func TestComputeResult(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, tc := range []struct {
		name     string
		in       outcome
		want     ctrl.Result
		err      error
		terminal bool
	}{
		{name: "done", in: outcome{}},
		{name: "requeue", in: outcome{kind: requeue, after: time.Minute}, want: ctrl.Result{RequeueAfter: time.Minute}},
		{name: "conflict", in: outcome{kind: conflict}, want: ctrl.Result{RequeueAfter: conflictRetry}},
		{name: "transient", in: failed(boom), err: boom},
		{name: "terminal", in: outcome{kind: terminal, err: boom}, err: boom, terminal: true},
		{name: "no error", in: failed(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := computeResult(tc.in)
			if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("got %+v, %v: want %+v, %v", got, err, tc.want, tc.err)
			}
			if errors.Is(err, reconcile.TerminalError(nil)) != tc.terminal {
				t.Errorf("terminal error %v: want terminal=%v", err, tc.terminal)
			}
		})
	}
}
