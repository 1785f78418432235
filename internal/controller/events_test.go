package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func TestTransitionsEmitEventsAndMetrics(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns, Options{})
	pathways := threeStepJourney(ns)
	for _, p := range pathways {
		create(t, p)
	}
	create(t, journeyOf(ns, "evented", pathways...), sessionOf(ns, "s", "evented"))
	settled(t, ns, "s", func(s *flowv1.Session) error {
		if s.Status.Phase != flowv1.PhaseCompleted {
			return fmt.Errorf("phase %s", s.Status.Phase)
		}
		return nil
	})

	// One Normal event per transition and one for the end; the Session is the subject.
	eventually(t, 10*time.Second, func() error {
		var list eventsv1.EventList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		reasons := map[string]int{}
		for _, e := range list.Items {
			if e.Regarding.Kind == "Session" && e.Regarding.Name == "s" {
				reasons[e.Reason]++
				if e.Type != "Normal" {
					return fmt.Errorf("event %s is %s, want Normal on a happy path", e.Reason, e.Type)
				}
			}
		}
		if reasons["Advance"] != 2 || reasons["Completed"] != 1 {
			return fmt.Errorf("event reasons %v: want 2 Advance and 1 Completed", reasons)
		}
		return nil
	})

	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range families {
		found[f.GetName()] = true
		if !strings.HasPrefix(f.GetName(), "journey_") {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "session" || l.GetName() == "name" || l.GetName() == "namespace" {
					t.Errorf("metric %s has a per-session label %s", f.GetName(), l.GetName())
				}
			}
		}
	}
	for _, name := range []string{"journey_steps_total", "journey_transitions_total", "journey_sessions"} {
		if !found[name] {
			t.Errorf("metric %s not registered", name)
		}
	}
}
