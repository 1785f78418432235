package audit

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Sink keeps audit records. When Write returns nil the records are kept for good (a
// file synced to disk, a collector that answered); an error means some may not be,
// and the same records are written again later with the same ids, so a sink
// de-duplicates by id.
type Sink interface {
	Write(ctx context.Context, records []Record) error
}

// Trail writes the audit records of the Sessions one manager steps, each status
// write's records after the write and before the Session takes its next step.
//
// How no record is lost, with no API write of its own: the records of a status
// write are derived from that status and from its cursor (status.audit, what the
// sink had acknowledged before it), so they can be derived again at any time from
// the Session alone. After a write the Trail writes its records and remembers, in
// memory, the cursor of the status written. The next status write carries that
// cursor in status.audit. A manager that stops before the sink acknowledged a write's
// records finds, after its restart, status.audit behind status.step and writes the
// records after status.audit again, with the same ids. A Session never takes its next
// step before the records of its last write are acknowledged (Sync fails, the
// reconcile is retried with backoff), so at most one write's records are ever
// outstanding.
type Trail struct {
	// Sink keeps the records.
	Sink Sink
	// Redact masks a Journey's redaction patterns in the records about a Session;
	// nil leaves them as they are.
	Redact func(ctx context.Context, s *flowv1.Session) (*Redactor, error)

	// acked holds, per Session, the cursor of the last status whose records the
	// sink acknowledged.
	acked sync.Map // types.NamespacedName -> ackedCursor
}

type ackedCursor struct {
	uid    types.UID
	cursor *flowv1.AuditCursor
}

// Sync writes the records of s's status that its sink has not acknowledged yet:
// those after status.audit, or after what this Trail remembers acknowledging when
// that is further. A nil Trail writes nothing.
func (t *Trail) Sync(ctx context.Context, s *flowv1.Session) error {
	if t == nil {
		return nil
	}
	from := s.Status.Audit
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	if v, ok := t.acked.Load(key); ok && v.(ackedCursor).uid == s.UID {
		if mem := v.(ackedCursor).cursor; from == nil || mem.AcknowledgedStep > from.AcknowledgedStep {
			from = mem
		}
	}
	if from != nil && from.AcknowledgedStep >= s.Status.Step {
		return nil
	}
	if recs := Records(s, from); len(recs) > 0 {
		if err := t.write(ctx, s, recs); err != nil {
			return err
		}
	}
	t.acked.Store(key, ackedCursor{uid: s.UID, cursor: CursorOf(&s.Status)})
	return nil
}

// Cursor is what the next status write of s carries in status.audit: the cursor of
// the last status of s whose records the sink acknowledged (nil for none known).
func (t *Trail) Cursor(s *flowv1.Session) *flowv1.AuditCursor {
	if t == nil {
		return nil
	}
	if v, ok := t.acked.Load(types.NamespacedName{Namespace: s.Namespace, Name: s.Name}); ok && v.(ackedCursor).uid == s.UID {
		return v.(ackedCursor).cursor.DeepCopy()
	}
	return s.Status.Audit.DeepCopy()
}

// Forget drops what the Trail remembers of a Session that is gone.
func (t *Trail) Forget(key types.NamespacedName) {
	if t != nil {
		t.acked.Delete(key)
	}
}

// Write writes records about s (an archive, an erasure), redacted.
func (t *Trail) Write(ctx context.Context, s *flowv1.Session, recs ...Record) error {
	if t == nil {
		return nil
	}
	return t.write(ctx, s, recs)
}

func (t *Trail) write(ctx context.Context, s *flowv1.Session, recs []Record) error {
	if t.Redact != nil {
		r, err := t.Redact(ctx, s)
		if err != nil {
			return fmt.Errorf("audit: redaction patterns of Session %s/%s: %w", s.Namespace, s.Name, err)
		}
		for i := range recs {
			r.Record(&recs[i])
		}
	}
	if err := t.Sink.Write(ctx, recs); err != nil {
		return fmt.Errorf("audit: writing %d records of Session %s/%s: %w", len(recs), s.Namespace, s.Name, err)
	}
	return nil
}
