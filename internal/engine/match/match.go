// Package match is the intent pattern matcher shared by the engine (routing global
// transitions) and the builtin provider (ClassifyIntent): case-insensitive phrases
// matched on word boundaries, without allocating.
//
// A phrase matches when its runes appear in the text, compared case-insensitively
// (simple Unicode lower-casing), such that:
//
//   - a phrase that starts (ends) with a letter or digit does not start (end) inside a
//     word of the text: "why" does not match "whyte" nor "anywhy", "don" does not match
//     "don't";
//   - a run of white space in the phrase matches a run of one or more white-space runes
//     in the text, so "how do i" matches "How  do I";
//   - typographic apostrophes (’ ‘ ʼ) match the ASCII one, so "don't want" matches
//     "I don’t want";
//   - an ASCII letter of the phrase matches only that letter in either case (so the
//     scan can skip from byte to byte); other runes compare by simple lower-casing.
//
// An empty phrase, or one of white space only, never matches.
package match

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Contains reports whether text contains phrase as whole words, ignoring case.
func Contains(text, phrase string) bool {
	first, n := decode(phrase, 0)
	if n == 0 {
		return false
	}
	if isSpace(first) {
		// Leading white space in a phrase is not significant.
		i := 0
		for i < len(phrase) {
			r, w := decode(phrase, i)
			if !isSpace(r) {
				break
			}
			i += w
		}
		if i == len(phrase) {
			return false
		}
		phrase = phrase[i:]
		first, _ = decode(phrase, 0)
	}
	first = fold(first)
	wordStart := isWord(first)
	wordEnd := isWord(lastRune(phrase))

	if first < utf8.RuneSelf && first != '\'' {
		// Fast path: jump between the bytes that can start a match. A non-ASCII byte
		// never equals an ASCII one, so scanning bytes is safe in UTF-8.
		lo, up := byte(first), byte(first)
		if 'a' <= lo && lo <= 'z' {
			up = lo - ('a' - 'A')
		}
		nextLo, nextUp := -1, -1 // next offsets of lo and up at or after i, or len(text)
		for i := 0; i < len(text); i++ {
			if nextLo < i {
				nextLo = indexFrom(text, lo, i)
			}
			if nextUp < i {
				nextUp = indexFrom(text, up, i)
			}
			if i = min(nextLo, nextUp); i >= len(text) {
				return false
			}
			if wordStart && !boundaryBeforeAt(text, i) {
				continue
			}
			if end := matchAt(text, i, phrase); end >= 0 && (!wordEnd || boundaryAfter(text, end)) {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(text); {
		r, w := decode(text, i)
		if fold(r) == first && (!wordStart || boundaryBeforeAt(text, i)) {
			if end := matchAt(text, i, phrase); end >= 0 && (!wordEnd || boundaryAfter(text, end)) {
				return true
			}
		}
		i += w
	}
	return false
}

// Index returns the index of the first phrase that text contains, or -1.
func Index(text string, phrases []string) int {
	for i, p := range phrases {
		if Contains(text, p) {
			return i
		}
	}
	return -1
}

// Words splits text into its words as Contains sees their boundaries, lower-cased
// (simple Unicode lower-casing, typographic apostrophes as the ASCII one): runs of
// letters, digits and underscores, an apostrophe between two of them inside the word
// ("don't", "patient's"). The builtin intent classifier scores messages with them.
func Words(text string) []string {
	var words []string
	var b strings.Builder
	end := func() {
		if b.Len() > 0 {
			words = append(words, b.String())
			b.Reset()
		}
	}
	for i := 0; i < len(text); {
		r, w := decode(text, i)
		i += w
		switch {
		case isWord(r):
			b.WriteRune(fold(r))
		case isApostrophe(r) && b.Len() > 0 && i < len(text):
			if next, _ := decode(text, i); isWord(next) {
				b.WriteByte('\'')
				continue
			}
			end()
		default:
			end()
		}
	}
	end()
	return words
}

// matchAt matches phrase against text from byte offset i and returns the offset just
// past the match, or -1.
func matchAt(text string, i int, phrase string) int {
	j := 0
	for j < len(phrase) {
		if pc := phrase[j]; pc < utf8.RuneSelf && pc != ' ' && pc != '\t' && pc != '\n' && pc != '\r' && pc != '\v' && pc != '\f' && pc != '\'' {
			if i >= len(text) {
				return -1
			}
			tc := text[i]
			// An ASCII letter of the phrase matches that letter only, in either case.
			if lowerASCII(tc) != lowerASCII(pc) {
				return -1
			}
			i++
			j++
			continue
		}
		pr, pw := decode(phrase, j)
		if isSpace(pr) {
			for j < len(phrase) {
				r, w := decode(phrase, j)
				if !isSpace(r) {
					break
				}
				j += w
			}
			if j == len(phrase) {
				// Trailing white space in a phrase is not significant.
				return i
			}
			spaces := 0
			for i < len(text) {
				r, w := decode(text, i)
				if !isSpace(r) {
					break
				}
				i += w
				spaces++
			}
			if spaces == 0 {
				return -1
			}
			continue
		}
		if i >= len(text) {
			return -1
		}
		tr, tw := decode(text, i)
		if fold(tr) != fold(pr) {
			return -1
		}
		i += tw
		j += pw
	}
	return i
}

// boundaryBeforeAt reports whether a word may start at byte offset i of text.
func boundaryBeforeAt(text string, i int) bool {
	if i == 0 {
		return true
	}
	prev, w := utf8.DecodeLastRuneInString(text[:i])
	if isWord(prev) {
		return false
	}
	// "don't": the t after the apostrophe is inside the word.
	if isApostrophe(prev) && i-w > 0 {
		if pp, _ := utf8.DecodeLastRuneInString(text[:i-w]); isWord(pp) {
			return false
		}
	}
	return true
}

// boundaryAfter reports whether a word may end at byte offset end of text.
func boundaryAfter(text string, end int) bool {
	if end >= len(text) {
		return true
	}
	r, w := decode(text, end)
	if isWord(r) {
		return false
	}
	if isApostrophe(r) && end+w < len(text) {
		if next, _ := decode(text, end+w); isWord(next) {
			return false
		}
	}
	return true
}

func lastRune(s string) rune {
	for len(s) > 0 {
		r, w := utf8.DecodeLastRuneInString(s)
		if !isSpace(r) {
			return fold(r)
		}
		s = s[:len(s)-w]
	}
	return -1
}

func decode(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// indexFrom returns the offset of c in text at or after from, or len(text).
func indexFrom(text string, c byte, from int) int {
	if j := strings.IndexByte(text[from:], c); j >= 0 {
		return from + j
	}
	return len(text)
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

func fold(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}
	if isApostrophe(r) {
		return '\''
	}
	return unicode.ToLower(r)
}

func isApostrophe(r rune) bool {
	return r == '\'' || r == '\u2019' || r == '\u2018' || r == '\u02bc'
}

func isWord(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f'
	}
	return unicode.IsSpace(r)
}
