package journeytest

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func uncovered(c *JourneyCoverage) []string {
	var out []string
	for _, it := range c.Items {
		if !it.Covered {
			out = append(out, it.Kind+" "+it.Name)
		}
	}
	return out
}

// The review-loop sample's test walks every pathway's success and one review failure:
// what it leaves uncovered is every other failure, as transitions and as outcomes.
func TestCoverageOfTheReviewLoopSample(t *testing.T) {
	res := RunFiles([]string{filepath.Join("..", "..", "config", "samples", "tests", "review-loop.yaml")})
	cov := Coverage(res)
	if len(cov) != 1 || cov[0].Journey != "review-loop" || cov[0].Tests != 1 {
		t.Fatalf("coverage: %+v", cov)
	}
	c := cov[0]
	want := []string{
		"outcome plan.onFailure", "transition onFailure plan→plan",
		"outcome generate.onFailure", "transition onFailure generate→generate",
		"outcome revise.onFailure", "transition onFailure revise→revise",
	}
	if got := uncovered(c); !slices.Equal(got, want) {
		t.Fatalf("uncovered:\n got %q\nwant %q", got, want)
	}
	if covered, total := c.Count(CoverTransition); covered != 5 || total != 8 {
		t.Errorf("transitions %d/%d, want 5/8", covered, total)
	}
	var out bytes.Buffer
	PrintCoverage(&out, cov)
	for _, line := range []string{
		"Coverage of journey review-loop (1 tests, revision review-loop-",
		"  transitions        5/8    62.5%",
		"  total             10/16   62.5%",
		"  not covered: transition onFailure plan→plan",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("report lacks %q:\n%s", line, out.String())
		}
	}
}

// A decision's bands are covered by the state its decisions were first written in.
func TestCoverageOfDecisionBands(t *testing.T) {
	cov := Coverage(RunFiles([]string{filepath.Join("testdata", "llm-answers.yaml")}))
	if len(cov) != 1 {
		t.Fatalf("coverage: %+v", cov)
	}
	want := []string{
		"transition onSuccess help→help",
		"decision band help.onSuccess requireApproval (>= 0.5)",
		"decision band help.onSuccess escalate (below 0.5)",
		"transition next refund→done",
		"transition refund *→refund",
	}
	if got := uncovered(cov[0]); !slices.Equal(got, want) {
		t.Fatalf("uncovered:\n got %q\nwant %q", got, want)
	}
	if covered, total := cov[0].Count(CoverBand); covered != 1 || total != 3 {
		t.Errorf("bands %d/%d, want 1/3", covered, total)
	}
}
