package controller

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/engine"
)

// DefaultToolProgressInterval is how often, at most, the progress of a tool call in
// flight is written to its Session's status.
const DefaultToolProgressInterval = 5 * time.Second

// progressWriter writes the progress notifications of the tool calls one step makes
// to the Session's status.toolProgress: the first at once, then at most one every
// interval (the notifications in between are dropped; a server may send hundreds).
// Each write is a JSON patch that first tests status.step, so progress never lands on
// a Session that has moved on. The step's own write removes it (the engine clears
// status.toolProgress when it journals the call's answer).
type progressWriter struct {
	client   client.Client
	key      types.NamespacedName
	step     int64
	clock    clock.PassiveClock
	interval time.Duration

	mu   sync.Mutex
	last time.Time
	// written is the progress last written, nil for none.
	written *flowv1.ToolProgress
}

// report writes progress p of eff's call, unless a write was made less than an
// interval ago.
func (w *progressWriter) report(eff *engine.Effect, p agent.ToolProgress) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	if w.written != nil && now.Sub(w.last) < w.interval {
		return
	}
	tp := engine.ToolProgress(eff.Tool, p, now)
	raw, err := json.Marshal([]patchOp{
		{Op: "test", Path: "/status/step", Value: w.step},
		{Op: "add", Path: "/status/toolProgress", Value: tp},
	})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := &flowv1.Session{}
	s.Namespace, s.Name = w.key.Namespace, w.key.Name
	if err := w.client.Status().Patch(ctx, s, client.RawPatch(types.JSONPatchType, raw)); err != nil {
		// Progress is a courtesy: the call goes on, the next report tries again.
		log.FromContext(ctx).V(4).Info("Writing tool progress", "session", w.key, "err", err.Error())
		return
	}
	w.last, w.written = now, tp
}

// progress is what w wrote, nil for nothing.
func (w *progressWriter) progress() *flowv1.ToolProgress {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written
}

// wrote says the step wrote status step (before a call it must not make twice): the
// progress written from now on is conditioned on it.
func (w *progressWriter) wrote(step int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.step = step
}
