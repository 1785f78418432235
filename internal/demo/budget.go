package demo

import (
	"fmt"
	"os"
	"path/filepath"
)

// budgetName is the Budget of hack/demo/budget.yaml.
const budgetName = "clinic-monthly"

// applyBudget applies a Budget over the Sessions labelled team: clinic before any of
// them starts, and waits until the manager counts it.
func applyBudget(k kubectl) error {
	Say("A Budget: what the clinic team's Sessions (the new patient's and the booking's, labelled team=clinic) may spend together this month")
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
	if _, err := k.output("wait", "--for=condition=Ready", "--timeout=30s", "budget/"+budgetName); err != nil {
		_ = k.show("get", "budget", budgetName, "-o", "jsonpath={.status}")
		return err
	}
	return nil
}

// budgetSpend shows what the Budget counted once the conversations are over: the
// patient's builtin turns cost nothing, the clinic booking made three tool calls.
func budgetSpend(k kubectl) error {
	Say("What the clinic team spent: the patient's builtin turns cost nothing, the booking's three tool calls count")
	// The manager writes a Budget's status every few seconds, not per call.
	if _, err := k.output("wait", "--timeout=30s", "--for=jsonpath={.status.spent.toolCalls}=3", "budget/"+budgetName); err != nil {
		_ = k.show("get", "budget", budgetName, "-o", "jsonpath={.status}")
		return fmt.Errorf("budget %s did not count the clinic booking's 3 tool calls: %w", budgetName, err)
	}
	return k.show("journey", "budget", budgetName)
}
