package pairscore

import (
	"slices"
	"strings"
	"unicode"
)

// Sentence encoders score a text and its contrary as near-identical:
// "cancel the order" and "do not cancel the order" (0.97 with the built-in
// encoder), "stocks close 2.47% higher" and "… 0.39% higher" (0.99),
// "close up" and "close down", "on the kitchen speaker" and "on the
// bedroom speaker" (0.96). Contrast finds such a difference between two
// text views by their surface: a different number of negation cues, a
// different multiset of numbers, a word on one side whose opposite stands
// on the other (the list below, or WordNet's antonyms), or a word on one
// side swapped for another of the same kind (the lexicon). It names the
// kind of difference ("negation", "numbers", "opposite words", "words of
// the same kind"), never the text, or returns "" when there is none. It
// is the funnel's contrast guard (here so that the guard and the scorer's
// features are one code); the scorer reads the same signals as features.
func Contrast(a, b string) string {
	wa, wb := words(a), words(b)
	if negations(wa) != negations(wb) {
		return "negation"
	}
	if !slices.Equal(numbers(a), numbers(b)) {
		return "numbers"
	}
	if opposed(wa, wb) != "" || opposed(wb, wa) != "" {
		return "opposite words"
	}
	switch _, rel := swapped(a, b, wa, wb); rel {
	case "opposites":
		return "opposite words"
	case "kinds":
		return "words of the same kind"
	}
	return ""
}

// words lowercases text and splits it into words, keeping apostrophes.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' && r != '’'
	})
}

// negations counts the negation cues: "not", "no", "never", "without",
// "n't" contractions and the like.
func negations(ws []string) int {
	n := 0
	for _, w := range ws {
		if isNegation(w) {
			n++
		}
	}
	return n
}

func isNegation(w string) bool {
	w = trimApostrophes(w)
	return negationCues[w] || strings.HasSuffix(w, "n't") || strings.HasSuffix(w, "n’t")
}

// trimApostrophes is strings.Trim(w, "'’"), without its general cutset
// path (it runs for every word).
func trimApostrophes(w string) string {
	for {
		switch {
		case strings.HasPrefix(w, "'"):
			w = w[1:]
		case strings.HasPrefix(w, "’"):
			w = w[len("’"):]
		case strings.HasSuffix(w, "'"):
			w = w[:len(w)-1]
		case strings.HasSuffix(w, "’"):
			w = w[:len(w)-len("’")]
		default:
			return w
		}
	}
}

var negationCues = map[string]bool{
	"not": true, "no": true, "never": true, "without": true, "neither": true, "nor": true,
	"cannot": true, "dont": true, "doesnt": true, "didnt": true, "wont": true, "cant": true,
	"isnt": true, "arent": true, "shouldnt": true, "none": true, "nothing": true, "nobody": true,
}

// numbers returns the numbers written in text (digits with their decimal
// point, without leading or trailing zeros that do not change the value),
// sorted.
func numbers(text string) []string {
	var out []string
	for i := 0; i < len(text); {
		if text[i] < '0' || text[i] > '9' {
			i++
			continue
		}
		j := i
		for j < len(text) && (text[j] >= '0' && text[j] <= '9' || text[j] == '.' && j+1 < len(text) && text[j+1] >= '0' && text[j+1] <= '9') {
			j++
		}
		n := strings.TrimLeft(text[i:j], "0")
		if strings.Contains(n, ".") {
			n = strings.TrimRight(strings.TrimRight(n, "0"), ".") // 2.50 is 2.5, 2.0 is 2
		}
		out = append(out, n)
		i = j
	}
	slices.Sort(out)
	return out
}

// opposites pairs words whose swap reverses an instruction or a fact.
var opposites = map[string][]string{
	"up": {"down"}, "higher": {"lower"}, "increase": {"decrease", "reduce"}, "raise": {"lower", "cut"},
	"add": {"remove", "delete"}, "enable": {"disable"}, "open": {"close"}, "buy": {"sell"},
	"accept": {"reject", "decline"}, "approve": {"reject", "deny", "decline"}, "allow": {"deny", "block"},
	"start": {"stop"}, "lock": {"unlock"}, "subscribe": {"unsubscribe"}, "include": {"exclude"},
	"before": {"after"}, "debit": {"credit"}, "win": {"lose"}, "gain": {"loss"}, "rise": {"fall"},
	"rose": {"fell"}, "above": {"below"}, "more": {"less", "fewer"}, "true": {"false"}, "first": {"last"}, "import": {"export"}, "upload": {"download"},
	"grant": {"revoke"}, "follow": {"unfollow"}, "publish": {"unpublish"}, "archive": {"unarchive"},
}

func init() {
	// Opposites go both ways.
	for w, os := range opposites {
		for _, o := range os {
			if !slices.Contains(opposites[o], w) {
				opposites[o] = append(opposites[o], w)
			}
		}
	}
	for _, os := range opposites {
		slices.Sort(os) // the first pair found does not depend on the order of init
	}
}

// opposed returns "w / o" for a word w of a whose opposite o stands in b
// and not in a, while b lacks w itself; "" when there is none. Words are
// tried in a's order, so the answer is deterministic.
func opposed(a, b []string) string {
	for i, w := range a {
		os := opposites[w]
		if len(os) == 0 || slices.Contains(b, w) || slices.Contains(a[:i], w) {
			continue
		}
		for _, o := range os {
			if slices.Contains(b, o) && !slices.Contains(a, o) {
				return w + " / " + o
			}
		}
	}
	return ""
}
