package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/revision"
	"github.com/journeyops/journey-operator/internal/tools"
	"github.com/journeyops/journey-operator/internal/tracing"
)

// toolServerRetry is how soon a Journey whose tool server could not be listed tries again.
const toolServerRetry = 30 * time.Second

// traceTool makes the tool call of a CallTool effect as a span of the step's trace,
// and measures it.
func traceTool(ctx context.Context, eff *engine.Effect, call func(context.Context) (any, error)) (any, error) {
	start := time.Now()
	ctx, span := tracing.StartTool(ctx, eff.Tool.Tool, eff.Tool.IdempotencyKey, eff.Tool.ApprovedBy)
	resp, err := call(ctx)
	result := "ok"
	if err != nil {
		result = string(agent.ClassOf(err))
	}
	if span.IsRecording() {
		args, _ := json.Marshal(eff.Tool.Args)
		var out []byte
		if r, ok := resp.(agent.ToolResponse); ok {
			out, _ = json.Marshal(r.Result)
		}
		tracing.ToolContent(ctx, span, string(args), string(out))
	}
	tracing.EndTool(span, err, result)
	agentDuration.WithLabelValues("tool", string(eff.Kind), result).Observe(time.Since(start).Seconds())
	return resp, err
}

// discover lists the tools of the Journey's servers: it reports them in status.tools
// with the ToolsAvailable condition, and returns the schemas the revision pins. retry
// says a server could not be listed.
func (r *JourneyReconciler) discover(ctx context.Context, j *flowv1.Journey) (schemas map[string]*revision.ToolSchema, retry bool) {
	j.Status.Tools = nil
	if len(j.Spec.Tools) == 0 {
		apimeta.RemoveStatusCondition(&j.Status.Conditions, flowv1.ConditionToolsAvailable)
		return nil, false
	}
	caller := r.Tools
	if caller == nil {
		caller = &tools.Caller{Secrets: r.APIReader}
	}
	listed := map[string]map[string]*revision.ToolSchema{}
	var problems []string
	reason := flowv1.ReasonToolsDiscovered
	for i := range j.Spec.ToolServers {
		s := &j.Spec.ToolServers[i]
		list, err := caller.List(ctx, j.Namespace, s)
		if err != nil {
			problems = append(problems, fmt.Sprintf("server %s: %v", s.Name, err))
			reason, retry = flowv1.ReasonToolServerUnreachable, true
			continue
		}
		byName := map[string]*revision.ToolSchema{}
		for _, t := range list {
			ts := &revision.ToolSchema{Description: t.Description}
			if raw, err := json.Marshal(t.InputSchema); err == nil {
				ts.InputSchema = raw
			}
			if a := t.Annotations; a != nil {
				ts.ReadOnly = a.ReadOnlyHint
				ts.Destructive = !a.ReadOnlyHint && (a.DestructiveHint == nil || *a.DestructiveHint)
			} else {
				ts.Destructive = true // the protocol's default: a tool may be destructive
			}
			byName[t.Name] = ts
		}
		listed[string(s.Name)] = byName
	}
	for _, t := range j.Spec.Tools {
		if t.Builtin != nil {
			j.Status.Tools = append(j.Status.Tools, flowv1.DiscoveredTool{Name: string(t.Name), Description: t.Description, ReadOnly: true})
			continue
		}
		byName, ok := listed[string(t.Server)]
		if !ok {
			continue
		}
		remote := t.ServerTool
		if remote == "" {
			remote = string(t.Name)
		}
		ts, found := byName[remote]
		if !found {
			problems = append(problems, fmt.Sprintf("tool %s: server %s has no tool %q", t.Name, t.Server, remote))
			if reason == flowv1.ReasonToolsDiscovered {
				reason = flowv1.ReasonToolMissing
			}
			continue
		}
		if schemas == nil {
			schemas = map[string]*revision.ToolSchema{}
		}
		schemas[string(t.Name)] = ts
		j.Status.Tools = append(j.Status.Tools, flowv1.DiscoveredTool{Name: string(t.Name), Server: string(t.Server),
			Description: ts.Description, ReadOnly: ts.ReadOnly, Destructive: ts.Destructive})
	}
	status, msg := metav1.ConditionTrue, fmt.Sprintf("%d tools available", len(j.Status.Tools))
	if len(problems) > 0 {
		status, msg = metav1.ConditionFalse, strings.Join(problems, "; ")
	}
	apimeta.SetStatusCondition(&j.Status.Conditions, metav1.Condition{Type: flowv1.ConditionToolsAvailable, Status: status,
		Reason: reason, Message: msg, ObservedGeneration: j.Generation})
	return schemas, retry
}
