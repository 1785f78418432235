package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/budget"
)

// DefaultBudgetFlush is how often a Budget's status is written while its Sessions
// spend: the ledger reserves and settles in memory, and Budget status follows in
// batches, so a model call costs no write of the Budget.
const DefaultBudgetFlush = 10 * time.Second

// BudgetReconciler writes each Budget's status from the manager's ledger: what the
// selected Sessions spent and hold in the current window, at most once per Flush,
// and at the window's end. Reading the Budget also applies a changed limit to the
// ledger, which wakes the Sessions that waited for room.
type BudgetReconciler struct {
	client.Client
	Ledger   *budget.Ledger
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// Flush is how often a Budget's status is written while it changes (default
	// DefaultBudgetFlush).
	Flush time.Duration
}

// +kubebuilder:rbac:groups=flow.journey.dev,resources=budgets,verbs=get;list;watch
// +kubebuilder:rbac:groups=flow.journey.dev,resources=budgets/status,verbs=get;update;patch

// Reconcile writes Budget req's status from the ledger and requeues at the next flush
// or the window's end, whichever comes first.
func (r *BudgetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b flowv1.Budget
	if err := r.Get(ctx, req.NamespacedName, &b); err != nil {
		if apierrors.IsNotFound(err) {
			r.Ledger.Forget(req.NamespacedName)
			budgetMetrics.forget(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.Clock.Now()
	before := b.DeepCopy()
	snap, err := r.Ledger.Snapshot(ctx, &b, now)
	if err != nil {
		setBudgetCondition(&b, flowv1.ConditionReady, metav1.ConditionFalse, flowv1.ReasonInvalidTimeZone, err.Error(), now)
		b.Status.ObservedGeneration = b.Generation
		return ctrl.Result{}, r.write(ctx, before, &b)
	}
	// This shard's lease entry, and the sums of every shard's entry, in one write.
	entry, done, ok := r.Ledger.Entry(&b, now)
	if ok {
		snap = budget.SetShard(&b, entry, snap)
	}
	soft := budgetStatus(&b, snap, now)
	if soft && !apimeta.IsStatusConditionTrue(before.Status.Conditions, flowv1.ConditionSoftLimitReached) {
		r.Recorder.Eventf(&b, nil, corev1.EventTypeWarning, flowv1.ReasonSoftLimitReached, "SoftLimit",
			"The Sessions of Budget %s spent %d%% of a limit in the window from %s", b.Name, budget.Percent(snap.Spent, snap.Limit), snap.Start.Format(time.RFC3339))
	}
	budgetMetrics.set(&b, snap)
	err = r.write(ctx, before, &b)
	done(err == nil)
	if err != nil {
		return ctrl.Result{}, err
	}
	flush := r.Flush
	if flush <= 0 {
		flush = DefaultBudgetFlush
	}
	return ctrl.Result{RequeueAfter: min(flush, r.Ledger.RenewEvery(), snap.End.Sub(now)+10*time.Millisecond)}, nil
}

func (r *BudgetReconciler) write(ctx context.Context, before, b *flowv1.Budget) error {
	if equality.Semantic.DeepEqual(before.Status, b.Status) {
		return nil
	}
	return client.IgnoreNotFound(r.Status().Patch(ctx, b, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}

// budgetStatus sets b's conditions from snap, the sums of its shards' entries
// (budget.SetShard). It reports whether a limit is past the soft limit.
func budgetStatus(b *flowv1.Budget, snap budget.Snapshot, now time.Time) (soft bool) {
	b.Status.ObservedGeneration = b.Generation
	setBudgetCondition(b, flowv1.ConditionReady, metav1.ConditionTrue, flowv1.ReasonCounted,
		fmt.Sprintf("Counting the window from %s to %s", snap.Start.Format(time.RFC3339), snap.End.Format(time.RFC3339)), now)
	percent := int64(80)
	if b.Spec.SoftLimitPercent != nil {
		percent = int64(*b.Spec.SoftLimitPercent)
	}
	used := budget.Percent(snap.Spent, snap.Limit)
	soft = used >= percent
	if soft {
		setBudgetCondition(b, flowv1.ConditionSoftLimitReached, metav1.ConditionTrue, flowv1.ReasonSoftLimitReached,
			fmt.Sprintf("%d%% of a limit is spent, past softLimitPercent %d", used, percent), now)
	} else {
		setBudgetCondition(b, flowv1.ConditionSoftLimitReached, metav1.ConditionFalse, flowv1.ReasonWithinLimits,
			fmt.Sprintf("%d%% of the tightest limit is spent, below softLimitPercent %d", used, percent), now)
	}
	if snap.Waits > 0 {
		setBudgetCondition(b, flowv1.ConditionExhausted, metav1.ConditionTrue, flowv1.ReasonCallsDenied,
			fmt.Sprintf("%d Sessions wait for room in the window until %s", snap.Waits, snap.End.Format(time.RFC3339)), now)
	} else {
		setBudgetCondition(b, flowv1.ConditionExhausted, metav1.ConditionFalse, flowv1.ReasonWithinLimits, "No Session waits for room", now)
	}
	return soft
}

func setBudgetCondition(b *flowv1.Budget, typ string, st metav1.ConditionStatus, reason, msg string, now time.Time) {
	apimeta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(now), ObservedGeneration: b.Generation})
}

// SetupWithManager registers the controller: Budgets, on spec changes (a limit raised
// wakes the waiting Sessions at once), on changes of other shards' lease entries (room
// given back, Sessions of theirs waiting) and on its own timer.
func (r *BudgetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	self := r.Ledger.ShardName()
	otherShards := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*flowv1.Budget)
		after, ok2 := e.ObjectNew.(*flowv1.Budget)
		return ok1 && ok2 && !equality.Semantic.DeepEqual(othersOf(before, self), othersOf(after, self))
	}}
	return ctrl.NewControllerManagedBy(mgr).
		For(&flowv1.Budget{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, otherShards))).
		Named("budget").
		Complete(r)
}

// othersOf are the entries of b's status.shards other than self's.
func othersOf(b *flowv1.Budget, self string) []flowv1.BudgetShard {
	var out []flowv1.BudgetShard
	for _, e := range b.Status.Shards {
		if e.Shard != self {
			out = append(out, e)
		}
	}
	return out
}

// budgetGauges are the Prometheus metrics of Budgets, labelled budget=<namespace>/<name>
// (Budgets are few; no label is per Session).
type budgetGauges struct {
	spent, reserved, limit *prometheus.GaugeVec
	denials                *prometheus.GaugeVec
}

var budgetMetrics = func() budgetGauges {
	labels := []string{"budget", "amount"}
	g := budgetGauges{
		spent: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "journey_budget_spent",
			Help: "What the Sessions of a Budget spent in its current window, by amount (costUSD, tokens, toolCalls, modelCalls)."}, labels),
		reserved: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "journey_budget_reserved",
			Help: "The worst cases of the calls in flight a Budget holds, by amount."}, labels),
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "journey_budget_limit",
			Help: "A Budget's limits, by amount (0: not limited)."}, labels),
		denials: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "journey_budget_denials",
			Help: "Sessions a Budget had no room for (each time one starts waiting) since the manager counted its current window."}, []string{"budget"}),
	}
	metrics.Registry.MustRegister(g.spent, g.reserved, g.limit, g.denials)
	return g
}()

func (g budgetGauges) set(b *flowv1.Budget, snap budget.Snapshot) {
	for _, m := range []struct {
		vec *prometheus.GaugeVec
		v   [4]float64
	}{
		{g.spent, amounts(snap.Spent.CostNano, snap.Spent.Tokens, snap.Spent.ToolCalls, snap.Spent.ModelCalls)},
		{g.reserved, amounts(snap.Reserved.CostNano, snap.Reserved.Tokens, snap.Reserved.ToolCalls, snap.Reserved.ModelCalls)},
		{g.limit, amounts(snap.Limit.CostNano, snap.Limit.Tokens, snap.Limit.ToolCalls, snap.Limit.ModelCalls)},
	} {
		for i, name := range []string{"costUSD", "tokens", "toolCalls", "modelCalls"} {
			m.vec.WithLabelValues(b.Namespace+"/"+b.Name, name).Set(m.v[i])
		}
	}
	g.denials.WithLabelValues(b.Namespace + "/" + b.Name).Set(float64(snap.Denials))
}

func (g budgetGauges) forget(ns, name string) {
	for _, v := range []*prometheus.GaugeVec{g.spent, g.reserved, g.limit, g.denials} {
		v.DeletePartialMatch(prometheus.Labels{"budget": ns + "/" + name})
	}
}

func amounts(costNano, tokens, toolCalls, modelCalls int64) [4]float64 {
	return [4]float64{float64(costNano) / 1e9, float64(tokens), float64(toolCalls), float64(modelCalls)}
}
