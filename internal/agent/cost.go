package agent

import (
	"strconv"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Cost is the price in US dollars of the tokens in usage at pricing (per million
// tokens). A nil pricing, or a price that does not parse, costs nothing: the CRD
// validates prices as decimals, so that only happens for agents without pricing.
func Cost(pricing *flowv1.Pricing, usage Usage) float64 {
	if pricing == nil {
		return 0
	}
	prompt := perToken(pricing.PromptPerMTok)
	completion := perToken(pricing.CompletionPerMTok)
	return float64(usage.PromptTokens)*prompt + float64(usage.CompletionTokens)*completion
}

func perToken(d flowv1.Decimal) float64 {
	if d == "" {
		return 0
	}
	v, err := strconv.ParseFloat(string(d), 64)
	if err != nil || v < 0 {
		return 0
	}
	return v / 1e6
}

// Add returns the sum of two usages, cost included.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + v.PromptTokens,
		CompletionTokens: u.CompletionTokens + v.CompletionTokens,
		CostUSD:          u.CostUSD + v.CostUSD,
		Estimated:        u.Estimated || v.Estimated,
	}
}

// charsPerToken is the usual length of a token in English text and JSON.
const charsPerToken = 4

// EstimateTokens estimates the tokens of chars characters of text: one per four,
// rounded up. It stands in for a usage block an endpoint did not send, and for the
// prompt of a call not made yet.
func EstimateTokens(chars int) int64 {
	if chars <= 0 {
		return 0
	}
	return int64((chars + charsPerToken - 1) / charsPerToken)
}

// WorstCaseCost is the most one call of the agent spec can cost, in US dollars, for a
// prompt of promptTokens (EstimateTokens of its characters): the prompt plus a full
// answer of MaxTokens(spec), at the agent's pricing. A retried call that fails costs
// nothing at the usual providers, so this is the figure a budget check compares with
// what is left before calling.
func WorstCaseCost(spec flowv1.AgentSpec, promptTokens int64) float64 {
	return Cost(spec.Pricing, Usage{PromptTokens: promptTokens, CompletionTokens: MaxTokens(spec)})
}

// DefaultMaxTokens caps the tokens of one answer when spec.maxTokens is not set: far
// more than a decision or a pathway turn needs, and small enough that a model looping
// on whitespace stops long before the timeout at local-model speeds.
const DefaultMaxTokens = 1024

// MaxTokens is the cap on the tokens of one answer of the agent spec: spec.maxTokens,
// or DefaultMaxTokens. The openai provider sends it with every call, so it bounds
// what a call can cost before it is made.
func MaxTokens(spec flowv1.AgentSpec) int64 {
	if spec.MaxTokens != nil && *spec.MaxTokens > 0 {
		return int64(*spec.MaxTokens)
	}
	return DefaultMaxTokens
}
