package engine

import (
	"fmt"

	"github.com/google/cel-go/interpreter"

	"github.com/journeyops/journey-operator/internal/expr"
)

// activation binds the CEL variables once for several evaluations (the conditions of
// one message, the rules of one decision).
func activation(v expr.Vars) interpreter.Activation {
	orEmpty := func(m map[string]any) map[string]any {
		if m == nil {
			return map[string]any{}
		}
		return m
	}
	act, err := interpreter.NewActivation(map[string]any{
		expr.VarContext: orEmpty(v.Context),
		expr.VarMessage: v.Message,
		expr.VarInputs:  orEmpty(v.Inputs),
		expr.VarOutputs: orEmpty(v.Outputs),
		expr.VarSession: orEmpty(v.Session),
	})
	if err != nil {
		panic(err) // a map always makes an activation
	}
	return act
}

// evalBool evaluates a boolean CEL expression (compiled once per source, shared with
// the expr package) without converting its result.
func evalBool(src string, act interpreter.Activation) (bool, error) {
	prg, err := expr.Compile(src)
	if err != nil {
		return false, err
	}
	out, _, err := prg.Eval(act)
	if err != nil {
		return false, fmt.Errorf("CEL %q: %w", src, err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("CEL %q: want a bool, got %s", src, out.Type())
	}
	return b, nil
}

// lazy is an activation of one variable computed on first use.
type lazy struct {
	name string
	fn   func() any
}

func (l lazy) ResolveName(name string) (any, bool) {
	if name != l.name {
		return nil, false
	}
	return l.fn(), true
}

func (l lazy) Parent() interpreter.Activation { return nil }
