// Package docs runs the documentation: every fenced sh, bash, console and yaml block
// of README.md and docs/*.md is either executed against a local control plane with the
// operator (kubectl and the kubectl-journey plugin built from this repository) or
// marked as illustrative by the line *(illustrative)* directly above its opening
// fence. This file extracts the blocks; the test runs them.
package docs

import (
	"regexp"
	"strconv"
	"strings"
)

// IllustrativeMark is the line that, directly above a fence, says the block is not
// run: it needs a real cluster, an image registry, a Helm release, or it is a fragment.
const IllustrativeMark = "*(illustrative)*"

// Languages are the fence languages whose blocks are run or must be marked.
var Languages = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true, "yaml": true}

// Block is one fenced code block of a Markdown file.
type Block struct {
	// File is the Markdown file's name as given to Extract.
	File string
	// Line is the line of the opening fence (from 1); the block's first line is Line+1.
	Line int
	// Lang is the fence's info string up to the first space ("sh", "yaml", "").
	Lang string
	// Text is the block's content, each line ending in a newline, with the fence's
	// indentation removed.
	Text string
	// Illustrative is true when the line above the fence is IllustrativeMark.
	Illustrative bool
}

// Checked reports whether the docs test must run the block or see it marked.
func (b Block) Checked() bool { return Languages[b.Lang] }

// Where is "file:line" of the block's opening fence.
func (b Block) Where() string { return b.File + ":" + strconv.Itoa(b.Line) }

// Extract returns the fenced code blocks of a Markdown document, in order. Fences are
// ``` or ~~~ (three or more), indented by at most three spaces or inside a list item;
// a block ends at a fence of the same character at least as long, or at the end of
// the document.
func Extract(file string, markdown string) []Block {
	lines := strings.Split(markdown, "\n")
	var blocks []Block
	for i := 0; i < len(lines); i++ {
		indent, fence, info, ok := openingFence(lines[i])
		if !ok {
			continue
		}
		b := Block{File: file, Line: i + 1, Lang: info}
		if i > 0 && strings.TrimSpace(lines[i-1]) == IllustrativeMark {
			b.Illustrative = true
		}
		var text strings.Builder
		for i++; i < len(lines); i++ {
			if isClosingFence(lines[i], fence) {
				break
			}
			text.WriteString(dedent(lines[i], indent))
			text.WriteByte('\n')
		}
		b.Text = text.String()
		blocks = append(blocks, b)
	}
	return blocks
}

// openingFence parses a fence line: its indentation, the fence itself (``` or ~~~
// repeated) and the language of its info string.
func openingFence(line string) (indent int, fence, lang string, ok bool) {
	trimmed := strings.TrimLeft(line, " ")
	indent = len(line) - len(trimmed)
	for _, c := range []string{"`", "~"} {
		n := len(trimmed) - len(strings.TrimLeft(trimmed, c))
		if n < 3 {
			continue
		}
		info := strings.TrimSpace(trimmed[n:])
		if c == "`" && strings.Contains(info, "`") {
			return 0, "", "", false
		}
		if f := strings.Fields(info); len(f) > 0 {
			lang = f[0]
		}
		return indent, trimmed[:n], lang, true
	}
	return 0, "", "", false
}

func isClosingFence(line, fence string) bool {
	t := strings.TrimSpace(line)
	return strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == ""
}

// dedent removes up to n leading spaces.
func dedent(line string, n int) string {
	for range n {
		if !strings.HasPrefix(line, " ") {
			break
		}
		line = line[1:]
	}
	return line
}

// Command is one command of a console block: a line starting with "$ " and the lines
// it continues onto with a trailing backslash, with the output shown after it.
type Command struct {
	// Line is the command's line in the Markdown file.
	Line int
	// Text is the command as a shell reads it (continuations included).
	Text string
	// Output is the output the block shows for it.
	Output string
}

// ExpectsError reports whether the shown output is an error: kubectl and the plugin
// print "error: ..." and exit 1 (after a report, for commands that fail on what they
// report, as kubectl diff and kubectl journey diff do: the last line is the error),
// and kubectl prints an object the API server or an admission webhook refused as
// invalid as `The Kind "name" is invalid: ...`.
func (c Command) ExpectsError() bool {
	lines := strings.Split(strings.TrimRight(c.Output, "\n"), "\n")
	return strings.HasPrefix(c.Output, "error:") || strings.HasPrefix(lines[len(lines)-1], "error:") ||
		refusedAsInvalid.MatchString(c.Output)
}

// refusedAsInvalid is how kubectl starts the message of a refusal with reason Invalid.
var refusedAsInvalid = regexp.MustCompile(`^The [A-Z][A-Za-z]* "[^"]+" is invalid: `)

// Commands splits a console block into its commands.
func (b Block) Commands() []Command {
	var cmds []Command
	lines := strings.Split(strings.TrimSuffix(b.Text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "$ ") {
			if n := len(cmds); n > 0 {
				cmds[n-1].Output += lines[i] + "\n"
			}
			continue
		}
		c := Command{Line: b.Line + 1 + i, Text: strings.TrimPrefix(lines[i], "$ ")}
		for strings.HasSuffix(lines[i], `\`) && i+1 < len(lines) {
			i++
			c.Text += "\n" + lines[i]
		}
		cmds = append(cmds, c)
	}
	return cmds
}
