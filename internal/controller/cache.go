package controller

import (
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// transformSession is the Session informer's cache transform: what the manager keeps of
// each Session it caches. A manager holds every Session of its shard, so this is most of
// its memory (docs/PERFORMANCE.md, "heap per Session").
//
// The reconciler steps from the cached Session and writes its status as a patch from
// it: a status field missing from the cache would be missing from the step's input,
// and a list missing an entry would be written back without it (a patch replaces a
// list whole). So the status is kept whole, and only what no step, trace or event
// reads is dropped:
//
//   - metadata.managedFields (as for every cached object): server-side apply's
//     bookkeeping, about a third of a small Session;
//   - the kubectl.kubernetes.io/last-applied-configuration annotation: kubectl apply's
//     copy of the whole spec as applied, messages and initial context included;
//   - the processed messages at the front of spec.messages, as kubectl journey say
//     drops them (DroppableMessages: all the processed ones but the message of a turn
//     still in progress), with spec.messagesDropped raised by as many; likewise the
//     processed outcomes, approvals and interventions (DroppableOutcomes,
//     DroppableApprovals, DroppableInterventions). The step reads only pending
//     messages, outcomes, approvals and interventions and the message of the
//     turn in progress, by number from the *Dropped origin, which is why any client may
//     drop the same prefix from the stored Session; the cached Session is one such
//     compaction of the stored one. The status patch never carries spec, so nothing
//     dropped here is written back.
//
// Two changes keep every value and only lay it out in less memory:
//
//   - lists are copied to their length: the JSON decoder grows a list by doubling, so
//     a decoded list holds up to twice the room it needs;
//   - strings that take few distinct values across Sessions (namespace, journey,
//     pathway, agent and tool names, revision, enum values, condition types, reasons
//     and messages) are interned (unique.Make): one copy shared by every Session.
//     Strings are immutable, so sharing them is invisible to readers.
func transformSession(obj any) (any, error) {
	s, ok := obj.(*flowv1.Session)
	if !ok {
		return obj, nil
	}
	s.ManagedFields = nil
	if _, ok := s.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		delete(s.Annotations, corev1.LastAppliedConfigAnnotation)
		if len(s.Annotations) == 0 {
			s.Annotations = nil
		}
	}
	dropProcessed(s)
	compactSession(s)
	return s, nil
}

var _ toolscache.TransformFunc = transformSession

// dropProcessed drops the processed prefix of spec.messages, spec.outcomes,
// spec.approvals and spec.interventions, raising the matching counter by as many:
// what kubectl journey say, outcome, approve and the intervention commands may drop
// from the stored Session.
func dropProcessed(s *flowv1.Session) {
	if n := int(s.DroppableMessages() - s.Spec.MessagesDropped); n > 0 {
		n = min(n, len(s.Spec.Messages))
		s.Spec.Messages = clipped(s.Spec.Messages[n:])
		s.Spec.MessagesDropped += int32(n)
	}
	if n := int(s.DroppableOutcomes() - s.Spec.OutcomesDropped); n > 0 {
		n = min(n, len(s.Spec.Outcomes))
		s.Spec.Outcomes = clipped(s.Spec.Outcomes[n:])
		s.Spec.OutcomesDropped += int32(n)
	}
	if n := int(s.DroppableApprovals() - s.Spec.ApprovalsDropped); n > 0 {
		n = min(n, len(s.Spec.Approvals))
		s.Spec.Approvals = clipped(s.Spec.Approvals[n:])
		s.Spec.ApprovalsDropped += int32(n)
	}
	if n := int(s.DroppableInterventions() - s.Spec.InterventionsDropped); n > 0 {
		n = min(n, len(s.Spec.Interventions))
		s.Spec.Interventions = clipped(s.Spec.Interventions[n:])
		s.Spec.InterventionsDropped += int32(n)
	}
}

// compactSession copies s's lists to their length and interns its low-cardinality
// strings.
//
//nolint:funlen // one field of the Session after another, in the order of its type
func compactSession(s *flowv1.Session) {
	in(&s.Namespace)
	in(&s.Spec.JourneyRef.Name)
	s.Spec.Messages = clipped(s.Spec.Messages)
	s.Spec.Outcomes = clipped(s.Spec.Outcomes)
	s.Spec.Approvals = clipped(s.Spec.Approvals)
	s.Spec.Interventions = clipped(s.Spec.Interventions)

	st := &s.Status
	in((*string)(&st.Phase))
	in(&st.CurrentPathway)
	in((*string)(&st.Confidence))
	in(&st.JourneyRevision)
	st.PathwayStack = clipped(st.PathwayStack)
	for i := range st.PathwayStack {
		in(&st.PathwayStack[i])
	}
	if t := st.Turn; t != nil {
		in((*string)(&t.Trigger))
		in((*string)(&t.Stage))
		in(&t.Pathway)
		in((*string)(&t.ResultType))
		t.ToolCalls = clipped(t.ToolCalls)
		for i := range t.ToolCalls {
			in(&t.ToolCalls[i].Tool)
			in((*string)(&t.ToolCalls[i].State))
		}
	}
	if d := st.LastDecision; d != nil {
		in(&d.Transition)
		in(&d.From)
		in(&d.To)
		in((*string)(&d.Action))
		in((*string)(&d.Source))
		in(&d.Agent)
		in((*string)(&d.Confidence))
		in((*string)(&d.State))
		d.AllowedDestinations = clipped(d.AllowedDestinations)
		for i := range d.AllowedDestinations {
			in(&d.AllowedDestinations[i])
		}
	}
	if e := st.PendingEffect; e != nil {
		compactEffect(e)
	}
	st.Journal = clipped(st.Journal)
	for i := range st.Journal {
		compactEffect(&st.Journal[i])
	}
	if t := st.LastTurn; t != nil {
		in((*string)(&t.Trigger))
		in(&t.Pathway)
		in((*string)(&t.FinishReason))
		in((*string)(&t.ResultType))
		in(&t.Transition)
		t.Failures = clipped(t.Failures)
		t.ToolCalls = clipped(t.ToolCalls)
		for i := range t.ToolCalls {
			in(&t.ToolCalls[i].Tool)
			in((*string)(&t.ToolCalls[i].State))
		}
	}
	st.ContextHistory = clipped(st.ContextHistory)
	for i := range st.ContextHistory {
		v := &st.ContextHistory[i]
		in(&v.Pathway)
		v.Keys = clipped(v.Keys)
		for k := range v.Keys {
			in(&v.Keys[k])
		}
	}
	st.History = clipped(st.History)
	for i := range st.History {
		h := &st.History[i]
		in(&h.From)
		in(&h.To)
		in((*string)(&h.Action))
		in((*string)(&h.Source))
		in(&h.Transition)
		in((*string)(&h.Confidence))
	}
	st.Transcript = clipped(st.Transcript)
	for i := range st.Transcript {
		x := &st.Transcript[i]
		in(&x.Pathway)
		x.ToolCalls = clipped(x.ToolCalls)
		for k := range x.ToolCalls {
			in(&x.ToolCalls[k].Tool)
			in((*string)(&x.ToolCalls[k].State))
		}
	}
	st.ToolCache = clipped(st.ToolCache)
	for i := range st.ToolCache {
		in(&st.ToolCache[i].Tool)
	}
	st.Conditions = clipped(st.Conditions)
	for i := range st.Conditions {
		compactCondition(&st.Conditions[i])
	}
}

func compactEffect(e *flowv1.EffectRecord) {
	in((*string)(&e.Kind))
	in(&e.Agent)
	r := &e.Result
	in(&r.Intent)
	in(&r.Destination)
	in((*string)(&r.Confidence))
	in((*string)(&r.ResultType))
	r.ToolCalls = clipped(r.ToolCalls)
	for i := range r.ToolCalls {
		in(&r.ToolCalls[i].Name)
	}
}

func compactCondition(c *metav1.Condition) {
	in(&c.Type)
	in((*string)(&c.Status))
	in(&c.Reason)
	in(&c.Message)
}

// in interns *s: the canonical copy of its value, shared by every Session that holds
// it, and freed once none does.
func in(s *string) {
	if *s != "" {
		*s = unique.Make(*s).Value()
	}
}

// clipped is l copied to its length, or l when it has no room to spare. A nil list
// stays nil and an empty one empty.
func clipped[T any](l []T) []T {
	switch {
	case cap(l) == len(l):
		return l
	case len(l) == 0:
		return []T{}
	}
	return append(make([]T, 0, len(l)), l...)
}
