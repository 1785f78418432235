// Package truncate cuts text to a bound, never inside a UTF-8 sequence: Bytes for
// what is stored or sent (status fields, Events, error messages), Runes and Line for
// what people read in a terminal or a page. It is the one truncate of the project.
package truncate

import (
	"strings"
	"unicode/utf8"
)

// Bytes returns s when it fits in n bytes; else the longest prefix of s that ends at
// a rune boundary and leaves room for ellipsis within n bytes, followed by ellipsis
// ("" for none). An ellipsis longer than n is appended whole after an empty prefix.
func Bytes(s string, n int, ellipsis string) string {
	if len(s) <= n {
		return s
	}
	cut := max(0, n-len(ellipsis))
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// Runes is Bytes counted in runes: s when it has at most n runes, else its first
// runes followed by ellipsis, n runes in all.
func Runes(s string, n int, ellipsis string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	keep := max(0, n-utf8.RuneCountInString(ellipsis))
	cut := 0
	for i := 0; i < keep; i++ {
		_, size := utf8.DecodeRuneInString(s[cut:])
		cut += size
	}
	return s[:cut] + ellipsis
}

// Line puts s on one line (each run of white space becomes one space) and cuts it to
// n runes, with "…" when cut: free text in a table cell or a status line.
func Line(s string, n int) string {
	return Runes(strings.Join(strings.Fields(s), " "), n, "…")
}
