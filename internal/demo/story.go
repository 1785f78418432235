package demo

import (
	"context"
	"fmt"
	"strings"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// tellStories applies the samples and a Budget, then walks one healthcare
// conversation, one review loop and one booking turn by turn with the plugin, rolls
// out a change as a canary, and shows what the Budget counted: what a person would see.
func tellStories(ctx context.Context, k kubectl, c *clinic.Listening) error {
	if err := applySamples(ctx, k); err != nil {
		return err
	}
	if err := applyBudget(ctx, k); err != nil {
		return err
	}
	if err := healthcareStory(ctx, k); err != nil {
		return err
	}
	if err := reviewStory(ctx, k); err != nil {
		return err
	}
	if err := clinicStory(ctx, k, c); err != nil {
		return err
	}
	if err := rolloutStory(ctx, k); err != nil {
		return err
	}
	if err := budgetSpend(ctx, k); err != nil {
		return err
	}
	k.say("All sessions")
	return k.show("get", "sessions", "-o", "wide")
}

// applySamples applies the samples and waits for their Journeys to be Ready.
func applySamples(ctx context.Context, k kubectl) error {
	k.say("Applying the sample journeys, pathways and sessions")
	if err := k.show("apply", "-k", "config/samples", "-n", "default"); err != nil {
		return err
	}
	for _, j := range []string{"healthcare-referral", "review-loop"} {
		if _, err := k.waitJourney(ctx, j, flowv1alpha1.ConditionReady); err != nil {
			return err
		}
	}
	if err := k.show("get", "journeys"); err != nil {
		return err
	}
	return k.show("journey", "graph", "healthcare-referral", "--format", "mermaid")
}

// healthcareStory is a new patient's conversation, one message at a time.
func healthcareStory(ctx context.Context, k kubectl) error {
	k.say("Healthcare referral: a new patient, one message at a time")
	if err := k.create(ctx, `{"apiVersion":"flow.journey.dev/v1alpha1","kind":"Session",
		"metadata":{"name":"patient-12345","namespace":"default","labels":{"team":"clinic"}},
		"spec":{"journeyRef":{"name":"healthcare-referral"},
		        "initialContext":{"insurance_id":"INS-123456","referral_source":"primary_care"}}}`); err != nil {
		return err
	}
	for _, text := range []string{
		"Hi, I need to book an appointment with a cardiologist. Here's my referral.",
		"Wait, what is the copay for specialist visits?",
		"Thanks! Now show me the available doctors.",
		"I don't want Dr. Smith. Can you show me another option?",
		"Dr. Johnson looks great. Book the Tuesday 2pm slot.",
	} {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintln(k.out)
		if err := k.show("journey", "say", "patient-12345", text, "--wait"); err != nil {
			return err
		}
		if err := k.show("get", "session", "patient-12345"); err != nil {
			return err
		}
	}
	if err := k.show("get", "session", "patient-12345", "-o", "jsonpath={.status.context.rejected_doctors[*].name}{\"\\n\"}"); err != nil {
		return err
	}
	if err := k.show("journey", "history", "patient-12345"); err != nil {
		return err
	}
	// The admission webhook runs as in a cluster: a limit below what the Session has
	// used is refused.
	fmt.Fprintln(k.out)
	return k.refused("patch", "session", "patient-12345", "--type=merge", "-p", `{"spec":{"limits":{"maxTurns":2}}}`)
}

// reviewStory is a review loop whose first review fails and starts iteration 2.
func reviewStory(ctx context.Context, k kubectl) error {
	k.say("Review loop: External executors post outcomes; a failed review starts iteration 2")
	if err := k.create(ctx, `{"apiVersion":"flow.journey.dev/v1alpha1","kind":"Session",
		"metadata":{"name":"review-42","namespace":"default"},
		"spec":{"journeyRef":{"name":"review-loop"},"initialContext":{"entity":"Invoice"}}}`); err != nil {
		return err
	}
	for _, o := range []struct{ pathway, iteration, result, data string }{
		{"plan", "1", "success", "plan=Invoice aggregate, repository and service"},
		{"generate", "1", "success", `files=["Invoice.java","InvoiceService.java"]`},
		{"review", "1", "failure", `findings=["InvoiceService ignores currency rounding"]`},
		{"revise", "2", "success", `files=["InvoiceService.java"]`},
		{"review", "2", "success", ""},
	} {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := k.waitFor(ctx, "review-42", o.pathway); err != nil {
			return err
		}
		args := []string{"journey", "outcome", "review-42", "--pathway", o.pathway, "--iteration", o.iteration, "--result", o.result}
		if o.data != "" {
			args = append(args, "--data", o.data)
		}
		fmt.Fprintln(k.out)
		if err := k.show(args...); err != nil {
			return err
		}
	}
	if _, err := k.waitPhase(ctx, "review-42", flowv1alpha1.PhaseCompleted, ""); err != nil {
		return err
	}
	fmt.Fprintln(k.out)
	if err := k.show("get", "session", "review-42"); err != nil {
		return err
	}
	return k.show("journey", "history", "review-42")
}

// refused shows a command that the API server must refuse, and fails when it does not.
func (k kubectl) refused(args ...string) error {
	if err := k.show(args...); err == nil {
		return fmt.Errorf("kubectl %s was accepted; the admission webhook should have refused it", strings.Join(args, " "))
	}
	return nil
}

// waitFor waits until the Session waits for input in pathway, and shows it.
func (k kubectl) waitFor(ctx context.Context, session, pathway string) error {
	if _, err := k.waitPhase(ctx, session, flowv1alpha1.PhaseWaitingForInput, pathway); err != nil {
		return err
	}
	fmt.Fprintln(k.out)
	return k.show("get", "session", session)
}
