package builtin

import (
	"fmt"
	"strings"

	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/engine/match"
)

// Classify is the builtin intent classification, offline and deterministic:
//
//   - an intent one of whose patterns the message contains wins, with confidence 1
//     (the first such intent, in the order given);
//   - otherwise the message's words are scored against each intent's words, those of
//     its description and of its patterns. Words are compared lower-cased, without
//     a possessive 's or apostrophes, with a light stemming of English endings
//     (-s, -es, -ies, -ed, -ing), and without common English function words ("is",
//     "it", "my", "the", ...). The confidence of an intent is the share of the
//     message's distinct words it contains, each word counting 1/n when n of the
//     intents contain it, so that a word every intent shares is weak evidence: "is it
//     covered by my insurance plan?" has the words cover, insurance and plan, and an
//     intent described as "questions on what the insurance plan covers" scores 1;
//   - the intent with the highest confidence wins, ties going to the first; when no
//     word scores (or the message has none), the answer is agent.NoIntent.
//
// The caller applies its threshold: the engine counts an intent below the journey's
// intentDetection.confidenceThreshold as no match.
func Classify(req agent.IntentRequest) agent.IntentResponse {
	for _, in := range req.Intents {
		if match.Index(req.Message, in.Patterns) >= 0 {
			return agent.IntentResponse{Intent: in.Name, Confidence: 1, Reasoning: "pattern match"}
		}
	}
	words := terms(req.Message)
	if len(words) == 0 || len(req.Intents) == 0 {
		return agent.IntentResponse{Intent: agent.NoIntent, Confidence: 1, Reasoning: "no pattern matched and the message has no words to score"}
	}
	vocab := make([]map[string]bool, len(req.Intents))
	shared := map[string]int{} // how many intents have each word of the message
	for i, in := range req.Intents {
		v := map[string]bool{}
		for _, w := range terms(in.Description) {
			v[w] = true
		}
		for _, p := range in.Patterns {
			for _, w := range terms(p) {
				v[w] = true
			}
		}
		vocab[i] = v
		for _, w := range words {
			if v[w] {
				shared[w]++
			}
		}
	}
	best, bestScore := -1, 0.0
	var bestWords []string
	for i := range req.Intents {
		score := 0.0
		var hits []string
		for _, w := range words {
			if vocab[i][w] {
				score += 1 / float64(shared[w])
				hits = append(hits, w)
			}
		}
		if score > bestScore {
			best, bestScore, bestWords = i, score, hits
		}
	}
	if best < 0 {
		return agent.IntentResponse{Intent: agent.NoIntent, Confidence: 1,
			Reasoning: fmt.Sprintf("no pattern matched and none of the message's words (%s) is an intent's", strings.Join(words, ", "))}
	}
	return agent.IntentResponse{
		Intent:     req.Intents[best].Name,
		Confidence: bestScore / float64(len(words)),
		Reasoning: fmt.Sprintf("word overlap: %d of the message's %d words (%s) are the intent's",
			len(bestWords), len(words), strings.Join(bestWords, ", ")),
	}
}

// terms are the distinct normalized words of text, in order: no function words,
// possessives and apostrophes dropped, endings stemmed.
func terms(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range match.Words(text) {
		w = strings.TrimSuffix(w, "'s")
		w = strings.ReplaceAll(w, "'", "")
		if stopWords[w] {
			continue
		}
		w = stem(w)
		if w == "" || seen[w] || stopWords[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
	}
	return out
}

// stem strips a few English endings, conservatively: covers, covered and covering
// become cover; policies becomes policy; a short word is left alone.
func stem(w string) string {
	n := len(w)
	switch {
	case n > 4 && strings.HasSuffix(w, "ies"):
		return w[:n-3] + "y"
	case strings.HasSuffix(w, "sses"):
		return w[:n-2]
	case n > 5 && strings.HasSuffix(w, "ing"):
		return w[:n-3]
	case n > 4 && strings.HasSuffix(w, "ed"):
		return w[:n-2]
	case n > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:n-1]
	}
	return w
}

// stopWords are English function words and pleasantries, which say nothing about an
// intent. Question words (what, how, why, ...) are not among them: they tell a
// question.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		a an the and or but if then so than too very just also only even
		is am are was were be been being do does did doing done have has had having
		i me my mine myself we us our ours you your yours he him his she her hers
		it its they them their theirs this that these those there here
		of in on at by for with from to into onto about over under up down out off as
		can could would should will shall may might must
		not no nor some any all each both more most such own same other
		im ive id ill youre youve dont doesnt didnt cant couldnt wont wouldnt isnt arent
		please thanks thank hi hello hey ok okay yes oh well now again still`) {
		m[w] = true
	}
	return m
}()
