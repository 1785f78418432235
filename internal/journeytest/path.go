package journeytest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// A path selects a value in the Session status: field names separated by dots, list
// indexes in brackets, and names that are not identifiers quoted in brackets:
// context.rejected_doctors[0].name, lastTurn.outputs["copay amount"].
type path []segment

type segment struct {
	name  string
	index int
	isIdx bool
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func parsePath(s string) (path, error) {
	var p path
	i := 0
	expectName := true
	for i < len(s) {
		switch {
		case s[i] == '[':
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unclosed [ at %d", i)
			}
			inner := s[i+1 : i+end]
			if len(inner) >= 2 && (inner[0] == '"' || inner[0] == '\'') && inner[len(inner)-1] == inner[0] {
				p = append(p, segment{name: inner[1 : len(inner)-1]})
			} else {
				n, err := strconv.Atoi(inner)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("[%s] is neither a list index nor a quoted name", inner)
				}
				p = append(p, segment{index: n, isIdx: true})
			}
			i += end + 1
			expectName = false
		case s[i] == '.':
			if expectName {
				return nil, fmt.Errorf("empty name at %d", i)
			}
			i++
			expectName = true
			if i == len(s) {
				return nil, fmt.Errorf("ends with a dot")
			}
		default:
			if !expectName {
				return nil, fmt.Errorf("expected . or [ at %d", i)
			}
			j := i
			for j < len(s) && s[j] != '.' && s[j] != '[' {
				j++
			}
			p = append(p, segment{name: s[i:j]})
			i = j
			expectName = false
		}
	}
	if len(p) == 0 {
		return nil, fmt.Errorf("empty path")
	}
	return p, nil
}

func (p path) String() string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.isIdx:
			fmt.Fprintf(&b, "[%d]", s.index)
		case identifier.MatchString(s.name):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.name)
		default:
			fmt.Fprintf(&b, "[%q]", s.name)
		}
	}
	return b.String()
}

// lookup returns the value at p in v (decoded JSON), and whether it exists.
func (p path) lookup(v any) (any, bool) {
	for _, s := range p {
		switch x := v.(type) {
		case map[string]any:
			if s.isIdx {
				return nil, false
			}
			val, ok := x[s.name]
			if !ok {
				return nil, false
			}
			v = val
		case []any:
			if !s.isIdx || s.index >= len(x) {
				return nil, false
			}
			v = x[s.index]
		default:
			return nil, false
		}
	}
	return v, true
}

// toJSONValue converts a value to its decoded-JSON form (numbers as float64).
func toJSONValue(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return v
	}
	return out
}

func equalJSON(a, b any) bool {
	return reflect.DeepEqual(toJSONValue(a), toJSONValue(b))
}

func compactJSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}
