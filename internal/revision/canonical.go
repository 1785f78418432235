package revision

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"sync"

	"github.com/google/cel-go/cel"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/expr"
)

// Canonical returns the form of data that names its revision. Two Journeys that mean
// the same get the same bytes, however their YAML was written:
//
//   - the CRD defaults are applied, so a field left out and the same field written
//     with its default value are one;
//   - every CEL expression is replaced by the text of its parsed form, so line breaks,
//     indentation and comments do not count (a folded YAML scalar that one YAML
//     library reads with a blank line more than another, as kustomize's does, names
//     the same revision);
//   - free-form JSON values (context values, tool schemas) are re-encoded with sorted
//     keys, no insignificant whitespace, and whole numbers written as integers.
//
// Everything else (prompts, descriptions, names) counts byte for byte. The stored
// data is not canonicalised: a revision keeps the spec as it was written.
func Canonical(data *Data) ([]byte, error) {
	c := Data{Journey: *data.Journey.DeepCopy(), Tools: data.Tools}
	if data.Pathways != nil {
		c.Pathways = make(map[string]*flowv1.PathwaySpec, len(data.Pathways))
		for name, p := range data.Pathways {
			if p != nil {
				p = p.DeepCopy()
				DefaultPathway(p)
			}
			c.Pathways[name] = p
		}
	}
	DefaultJourney(&c.Journey)
	canonicalExpressions(reflect.ValueOf(&c).Elem())
	raw, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	// encoding/json writes map keys sorted and no whitespace.
	return json.Marshal(canonicalNumbers(v))
}

// parseEnv is the expressions' environment, keeping the macro calls (exists, filter,
// ...) in the syntax tree so that it can be written back as text.
var parseEnv = sync.OnceValues(func() (*cel.Env, error) {
	env, err := expr.Env()
	if err != nil {
		return nil, err
	}
	return env.Extend(cel.EnableMacroCallTracking())
})

var expressionType = reflect.TypeFor[flowv1.Expression]()

// canonicalExpressions rewrites, in place, every flowv1.Expression reachable from v.
func canonicalExpressions(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			canonicalExpressions(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				canonicalExpressions(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			canonicalExpressions(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			canonicalExpressions(e)
			v.SetMapIndex(k, e)
		}
	case reflect.String:
		if v.Type() == expressionType && v.CanSet() {
			v.SetString(canonicalCEL(v.String()))
		}
	}
}

// canonicalCEL is the unparsed text of src's syntax tree. An expression that does not
// parse is kept as written (its Journey is invalid and gets no revision anyway).
func canonicalCEL(src string) string {
	env, err := parseEnv()
	if err != nil {
		return src
	}
	ast, iss := env.Parse(src)
	if iss.Err() != nil {
		return src
	}
	out, err := cel.AstToString(ast)
	if err != nil {
		return src
	}
	return out
}

// canonicalNumbers writes the numbers of a decoded JSON value one way: integers
// without a fraction or exponent (1.0 and 1e0 are 1), others in Go's shortest form.
func canonicalNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = canonicalNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = canonicalNumbers(e)
		}
	case json.Number:
		if _, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return x
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return x
		}
		if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return json.Number(strconv.FormatInt(int64(f), 10))
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
	}
	return v
}
