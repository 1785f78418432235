package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Attributes of the operator's own, beside the OpenTelemetry GenAI semantic
// conventions.
const (
	// AttrCostUSD is what a model call cost, in US dollars, at the agent's pricing.
	AttrCostUSD = attribute.Key("journey.usage.cost_usd")
	// AttrUsageEstimated says the endpoint reported no usage and the tokens are estimated.
	AttrUsageEstimated = attribute.Key("journey.usage.estimated")
	// AttrAgent is the agent's name in the Journey.
	AttrAgent = attribute.Key("journey.agent")
	// AttrErrorClass is an agent error's class: Transient, Invalid or Terminal.
	AttrErrorClass = attribute.Key("journey.error.class")
	// AttrToolIdempotencyKey is the idempotency key of a tool call.
	AttrToolIdempotencyKey = attribute.Key("journey.tool.idempotency_key")
	// AttrToolApproval is how a tool call was approved (for example "auto", or the
	// approver).
	AttrToolApproval = attribute.Key("journey.tool.approval")
)

// ChatUsage is what a model call used, for its span.
type ChatUsage struct {
	InputTokens, OutputTokens int64
	CostUSD                   float64
	Estimated                 bool
	// ResponseModel, ResponseID and FinishReasons are what the answer said, when it came.
	ResponseModel, ResponseID string
	FinishReasons             []string
}

// StartChat starts the `chat {model}` span of one model call (gen_ai.operation.name
// chat, gen_ai.request.model and attrs) under the span of ctx, when ctx traces; the
// caller ends it with EndChat. The context it returns carries the span, so the HTTP
// requests made with it carry its traceparent (Transport).
func StartChat(ctx context.Context, model string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	p := From(ctx)
	if p == nil {
		return ctx, noSpan
	}
	all := append([]attribute.KeyValue{semconv.GenAIOperationNameChat, semconv.GenAIRequestModel(model)}, attrs...)
	return p.tracer.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(all...))
}

// EndChat records u on a chat span, and err with its class when the call failed,
// then ends the span.
func EndChat(span trace.Span, u ChatUsage, err error, class string) {
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(
		semconv.GenAIUsageInputTokens(int(u.InputTokens)),
		semconv.GenAIUsageOutputTokens(int(u.OutputTokens)),
		AttrCostUSD.Float64(u.CostUSD),
	)
	if u.Estimated {
		span.SetAttributes(AttrUsageEstimated.Bool(true))
	}
	if u.ResponseModel != "" {
		span.SetAttributes(semconv.GenAIResponseModel(u.ResponseModel))
	}
	if u.ResponseID != "" {
		span.SetAttributes(semconv.GenAIResponseID(u.ResponseID))
	}
	if len(u.FinishReasons) > 0 {
		span.SetAttributes(semconv.GenAIResponseFinishReasons(u.FinishReasons...))
	}
	fail(span, err, class)
	span.End()
}

// ChatContent records the messages sent and the answer text on a chat span, when
// content capture is on for ctx (gen_ai.input.messages and gen_ai.output.messages, as
// JSON the caller builds); otherwise it records nothing.
func ChatContent(ctx context.Context, span trace.Span, input, output string) {
	if !Content(ctx) || !span.IsRecording() {
		return
	}
	if input != "" {
		span.SetAttributes(semconv.GenAIInputMessagesKey.String(input))
	}
	if output != "" {
		span.SetAttributes(semconv.GenAIOutputMessagesKey.String(output))
	}
}

// StartTool starts the `execute_tool {tool}` span of one tool call under the span of
// ctx, when ctx traces: gen_ai.operation.name execute_tool, gen_ai.tool.name, the
// call's idempotency key and how it was approved ("" when it needed no approval). The
// caller ends it with EndTool, and may record the arguments and result with
// ToolContent. The context it returns carries the span: an MCP client whose HTTP
// client goes through HTTPClient sends the server its traceparent.
func StartTool(ctx context.Context, tool, idempotencyKey, approval string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	p := From(ctx)
	if p == nil {
		return ctx, noSpan
	}
	all := append([]attribute.KeyValue{
		semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(tool),
		AttrToolIdempotencyKey.String(idempotencyKey),
	}, attrs...)
	if approval != "" {
		all = append(all, AttrToolApproval.String(approval))
	}
	return p.tracer.Start(ctx, "execute_tool "+tool, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(all...))
}

// ToolContent records a tool call's arguments and result (JSON) on its span, when
// content capture is on for ctx; otherwise it records nothing.
func ToolContent(ctx context.Context, span trace.Span, arguments, result string) {
	if !Content(ctx) || !span.IsRecording() {
		return
	}
	if arguments != "" {
		span.SetAttributes(semconv.GenAIToolCallArgumentsKey.String(arguments))
	}
	if result != "" {
		span.SetAttributes(semconv.GenAIToolCallResultKey.String(result))
	}
}

// EndTool records err with its class (when the call failed) and ends a tool span.
func EndTool(span trace.Span, err error, class string) {
	fail(span, err, class)
	span.End()
}

// fail marks span failed with err's message and class.
func fail(span trace.Span, err error, class string) {
	if err == nil {
		return
	}
	span.SetStatus(codes.Error, err.Error())
	if class != "" {
		span.SetAttributes(AttrErrorClass.String(class), semconv.ErrorTypeKey.String(class))
	}
}
