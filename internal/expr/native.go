package expr

import (
	"math"
	"reflect"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"google.golang.org/protobuf/types/known/structpb"
)

var jsonValueType = reflect.TypeOf(&structpb.Value{})

// fromStructpb turns a structpb.Value into plain Go values, as encoding/json would
// decode them (numbers become float64).
func fromStructpb(n any) any {
	if v, ok := n.(*structpb.Value); ok {
		return v.AsInterface()
	}
	return n
}

// maxExactInt is the largest integer a JSON number (a float64) holds exactly.
const maxExactInt = 1 << 53

// jsonAdapter gives CEL the values of the variables as a JSON document means them: a
// whole number (JSON has one number type, which Go decodes as float64) is an int, so
// `context.count + 1` works; a number with a fraction stays a double. Maps and lists
// are adapted lazily, as each element is read.
type jsonAdapter struct {
	base types.Adapter
}

// NativeToValue adapts v, whole float64 numbers as ints.
func (a jsonAdapter) NativeToValue(v any) ref.Val {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) <= maxExactInt {
			return types.Int(int64(x))
		}
	case map[string]any:
		return types.NewStringInterfaceMap(a, x)
	case []any:
		return types.NewDynamicList(a, x)
	}
	return a.base.NativeToValue(v)
}
