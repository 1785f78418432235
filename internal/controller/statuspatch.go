package controller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// A Session's status is written with a JSON patch conditioned on the status the step
// read, not on the whole object's resourceVersion: the patch first tests
// status.writes (the count of the controller's status writes, which every write
// raises: writeSessionStatus), status.step (and status.agentRetry, when set), then
// changes what the step changed. A status written by an operator that did not count
// its writes yet has no writes to test; its next write adds the count.
// A message, outcome or approval a user adds while a model call is in flight changes
// the spec, not those fields, so the step's write still applies and the model's answer
// is kept; only another status writer (our own earlier write not yet in the cache) can
// make it fail, as a conflict. A Session whose status has no step yet is written under
// the resourceVersion lock, as the other reconcilers write.

// patchOp is one JSON patch (RFC 6902) operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"` // ignored by remove; json.RawMessage when diffed
}

// sessionStatusPatch is the patch from the status of before to the status of after,
// or nil when after's status should be written under the resourceVersion lock.
//
// Both statuses are encoded once. Members are compared by their encoded bytes
// (encoding/json writes equal values as equal bytes: struct fields in their order,
// map keys sorted) and only objects that differ are split further, so building the
// patch costs the two encodings and a scan of their bytes, nothing decoded.
func sessionStatusPatch(before, after *flowv1.Session) (client.Patch, error) {
	if before.Status.Step == 0 {
		return nil, nil
	}
	oldRaw, err := json.Marshal(&before.Status)
	if err != nil {
		return nil, err
	}
	curRaw, err := json.Marshal(&after.Status)
	if err != nil {
		return nil, err
	}
	old, err := members(oldRaw)
	if err != nil {
		return nil, err
	}
	cur, err := members(curRaw)
	if err != nil {
		return nil, err
	}
	var p patchWriter
	p.buf.Grow(len(curRaw) + 256)
	p.buf.WriteByte('[')
	p.op("test", "/status/step", old.get("step"))
	if w := old.get("writes"); w != nil {
		p.op("test", "/status/writes", w)
	}
	if r := old.get("agentRetry"); r != nil {
		p.op("test", "/status/agentRetry", r)
	}
	if err := p.diff("/status", old, cur); err != nil {
		return nil, err
	}
	p.buf.WriteByte(']')
	return client.RawPatch(types.JSONPatchType, p.buf.Bytes()), nil
}

// patchWriter writes a JSON patch (RFC 6902), one operation after another.
type patchWriter struct {
	buf bytes.Buffer
	n   int
}

// op writes the operation op at path with value (nil: none, for remove). value is
// written as it is: encoded by encoding/json, so valid and compact.
func (p *patchWriter) op(op, path string, value []byte) {
	if p.n > 0 {
		p.buf.WriteByte(',')
	}
	p.n++
	p.buf.WriteString(`{"op":"`)
	p.buf.WriteString(op)
	p.buf.WriteString(`","path":`)
	quoted, _ := json.Marshal(path) // a string always encodes
	p.buf.Write(quoted)
	if value != nil {
		p.buf.WriteString(`,"value":`)
		p.buf.Write(value)
	}
	p.buf.WriteByte('}')
}

// diff writes the operations that turn object old into cur at path, with the
// semantics of a merge patch (RFC 7386): objects are compared member by member,
// anything else (arrays included) is replaced whole when it differs. Removals come
// first, then members in the order of their names, so the same change gives the same
// patch.
func (p *patchWriter) diff(path string, old, cur object) error {
	for _, m := range old {
		if cur.get(m.name) == nil {
			p.op("remove", path+"/"+escapePointer(m.name), nil)
		}
	}
	for _, m := range cur {
		at := path + "/" + escapePointer(m.name)
		o := old.get(m.name)
		switch {
		case o == nil:
			p.op("add", at, m.value)
		case bytes.Equal(o, m.value):
		case o[0] == '{' && m.value[0] == '{':
			om, err := members(o)
			if err != nil {
				return err
			}
			cm, err := members(m.value)
			if err != nil {
				return err
			}
			if err := p.diff(at, om, cm); err != nil {
				return err
			}
		default:
			p.op("replace", at, m.value)
		}
	}
	return nil
}

// object is a JSON object's members, sorted by name.
type object []member

// member is one member of a JSON object: its name and its value as encoded.
type member struct {
	name  string
	value []byte
}

// get is the encoded value of member name, nil when there is none.
func (o object) get(name string) []byte {
	i, ok := slices.BinarySearchFunc(o, name, func(m member, name string) int { return strings.Compare(m.name, name) })
	if !ok {
		return nil
	}
	return o[i].value
}

// members splits raw, a JSON object as encoding/json writes it (valid and compact),
// into its members, sorted by name; the values share raw's bytes.
func members(raw []byte) (object, error) {
	bad := func() (object, error) {
		return nil, fmt.Errorf("status is not a compact JSON object: %.64q", raw)
	}
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return bad()
	}
	var out object
	sorted := true
	for i := 1; i < len(raw)-1; {
		// A name, a colon, a value, then a comma or the end.
		end := stringEnd(raw, i)
		if end < 0 || end+1 >= len(raw) || raw[end] != ':' {
			return bad()
		}
		name, err := memberName(raw[i:end])
		if err != nil {
			return nil, err
		}
		start := end + 1
		stop := valueEnd(raw, start)
		if stop <= start || stop > len(raw)-1 {
			return bad()
		}
		if n := len(out); n > 0 && out[n-1].name >= name {
			sorted = false
		}
		out = append(out, member{name: name, value: raw[start:stop:stop]})
		i = stop
		if raw[i] == ',' {
			if i++; i == len(raw)-1 {
				return bad()
			}
		}
	}
	if !sorted {
		slices.SortFunc(out, func(a, b member) int { return strings.Compare(a.name, b.name) })
	}
	return out, nil
}

// memberName is the name the JSON string s (with its quotes) encodes.
func memberName(s []byte) (string, error) {
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s[1 : len(s)-1]), nil
	}
	var name string
	err := json.Unmarshal(s, &name)
	return name, err
}

// stringEnd is the index just after the JSON string starting at raw[i], -1 when there
// is none.
func stringEnd(raw []byte, i int) int {
	if i >= len(raw) || raw[i] != '"' {
		return -1
	}
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd is the index just after the compact JSON value starting at raw[i], -1
// when it does not end.
func valueEnd(raw []byte, i int) int {
	depth := 0
	for j := i; j < len(raw); j++ {
		switch raw[j] {
		case '"':
			if j = stringEnd(raw, j); j < 0 {
				return -1
			}
			j--
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j // the end of the enclosing object
			}
			depth--
		case ',':
			if depth == 0 {
				return j
			}
		}
		if depth == 0 && j+1 < len(raw) && (raw[j+1] == ',' || raw[j+1] == '}' || raw[j+1] == ']') {
			return j + 1
		}
	}
	return -1
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escapePointer escapes a member name for a JSON pointer (RFC 6901).
func escapePointer(s string) string { return pointerEscaper.Replace(s) }
