package pairscore

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// token is one content word of a text view's values.
type token struct {
	key     string  // folded: lower case, light suffix folding (see fold)
	surface string  // as written
	weight  float64 // the key's IDF weight, once looked up
	caps    bool    // capitalised and not the first word of a sentence
	quoted  bool    // inside quotation marks
}

// contentWords returns the content words of a text view: the words of its
// values, without the tool line and the field paths canon writes ("tool\n
// path: value\n…"), without function words, numbers and negation cues
// (the last two have features of their own). A text of one line is all
// value.
func contentWords(view string, dst []token) []token {
	if dst == nil {
		dst = make([]token, 0, len(view)/6)
	}
	lines := strings.Split(view, "\n")
	if len(lines) > 1 {
		lines = lines[1:] // the tool's name
		for i, l := range lines {
			if k := strings.Index(l, ": "); k >= 0 {
				lines[i] = l[k+2:]
			}
		}
	}
	for _, l := range lines {
		dst = valueWords(l, dst)
	}
	return dst
}

// titleShare is the share of capitalised words inside a value past which
// it is read as a headline in title case ("UN Chemical Weapons Experts to
// Visit Syria"), whose capitals mark no names.
const titleShare = 0.7

// valueWords appends the content words of one value.
func valueWords(s string, dst []token) []token {
	from := len(dst)
	inner, capsInner := 0, 0 // content words not starting a sentence, capitalised ones
	initial := true          // the next word starts a sentence
	quote := rune(0)         // the open quotation mark, if any
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isWordRune(r) {
			switch {
			case r == '.' || r == '!' || r == '?' || r == ':' || r == ';':
				initial = true
			case quote == 0 && isQuote(r) && i+n < len(s):
				if next, _ := utf8.DecodeRuneInString(s[i+n:]); isWordRune(next) {
					quote = r
				}
			case quote != 0 && closes(quote, r):
				quote = 0
			}
			i += n
			continue
		}
		j := i
		for j < len(s) {
			r, n := utf8.DecodeRuneInString(s[j:])
			if !isWordRune(r) && !(isApostrophe(r) && j+n < len(s) && startsWord(s[j+n:])) {
				break
			}
			j += n
		}
		w := s[i:j]
		first, _ := utf8.DecodeRuneInString(w)
		caps := !initial && unicode.IsUpper(first)
		wasInitial := initial
		initial = false
		i = j
		if unicode.IsDigit(first) {
			continue
		}
		lower := strings.ToLower(w)
		if strings.ContainsRune(lower, '’') {
			lower = strings.ReplaceAll(lower, "’", "'")
		}
		if stopwords[strings.TrimRight(lower, "'")] || isNegation(lower) {
			continue
		}
		key := foldLower(lower)
		if key == "" {
			continue
		}
		if !wasInitial {
			inner++
			if caps {
				capsInner++
			}
		}
		dst = append(dst, token{key: key, surface: w, caps: caps, quoted: quote != 0})
	}
	if inner >= 3 && float64(capsInner) > titleShare*float64(inner) {
		for i := from; i < len(dst); i++ {
			dst[i].caps = false
		}
	}
	return dst
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func isApostrophe(r rune) bool { return r == '\'' || r == '’' }

func startsWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isWordRune(r)
}

func isQuote(r rune) bool {
	switch r {
	case '"', '\'', '“', '‘', '«', '`':
		return true
	}
	return false
}

// closes reports whether r closes a quotation opened by open.
func closes(open, r rune) bool {
	switch open {
	case '“':
		return r == '”' || r == '"'
	case '‘':
		return r == '’' || r == '\''
	case '«':
		return r == '»'
	}
	return r == open || r == '’' && open == '\'' || r == '”' && open == '"'
}

// fold lowercases a word, drops a possessive, and folds the commonest
// English inflections so that "learning" meets "learn" and "passwords"
// "password": plural -s/-es/-ies, -ing, -ed. It is not a stemmer
// (a Porter or Snowball stemmer costs about a microsecond a word, a fifth
// of the scorer's budget for a whole pair, and conflates words that mean
// different things: "general"/"generate"); a wrong fold only merges two
// forms of one word or misses one. Folds are keys, not words: "use",
// "uses", "used" and "using" are all "us".
func fold(w string) string { return foldLower(strings.ToLower(w)) }

// foldLower is fold of a word already in lower case.
func foldLower(w string) string {
	w = strings.TrimSuffix(strings.TrimSuffix(w, "'s"), "’s")
	w = strings.TrimRight(w, "'’")
	n := len(w)
	switch {
	case n > 4 && strings.HasSuffix(w, "ies"):
		w = w[:n-3] + "y"
	case n > 4 && strings.HasSuffix(w, "ing") && hasVowel(w[:n-3]):
		w = undouble(w[:n-3])
	case n > 3 && strings.HasSuffix(w, "ed") && !strings.HasSuffix(w, "eed") && hasVowel(w[:n-2]):
		w = undouble(w[:n-2])
	case n > 4 && (strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "xes")):
		w = w[:n-2]
	case n > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:n-1]
	}
	// The e an inflection drops is left off every form: "change",
	// "changes", "changed" and "changing" all fold to "chang".
	if n := len(w); n >= 3 && w[n-1] == 'e' && !strings.ContainsRune("aeiou", rune(w[n-2])) {
		w = w[:n-1]
	}
	return w
}

// hasVowel reports whether s holds a vowel: "thing" is no inflection of
// "th", "using" is one of "us(e)".
func hasVowel(s string) bool { return strings.ContainsAny(s, "aeiouy") }

// undouble drops the doubled consonant an inflection added ("stopp" of
// "stopping").
func undouble(s string) string {
	n := len(s)
	if n >= 3 && s[n-1] == s[n-2] && !strings.ContainsRune("aeiouls", rune(s[n-1])) {
		return s[:n-1]
	}
	return s
}

// stopwords are the English function words: they carry no request of
// their own, and a difference in them is the encoder's to weigh. Matched
// in lower case, before folding.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be
		because been being below between both but by can could did do does doing down during each few
		for from further had has have having he her here hers herself him himself his how i if in into
		is it its itself just me might my myself of off on once only or other our ours ourselves out over
		own same shall she should so some such than that the their theirs them themselves then there
		these they this those through to too under until up very was we were what when where which while
		who whom why will with would you your yours yourself yourselves also us let may must yet im ive
		id youre thats whats theres one i'm i've i'd you're that's what's there's it's he's she's let's we're they're`) {
		m[w] = true
	}
	return m
}()
