package expr

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Context values come from JSON, where every number is a float64 in Go. Whole numbers
// behave as CEL ints, numbers with a fraction as doubles; ints and doubles compare with
// each other, but CEL adds, subtracts, multiplies and divides only numbers of one type.
func TestJSONNumbersInExpressions(t *testing.T) {
	var ctx map[string]any
	if err := json.Unmarshal([]byte(`{"count": 2, "ratio": 0.5, "items": [{"n": 3}], "big": 1e300}`), &ctx); err != nil {
		t.Fatal(err)
	}
	vars := Vars{Context: ctx}
	works := []struct {
		src  string
		want any
	}{
		{`context.count + 1`, float64(3)},
		{`context.count * 2 - 1`, float64(3)},
		{`double(context.count) + 1.0`, float64(3)},
		{`context.ratio + 1.0`, float64(1.5)},
		{`context.ratio * double(context.count)`, float64(1)},
		{`context.items[0].n + 1`, float64(4)},
		{`context.items.map(i, i.n + 1)`, []any{float64(4)}},
		{`context.count >= 2.0 && context.count < 2.5 && context.count == 2`, true},
		{`context.ratio < 1`, true},
		{`(has(context.missing) ? context.missing : 0) + 1`, float64(1)},
		{`int(context.ratio * 10.0) + context.count`, float64(7)},
		{`context.big > 1.0`, true},
		{`string(context.count)`, "2"},
	}
	for _, tt := range works {
		got, err := Eval(tt.src, vars)
		if err != nil {
			t.Errorf("Eval(%q): %v", tt.src, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Eval(%q) = %#v, want %#v", tt.src, got, tt.want)
		}
	}
	// What does not work, as documented: mixing an int and a double in arithmetic.
	for _, src := range []string{`context.count + 1.0`, `context.ratio + 1`} {
		if _, err := Eval(src, vars); err == nil {
			t.Errorf("Eval(%q): want a no-such-overload error", src)
		}
	}
}
