package testenv

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// ClinicBooking is the journey "clinic" that tests run against the clinic MCP server at
// url: its one pathway, "book", runs on entry with the builtin agent, finds a
// cardiologist, books the first free slot, keeps the booking in the context as
// "booking", and replies "Booked <booking id> at <slot>". Neither tool needs an
// approval. Tests change the objects for their case before creating them.
func ClinicBooking(ns, url string) (*flowv1.Pathway, *flowv1.Journey) {
	p := &flowv1.Pathway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "book"},
		Spec: flowv1.PathwaySpec{
			RunOn: flowv1.RunOnEntry,
			Tools: []flowv1.ToolName{"find_doctors", "book_slot"},
			Builtin: &flowv1.BuiltinPathway{
				ToolCalls: []flowv1.BuiltinToolCall{
					{Tool: "find_doctors", Args: "{'specialty': 'cardiology'}"},
					{Tool: "book_slot", Args: "{'doctor_id': tools.find_doctors.doctors[0].id, 'slot': tools.find_doctors.doctors[0].slots[0]}"},
				},
				Outputs: []flowv1.BuiltinOutput{{Name: "booking", Expression: "tools.book_slot"}},
				Reply:   "Booked {{ .tools.book_slot.booking_id }} at {{ .tools.book_slot.slot }}",
			},
			Accumulate: []string{"booking"},
		},
	}
	j := &flowv1.Journey{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "clinic"},
		Spec: flowv1.JourneySpec{
			EntryPathway: "book",
			Pathways:     []flowv1.PathwayEntry{{Name: "book", PathwayRef: "book"}},
			ToolServers:  []flowv1.ToolServer{{Name: "clinic", URL: url, Timeout: &metav1.Duration{Duration: 20 * time.Second}}},
			Tools: []flowv1.Tool{
				{Name: "find_doctors", Server: "clinic", Approval: flowv1.ToolApprovalNever},
				{Name: "book_slot", Server: "clinic", Approval: flowv1.ToolApprovalNever},
			},
		},
	}
	return p, j
}
