// Package agent is the one interface behind which pathway, decision and intent agents
// live, with two providers: openai (any OpenAI-compatible endpoint, through go-openai)
// and builtin (offline and deterministic, the default).
package agent

import (
	"context"
	"time"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Agent answers the three kinds of question the engine asks.
type Agent interface {
	// RunPathway runs a pathway's signature for one turn.
	RunPathway(ctx context.Context, req PathwayRequest) (PathwayResponse, error)
	// Decide chooses a destination among a decision's allowed destinations.
	Decide(ctx context.Context, req DecisionRequest) (DecisionResponse, error)
	// ClassifyIntent maps a message to one of the known intents, or none.
	ClassifyIntent(ctx context.Context, req IntentRequest) (IntentResponse, error)
}

// SessionInfo is what agents and CEL expressions may know about the Session.
type SessionInfo struct {
	Name         string `json:"name,omitempty"`
	Pathway      string `json:"pathway"`
	Iteration    int32  `json:"iteration"`
	Turns        int32  `json:"turns"`
	PathwayTurns int32  `json:"pathwayTurns"`
}

// Exchange is one line of the conversation history.
type Exchange struct {
	Role string `json:"role"` // user | assistant
	Text string `json:"text"`
}

// PathwayRequest asks for one turn of a pathway.
type PathwayRequest struct {
	// Pathway is the pathway's local name; Spec its resolved spec (signature, builtin).
	Pathway string              `json:"pathway"`
	Spec    *flowv1.PathwaySpec `json:"spec"`
	// Message is the user's text; empty for Entry and Outcome turns.
	Message string `json:"message,omitempty"`
	// Inputs are the signature's inputs resolved from the message, context and defaults.
	Inputs  map[string]any `json:"inputs,omitempty"`
	Context map[string]any `json:"context,omitempty"`
	// History is the conversation before this turn, oldest first: the user's
	// messages and the replies, alternating.
	History []Exchange `json:"history,omitempty"`
	// HandedOver is what decisions with messaging passed on (the context's messages),
	// by the pathway whose outputs they are.
	HandedOver map[string]any `json:"handedOver,omitempty"`
	Session    SessionInfo    `json:"session"`
	// Feedback is why the pathway runs again: the reasoning of a decision that asked
	// for another try, or an approver's rejection.
	Feedback string `json:"feedback,omitempty"`
	// Tools are the results of the turn's tool calls by tool name (the builtin
	// provider's toolCalls).
	Tools map[string]any `json:"tools,omitempty"`
	// ToolSpecs are the tools the agent may call in this turn, when the pathway
	// lists tools and one remote agent runs it: the model answers either with
	// tool calls (PathwayResponse.ToolCalls) or with the final answer.
	ToolSpecs []ToolSpec `json:"toolSpecs,omitempty"`
	// ToolExchanges are the turn's tool calls so far and their results, in order.
	ToolExchanges []ToolExchange `json:"toolExchanges,omitempty"`
}

// PathwayResponse is one turn's result.
type PathwayResponse struct {
	Reply      string            `json:"reply,omitempty"`
	Outputs    map[string]any    `json:"outputs,omitempty"`
	ResultType flowv1.ResultType `json:"resultType,omitempty"`
	Complete   bool              `json:"complete"`
	Usage      Usage             `json:"usage,omitzero"`
	// ToolCalls, when set, are the tools the model asks to call before it
	// answers; the other fields are then empty but Usage and Reply, which is
	// then the text the model wrote with its calls, if any.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
}

// DecisionRequest asks to choose the next pathway after an outcome.
type DecisionRequest struct {
	// ID is the decision's id (d-<step>).
	ID         string            `json:"id"`
	Pathway    string            `json:"pathway"`
	Transition string            `json:"transition"` // onSuccess, onFailure, ...
	Decision   *flowv1.Decision  `json:"decision"`
	ResultType flowv1.ResultType `json:"resultType"`
	Outputs    map[string]any    `json:"outputs,omitempty"`
	Context    map[string]any    `json:"context,omitempty"`
	Session    SessionInfo       `json:"session"`
}

// DecisionResponse is the chosen destination. An empty Destination means unclear.
type DecisionResponse struct {
	Destination string  `json:"destination"`
	Confidence  float64 `json:"confidence"`
	Reasoning   string  `json:"reasoning,omitempty"`
	Usage       Usage   `json:"usage,omitzero"`
}

// Intent is one classifiable intent: a global transition with an intent trigger.
type Intent struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Patterns    []string `json:"patterns,omitempty"`
}

// IntentRequest asks which intent a message expresses.
type IntentRequest struct {
	Message string         `json:"message"`
	Intents []Intent       `json:"intents"`
	Context map[string]any `json:"context,omitempty"`
	// CacheTTL is how long an answer to the same message and intents may be reused
	// (the journey's intentDetection.cacheTTL); 0 means the cache's default. It is
	// not part of the question.
	CacheTTL time.Duration `json:"-"`
	// Pathway is the pathway the Session is in when the message is classified, whose
	// retry limit and timeout bound the call. It is not part of the question.
	Pathway string `json:"-"`
}

// NoIntent is the intent of a message that expresses none of the known intents.
const NoIntent = "none"

// IntentResponse is the classified intent, or NoIntent.
type IntentResponse struct {
	Intent     string  `json:"intent"`
	Confidence float64 `json:"confidence"`
	Reasoning  string  `json:"reasoning,omitempty"`
	Usage      Usage   `json:"usage,omitzero"`
}

// Usage is the token usage of a call and its cost from the agent's pricing.
type Usage struct {
	PromptTokens     int64   `json:"promptTokens,omitempty"`
	CompletionTokens int64   `json:"completionTokens,omitempty"`
	CostUSD          float64 `json:"costUSD,omitempty"`
	// Estimated marks tokens estimated from text lengths (EstimateTokens) because the
	// endpoint reported no usage.
	Estimated bool `json:"estimated,omitempty"`
}
