package expr

import (
	"reflect"
	"testing"
)

func TestEval(t *testing.T) {
	vars := Vars{
		Context: map[string]any{"escalation_count": float64(3), "rejected": []any{"dr-smith"}},
		Message: "I don't want Dr. Smith",
		Outputs: map[string]any{"failures": float64(7)},
		Session: map[string]any{"pathway": "booking", "iteration": int64(2)},
	}
	tests := []struct {
		src  string
		want any
	}{
		{`context.escalation_count >= 3`, true},
		{`outputs.failures > 5`, true},
		{`message.lowerAscii().contains("don't want")`, true},
		{`session.pathway == "booking" && session.iteration == 2`, true},
		{`"dr-smith" in context.rejected`, true},
		{`{"name": "Dr. Jones", "slots": [1, 2]}`, map[string]any{"name": "Dr. Jones", "slots": []any{float64(1), float64(2)}}},
		{`has(context.missing) ? 1 : 0`, float64(0)},
	}
	for _, tt := range tests {
		got, err := Eval(tt.src, vars)
		if err != nil {
			t.Fatalf("Eval(%q): %v", tt.src, err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Eval(%q) = %#v, want %#v", tt.src, got, tt.want)
		}
	}
}

func TestErrors(t *testing.T) {
	if _, err := Compile(`context.`); err == nil {
		t.Error("Compile of a syntax error: want an error")
	}
	if _, err := Bool(`"not a bool"`, Vars{}); err == nil {
		t.Error("Bool of a string: want an error")
	}
	if _, err := Eval(`context.nope.deeper`, Vars{}); err == nil {
		t.Error("Eval of a missing key: want an error")
	}
	// A runaway comprehension hits the cost limit instead of spinning.
	if _, err := Eval(`[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, a+b+c+d+e+f > 0))))))`, Vars{}); err == nil {
		t.Error("a comprehension of 10^6 steps: want a cost limit error")
	}
}
