package expr

import (
	"reflect"

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
