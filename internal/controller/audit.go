package controller

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/audit"
)

// redactors are the compiled redaction patterns of Journey revisions, by
// namespace/revision (a revision never changes).
var redactors sync.Map

// redactor is the Redactor of the Journey revision s runs on: its spec.redact. A
// Session not pinned to a revision yet has nothing to redact. When the revision
// cannot be read, nothing is written (fail closed): the write is retried.
func (r *SessionReconciler) redactor(ctx context.Context, s *flowv1.Session) (*audit.Redactor, error) {
	rev := s.Status.JourneyRevision
	if rev == "" {
		return nil, nil
	}
	key := s.Namespace + "/" + rev
	if x, ok := redactors.Load(key); ok {
		return x.(*audit.Redactor), nil
	}
	snap, err := r.snapshots.Get(ctx, r.Client, s.Namespace, rev)
	if apierrors.IsNotFound(err) {
		snap, err = r.snapshots.Get(ctx, r.APIReader, s.Namespace, rev)
	}
	if err != nil {
		return nil, err
	}
	x, err := audit.NewRedactor(snap.Journey().Redact)
	if err != nil {
		return nil, err
	}
	redactors.Store(key, x)
	return x, nil
}
