package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// budgetName is the Budget of hack/demo/budget.yaml.
const budgetName = "clinic-monthly"

// applyBudget applies a Budget over the Sessions labelled team: clinic before any of
// them starts, and waits until the manager counts it.
func applyBudget(ctx context.Context, k kubectl) error {
	k.say("A Budget: what the clinic team's Sessions (the new patient's and the booking's, labelled team=clinic) may spend together this month")
	path := filepath.Join(k.c.Dir, "budget.yaml")
	manifest, err := manifest("budget.yaml")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		return err
	}
	if err := k.show("apply", "-f", path); err != nil {
		return err
	}
	var b flowv1alpha1.Budget
	return k.waitCondition(ctx, "budget", budgetName, &b, &b.Status.Conditions, flowv1alpha1.ConditionReady)
}

// budgetSpend shows what the Budget counted once the conversations are over: the
// patient's builtin turns cost nothing, the clinic booking made three tool calls.
func budgetSpend(ctx context.Context, k kubectl) error {
	k.say("What the clinic team spent: the patient's builtin turns cost nothing, the booking's three tool calls count")
	// The manager writes a Budget's status every few seconds, not per call.
	var b flowv1alpha1.Budget
	err := k.waitUntil(ctx, "budget", budgetName, &b, func() error {
		if n := b.Status.Spent.ToolCalls; n == nil || *n != 3 {
			return fmt.Errorf("status.spent.toolCalls is %s, want the clinic booking's 3", countOf(n))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return k.show("journey", "budget", budgetName)
}

// countOf shows a count that may be unset.
func countOf(n *int64) string {
	if n == nil {
		return "unset"
	}
	return fmt.Sprint(*n)
}
