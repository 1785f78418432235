package engine

import (
	"reflect"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func TestSnapshotCopiesItsInputs(t *testing.T) {
	d := healthcare()
	snap, err := NewSnapshot("rev", d.j, d.p)
	if err != nil {
		t.Fatal(err)
	}
	d.p["intake"].Next = "faq"
	d.j.Agents[0].Provider = flowv1.ProviderOpenAI
	if p, _ := snap.Pathway("intake"); p.Next != "booking" {
		t.Error("the snapshot shares its pathway specs with the caller")
	}
	if a, ok := snap.Agent("document-processor"); !ok || a.Provider != flowv1.ProviderBuiltin {
		t.Error("the snapshot shares its agents with the caller")
	}
	if _, ok := snap.Agent("nobody"); ok {
		t.Error("Agent found an undeclared agent")
	}
	if snap.Revision() != "rev" || snap.Journey().EntryPathway != "intake" {
		t.Error("revision or journey")
	}
	// Global transitions are ordered by priority, then declaration.
	var names []string
	for _, tr := range snap.transitions {
		names = append(names, string(tr.Name))
	}
	if want := []string{"escalate", "faq-detour", "reject-doctor", "hesitation"}; !reflect.DeepEqual(names, want) {
		t.Errorf("order %v, want %v", names, want)
	}
}
