package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func TestEventWriterWritesEventsAndDropsOverflow(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	s := &flowv1.Session{}
	s.Namespace, s.Name = ns, "ev"
	s.Spec.JourneyRef.Name = "none"
	create(t, s)

	w := newEventWriter(k8sClient, scheme, "session-controller")
	w.queue = make(chan *eventsv1.Event, 2) // no worker runs yet: a blocking Eventf would hang here
	dropped := droppedEvents(t)
	w.Eventf(s, nil, "Normal", "Advance", "Step", "intake -> %s", "booking")
	w.Eventf(s, nil, "Warning", "TurnFailed", "Step", "%s", strings.Repeat("é", 800)) // over the 1 kB note limit
	w.Eventf(s, nil, "Normal", "Completed", "Step", "no room for this one")
	if got := droppedEvents(t) - dropped; got != 1 {
		t.Errorf("dropped %v Events with a full queue, want 1", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Start(ctx) }()
	defer func() { cancel(); <-done }()
	eventually(t, 10*time.Second, func() error {
		var list eventsv1.EventList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 2 {
			return fmt.Errorf("%d Events, want 2", len(list.Items))
		}
		for _, e := range list.Items {
			if e.Regarding.Name != "ev" || e.Regarding.Kind != "Session" || e.ReportingController != "session-controller" || e.Action != "Step" || e.EventTime.IsZero() {
				return fmt.Errorf("unexpected Event %+v", e)
			}
			if e.Reason == "Advance" && (e.Note != "intake -> booking" || e.Type != "Normal") {
				return fmt.Errorf("Advance Event: %q %s", e.Note, e.Type)
			}
			if e.Reason == "TurnFailed" && (len(e.Note) > 1024 || !strings.HasSuffix(e.Note, "...")) {
				return fmt.Errorf("long note kept %d bytes", len(e.Note))
			}
		}
		return nil
	})
}

func droppedEvents(t *testing.T) float64 {
	t.Helper()
	var m dto.Metric
	if err := eventsDropped.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
