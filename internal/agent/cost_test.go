package agent

import (
	"math"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func TestCost(t *testing.T) {
	mini := &flowv1.Pricing{PromptPerMTok: "0.15", CompletionPerMTok: "0.60"}
	for _, tc := range []struct {
		name    string
		pricing *flowv1.Pricing
		usage   Usage
		want    float64
	}{
		{"a million each", mini, Usage{PromptTokens: 1_000_000, CompletionTokens: 1_000_000}, 0.75},
		{"one call", mini, Usage{PromptTokens: 1200, CompletionTokens: 300}, 0.00018 + 0.00018},
		{"budget-sized session", mini, Usage{PromptTokens: 150_000, CompletionTokens: 50_000}, 0.0225 + 0.03},
		{"prompt price only", &flowv1.Pricing{PromptPerMTok: "2.5"}, Usage{PromptTokens: 400_000, CompletionTokens: 9}, 1},
		{"no pricing", nil, Usage{PromptTokens: 1e9}, 0},
		{"unparsable price", &flowv1.Pricing{PromptPerMTok: "cheap"}, Usage{PromptTokens: 1e9}, 0},
		{"no usage", mini, Usage{}, 0},
	} {
		if got := Cost(tc.pricing, tc.usage); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: Cost = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestUsageAdd(t *testing.T) {
	got := Usage{PromptTokens: 1, CompletionTokens: 2, CostUSD: 0.5}.Add(Usage{PromptTokens: 10, CompletionTokens: 20, CostUSD: 0.25})
	if got != (Usage{PromptTokens: 11, CompletionTokens: 22, CostUSD: 0.75}) {
		t.Errorf("Add = %+v", got)
	}
}

func TestWorstCaseCost(t *testing.T) {
	spec := flowv1.AgentSpec{Name: "x", Provider: flowv1.ProviderOpenAI, Model: "m",
		Pricing: &flowv1.Pricing{PromptPerMTok: "1", CompletionPerMTok: "10"}}
	// 4000 characters ~ 1000 prompt tokens at $1/M, 1024 completion tokens at $10/M.
	if got, want := WorstCaseCost(spec, EstimateTokens(4000)), 1000*1e-6+1024*10e-6; math.Abs(got-want) > 1e-12 {
		t.Errorf("WorstCaseCost = %v, want %v", got, want)
	}
	n := int32(100)
	spec.MaxTokens = &n
	if got, want := WorstCaseCost(spec, EstimateTokens(4000)), 1000*1e-6+100*10e-6; math.Abs(got-want) > 1e-12 {
		t.Errorf("WorstCaseCost with maxTokens 100 = %v, want %v", got, want)
	}
	spec.Pricing = nil
	if got := WorstCaseCost(spec, EstimateTokens(4000)); got != 0 {
		t.Errorf("WorstCaseCost without pricing = %v", got)
	}
}
