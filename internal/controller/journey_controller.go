package controller

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/revision"
	"github.com/journeyops/journey-operator/internal/tools"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// indexPathwayRef indexes Journeys by the Pathway objects they reference.
const indexPathwayRef = ".spec.pathways.pathwayRef"

// JourneyReconciler resolves a Journey's Pathways, validates the graph, and snapshots
// each valid generation into an immutable ControllerRevision.
type JourneyReconciler struct {
	client.Client
	// APIReader reads Pathways live. The cache could miss a Pathway created just before
	// the Journey, while the Pathway's own event could arrive before the Journey is
	// cached and so wake nobody; a live read closes both windows. Journeys reconcile
	// rarely, so the extra reads are cheap.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	// Tools lists the journey's tool servers; nil means a tools.Caller reading Secrets
	// with APIReader.
	Tools *tools.Caller
	// Clock times a rollout's steps; nil means the real clock.
	Clock clock.PassiveClock
}

// +kubebuilder:rbac:groups=flow.journey.dev,resources=journeys,verbs=get;list;watch
// +kubebuilder:rbac:groups=flow.journey.dev,resources=journeys/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=flow.journey.dev,resources=pathways,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile validates a Journey, snapshots it, takes a step of its rollout, and writes
// its status at most once.
func (r *JourneyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileStatus(ctx, r.Client, req, &flowv1.Journey{},
		func(j *flowv1.Journey) *flowv1.JourneyStatus { return &j.Status }, func(ctx context.Context, j *flowv1.Journey) outcome {
			out := r.reconcile(ctx, j)
			if out.kind == transient || out.kind == terminal {
				return out
			}
			// A rollout goes on while the latest edit is invalid: readyRevision did not move.
			ro := r.rollout(ctx, j)
			switch {
			case ro.kind != requeue:
				if ro.kind != done {
					return ro
				}
				return out
			case out.kind == requeue && out.after < ro.after:
				return out
			}
			return ro
		})
}

// reconcile resolves and validates the Journey, snapshots a valid one, and says so in
// its status. An invalid one leaves readyRevision where it was: new Sessions keep
// starting on the last valid revision.
func (r *JourneyReconciler) reconcile(ctx context.Context, j *flowv1.Journey) outcome {
	j.Status.ObservedGeneration = j.Generation
	pathways, missing, err := r.resolve(ctx, j)
	if err != nil {
		return failed(err)
	}
	issues := missing
	if len(missing) == 0 {
		issues = engine.Validate(&j.Spec, pathways)
	}
	j.Status.Pathways = int32(len(pathways))
	if len(issues) > 0 {
		reason := flowv1.ReasonInvalid
		if len(missing) > 0 {
			reason = flowv1.ReasonPathwayNotFound
		}
		// A missing Pathway is fixed by creating it: the Pathway watch wakes us.
		return r.invalid(j, pathways, reason, issues)
	}

	schemas, retry := r.discover(ctx, j)
	raw, name, err := revision.Encode(j.Name, &revision.Data{Journey: j.Spec, Pathways: pathways, Tools: schemas})
	if err != nil {
		return failed(err)
	}
	if err := r.ensureRevision(ctx, j, name, raw); err != nil {
		return failed(err)
	}
	if j.Status.ReadyRevision != name {
		if j.Spec.Rollout != nil && j.Status.StableRevision != "" {
			r.Recorder.Eventf(j, nil, "Normal", "RevisionCreated", "Snapshot", "Revision %s is ready; spec.rollout rolls it out", name)
		} else {
			r.Recorder.Eventf(j, nil, "Normal", "RevisionCreated", "Snapshot", "Sessions now start on revision %s", name)
		}
	}
	j.Status.ReadyRevision = name
	j.Status.LatestRevision = name
	j.Status.Issues = nil
	r.setReady(j, metav1.ConditionTrue, flowv1.ReasonValid, fmt.Sprintf("%d pathways resolved; revision %s", len(pathways), name))
	if retry {
		return outcome{kind: requeue, after: toolServerRetry}
	}
	return outcome{}
}

// invalid records that the current generation, with the Pathways as they are now, is
// invalid: status.latestRevision names its snapshot (never stored), readyRevision
// stays, and the Ready condition and a Warning Event (once per invalid snapshot) say
// which revision still serves and why the latest does not.
func (r *JourneyReconciler) invalid(j *flowv1.Journey, pathways map[string]*flowv1.PathwaySpec, reason string, issues []string) outcome {
	_, latest, err := revision.Encode(j.Name, &revision.Data{Journey: j.Spec, Pathways: pathways})
	if err != nil {
		return failed(err)
	}
	if len(issues) > 64 {
		issues = issues[:64]
	}
	msg := strings.Join(issues, "; ")
	if j.Status.ReadyRevision != "" {
		msg = fmt.Sprintf("serving %s; %s is invalid: %s", j.Status.ReadyRevision, latest, msg)
	}
	if j.Status.LatestRevision != latest {
		r.Recorder.Eventf(j, nil, "Warning", reason, "Validate", "%s", truncate.Bytes(msg, maxNoteBytes, "..."))
	}
	j.Status.LatestRevision = latest
	j.Status.Issues = issues
	r.setReady(j, metav1.ConditionFalse, reason, msg)
	return outcome{}
}

// resolve fetches the Pathway objects of the Journey, by local name. It lists the
// references that do not exist as issues.
func (r *JourneyReconciler) resolve(ctx context.Context, j *flowv1.Journey) (map[string]*flowv1.PathwaySpec, []string, error) {
	pathways := make(map[string]*flowv1.PathwaySpec, len(j.Spec.Pathways))
	var missing []string
	for _, entry := range j.Spec.Pathways {
		var p flowv1.Pathway
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: j.Namespace, Name: entry.PathwayRef}, &p)
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, fmt.Sprintf("pathway %q: Pathway %q not found in namespace %q", entry.Name, entry.PathwayRef, j.Namespace))
		case err != nil:
			return nil, nil, err
		default:
			pathways[string(entry.Name)] = p.Spec.DeepCopy()
		}
	}
	return pathways, missing, nil
}

func (r *JourneyReconciler) ensureRevision(ctx context.Context, j *flowv1.Journey, name string, raw []byte) error {
	var existing appsv1.ControllerRevision
	err := r.Get(ctx, types.NamespacedName{Namespace: j.Namespace, Name: name}, &existing)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: j.Namespace,
			Labels:    map[string]string{revision.LabelJourney: j.Name},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: j.Generation,
	}
	if err := controllerutil.SetOwnerReference(j, rev, r.Scheme); err != nil {
		return err
	}
	if err := r.Create(ctx, rev); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func (r *JourneyReconciler) setReady(j *flowv1.Journey, status metav1.ConditionStatus, reason, msg string) {
	setValidity(&j.Status.Conditions, j.Generation, status, reason, msg)
}

// SetupWithManager registers the controller: Journeys, the Pathways they reference, and
// their ControllerRevisions.
func (r *JourneyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &flowv1.Journey{}, indexPathwayRef, func(o client.Object) []string {
		j := o.(*flowv1.Journey)
		refs := make([]string, 0, len(j.Spec.Pathways))
		for _, p := range j.Spec.Pathways {
			refs = append(refs, p.PathwayRef)
		}
		return refs
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &flowv1.Session{}, indexJourneyRevision, journeyRevisionIndex); err != nil {
		return err
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		// Annotations carry kubectl journey rollout promote and abort.
		For(&flowv1.Journey{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&appsv1.ControllerRevision{}).
		Watches(&flowv1.Session{}, handler.EnqueueRequestsFromMapFunc(r.journeyOfSession), builder.WithPredicates(sessionCounted)).
		Watches(&flowv1.Pathway{}, handler.EnqueueRequestsFromMapFunc(r.journeysForPathway),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("journey").
		Complete(r)
}

func (r *JourneyReconciler) journeysForPathway(ctx context.Context, o client.Object) []reconcile.Request {
	var list flowv1.JourneyList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexPathwayRef: o.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, j := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: j.Namespace, Name: j.Name}})
	}
	return reqs
}
