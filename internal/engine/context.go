package engine

import (
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// The context of a Session: what pathways accumulate (the merge rules are in
// values.go), what global transitions update, what a decision with messaging passes
// on, and the versions that let a detour's changes be undone.

// context returns the decoded context (an invalid stored context reads as empty).
func (r *run) context() map[string]any {
	if r.ctx == nil {
		r.ctx, _ = decodeJSON(r.st.Context)
		if r.ctx == nil {
			r.ctx = map[string]any{}
		}
	}
	return r.ctx
}

// commitContext makes next the context, keys being the top-level keys that may have
// changed. It records a context version holding what the change did (a delta, never
// the whole previous context), or fails with errContextTooLarge, leaving the context
// unchanged.
func (r *run) commitContext(next map[string]any, keys []string, pathway string) error {
	st := r.st
	base := r.context()
	size := sizeOf(next)
	if size > r.snap.lim.contextBytes {
		return fmt.Errorf("%w: %d bytes, over maxContextBytes %d", errContextTooLarge, size, r.snap.lim.contextBytes)
	}
	v, changed := contextDelta(base, next, keys)
	if !changed {
		return nil
	}
	st.ContextVersion++
	v.Version, v.Step, v.Pathway = st.ContextVersion, r.step, pathway
	st.ContextHistory = append(st.ContextHistory, v)
	r.trimContextHistory()
	st.Context = &apiextensionsv1.JSON{Raw: appendJSON(make([]byte, 0, size), next)}
	r.ctx = next
	return nil
}

// contextDelta is the version that takes base to next, looking at keys: a list that
// grew by appending records only the items appended (in appended); any other change
// records the value it replaced (in previous, null for a key that was absent). Either
// way the previous context is the next one with the delta undone (see undo), and a
// version costs what the change added, not the size of the context.
func contextDelta(base, next map[string]any, keys []string) (flowv1.ContextVersion, bool) {
	prev, added := map[string]any{}, map[string]any{}
	var changed []string
	for _, k := range keys {
		if slices.Contains(changed, k) {
			continue
		}
		old, had := base[k]
		nv, has := next[k]
		if had == has && equalValues(old, nv) {
			continue
		}
		changed = append(changed, k)
		if items, ok := appendedItems(old, nv); ok {
			added[k] = items
			continue
		}
		prev[k] = old
	}
	if len(changed) == 0 {
		return flowv1.ContextVersion{}, false
	}
	slices.Sort(changed)
	v := flowv1.ContextVersion{Keys: changed}
	if len(prev) > 0 {
		v.Previous = toJSON(prev)
	}
	if len(added) > 0 {
		v.Appended = toJSON(added)
	}
	return v, true
}

// appendedItems returns the items next adds at the end of the list old, when next is
// old with items appended.
func appendedItems(old, next any) ([]any, bool) {
	o, ok1 := old.([]any)
	n, ok2 := next.([]any)
	if !ok1 || !ok2 || len(o) == 0 || len(n) <= len(o) {
		return nil, false
	}
	for i := range o {
		if !equalValues(o[i], n[i]) {
			return nil, false
		}
	}
	return n[len(o):], true
}

// versionBytes is what a context version costs in status.
func versionBytes(v *flowv1.ContextVersion) int {
	n := contextVersionOverhead + len(v.Pathway)
	for _, k := range v.Keys {
		n += len(k) + 3
	}
	if v.Previous != nil {
		n += len(v.Previous.Raw)
	}
	if v.Appended != nil {
		n += len(v.Appended.Raw)
	}
	return n
}

// contextVersionOverhead is a context version's JSON without its keys and values.
const contextVersionOverhead = 64

// trimContextHistory keeps at most MaxContextVersions versions, taking at most
// flowv1.ContextHistoryBytes(maxContextBytes) in total; the newest version is always kept.
func (r *run) trimContextHistory() {
	h := r.st.ContextHistory
	limit := flowv1.ContextHistoryBytes(r.snap.lim.contextBytes)
	total := 0
	keep := 0
	for i := len(h) - 1; i >= 0 && keep < MaxContextVersions; i-- {
		n := versionBytes(&h[i])
		if keep > 0 && total+n > limit {
			break
		}
		total += n
		keep++
	}
	if keep < len(h) {
		r.st.ContextHistory = append([]flowv1.ContextVersion(nil), h[len(h)-keep:]...)
	}
}

// dropDetourContext undoes the context changes a detour made (returnBehavior
// preserveContext: false): the trailing context versions recorded in pathway.
func (r *run) dropDetourContext(pathway string) {
	st := r.st
	h := st.ContextHistory
	i := len(h)
	for i > 0 && h[i-1].Pathway == pathway {
		i--
	}
	if i == len(h) {
		return
	}
	ctx := r.context()
	for j := len(h) - 1; j >= i; j-- {
		ctx = undo(ctx, h[j])
	}
	keys := map[string]bool{}
	var all []string
	for _, v := range h[i:] {
		for _, k := range v.Keys {
			if !keys[k] {
				keys[k] = true
				all = append(all, k)
			}
		}
	}
	// Recorded as a new version of the pathway returned to, so it can be undone too.
	_ = r.commitContext(ctx, all, st.PathwayStack[len(st.PathwayStack)-1])
}

// undo returns the context before version v, given the context after it.
func undo(ctx map[string]any, v flowv1.ContextVersion) map[string]any {
	prev, _ := decodeJSON(v.Previous)
	added, _ := decodeJSON(v.Appended)
	out := make(map[string]any, len(ctx))
	for k, val := range ctx {
		out[k] = val
	}
	for _, k := range v.Keys {
		if items, ok := added[k].([]any); ok {
			if list, ok := out[k].([]any); ok && len(list) >= len(items) {
				out[k] = slices.Clone(list[:len(list)-len(items)])
				continue
			}
		}
		if p, ok := prev[k]; ok && p != nil {
			out[k] = p
		} else {
			delete(out, k)
		}
	}
	return out
}

// ContextAt reconstructs the context at version, from the context now and its
// recorded versions (the deltas). It fails when version is older than the oldest
// version kept, or newer than the current one.
func ContextAt(status *flowv1.SessionStatus, version int64) (map[string]any, error) {
	ctx, err := decodeJSON(status.Context)
	if err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = map[string]any{}
	}
	if version > status.ContextVersion || version < 0 {
		return nil, fmt.Errorf("context version %d: the Session is at version %d", version, status.ContextVersion)
	}
	h := status.ContextHistory
	oldest := status.ContextVersion
	if len(h) > 0 {
		oldest = h[0].Version - 1
	}
	if version < oldest {
		return nil, fmt.Errorf("context version %d is no longer kept (oldest kept: %d)", version, oldest)
	}
	for i := len(h) - 1; i >= 0 && h[i].Version > version; i-- {
		ctx = undo(ctx, h[i])
	}
	return ctx, nil
}

// accumulate merges the pathway's accumulate fields of outputs into the context. It
// reports whether the Session goes on: a context over maxContextBytes is a failure that
// leaves the context unchanged, and FailFast fails the Session.
func (r *run) accumulate(p *flowv1.PathwaySpec, outputs map[string]any) bool {
	if len(p.Accumulate) == 0 || len(outputs) == 0 {
		return true
	}
	upd := make(map[string]any, len(p.Accumulate))
	keys := make([]string, 0, len(p.Accumulate))
	for _, f := range p.Accumulate {
		if v, ok := outputs[f]; ok {
			upd[f] = v
			keys = append(keys, f)
		}
	}
	if len(upd) == 0 {
		return true
	}
	if err := r.commitContext(mergeObject(r.context(), upd), keys, r.st.CurrentPathway); err != nil {
		return r.contextTooLarge(r.st.CurrentPathway, err)
	}
	return true
}

// contextUpdate applies a global transition's context updates, as one context
// version, in pathway (the pathway the transition left). An update whose value does not
// decode is recorded and skipped; a Copy or Append from a key the context lacks does
// nothing. It reports whether the Session goes on (see accumulate).
func (r *run) contextUpdate(gt *flowv1.GlobalTransition, pathway string) bool {
	next := r.context()
	keys := make([]string, 0, len(gt.ContextUpdate))
	for _, u := range gt.ContextUpdate {
		var value any
		if u.Value != nil {
			v, err := decodeValue(u.Value.Raw)
			if err != nil {
				r.addFailure(flowv1.Failure{Source: flowv1.FailureSystem, Component: string(gt.Name), Kind: flowv1.FailureValidation,
					Message: fmt.Sprintf("contextUpdate %s: value: %v", u.Field, err)})
				continue
			}
			value = v
		}
		var ok bool
		if next, ok = applyUpdate(next, u, value); ok {
			keys = append(keys, u.Field)
		}
	}
	if err := r.commitContext(next, keys, pathway); err != nil {
		return r.contextTooLarge(pathway, err)
	}
	return true
}

// applyUpdate returns ctx with one context update applied (value is its decoded
// value), and whether it applied.
func applyUpdate(ctx map[string]any, u flowv1.ContextUpdate, value any) (map[string]any, bool) {
	switch u.Op {
	case flowv1.ContextSet:
		return with(ctx, u.Field, value), true
	case flowv1.ContextCopy:
		v, ok := ctx[u.From]
		if !ok {
			return ctx, false
		}
		return with(ctx, u.Field, v), true
	case flowv1.ContextAppend:
		if u.From != "" {
			v, ok := ctx[u.From]
			if !ok || v == nil {
				return ctx, false
			}
			value = v
		}
		var list []any
		switch cur := ctx[u.Field].(type) {
		case []any:
			list = cur
		case nil:
		default:
			list = []any{cur}
		}
		return with(ctx, u.Field, appendUnique(list, []any{value})), true
	}
	return ctx, false
}

func with(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for key, val := range m {
		out[key] = val
	}
	out[k] = v
	return out
}

func decodeValue(raw []byte) (any, error) {
	m, err := decodeObject(append(append([]byte(`{"v":`), raw...), '}'))
	if err != nil {
		return nil, err
	}
	return m["v"], nil
}

// passOutputs passes a pathway's outputs to the destination: context.messages.<pathway>.
func (r *run) passOutputs(from string, outputs map[string]any) {
	base := r.context()
	msgs := map[string]any{}
	if m, ok := base["messages"].(map[string]any); ok {
		msgs = with(m, from, nil)
	}
	var v any = map[string]any{}
	if outputs != nil {
		v = outputs
	}
	msgs[from] = v
	if err := r.commitContext(with(base, "messages", msgs), []string{"messages"}, from); err != nil {
		r.contextTooLarge(from, err)
	}
}

// contextTooLarge records a context change refused for its size under the journey's
// errorRecovery. It reports whether the Session goes on.
func (r *run) contextTooLarge(pathway string, err error) bool {
	return r.recoverable(flowv1.ReasonContextTooLarge, flowv1.Failure{Source: flowv1.FailurePolicy, Component: pathway, Kind: flowv1.FailurePolicyKind, Message: err.Error()})
}

func contains[T ~string](list []T, s string) bool {
	for _, v := range list {
		if string(v) == s {
			return true
		}
	}
	return false
}
