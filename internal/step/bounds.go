package step

import flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"

// MaxJournalBytes bounds status.journal: the oldest answers are dropped past it. The
// Session's byte bounds, this one among them, are computed in api/v1alpha1
// (Limits.MaxObjectBytes), where the admission webhook reads them too.
const MaxJournalBytes = flowv1.MaxJournalBytes
