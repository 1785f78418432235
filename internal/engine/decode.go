package engine

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// parseJSON decodes a JSON document into the values encoding/json would produce for an
// `any` (map[string]any, []any, string, float64, bool, nil), several times faster. It
// reports false on anything it does not handle exactly like encoding/json (invalid
// input, invalid UTF-8, lone surrogates, very deep nesting); callers then fall back to
// encoding/json, which also gives the error.
func parseJSON(data []byte) (any, bool) {
	p := parser{b: data}
	p.space()
	v, ok := p.value(0)
	if !ok {
		return nil, false
	}
	p.space()
	return v, p.i == len(p.b)
}

type parser struct {
	b []byte
	i int
}

const maxDepth = 1000

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, bool) {
	if p.i >= len(p.b) || depth > maxDepth {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	}
	return nil, false
}

// object parses an object at p.i (a '{').
func (p *parser) object(depth int) (any, bool) {
	m := map[string]any{}
	ok := p.members('}', func() bool {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return false
		}
		k, ok := p.str()
		if !ok {
			return false
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return false
		}
		p.i++
		p.space()
		v, ok := p.value(depth + 1)
		m[k] = v
		return ok
	})
	if !ok {
		return nil, false
	}
	return m, true
}

// array parses an array at p.i (a '[').
func (p *parser) array(depth int) (any, bool) {
	list := []any{}
	ok := p.members(']', func() bool {
		v, ok := p.value(depth + 1)
		list = append(list, v)
		return ok
	})
	if !ok {
		return nil, false
	}
	return list, true
}

// members parses the members of an object or array whose opening byte is at p.i, up
// to its closing byte end: member parses one, at p.i after spaces, and reports whether
// it was valid; members are separated by ','.
func (p *parser) members(end byte, member func() bool) bool {
	p.i++
	p.space()
	if p.i < len(p.b) && p.b[p.i] == end {
		p.i++
		return true
	}
	for {
		p.space()
		if !member() {
			return false
		}
		p.space()
		if p.i >= len(p.b) {
			return false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case end:
			p.i++
			return true
		default:
			return false
		}
	}
}

func (p *parser) literal(lit string) bool {
	if len(p.b)-p.i < len(lit) || string(p.b[p.i:p.i+len(lit)]) != lit {
		return false
	}
	p.i += len(lit)
	return true
}

func (p *parser) number() (any, bool) {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(p.b) && p.b[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	raw := p.b[start:p.i]
	f, err := strconv.ParseFloat(unsafe.String(&raw[0], len(raw)), 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

// str parses a string at p.i (a '"').
func (p *parser) str() (string, bool) {
	p.i++
	start := p.i
	// Fast path: no escapes, ASCII or valid UTF-8.
	ascii := true
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			s := p.b[start:p.i]
			p.i++
			if !ascii && !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		p.i++
	}
	if p.i >= len(p.b) {
		return "", false
	}
	return p.escaped(start)
}

// escaped parses the rest of a string that has escapes, from its start; p.i is at the
// first backslash.
func (p *parser) escaped(start int) (string, bool) {
	out := make([]byte, 0, p.i-start+16)
	out = append(out, p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(out) {
				return "", false
			}
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		p.i++
		var ok bool
		if out, ok = p.escape(out); !ok {
			return "", false
		}
	}
	return "", false
}

// escape appends the character of the escape at p.i (after its backslash) to out.
func (p *parser) escape(out []byte) ([]byte, bool) {
	if p.i >= len(p.b) {
		return out, false
	}
	e := p.b[p.i]
	p.i++
	switch e {
	case '"', '\\', '/':
		return append(out, e), true
	case 'b':
		return append(out, '\b'), true
	case 'f':
		return append(out, '\f'), true
	case 'n':
		return append(out, '\n'), true
	case 'r':
		return append(out, '\r'), true
	case 't':
		return append(out, '\t'), true
	case 'u':
		r, ok := p.hex4()
		if !ok {
			return out, false
		}
		if utf16.IsSurrogate(r) {
			if p.i+1 >= len(p.b) || p.b[p.i] != '\\' || p.b[p.i+1] != 'u' {
				return out, false
			}
			p.i += 2
			r2, ok := p.hex4()
			if !ok {
				return out, false
			}
			r = utf16.DecodeRune(r, r2)
			if r == utf8.RuneError {
				return out, false
			}
		}
		return utf8.AppendRune(out, r), true
	}
	return out, false
}

func (p *parser) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.i += 4
	return r, true
}
