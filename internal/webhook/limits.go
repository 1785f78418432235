package webhook

import (
	"fmt"
	"math/big"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

var limitsPath = field.NewPath("spec", "limits")

// checkLimits admits a change of spec.limits, the per-Session override of the
// Journey's caps, only at or above what the Session has used (its stored status):
// an override lets a Session stalled by a cap continue, it never takes back what was
// spent. Limits unchanged by the update are not checked.
func checkLimits(old, s *flowv1.Session) field.ErrorList {
	l := s.Spec.Limits
	if l == nil || equality.Semantic.DeepEqual(old.Spec.Limits, l) {
		return nil
	}
	used := old.Status
	var errs field.ErrorList
	below := func(path *field.Path, value any, what string) {
		errs = append(errs, field.Forbidden(path, fmt.Sprintf(
			"Session %q has used %s: %s %v is below that; a limit may only be set at or above what the Session has used",
			s.Name, what, path, value)))
	}
	if l.MaxTurns > 0 && l.MaxTurns < used.Turns {
		below(limitsPath.Child("maxTurns"), l.MaxTurns, fmt.Sprintf("%d turns", used.Turns))
	}
	if l.MaxIterations > 0 && l.MaxIterations < used.Iteration {
		below(limitsPath.Child("maxIterations"), l.MaxIterations, fmt.Sprintf("%d iterations", used.Iteration))
	}
	if l.MaxTransitions > 0 && l.MaxTransitions < used.Transitions {
		below(limitsPath.Child("maxTransitions"), l.MaxTransitions, fmt.Sprintf("%d transitions", used.Transitions))
	}
	b := l.Budget
	if b == nil {
		return errs
	}
	bp := limitsPath.Child("budget")
	if tokens := used.Usage.PromptTokens + used.Usage.CompletionTokens; b.MaxTokens > 0 && b.MaxTokens < tokens {
		below(bp.Child("maxTokens"), b.MaxTokens, fmt.Sprintf("%d tokens", tokens))
	}
	if calls := used.Usage.ToolCalls; b.MaxToolCalls > 0 && b.MaxToolCalls < calls {
		below(bp.Child("maxToolCalls"), b.MaxToolCalls, fmt.Sprintf("%d tool calls", calls))
	}
	if b.MaxCostUSD != "" {
		limit, ok := new(big.Rat).SetString(string(b.MaxCostUSD))
		if !ok || limit.Sign() < 0 {
			return append(errs, field.Invalid(bp.Child("maxCostUSD"), b.MaxCostUSD, "not a decimal number of US dollars"))
		}
		if spent, ok := new(big.Rat).SetString(used.Usage.CostUSD); ok && limit.Cmp(spent) < 0 {
			below(bp.Child("maxCostUSD"), b.MaxCostUSD, "USD "+used.Usage.CostUSD)
		}
	}
	return errs
}
