package docs

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/journeyops/journey-operator/internal/demo"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// TestDemoTellsItsStories tells the stories of make demo (internal/demo) on the
// documents' control plane, whose manager runs as make demo's does (localcluster), and
// checks what a person reads: the conversations, the canary rollout (the Sessions
// split between the stable and canary revisions, then the promotion) and the
// Budget's spend. The stories work in namespace default, which no document uses, so
// the test runs beside the documents.
func TestDemoTellsItsStories(t *testing.T) {
	t.Parallel()
	cl, err := clinic.Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })

	var out bytes.Buffer
	if err := demo.TellStories(context.Background(), cluster, cl, &out); err != nil {
		t.Fatalf("the demo failed: %v\n%s", err, out.String())
	}
	checkStories(t, out.String())
}

// checkStories checks the demo's output out.
func checkStories(t *testing.T, out string) {
	t.Helper()
	// Columns are aligned with spaces: compare each line's words.
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	text := strings.Join(lines, "\n")
	has := func(want string) {
		t.Helper()
		if !strings.Contains(text, want) {
			t.Errorf("the demo's output has no line %q", want)
		}
	}

	// The stories told before.
	has("Phase: Completed")
	has("book_slot calls: 1, bookings: 1")

	// The rollout: the Sessions of the canary have the new reply, those of the stable
	// revision the old one, and rollout status counts them.
	m := regexp.MustCompile(`(?m)^Stable: (\S+)\nCanary: (\S+)\nPhase: Paused \(revision (\S+)\)$`).FindStringSubmatch(text)
	if m == nil || m[2] != m[3] || m[1] == m[2] {
		t.Fatalf("no rollout status of a paused canary beside its stable revision in:\n%s", out)
	}
	stable, canary := m[1], m[2]
	rows := regexp.MustCompile(`(?m)^welcome-\d+ Completed (\S+) (.+)$`).FindAllStringSubmatch(text, -1)
	on := map[string]int{}
	for _, r := range rows {
		want := map[string]string{stable: "Welcome to the clinic.", canary: "Welcome to the clinic! Ask me for a cardiologist, a free slot or your copay."}[r[1]]
		if r[2] != want {
			t.Errorf("a Session on revision %s replied %q, want %q", r[1], r[2], want)
		}
		on[r[1]]++
	}
	if len(rows) < demo.MinCanarySessions || on[stable] == 0 || on[canary] == 0 {
		t.Errorf("the Sessions listed: %d on the stable revision, %d on the canary, want at least %d with one on each", on[stable], on[canary], demo.MinCanarySessions)
	}
	// STARTED FINISHED COMPLETED FAILED ESCALATED TURNS COST USD: one turn each.
	counts := func(n int) string {
		s := strconv.Itoa(n)
		return strings.Join([]string{s, s, s, "0", "0", s, "-"}, " ")
	}
	has("stable " + stable + " " + counts(on[stable]))
	// After the promotion the stable counts are still those of the revision the
	// canary was compared with, not of the canary that is now stable.
	if n := strings.Count(text, "\nstable "+stable+" "+counts(on[stable])); n != 2 {
		t.Errorf("the stable revision's row is shown %d times, want twice (paused, then promoted)", n)
	}
	has("canary " + canary + " " + counts(on[canary]))
	has("journey/clinic-welcome: promote of canary " + canary + " requested")
	has("Stable: " + canary + "\nCanary: -\nPhase: Promoted (revision " + canary + ")")
	has("clinic-welcome welcome 1 True Valid " + canary + " " + canary)

	// The Budget: the booking's three tool calls, nothing for the builtin turns.
	has("budget.flow.journey.dev/clinic-monthly created")
	has("BUDGET WINDOW COST (USD) TOKENS MODEL CALLS TOOL CALLS SESSIONS WAITING\nclinic-monthly Month 0/5.00 0 0/200 3/20 1 0")
	has("JOURNEY SESSION COST (USD) TOKENS MODEL CALLS TOOL CALLS\nclinic-booking clinic-ada 0 0 0 3\n")
	if t.Failed() {
		t.Logf("the demo's output:\n%s", out)
	}
}
