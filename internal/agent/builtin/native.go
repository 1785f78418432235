package builtin

import (
	"fmt"
	"math"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"

	"github.com/journeyops/journey-operator/internal/expr"
)

// eval evaluates src over act and converts the result to JSON-like Go values.
func eval(src string, act interpreter.Activation) (any, error) {
	prg, err := expr.Compile(src)
	if err != nil {
		return nil, err
	}
	out, _, err := prg.Eval(act)
	if err != nil {
		return nil, fmt.Errorf("CEL %q: %w", src, err)
	}
	return native(out)
}

// native converts a CEL value like expr.ToNative (numbers become float64), directly for
// the JSON types and through expr.ToNative for the others (bytes, timestamps, ...).
func native(v ref.Val) (any, error) {
	switch x := v.(type) {
	case types.String:
		return string(x), nil
	case types.Double:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return expr.ToNative(v)
		}
		return f, nil
	case types.Int:
		return float64(x), nil
	case types.Uint:
		return float64(x), nil
	case types.Bool:
		return bool(x), nil
	case types.Null:
		return nil, nil
	}
	switch v.Type() {
	case types.ListType:
		l, ok := v.(traits.Lister)
		if !ok {
			return expr.ToNative(v)
		}
		n, ok := l.Size().(types.Int)
		if !ok {
			return expr.ToNative(v)
		}
		out := make([]any, 0, int(n))
		for it := l.Iterator(); it.HasNext() == types.True; {
			e, err := native(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	case types.MapType:
		m, ok := v.(traits.Mapper)
		if !ok {
			return expr.ToNative(v)
		}
		out := map[string]any{}
		for it := m.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return expr.ToNative(v) // reports the non-string key
			}
			e, err := native(m.Get(k))
			if err != nil {
				return nil, err
			}
			out[string(ks)] = e
		}
		return out, nil
	}
	return expr.ToNative(v)
}
