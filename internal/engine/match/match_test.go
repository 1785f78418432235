package match

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestContains(t *testing.T) {
	tests := []struct {
		text, phrase string
		want         bool
	}{
		{"Why is that?", "why", true},
		{"Mr Whyte called", "why", false},
		{"anywhy", "why", false},
		{"What is the copay?", "what is", true},
		{"WHAT   IS this", "what is", true},
		{"whatis", "what is", false},
		{"what isn't", "what is", false},
		{"How do I book?", "how do i", true},
		{"I don't want Dr. Smith", "don't want", true},
		{"I don’t want Dr. Smith", "don't want", true},
		{"I don't want Dr. Smith", "don’t want", true},
		{"I don't", "don", false},
		{"I don't", "t", false},
		{"rock'n'roll", "n", false},
		{"'quoted' word", "quoted", true},
		{"show me another option, please", "another option", true},
		{"another optional thing", "another option", false},
		{"help!", "help", true},
		{"(help)", "help", true},
		{"Ünïcode GRÜSSE", "ünïcode grüsse", true},
		{"", "help", false},
		{"help", "", false},
		{"help", "   ", false},
		{"  help  ", " help ", true},
		{"cost: $5?", "$5?", true},
		{"x$5?y", "$5?", true},
		{"question mark?", "?", true},
		{"ahelp help", "help", true},
		{"not sure yet", "not sure", true},
		{"notsure", "not sure", false},
		{"line\nbreak", "line break", true},
	}
	for _, tt := range tests {
		if got := Contains(tt.text, tt.phrase); got != tt.want {
			t.Errorf("Contains(%q, %q) = %v, want %v", tt.text, tt.phrase, got, tt.want)
		}
	}
}

func TestWords(t *testing.T) {
	for text, want := range map[string]string{
		"Is it covered by my insurance plan?": "is it covered by my insurance plan",
		"I don’t want Dr. Smith's slot":       "i don't want dr smith's slot",
		"'quoted' rock'n'roll":                "quoted rock'n'roll",
		"Ünïcode GRÜSSE, snake_case 2pm!":     "ünïcode grüsse snake_case 2pm",
		"trailing' ' - ''":                    "trailing",
		"":                                    "",
	} {
		got := Words(text)
		if strings.Join(got, " ") != want {
			t.Errorf("Words(%q) = %q, want %q", text, got, want)
		}
		// A word is what Contains matches on word boundaries.
		for _, w := range got {
			if !Contains(text, w) {
				t.Errorf("Words(%q) has %q, which Contains does not find", text, w)
			}
		}
	}
}

func TestIndex(t *testing.T) {
	phrases := []string{"question", "help", "what is"}
	if got := Index("can you help me", phrases); got != 1 {
		t.Errorf("Index = %d, want 1", got)
	}
	if got := Index("nothing here", phrases); got != -1 {
		t.Errorf("Index = %d, want -1", got)
	}
}

func TestContainsDoesNotAllocate(t *testing.T) {
	text := "Hi, I don’t want Dr. Smith. Can you show me another option? What is the copay for specialists?"
	allocs := testing.AllocsPerRun(100, func() {
		Contains(text, "what is")
		Contains(text, "don't want")
		Contains(text, "zebra crossing")
	})
	if allocs != 0 {
		t.Errorf("Contains allocates %.1f times per run, want 0", allocs)
	}
}

func FuzzContains(f *testing.F) {
	f.Add("I don't want this", "don't want")
	f.Add("whyte", "why")
	f.Fuzz(func(t *testing.T, text, phrase string) {
		got := Contains(text, phrase)
		// A phrase always matches itself surrounded by spaces, unless it is blank.
		if got && phrase == "" {
			t.Fatal("empty phrase matched")
		}
		// Matching is case-insensitive for ASCII letters: adding the phrase to the text
		// with spaces around it always matches.
		if !blank(phrase) && validUTF8(phrase) && !Contains(text+" "+phrase+" ", phrase) {
			t.Fatalf("phrase %q not found in text ending with it", phrase)
		}
	})
}

func blank(s string) bool {
	for _, r := range s {
		if !isSpace(r) {
			return false
		}
	}
	return true
}

func validUTF8(s string) bool {
	for _, r := range s {
		if r == '\uFFFD' {
			return false
		}
	}
	return true
}

// reference is a slow, obviously-correct matcher over runes.
func reference(text, phrase string) bool {
	toks := strings.FieldsFunc(phrase, isSpace)
	if len(toks) == 0 {
		return false
	}
	tr := []rune(text)
	eq := func(p, t rune) bool {
		if p < utf8.RuneSelf && p != '\'' {
			return t < utf8.RuneSelf && fold(t) == fold(p)
		}
		return fold(p) == fold(t)
	}
	first := []rune(toks[0])[0]
	lastTok := []rune(toks[len(toks)-1])
	last := lastTok[len(lastTok)-1]
	for s := range tr {
		if isWord(fold(first)) && s > 0 && (isWord(tr[s-1]) || isApostrophe(tr[s-1]) && s > 1 && isWord(tr[s-2])) {
			continue
		}
		i, ok := s, true
		for k, tok := range toks {
			if k > 0 {
				n := 0
				for i < len(tr) && isSpace(tr[i]) {
					i++
					n++
				}
				if n == 0 {
					ok = false
					break
				}
			}
			for _, p := range tok {
				if i >= len(tr) || !eq(p, tr[i]) {
					ok = false
					break
				}
				i++
			}
			if !ok {
				break
			}
		}
		if !ok {
			continue
		}
		if isWord(fold(last)) && i < len(tr) && (isWord(tr[i]) || isApostrophe(tr[i]) && i+1 < len(tr) && isWord(tr[i+1])) {
			continue
		}
		return true
	}
	return false
}

func FuzzContainsReference(f *testing.F) {
	f.Add("I don’t want Dr. Smith", "don't  want")
	f.Add("Mr Whyte", "why")
	f.Add("KELVIN \u212a", "k")
	f.Fuzz(func(t *testing.T, text, phrase string) {
		if !utf8.ValidString(text) || !utf8.ValidString(phrase) {
			return
		}
		if got, want := Contains(text, phrase), reference(text, phrase); got != want {
			t.Fatalf("Contains(%q, %q) = %v, reference says %v", text, phrase, got, want)
		}
	})
}
