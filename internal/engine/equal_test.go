package engine

import (
	"reflect"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// fill gives every pointer a value and every slice and map one element, recursively,
// so each leaf field of v exists.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem())
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[metav1.Time]() || v.Type() == reflect.TypeFor[apiextensionsv1.JSON]() {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem())
	}
}

// leaves calls f with a setter for every leaf reachable from v.
func leaves(v reflect.Value, path string, f func(path string, set func())) {
	switch v.Kind() {
	case reflect.Pointer:
		leaves(v.Elem(), path, f)
	case reflect.Struct:
		switch v.Type() {
		case reflect.TypeFor[metav1.Time]():
			f(path, func() { v.Set(reflect.ValueOf(metav1.NewTime(time.Unix(1, 0)))) })
			return
		case reflect.TypeFor[apiextensionsv1.JSON]():
			f(path, func() { v.Set(reflect.ValueOf(apiextensionsv1.JSON{Raw: []byte(`{"x":1}`)})) })
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				leaves(v.Field(i), path+"."+v.Type().Field(i).Name, f)
			}
		}
	case reflect.Slice:
		leaves(v.Index(0), path+"[0]", f)
	case reflect.Map:
		f(path, func() {
			v.SetMapIndex(reflect.New(v.Type().Key()).Elem(), reflect.ValueOf(int32(7)).Convert(v.Type().Elem()))
		})
	case reflect.String:
		f(path, func() { v.SetString("changed") })
	case reflect.Bool:
		f(path, func() { v.SetBool(!v.Bool()) })
	case reflect.Int, reflect.Int32, reflect.Int64:
		f(path, func() { v.SetInt(v.Int() + 1) })
	default:
		f(path, nil)
	}
}

func TestStatusEqualCoversEveryField(t *testing.T) {
	base := &flowv1.SessionStatus{}
	fill(reflect.ValueOf(base))
	if !statusEqual(base, base.DeepCopy()) {
		t.Fatal("a status differs from its copy")
	}
	n := 0
	leaves(reflect.ValueOf(base.DeepCopy()), "status", func(path string, _ func()) {
		variant := base.DeepCopy()
		var set func()
		leaves(reflect.ValueOf(variant), "status", func(p string, s func()) {
			if p == path {
				set = s
			}
		})
		if set == nil {
			t.Errorf("%s: cannot change this kind of field", path)
			return
		}
		set()
		n++
		if statusEqual(base, variant) {
			t.Errorf("statusEqual misses a change of %s", path)
		}
	})
	if n < 60 {
		t.Errorf("only %d leaves checked", n)
	}
}
