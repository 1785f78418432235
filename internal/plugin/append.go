package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// appendBackoff spreads retries of concurrent appends to the same Session: each conflict
// means someone else's append landed first, so the next try sees it and goes after it.
var appendBackoff = wait.Backoff{Steps: 12, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 0.5}

// errAlreadyThere tells appendToSession that the item it would append is already in the
// list (an earlier try of the same append landed), so there is nothing to send.
var errAlreadyThere = errors.New("already appended")

// appendToSession appends one item to the spec list field ("messages", "outcomes",
// "approvals" or "interventions") of the Session key. build sees the latest Session and returns the item,
// or errAlreadyThere. The JSON patch carries the resourceVersion build saw, so it applies
// only to that exact object; a concurrent writer makes it fail with a conflict, and the
// append is built again on the fresh object. Lists are append-only, so an append never
// reorders or replaces what others sent. opts go with the patch (client.DryRunAll for a
// server dry run). It returns the Session as patched.
func appendToSession(ctx context.Context, c client.Client, key types.NamespacedName, field string,
	build func(s *flowv1alpha1.Session) (any, error), opts ...client.PatchOption) (*flowv1alpha1.Session, error) {
	var patched *flowv1alpha1.Session
	err := retry.RetryOnConflict(appendBackoff, func() error {
		s := &flowv1alpha1.Session{}
		if err := c.Get(ctx, key, s); err != nil {
			return fmt.Errorf("getting session %s: %w", describeKey(key), err)
		}
		item, err := build(s)
		if errors.Is(err, errAlreadyThere) {
			patched = s
			return nil
		}
		if err != nil {
			return err
		}
		patch, err := compactingPatch(s, field, item)
		if err != nil {
			return err
		}
		if err := c.Patch(ctx, s, client.RawPatch(types.JSONPatchType, patch), opts...); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("updating session %s: %w", describeKey(key), err)
		}
		patched = s
		return nil
	})
	if apierrors.IsConflict(err) {
		return nil, fmt.Errorf("session %s changed too often while appending to spec.%s; try again: %w", describeKey(key), field, err)
	}
	return patched, err
}

// list is spec.<field> of s as JSON values, how many of its entries were dropped,
// and how many the Session's validation lets be dropped (the processed ones).
func list(s *flowv1alpha1.Session, field string) (items []any, dropped, droppable int32) {
	switch field {
	case "messages":
		return anys(s.Spec.Messages), s.Spec.MessagesDropped, s.DroppableMessages()
	case "outcomes":
		return anys(s.Spec.Outcomes), s.Spec.OutcomesDropped, s.DroppableOutcomes()
	case "approvals":
		return anys(s.Spec.Approvals), s.Spec.ApprovalsDropped, s.DroppableApprovals()
	case "interventions":
		return anys(s.Spec.Interventions), s.Spec.InterventionsDropped, s.DroppableInterventions()
	}
	panic("unknown list " + field)
}

func anys[T any](l []T) []any {
	out := make([]any, len(l))
	for i := range l {
		out[i] = l[i]
	}
	return out
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// appendPatch is the JSON patch (RFC 6902) appending item to /spec/<field>, which has n
// items at resourceVersion rv. Replacing metadata.resourceVersion with the version the
// item was built from makes the update conditional: the API server answers 409 Conflict
// when the stored object has moved on. An empty list is absent from the JSON, so the
// first item creates it.
func appendPatch(rv, field string, n int, item any) ([]byte, error) {
	if rv == "" {
		return nil, errors.New("session has no resourceVersion")
	}
	ops := []jsonPatchOp{{Op: "replace", Path: "/metadata/resourceVersion", Value: rv}}
	if n == 0 {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/" + field, Value: []any{item}})
	} else {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/" + field + "/-", Value: item})
	}
	return json.Marshal(ops)
}

// compactingPatch is the JSON patch that appends item to spec.<field> of s (messages,
// outcomes, approvals or interventions) and, in the same update, drops the processed entries from its
// front, raising spec.<field>Dropped by as many (the Session's validation allows
// exactly that), so that the list holds only what is still pending and never
// outgrows its bound. Like appendPatch it is conditional on the resourceVersion s was
// read at: the status it counted processed entries from is the one the API server
// checks the drop against.
func compactingPatch(s *flowv1alpha1.Session, field string, item any) ([]byte, error) {
	items, dropped, droppable := list(s, field)
	drop := int(droppable - dropped)
	if drop <= 0 {
		return appendPatch(s.ResourceVersion, field, len(items), item)
	}
	if s.ResourceVersion == "" {
		return nil, errors.New("session has no resourceVersion")
	}
	drop = min(drop, len(items))
	kept := make([]any, 0, len(items)-drop+1)
	kept = append(kept, items[drop:]...)
	kept = append(kept, item)
	return json.Marshal([]jsonPatchOp{
		{Op: "replace", Path: "/metadata/resourceVersion", Value: s.ResourceVersion},
		{Op: "add", Path: "/spec/" + field, Value: kept},
		{Op: "add", Path: "/spec/" + field + "Dropped", Value: int(dropped) + drop},
	})
}
