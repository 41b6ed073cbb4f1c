package funnel

import (
	"strings"
	"unicode"
)

// negations counts the negation cues of a text: "not", "no", "never",
// "without", "n't" contractions and the like. Sentence encoders score a
// text and its negation as near-identical ("cancel the order" and "do not
// cancel the order"), so a candidate whose count differs from the call's is
// held below the duplicate threshold: only the judge may call it the same.
func negations(text string) int {
	n := 0
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && r != '\'' && r != '’'
	}) {
		w = strings.Trim(w, "'’")
		if negationCues[w] || strings.HasSuffix(w, "n't") || strings.HasSuffix(w, "n’t") {
			n++
		}
	}
	return n
}

var negationCues = map[string]bool{
	"not": true, "no": true, "never": true, "without": true, "neither": true, "nor": true,
	"cannot": true, "dont": true, "doesnt": true, "didnt": true, "wont": true, "cant": true,
	"isnt": true, "arent": true, "shouldnt": true, "none": true, "nothing": true, "nobody": true,
}
