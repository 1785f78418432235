package controller

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
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
	Value any    `json:"value"` // ignored by remove
}

// sessionStatusPatch is the patch from the status of before to the status of after,
// or nil when after's status should be written under the resourceVersion lock.
func sessionStatusPatch(before, after *flowv1.Session) (client.Patch, error) {
	if before.Status.Step == 0 {
		return nil, nil
	}
	old, err := asObject(&before.Status)
	if err != nil {
		return nil, err
	}
	cur, err := asObject(&after.Status)
	if err != nil {
		return nil, err
	}
	ops := []patchOp{{Op: "test", Path: "/status/step", Value: old["step"]}}
	if w, ok := old["writes"]; ok {
		ops = append(ops, patchOp{Op: "test", Path: "/status/writes", Value: w})
	}
	if r, ok := old["agentRetry"]; ok {
		ops = append(ops, patchOp{Op: "test", Path: "/status/agentRetry", Value: r})
	}
	ops = diffObjects(ops, "/status", old, cur)
	raw, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	return client.RawPatch(types.JSONPatchType, raw), nil
}

// asObject is v as a JSON object.
func asObject(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("status is not a JSON object: %w", err)
	}
	return m, nil
}

// diffObjects appends the operations that turn object old into cur at path, with the
// semantics of a merge patch (RFC 7386): objects are compared member by member,
// anything else (arrays included) is replaced whole when it differs. Members are
// visited in order, so the same change gives the same patch.
func diffObjects(ops []patchOp, path string, old, cur map[string]any) []patchOp {
	for _, k := range slices.Sorted(maps.Keys(old)) {
		if _, ok := cur[k]; !ok {
			ops = append(ops, patchOp{Op: "remove", Path: path + "/" + escapePointer(k)})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cur)) {
		p := path + "/" + escapePointer(k)
		o, had := old[k]
		switch {
		case !had:
			ops = append(ops, patchOp{Op: "add", Path: p, Value: cur[k]})
		case reflect.DeepEqual(o, cur[k]):
		default:
			om, oObj := o.(map[string]any)
			cm, cObj := cur[k].(map[string]any)
			if oObj && cObj {
				ops = diffObjects(ops, p, om, cm)
				continue
			}
			ops = append(ops, patchOp{Op: "replace", Path: p, Value: cur[k]})
		}
	}
	return ops
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escapePointer escapes a member name for a JSON pointer (RFC 6901).
func escapePointer(s string) string { return pointerEscaper.Replace(s) }
