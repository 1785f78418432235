package expr

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
)

// Variables of a rollout analysis's conditions: the counts of each revision's Sessions.
const (
	VarCanary = "canary"
	VarStable = "stable"
)

// RolloutCounts are the names of the counts a rollout condition reads from canary and
// stable, all numbers (doubles, so a ratio such as canary.failed / canary.finished is a
// fraction, and NaN rather than an error while nothing finished).
var RolloutCounts = []string{"started", "completed", "failed", "escalated", "finished", "turns", "costUSD"}

var (
	rolloutOnce  sync.Once
	rolloutEnv   *cel.Env
	rolloutErr   error
	rolloutCache sync.Map // source -> *compiled
)

func rolloutEnvironment() (*cel.Env, error) {
	rolloutOnce.Do(func() {
		counts := cel.MapType(cel.StringType, cel.DoubleType)
		rolloutEnv, rolloutErr = cel.NewEnv(
			cel.Variable(VarCanary, counts),
			cel.Variable(VarStable, counts),
			cel.CrossTypeNumericComparisons(true),
		)
	})
	return rolloutEnv, rolloutErr
}

// CompileRollout compiles a rollout condition: a boolean CEL expression over canary
// and stable. A syntax or type error carries CEL's caret under the offending column; a
// count that does not exist (canary.faild) is an error too, found by evaluating the
// condition on counts of one.
func CompileRollout(src string) (cel.Program, error) {
	return cached(&rolloutCache, src, compileRollout)
}

func compileRollout(src string) (cel.Program, error) {
	e, err := rolloutEnvironment()
	if err != nil {
		return nil, err
	}
	ast, iss := e.Compile(src)
	if iss.Err() != nil {
		return nil, fmt.Errorf("CEL %q: %w", src, iss.Err())
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("CEL %q: want a bool, the expression gives %s", src, ast.OutputType())
	}
	prg, err := e.Program(ast, cel.CostLimit(costLimit))
	if err != nil {
		return nil, err
	}
	// Counts of one, not zero: a ratio of zeros is NaN, which cannot be compared.
	one := map[string]float64{}
	for _, k := range RolloutCounts {
		one[k] = 1
	}
	if _, _, err := prg.Eval(map[string]any{VarCanary: one, VarStable: one}); err != nil {
		return nil, fmt.Errorf("CEL %q: %w (canary and stable have %v)", src, err, RolloutCounts)
	}
	return prg, nil
}

// RolloutBool evaluates the rollout condition src on the counts of the canary and the
// stable revision. An error (a ratio whose denominator is 0 is NaN, which cannot be
// compared) means the condition cannot be decided on these counts.
func RolloutBool(src string, canary, stable map[string]float64) (bool, error) {
	prg, err := CompileRollout(src)
	if err != nil {
		return false, err
	}
	out, _, err := prg.Eval(map[string]any{VarCanary: canary, VarStable: stable})
	if err != nil {
		return false, fmt.Errorf("CEL %q: %w", src, err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("CEL %q: want a bool, got %s", src, out.Type())
	}
	return b, nil
}
