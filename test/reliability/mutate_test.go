package reliability

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// fuzzer mutates decoded manifests (maps, lists and scalars from JSON).
// Half the fuzzers are gentle: they keep every value's type, so more manifests pass
// the schema and reach the controllers.
type fuzzer struct {
	rng    *rand.Rand
	gentle bool
}

func newFuzzer(rng *rand.Rand) *fuzzer { return &fuzzer{rng: rng, gentle: rng.IntN(2) == 0} }

// celJunk are expressions that do not compile, fail at run time or cost too much.
var celJunk = []string{
	"(((", "1 / 0", "context.a.b.c.d", "int('x')", "size(message) > 'a'",
	"[1,2,3].map(x, [1,2,3].map(y, [1,2,3].map(z, x/0)))", "message.matches('(')", "true ? : false",
	"has(context)", "'a' + 1", "outputs.nothing.there", strings.Repeat("!", 5000) + "true",
	"dyn(context).all(k, dyn(context).all(j, k == j))",
}

// strange are scalars of every kind and size.
func (f *fuzzer) strange() any {
	switch f.rng.IntN(16) {
	case 0:
		return ""
	case 1:
		return strings.Repeat("z", 1+f.rng.IntN(70000))
	case 2:
		return "\u0000\uffff\u202e💥 " + fmt.Sprint(f.rng.Int())
	case 3:
		return -f.rng.Int64()
	case 4:
		return int64(math.MaxInt64)
	case 5:
		return 1e308
	case 6:
		return f.rng.IntN(2) == 0
	case 7:
		return nil
	case 8:
		return map[string]any{}
	case 9:
		return []any{}
	case 10:
		deep := any("bottom")
		for range 1 + f.rng.IntN(80) {
			deep = map[string]any{"d": deep}
		}
		return deep
	case 11:
		list := make([]any, 1+f.rng.IntN(1500))
		for i := range list {
			list[i] = fmt.Sprintf("item-%d", i)
		}
		return list
	case 12:
		return celJunk[f.rng.IntN(len(celJunk))]
	case 13:
		return "Not-A-Valid Name!"
	case 14:
		return 0.5 + f.rng.Float64()
	default:
		return fmt.Sprintf("value-%d", f.rng.IntN(100))
	}
}

// alike is a value of the same type as v: what a careless edit would write.
func (f *fuzzer) alike(v any) any {
	switch t := v.(type) {
	case string:
		switch f.rng.IntN(5) {
		case 0:
			return ""
		case 1:
			return t + t
		case 2:
			return strings.ToUpper(t)
		case 3:
			return celJunk[f.rng.IntN(len(celJunk))]
		default:
			return fmt.Sprintf("%s-%d", t, f.rng.IntN(10))
		}
	case int64, float64:
		return []any{int64(0), int64(-1), int64(1), int64(1 << 31), 0.5, int64(100000)}[f.rng.IntN(6)]
	case bool:
		return !t
	case []any:
		if len(t) > 0 {
			return t[:f.rng.IntN(len(t))]
		}
		return t
	case map[string]any:
		for k := range t {
			delete(t, k)
			break
		}
		return t
	}
	return f.strange()
}

// slot is a place in the tree: a map key or a list index.
type slot struct {
	m    map[string]any
	key  string
	l    []any
	i    int
	path string
}

func (s slot) get() any {
	if s.m != nil {
		return s.m[s.key]
	}
	return s.l[s.i]
}

func (s slot) set(v any) {
	if s.m != nil {
		s.m[s.key] = v
	} else {
		s.l[s.i] = v
	}
}

func slots(v any, path string, out *[]slot) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			*out = append(*out, slot{m: t, key: k, path: path + "." + k})
			slots(c, path+"."+k, out)
		}
	case []any:
		for i, c := range t {
			*out = append(*out, slot{l: t, i: i, path: fmt.Sprintf("%s[%d]", path, i)})
			slots(c, fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

// mutate applies n mutations under obj[root].
func (f *fuzzer) mutate(obj map[string]any, root string, n int) {
	for range n {
		var all []slot
		slots(obj[root], root, &all)
		if len(all) == 0 {
			obj[root] = f.strange()
			continue
		}
		s := all[f.rng.IntN(len(all))]
		expr := strings.Contains(strings.ToLower(s.key), "expression") || s.key == "condition" || s.key == "complete" || s.key == "outcome" || s.key == "when"
		switch op := f.rng.IntN(8); {
		case op >= 6 || (f.gentle && op >= 1 && !(expr && op < 3)):
			s.set(f.alike(s.get()))
		case expr && op < 3:
			s.set(celJunk[f.rng.IntN(len(celJunk))])
		case op == 0 && s.m != nil:
			delete(s.m, s.key)
		case op == 1:
			if m, ok := s.get().(map[string]any); ok {
				m[fmt.Sprintf("unknown%d", f.rng.IntN(9))] = f.strange()
				continue
			}
			s.set(f.strange())
		case op == 2:
			if l, ok := s.get().([]any); ok && len(l) > 0 {
				s.set(append(l, l[f.rng.IntN(len(l))]))
				continue
			}
			s.set(f.strange())
		default:
			s.set(f.strange())
		}
	}
}
