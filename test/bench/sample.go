package main

import (
	"fmt"
	"path/filepath"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// sample is a sample journey of config/samples: its Journey, its Pathways and the
// conversation of its Session.
type sample struct {
	journey  *flowv1.Journey
	pathways []*flowv1.Pathway
	session  *flowv1.Session
}

// loadSample reads config/samples/<name>.yaml.
func loadSample(name string) (*sample, error) {
	path := filepath.Join(testenv.SamplesDir(), name+".yaml")
	objs, err := testenv.ReadManifests(path)
	if err != nil {
		return nil, err
	}
	s := &sample{}
	for _, u := range objs {
		o, err := testenv.Typed(u)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		switch o := o.(type) {
		case *flowv1.Journey:
			s.journey = o
		case *flowv1.Pathway:
			s.pathways = append(s.pathways, o)
		case *flowv1.Session:
			s.session = o
		}
	}
	if s.journey == nil || s.session == nil || len(s.session.Spec.Messages) == 0 {
		return nil, fmt.Errorf("%s: want a Journey and a Session with messages", path)
	}
	return s, nil
}
