package main

import (
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDeploySetsTheImage: `make deploy IMG=...` renders config/default with the
// manager running IMG, by tag or by digest, with the webhook and its cert-manager
// certificate in place.
func TestDeploySetsTheImage(t *testing.T) {
	dir := filepath.Join("..", "..", "config", "default")
	for img, want := range map[string]string{
		"registry.example.com:5000/team/journey-operator:v0.1.0": "registry.example.com:5000/team/journey-operator:v0.1.0",
		"journey-operator": "journey-operator:latest",
		"ghcr.io/x/journey-operator@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": "ghcr.io/x/journey-operator@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	} {
		out, err := Build(dir, img)
		if err != nil {
			t.Fatalf("%s: %v", img, err)
		}
		var found []string
		for _, doc := range strings.Split(string(out), "\n---\n") {
			var m struct {
				Kind string
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct{ Name, Image string }
						}
					}
				}
			}
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatal(err)
			}
			if m.Kind == "Deployment" {
				for _, c := range m.Spec.Template.Spec.Containers {
					found = append(found, c.Image)
				}
			}
			if m.Kind == "Certificate" && !strings.Contains(doc, "journey-operator-webhook-service.journey-operator-system.svc") {
				t.Errorf("the certificate does not name the webhook Service:\n%s", doc)
			}
		}
		if len(found) != 1 || found[0] != want {
			t.Errorf("IMG=%s: manager image %v, want %s", img, found, want)
		}
	}
}
