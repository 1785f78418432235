package controller

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/expr"
)

// PathwayReconciler checks what a Pathway can check on its own: its CEL expressions
// compile. Cross-object checks (destinations, agents) belong to the Journey.
type PathwayReconciler struct {
	client.Client
}

// +kubebuilder:rbac:groups=flow.journey.dev,resources=pathways,verbs=get;list;watch
// +kubebuilder:rbac:groups=flow.journey.dev,resources=pathways/status,verbs=get;update;patch

// Reconcile checks a Pathway and writes its status at most once.
func (r *PathwayReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileStatus(ctx, r.Client, req, &flowv1.Pathway{},
		func(p *flowv1.Pathway) *flowv1.PathwayStatus { return &p.Status }, r.reconcile)
}

// reconcile says in the Pathway's Ready condition whether its expressions compile.
func (r *PathwayReconciler) reconcile(_ context.Context, p *flowv1.Pathway) outcome {
	issues := PathwayIssues(&p.Spec)
	if len(issues) > 0 {
		setValidity(&p.Status.Conditions, p.Generation, metav1.ConditionFalse, flowv1.ReasonInvalid, strings.Join(issues, "; "))
	} else {
		setValidity(&p.Status.Conditions, p.Generation, metav1.ConditionTrue, flowv1.ReasonValid, "All expressions compile")
	}
	p.Status.ObservedGeneration = p.Generation
	return outcome{}
}

// PathwayIssues lists the CEL expressions of a Pathway that do not compile.
func PathwayIssues(spec *flowv1.PathwaySpec) []string {
	var issues []string
	check := func(field string, src flowv1.Expression) {
		if src == "" {
			return
		}
		if _, err := expr.Compile(string(src)); err != nil {
			issues = append(issues, fmt.Sprintf("%s: %v", field, err))
		}
	}
	if b := spec.Builtin; b != nil {
		for i, o := range b.Outputs {
			check(fmt.Sprintf("spec.builtin.outputs[%d].expression", i), o.Expression)
		}
		check("spec.builtin.outcome", b.Outcome)
		check("spec.builtin.complete", b.Complete)
	}
	for name, t := range spec.Transitions.All() {
		if t.Decision == nil {
			continue
		}
		for i, rule := range t.Decision.Rules {
			check(fmt.Sprintf("spec.transitions.%s.decision.rules[%d].when", name, i), rule.When)
		}
	}
	return issues
}

// SetupWithManager registers the controller.
func (r *PathwayReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&flowv1.Pathway{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("pathway").
		Complete(r)
}
