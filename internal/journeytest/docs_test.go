package journeytest

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The journey tests written out in docs/testing-journeys.md run as written: each YAML
// block that is a test (it has name and steps) is parsed, resolved as if it were a
// file of config/samples/tests, and run. A doc change is tested.
func TestDocumentedJourneyTestsRun(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(testsDir(), "..", "..", "..", "docs", "testing-journeys.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	ran := 0
	for i, b := range blocks {
		src := b[1]
		if !strings.HasPrefix(src, "name:") || !strings.Contains(src, "\nsteps:") || !strings.Contains(src, "\nmanifests:") {
			continue
		}
		ran++
		c, err := Parse([]byte(src))
		if err != nil {
			t.Fatalf("yaml block %d: %v\n%s", i, err, src)
		}
		c.Path = filepath.Join(testsDir(), "docs-example.yaml")
		if err := c.Resolve(); err != nil {
			t.Fatalf("yaml block %d: %v", i, err)
		}
		r := Run(c)
		if r.Failed() {
			var out bytes.Buffer
			PrintResult(&out, r)
			t.Errorf("yaml block %d (%s) fails as written:\n%s", i, c.Name, out.String())
		}
	}
	if ran == 0 {
		t.Fatal("docs/testing-journeys.md has no runnable journey test")
	}
}
