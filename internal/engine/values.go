package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Context values are plain JSON values as encoding/json decodes them: map[string]any,
// []any, string, float64, bool and nil (int, int32 and int64 are accepted too). They
// are treated as immutable: a merge builds new maps and lists along the paths it
// changes and shares the rest, so no input of Step is ever modified.

// decodeObject decodes a JSON object. Empty or null input is an empty object.
func decodeObject(raw []byte) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	v, ok := parseJSON(raw)
	if !ok {
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a JSON object, got %s", kindOf(v))
	}
	return m, nil
}

func decodeJSON(j *apiextensionsv1.JSON) (map[string]any, error) {
	if j == nil {
		return map[string]any{}, nil
	}
	return decodeObject(j.Raw)
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return "a number"
}

// encodeJSON encodes v as canonical JSON: object keys sorted, no HTML escaping, no
// insignificant white space.
func encodeJSON(v any) []byte {
	return appendJSON(make([]byte, 0, sizeOf(v)), v)
}

func toJSON(v map[string]any) *apiextensionsv1.JSON {
	if v == nil {
		return nil
	}
	return &apiextensionsv1.JSON{Raw: encodeJSON(v)}
}

func appendJSON(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, x)
	case string:
		return appendString(b, x)
	case float64:
		return appendFloat(b, x)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case int32:
		return strconv.AppendInt(b, int64(x), 10)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e)
		}
		return append(b, ']')
	case map[string]any:
		var arr [16]string
		keys := arr[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendJSON(b, x[k])
		}
		return append(b, '}')
	}
	// Anything else goes through encoding/json (never produced by the engine).
	raw, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// appendFloat formats like encoding/json. NaN and infinities, which JSON cannot hold,
// become null.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 && (f != 0 || !math.Signbit(f)) {
		return strconv.AppendInt(b, int64(f), 10)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// sizeOf is len(encodeJSON(v)), computed without building the encoding.
func sizeOf(v any) int {
	switch x := v.(type) {
	case nil:
		return 4
	case bool:
		if x {
			return 4
		}
		return 5
	case string:
		return stringSize(x)
	case float64:
		return floatSize(x)
	case int:
		var buf [24]byte
		return len(strconv.AppendInt(buf[:0], int64(x), 10))
	case int32:
		var buf [24]byte
		return len(strconv.AppendInt(buf[:0], int64(x), 10))
	case int64:
		var buf [24]byte
		return len(strconv.AppendInt(buf[:0], x, 10))
	case []any:
		n := 2
		if len(x) > 1 {
			n += len(x) - 1
		}
		for _, e := range x {
			n += sizeOf(e)
		}
		return n
	case map[string]any:
		n := 2
		if len(x) > 1 {
			n += len(x) - 1
		}
		for k, e := range x {
			n += stringSize(k) + 1 + sizeOf(e)
		}
		return n
	}
	return len(appendJSON(nil, v))
}

// asciiSize is the encoded size of each ASCII byte in a JSON string.
var asciiSize = func() (t [utf8.RuneSelf]uint8) {
	for c := range t {
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			t[c] = 2
		case c < 0x20:
			t[c] = 6
		default:
			t[c] = 1
		}
	}
	return t
}()

func stringSize(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			n += int(asciiSize[c])
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// floatSize is len(appendFloat(nil, f)), with a fast path for integral values.
func floatSize(f float64) int {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 && (f != 0 || !math.Signbit(f)) {
		i := int64(f)
		n := 1
		if i < 0 {
			n++
			i = -i
		}
		for i >= 10 {
			i /= 10
			n++
		}
		return n
	}
	var buf [32]byte
	return len(appendFloat(buf[:0], f))
}

// equalValues reports whether two JSON values are equal (numbers by value).
func equalValues(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equalValues(v, w) {
				return false
			}
		}
		return true
	}
	fa, oka := number(a)
	fb, okb := number(b)
	return oka && okb && fa == fb
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	return 0, false
}

// mergeObject merges upd into base with the accumulation rules and returns
// the result; base and upd are not modified:
//
//   - a key absent from base is set;
//   - two lists append: the items of upd's list that are not already in base's list
//     (nor earlier in upd's list) are added in order; items are compared as JSON, so
//     lists of objects de-duplicate too;
//   - two objects deep-merge with these same rules;
//   - anything else (scalars, a type change) is replaced by upd's value.
func mergeObject(base, upd map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(upd))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range upd {
		out[k] = mergeValue(base[k], v)
	}
	return out
}

func mergeValue(base, upd any) any {
	switch b := base.(type) {
	case []any:
		if u, ok := upd.([]any); ok {
			return appendUnique(b, u)
		}
	case map[string]any:
		if u, ok := upd.(map[string]any); ok {
			return mergeObject(b, u)
		}
	}
	return upd
}

// appendUnique returns base followed by the items of add not yet present.
func appendUnique(base, add []any) []any {
	if len(add) == 0 {
		return base
	}
	out := make([]any, len(base), len(base)+len(add))
	copy(out, base)
	if len(add) <= 8 || len(base)*len(add) <= 4096 {
		for _, v := range add {
			if !containsValue(out, v) {
				out = append(out, v)
			}
		}
		return out
	}
	seen := make(map[string]struct{}, len(base)+len(add))
	var buf []byte
	for _, v := range base {
		buf = appendJSON(buf[:0], v)
		seen[string(buf)] = struct{}{}
	}
	for _, v := range add {
		buf = appendJSON(buf[:0], v)
		if _, ok := seen[string(buf)]; ok {
			continue
		}
		seen[string(buf)] = struct{}{}
		out = append(out, v)
	}
	return out
}

func containsValue(list []any, v any) bool {
	for _, e := range list {
		if equalValues(e, v) {
			return true
		}
	}
	return false
}

// errContextTooLarge is returned when a change would make the context larger than
// maxContextBytes. The context is then left unchanged.
var errContextTooLarge = errors.New("context too large")
