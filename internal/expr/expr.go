// Package expr compiles and evaluates the CEL expressions of journeys: transition
// conditions, decision rules and the builtin provider's outputs, outcome and completion.
// One environment serves them all; programs are cached by source text, so a journey
// revision's expressions compile once per process.
package expr

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
)

// Variables every expression may use. Unset ones are empty maps or strings.
const (
	VarContext = "context" // the Session context
	VarMessage = "message" // the user message being processed ("" when none)
	VarInputs  = "inputs"  // the pathway signature's resolved inputs
	VarOutputs = "outputs" // the turn's outputs
	VarSession = "session" // {name, pathway, iteration, turns, pathwayTurns}
	VarArgs    = "args"    // a tool call's arguments (builtin tools, approval conditions)
	VarTools   = "tools"   // the results of a turn's tool calls, by tool name
)

// costLimit bounds one evaluation, so a runaway comprehension fails instead of spinning.
const costLimit = 1_000_000

var (
	envOnce sync.Once
	env     *cel.Env
	envErr  error
	cache   sync.Map // source -> *compiled
)

type compiled struct {
	prg cel.Program
	err error
}

// Env returns the shared CEL environment.
func Env() (*cel.Env, error) {
	envOnce.Do(func() {
		env, envErr = cel.NewEnv(
			cel.Variable(VarContext, cel.DynType),
			cel.Variable(VarMessage, cel.StringType),
			cel.Variable(VarInputs, cel.DynType),
			cel.Variable(VarOutputs, cel.DynType),
			cel.Variable(VarSession, cel.DynType),
			cel.Variable(VarArgs, cel.DynType),
			cel.Variable(VarTools, cel.DynType),
			ext.Strings(),
			ext.Lists(),
			ext.Sets(),
			ext.Math(),
			ext.Encoders(),
			// Whole JSON numbers are ints; ints and doubles compare with each other
			// (`context.count >= 3.0`), though CEL adds only numbers of one type.
			cel.CustomTypeAdapter(jsonAdapter{base: types.DefaultTypeAdapter}),
			cel.CrossTypeNumericComparisons(true),
		)
	})
	return env, envErr
}

// Compile returns the program for src, compiling it on first use.
func Compile(src string) (cel.Program, error) {
	return cached(&cache, src, compile)
}

// cached returns the program for src from programs (source -> *compiled), compiling
// it with compile on first use; a compile error is cached too.
func cached(programs *sync.Map, src string, compile func(string) (cel.Program, error)) (cel.Program, error) {
	if c, ok := programs.Load(src); ok {
		return c.(*compiled).prg, c.(*compiled).err
	}
	c := &compiled{}
	c.prg, c.err = compile(src)
	actual, _ := programs.LoadOrStore(src, c)
	return actual.(*compiled).prg, actual.(*compiled).err
}

func compile(src string) (cel.Program, error) {
	e, err := Env()
	if err != nil {
		return nil, err
	}
	ast, iss := e.Compile(src)
	if iss.Err() != nil {
		return nil, fmt.Errorf("CEL %q: %w", src, iss.Err())
	}
	return e.Program(ast, cel.CostLimit(costLimit), cel.InterruptCheckFrequency(100))
}

// Vars are the values of the variables for one evaluation.
type Vars struct {
	Context map[string]any
	Message string
	Inputs  map[string]any
	Outputs map[string]any
	Session map[string]any
	Args    map[string]any
	Tools   map[string]any
}

// Activation binds the variables once, for several evaluations (the conditions of one
// message, the rules of one decision, the outputs of one turn). Maps are read at each
// access, so a later output sees the earlier ones added to Outputs.
func (v Vars) Activation() interpreter.Activation {
	orEmpty := func(m map[string]any) map[string]any {
		if m == nil {
			return map[string]any{}
		}
		return m
	}
	act, err := interpreter.NewActivation(map[string]any{
		VarContext: orEmpty(v.Context),
		VarMessage: v.Message,
		VarInputs:  orEmpty(v.Inputs),
		VarOutputs: orEmpty(v.Outputs),
		VarSession: orEmpty(v.Session),
		VarArgs:    orEmpty(v.Args),
		VarTools:   orEmpty(v.Tools),
	})
	if err != nil {
		panic(err) // a map always makes an activation
	}
	return act
}

// EvalBool evaluates a boolean expression against an activation, without converting
// its result.
func EvalBool(src string, act interpreter.Activation) (bool, error) {
	prg, err := Compile(src)
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

// Eval evaluates src and returns its value converted to plain Go (JSON-like) values.
func Eval(src string, vars Vars) (any, error) {
	prg, err := Compile(src)
	if err != nil {
		return nil, err
	}
	out, _, err := prg.Eval(vars.Activation())
	if err != nil {
		return nil, fmt.Errorf("CEL %q: %w", src, err)
	}
	return ToNative(out)
}

// Bool evaluates src, which must yield a boolean.
func Bool(src string, vars Vars) (bool, error) {
	v, err := Eval(src, vars)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("CEL %q: want a bool, got %T", src, v)
	}
	return b, nil
}

// ToNative converts a CEL value to JSON-compatible Go values (map[string]any, []any,
// string, float64, int64, bool, nil).
func ToNative(v ref.Val) (any, error) {
	n, err := v.ConvertToNative(jsonValueType)
	if err != nil {
		return nil, err
	}
	return fromStructpb(n), nil
}
