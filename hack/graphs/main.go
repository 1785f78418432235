// Command graphs draws the sample journeys with `kubectl journey graph` on a local
// control plane and writes them to docs/graphs/<journey>.mmd (Mermaid) and
// docs/graphs/<journey>.svg (laid out by Graphviz, as kubectl journey graph --format svg
// and the console draw them), and points the marked blocks of docs/concepts.md at the
// SVG files. The e2e tests check that the committed pictures are current.
package main

import (
	"fmt"
	"github.com/go-logr/logr"
	"os"
	"path/filepath"
	"regexp"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/journeyops/journey-operator/internal/localcluster"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// Journeys are the sample journeys drawn in the docs.
var Journeys = []string{"healthcare-referral", "review-loop", "planning", "delivery-pipeline"}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "graphs:", err)
		os.Exit(1)
	}
}

func run() error {
	ctrl.SetLogger(logr.Discard())
	root := testenv.RepoRoot()
	dir, err := os.MkdirTemp("", "journey-graphs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c, err := localcluster.Start(dir, true)
	if err != nil {
		return err
	}
	defer c.Stop()
	if _, err := c.Kubectl("apply", "-k", "config/samples", "-n", "default"); err != nil {
		return err
	}
	conceptsPath := filepath.Join(root, "docs", "concepts.md")
	concepts, err := os.ReadFile(conceptsPath)
	if err != nil {
		return err
	}
	for _, j := range Journeys {
		if _, err := c.Kubectl("wait", "--for=condition=Ready", "--timeout=30s", "journey/"+j); err != nil {
			return err
		}
		for _, format := range []string{"mermaid", "svg"} {
			out, err := c.Kubectl("journey", "graph", j, "--format", format)
			if err != nil {
				return err
			}
			ext := map[string]string{"mermaid": ".mmd", "svg": ".svg"}[format]
			if err := os.WriteFile(filepath.Join(root, "docs", "graphs", j+ext), []byte(out), 0o644); err != nil {
				return err
			}
		}
		block := regexp.MustCompile("(?s)<!-- graph:" + regexp.QuoteMeta(j) + " -->\n.*?<!-- /graph -->")
		if !block.Match(concepts) {
			return fmt.Errorf("docs/concepts.md has no block for %s", j)
		}
		concepts = block.ReplaceAllFunc(concepts, func([]byte) []byte {
			return []byte(PictureBlock(j))
		})
		fmt.Println("drew", j)
	}
	return os.WriteFile(conceptsPath, concepts, 0o644)
}

// PictureBlock is the marked block of docs/concepts.md that shows journey's picture.
func PictureBlock(journey string) string {
	return "<!-- graph:" + journey + " -->\n![The " + journey + " journey, drawn by kubectl journey graph --format svg](graphs/" +
		journey + ".svg)\n\n(Mermaid source: [graphs/" + journey + ".mmd](graphs/" + journey + ".mmd))\n<!-- /graph -->"
}
