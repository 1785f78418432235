package truncate

import (
	"testing"
	"unicode/utf8"
)

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		s        string
		n        int
		ellipsis string
		want     string
	}{
		{"short", 10, "", "short"},
		{"exactly10!", 10, "...", "exactly10!"},
		{"abcdefghij", 4, "", "abcd"},
		{"abcdefghij", 6, "...", "abc..."},
		// é is two bytes: a cut inside it keeps the whole rune out.
		{"caféine", 4, "", "caf"},
		{"caféine", 5, "", "café"},
		{"日本語のテキスト", 7, "", "日本"},
		{"日本語のテキスト", 10, "…", "日本…"},
		{"abcdef", 0, "", ""},
		// An ellipsis that does not fit comes whole after nothing.
		{"abcdef", 2, "...", "..."},
	} {
		got := Bytes(tc.s, tc.n, tc.ellipsis)
		if got != tc.want {
			t.Errorf("Bytes(%q, %d, %q) = %q, want %q", tc.s, tc.n, tc.ellipsis, got, tc.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Bytes(%q, %d, %q) = %q: not UTF-8", tc.s, tc.n, tc.ellipsis, got)
		}
	}
}

func TestRunes(t *testing.T) {
	for _, tc := range []struct {
		s        string
		n        int
		ellipsis string
		want     string
	}{
		{"short", 5, "…", "short"},
		{"longer text", 5, "…", "long…"},
		{"日本語のテキスト", 4, "…", "日本語…"},
		{"日本語のテキスト", 3, "", "日本語"},
		{"abcdefgh", 6, "...", "abc..."},
	} {
		if got := Runes(tc.s, tc.n, tc.ellipsis); got != tc.want {
			t.Errorf("Runes(%q, %d, %q) = %q, want %q", tc.s, tc.n, tc.ellipsis, got, tc.want)
		}
	}
}

func TestLine(t *testing.T) {
	if got := Line("  two\nlines\tand   spaces ", 40); got != "two lines and spaces" {
		t.Errorf("Line = %q", got)
	}
	if got := Line("a reply\nthat goes on and on", 10); got != "a reply t…" {
		t.Errorf("Line cut = %q", got)
	}
}
