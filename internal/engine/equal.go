package engine

import (
	"bytes"
	"maps"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// statusEqual reports whether two statuses are the same, field by field (times by
// instant). It is what tells a step that changed nothing, so it must cover every field
// of SessionStatus: TestStatusEqualCoversEveryField checks that it does. It is many
// times faster than reflect.DeepEqual, which dominated the cost of a blocked step.
func statusEqual(a, b *flowv1.SessionStatus) bool {
	return a.Phase == b.Phase &&
		a.CurrentPathway == b.CurrentPathway &&
		slices.Equal(a.PathwayStack, b.PathwayStack) &&
		a.Iteration == b.Iteration &&
		a.Confidence == b.Confidence &&
		a.Step == b.Step &&
		a.Turns == b.Turns &&
		a.PathwayTurns == b.PathwayTurns &&
		a.Transitions == b.Transitions &&
		maps.Equal(a.Retries, b.Retries) &&
		a.ProcessedMessages == b.ProcessedMessages &&
		a.ProcessedOutcomes == b.ProcessedOutcomes &&
		a.ProcessedApprovals == b.ProcessedApprovals &&
		a.ProcessedInterventions == b.ProcessedInterventions &&
		slices.EqualFunc(a.Interventions, b.Interventions, func(x, y flowv1.InterventionRecord) bool {
			return x.Step == y.Step && x.Result == y.Result && x.Message == y.Message && interventionEqual(&x.Intervention, &y.Intervention)
		}) &&
		limitsEqual(a.InterventionLimits, b.InterventionLimits) &&
		timeEqual(a.SessionTimeoutFrom, b.SessionTimeoutFrom) &&
		turnEqual(a.Turn, b.Turn) &&
		toolProgressEqual(a.ToolProgress, b.ToolProgress) &&
		decisionEqual(a.LastDecision, b.LastDecision) &&
		effectEqual(a.PendingEffect, b.PendingEffect) &&
		retryEqual(a.AgentRetry, b.AgentRetry) &&
		slices.EqualFunc(a.Journal, b.Journal, func(x, y flowv1.EffectRecord) bool { return effectEqual(&x, &y) }) &&
		slices.Equal(a.JournalEntries, b.JournalEntries) && // the stored form: empty in Go
		a.JournalDropped == b.JournalDropped &&
		outcomeEqual(a.LastTurn, b.LastTurn) &&
		jsonEqual(a.Context, b.Context) &&
		a.ContextVersion == b.ContextVersion &&
		slices.EqualFunc(a.ContextHistory, b.ContextHistory, func(x, y flowv1.ContextVersion) bool {
			return x.Version == y.Version && x.Step == y.Step && x.Pathway == y.Pathway && slices.Equal(x.Keys, y.Keys) && jsonEqual(x.Previous, y.Previous) && jsonEqual(x.Appended, y.Appended)
		}) &&
		slices.EqualFunc(a.History, b.History, func(x, y flowv1.HistoryEntry) bool {
			return x.Time.Equal(&y.Time) && x.Step == y.Step && x.From == y.From && x.To == y.To && x.Action == y.Action &&
				x.Source == y.Source && x.Transition == y.Transition && x.Confidence == y.Confidence &&
				x.Iteration == y.Iteration && x.MessageID == y.MessageID && x.Reason == y.Reason &&
				x.Intervention == y.Intervention && x.By == y.By && slices.Equal(x.PathwayStack, y.PathwayStack)
		}) &&
		slices.Equal(a.HistoryEntries, b.HistoryEntries) && // the stored form: empty in Go
		slices.EqualFunc(a.Transcript, b.Transcript, exchangeEqual) &&
		a.TranscriptDropped == b.TranscriptDropped &&
		a.Usage == b.Usage &&
		slices.EqualFunc(a.Budgets, b.Budgets, func(x, y flowv1.BudgetCharge) bool {
			return x.Name == y.Name && x.WindowStart.Equal(&y.WindowStart) && x.CostUSD == y.CostUSD &&
				x.Tokens == y.Tokens && x.ToolCalls == y.ToolCalls && x.ModelCalls == y.ModelCalls
		}) &&
		slices.EqualFunc(a.ToolCache, b.ToolCache, func(x, y flowv1.ToolCacheEntry) bool {
			return x.Tool == y.Tool && x.ArgsDigest == y.ArgsDigest && jsonEqual(x.Result, y.Result)
		}) &&
		a.JourneyRevision == b.JourneyRevision &&
		a.Reason == b.Reason &&
		slices.EqualFunc(a.Conditions, b.Conditions, func(x, y metav1.Condition) bool {
			return x.Type == y.Type && x.Status == y.Status && x.ObservedGeneration == y.ObservedGeneration &&
				x.LastTransitionTime.Equal(&y.LastTransitionTime) && x.Reason == y.Reason && x.Message == y.Message
		}) &&
		a.ObservedGeneration == b.ObservedGeneration && a.Writes == b.Writes &&
		timeEqual(a.StartTime, b.StartTime) &&
		timeEqual(a.CompletionTime, b.CompletionTime) &&
		timeEqual(a.LastActivityTime, b.LastActivityTime) &&
		(a.TraceContext == nil) == (b.TraceContext == nil) && (a.TraceContext == nil || *a.TraceContext == *b.TraceContext) &&
		(a.Audit == nil) == (b.Audit == nil) && (a.Audit == nil || *a.Audit == *b.Audit)
}

func toolProgressEqual(a, b *flowv1.ToolProgress) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Call == b.Call && a.Tool == b.Tool && a.Progress == b.Progress && a.Total == b.Total && a.Message == b.Message &&
		a.UpdatedAt.Equal(&b.UpdatedAt)
}

func jsonEqual(a, b *apiextensionsv1.JSON) bool {
	if a == nil || b == nil {
		return a == b
	}
	return bytes.Equal(a.Raw, b.Raw)
}

func timeEqual(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

func turnEqual(a, b *flowv1.TurnProgress) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Trigger == b.Trigger && a.Stage == b.Stage && a.MessageID == b.MessageID && a.Pathway == b.Pathway &&
		a.ResultType == b.ResultType && jsonEqual(a.Outputs, b.Outputs) &&
		a.PipelineAgent == b.PipelineAgent && a.PipelineFirstCall == b.PipelineFirstCall &&
		jsonEqual(a.PipelineOutputs, b.PipelineOutputs) && a.PipelineReply == b.PipelineReply &&
		slices.EqualFunc(a.ToolCalls, b.ToolCalls, func(x, y flowv1.ToolCallProgress) bool {
			return x.ToolCallRecord == y.ToolCallRecord && x.IdempotencyKey == y.IdempotencyKey && x.AwaitingApproval == y.AwaitingApproval &&
				jsonEqual(x.Args, y.Args) && jsonEqual(x.Result, y.Result) && x.AssistantText == y.AssistantText && timeEqual(x.SentAt, y.SentAt) &&
				slices.EqualFunc(x.Elicitations, y.Elicitations, elicitationEqual)
		})
}

func exchangeEqual(a, b flowv1.Exchange) bool {
	return a.MessageID == b.MessageID && a.Pathway == b.Pathway && a.User == b.User && a.Assistant == b.Assistant &&
		slices.Equal(a.ToolCalls, b.ToolCalls) && a.ToolCallsOmitted == b.ToolCallsOmitted && a.Step == b.Step && a.Rewound == b.Rewound &&
		a.InputNumber == b.InputNumber && externalOutcomeEqual(a.Outcome, b.Outcome) && approvalEqual(a.Approval, b.Approval)
}

func externalOutcomeEqual(a, b *flowv1.ExternalOutcome) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Pathway == b.Pathway && a.Iteration == b.Iteration && a.Attempt == b.Attempt && a.ResultType == b.ResultType &&
		a.Message == b.Message && jsonEqual(a.Data, b.Data)
}

func approvalEqual(a, b *flowv1.Approval) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.DecisionID == b.DecisionID && a.Approves() == b.Approves() && (a.Approve == nil) == (b.Approve == nil) &&
		a.Destination == b.Destination && a.By == b.By && timeEqual(a.At, b.At) && a.Reason == b.Reason
}

func decisionEqual(a, b *flowv1.DecisionRecord) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ID == b.ID && a.Transition == b.Transition && a.From == b.From && a.To == b.To && a.Action == b.Action &&
		a.Source == b.Source && a.Agent == b.Agent && a.Confidence == b.Confidence && a.Reasoning == b.Reasoning &&
		slices.Equal(a.AllowedDestinations, b.AllowedDestinations) && a.State == b.State &&
		(a.WaitingSince == nil) == (b.WaitingSince == nil) && (a.WaitingSince == nil || a.WaitingSince.Equal(b.WaitingSince))
}

func effectEqual(a, b *flowv1.EffectRecord) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := &a.Result, &b.Result
	return a.ID == b.ID && a.Kind == b.Kind && a.Step == b.Step && a.InputHash == b.InputHash && a.Agent == b.Agent &&
		a.ToolCall == b.ToolCall && jsonEqual(x.ToolResult, y.ToolResult) && x.DurationMs == y.DurationMs &&
		x.Intent == y.Intent && x.Destination == y.Destination && x.Confidence == y.Confidence && x.Reasoning == y.Reasoning &&
		x.Reply == y.Reply && jsonEqual(x.Outputs, y.Outputs) && x.ResultType == y.ResultType &&
		(x.Complete == nil) == (y.Complete == nil) && (x.Complete == nil || *x.Complete == *y.Complete) &&
		x.Usage == y.Usage && (x.Failure == nil) == (y.Failure == nil) && (x.Failure == nil || *x.Failure == *y.Failure) &&
		slices.Equal(x.ToolCalls, y.ToolCalls) && a.SpanID == b.SpanID && a.Rewound == b.Rewound &&
		(x.Elicitation == nil) == (y.Elicitation == nil) && (x.Elicitation == nil || elicitationEqual(*x.Elicitation, *y.Elicitation)) &&
		(a.DegradedTo == nil) == (b.DegradedTo == nil) && (a.DegradedTo == nil || *a.DegradedTo == *b.DegradedTo)
}

func elicitationEqual(a, b flowv1.ToolElicitation) bool {
	return a.Mode == b.Mode && a.Message == b.Message && jsonEqual(a.RequestedSchema, b.RequestedSchema) && a.URL == b.URL &&
		a.ElicitationID == b.ElicitationID && timeEqual(a.AskedAt, b.AskedAt) && a.Answer == b.Answer && jsonEqual(a.Content, b.Content) &&
		a.AnsweredBy == b.AnsweredBy
}

func interventionEqual(a, b *flowv1.Intervention) bool {
	return a.ID == b.ID && a.Action == b.Action && a.Reason == b.Reason && a.By == b.By && limitsEqual(a.Limits, b.Limits) &&
		a.Feedback == b.Feedback && a.Pathway == b.Pathway && (a.Step == nil) == (b.Step == nil) && (a.Step == nil || *a.Step == *b.Step) &&
		a.Revision == b.Revision && a.Force == b.Force && a.Call == b.Call && a.Outcome == b.Outcome && a.Result == b.Result &&
		jsonEqual(a.Content, b.Content)
}

func limitsEqual(a, b *flowv1.SessionLimits) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.MaxTurns == b.MaxTurns && a.MaxIterations == b.MaxIterations && a.MaxTransitions == b.MaxTransitions &&
		(a.Budget == nil) == (b.Budget == nil) && (a.Budget == nil || *a.Budget == *b.Budget)
}

func outcomeEqual(a, b *flowv1.TurnOutcome) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Trigger == b.Trigger && a.MessageID == b.MessageID && a.Pathway == b.Pathway && a.FinishReason == b.FinishReason &&
		a.AssistantText == b.AssistantText && a.ResultType == b.ResultType && a.Complete == b.Complete &&
		a.Transition == b.Transition && jsonEqual(a.Outputs, b.Outputs) && slices.Equal(a.Failures, b.Failures) && a.Usage == b.Usage &&
		slices.Equal(a.ToolCalls, b.ToolCalls) && slices.Equal(a.Replies, b.Replies) &&
		(a.DegradedTo == nil) == (b.DegradedTo == nil) && (a.DegradedTo == nil || *a.DegradedTo == *b.DegradedTo)
}

func retryEqual(a, b *flowv1.AgentRetry) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.InputHash == b.InputHash && a.Attempts == b.Attempts && a.Since.Equal(&b.Since)
}
