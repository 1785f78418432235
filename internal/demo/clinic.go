package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// clinicStory books an appointment through the clinic MCP server c: the Journey lists
// the server's tools, the Session finds a doctor, waits for a person to approve the
// booking (a destructive tool), and books once.
func clinicStory(ctx context.Context, k kubectl, c *clinic.Listening) error {
	k.say("Clinic booking: tools on an MCP server, a destructive call approved by a person")
	url := c.URL
	fmt.Fprintf(k.out, "Clinic MCP server at %s\n", url)

	path := filepath.Join(k.c.Dir, "clinic-booking.yaml")
	manifest, err := manifest("clinic-booking.yaml")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(manifest, "CLINIC_URL", url)), 0o644); err != nil {
		return err
	}
	if err := k.show("apply", "-f", path); err != nil {
		return err
	}
	if _, err := k.waitJourney(ctx, "clinic-booking", flowv1alpha1.ConditionToolsAvailable); err != nil {
		return err
	}
	if err := k.show("get", "journey", "clinic-booking", "-o", `jsonpath={range .status.tools[*]}{.name}{"\tdestructive="}{.destructive}{"\n"}{end}`); err != nil {
		return err
	}
	if err := k.create(ctx, `{"apiVersion":"flow.journey.dev/v1alpha1","kind":"Session",
		"metadata":{"name":"clinic-ada","namespace":"default","labels":{"team":"clinic"}},
		"spec":{"journeyRef":{"name":"clinic-booking"},"initialContext":{"specialty":"cardiology","patient":"Ada"}}}`); err != nil {
		return err
	}
	if _, err := k.waitPhase(ctx, "clinic-ada", flowv1alpha1.PhaseAwaitingApproval, ""); err != nil {
		return err
	}
	fmt.Fprintln(k.out)
	if err := k.show("get", "session", "clinic-ada", "-o", `jsonpath={.status.lastDecision.id}: {.status.lastDecision.reasoning}{"\n"}`); err != nil {
		return err
	}
	fmt.Fprintf(k.out, "book_slot calls so far: %d\n", c.Calls("book_slot"))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := k.show("journey", "approve", "clinic-ada", "--reason", "patient confirmed by phone"); err != nil {
		return err
	}
	if _, err := k.waitPhase(ctx, "clinic-ada", flowv1alpha1.PhaseCompleted, ""); err != nil {
		return err
	}
	fmt.Fprintln(k.out)
	if err := k.show("get", "session", "clinic-ada", "-o", `jsonpath={.status.lastTurn.assistantText}{"\n"}{range .status.lastTurn.toolCalls[*]}{.id} {.tool} {.state} approvedBy={.approvedBy}{"\n"}{end}`); err != nil {
		return err
	}
	fmt.Fprintf(k.out, "book_slot calls: %d, bookings: %d\n", c.Calls("book_slot"), c.Bookings())
	if c.Bookings() != 1 {
		return fmt.Errorf("the clinic booked %d times, want 1", c.Bookings())
	}
	return nil
}
