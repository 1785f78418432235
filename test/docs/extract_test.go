package docs

import (
	"reflect"
	"testing"
)

const sample = "# Title\n" + // 1
	"\n" + // 2
	"```sh\n" + // 3
	"kubectl get journeys\n" + // 4
	"```\n" + // 5
	"*(illustrative)*\n" + // 6
	"```yaml\n" + // 7
	"spec: {}\n" + // 8
	"```\n" + // 9
	"*(illustrative)*\n" + // 10
	"\n" + // 11
	"````console\n" + // 12
	"$ kubectl journey say s-1 hi \\\n" + // 13
	"    --wait\n" + // 14
	"```not a fence end\n" + // 15
	"$ kubectl journey approve s-1 --to x\n" + // 16
	"error: destination \"x\" is not allowed\n" + // 17
	"````\n" + // 18
	"- a list item:\n" + // 19
	"  ~~~go\n" + // 20
	"  fmt.Println()\n" + // 21
	"  ~~~\n" + // 22
	"```bash\n" + // 23
	"echo unterminated\n" // 24

func TestExtract(t *testing.T) {
	got := Extract("x.md", sample)
	want := []Block{
		{File: "x.md", Line: 3, Lang: "sh", Text: "kubectl get journeys\n"},
		{File: "x.md", Line: 7, Lang: "yaml", Text: "spec: {}\n", Illustrative: true},
		// The mark must be directly above the fence: a blank line in between cancels it.
		{File: "x.md", Line: 12, Lang: "console", Text: "$ kubectl journey say s-1 hi \\\n    --wait\n```not a fence end\n$ kubectl journey approve s-1 --to x\nerror: destination \"x\" is not allowed\n"},
		{File: "x.md", Line: 20, Lang: "go", Text: "fmt.Println()\n"},
		{File: "x.md", Line: 23, Lang: "bash", Text: "echo unterminated\n\n"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Extract:\n got %#v\nwant %#v", got, want)
	}
	if got[3].Checked() || !got[0].Checked() || !got[2].Checked() {
		t.Errorf("Checked: go blocks are not run, sh and console blocks are")
	}
	if w := got[2].Where(); w != "x.md:12" {
		t.Errorf("Where = %s", w)
	}
	cmds := got[2].Commands()
	wantCmds := []Command{
		{Line: 13, Text: "kubectl journey say s-1 hi \\\n    --wait", Output: "```not a fence end\n"},
		{Line: 16, Text: "kubectl journey approve s-1 --to x", Output: "error: destination \"x\" is not allowed\n"},
	}
	if !reflect.DeepEqual(cmds, wantCmds) {
		t.Fatalf("Commands:\n got %#v\nwant %#v", cmds, wantCmds)
	}
	if cmds[0].ExpectsError() || !cmds[1].ExpectsError() {
		t.Errorf("ExpectsError: only the second command shows an error")
	}
	for out, want := range map[string]bool{
		"The Journey \"front-desk\" is invalid: spec: Invalid value: transition vip: ...\n": true,
		"journey.flow.journey.dev/front-desk configured\n":                                  false,
		"Journey \"x\" is invalid: it says so in its Ready condition\n":                     false,
		"SESSION  STEP\nwalk-in  2\nerror: 1 of 1 recorded Sessions change\n":               true,
		"the word error: in the middle\nends well\n":                                        false,
	} {
		if got := (Command{Output: out}).ExpectsError(); got != want {
			t.Errorf("ExpectsError of %q = %v, want %v", out, got, want)
		}
	}
}
