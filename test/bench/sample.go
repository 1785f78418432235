package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"

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
	path := filepath.Join(testenv.RepoRoot(), "config", "samples", name+".yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	s := &sample{}
	for {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 {
			continue
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(raw.Raw, &meta); err != nil {
			return nil, err
		}
		switch meta.Kind {
		case "Journey":
			s.journey = &flowv1.Journey{}
			err = yaml.Unmarshal(raw.Raw, s.journey)
		case "Pathway":
			p := &flowv1.Pathway{}
			err = yaml.Unmarshal(raw.Raw, p)
			s.pathways = append(s.pathways, p)
		case "Session":
			s.session = &flowv1.Session{}
			err = yaml.Unmarshal(raw.Raw, s.session)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, meta.Kind, err)
		}
	}
	if s.journey == nil || s.session == nil || len(s.session.Spec.Messages) == 0 {
		return nil, fmt.Errorf("%s: want a Journey and a Session with messages", path)
	}
	return s, nil
}

// withJourney returns a copy of the sample whose Journey edit changed, or nil.
func (s *sample) withJourney(edit func(*flowv1.Journey) bool) *sample {
	c := *s
	c.journey = s.journey.DeepCopy()
	if !edit(c.journey) {
		return nil
	}
	return &c
}
