package pairscore

import (
	_ "embed"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// The lexicon (lexicon.txt, written by bench/cmd/lexicon from WordNet 3.0)
// tells the contrast guard which two words are kinds of one thing or
// opposites: the swaps a sentence encoder scores as near-identical ("on
// the kitchen speaker" / "on the bedroom speaker", "next Tuesday" / "next
// Friday", "in Chicago" / "in Seattle", "acquitted" / "convicted").
//
//go:embed lexicon.txt
var lexiconFile string

// lexicon is the parsed file: nouns sorted by word, the pairs of
// opposites, and the irregular forms.
type lexicon struct {
	nouns     []string
	ids       []uint32            // every noun's entry, one after the other
	at        []uint32            // where the i-th noun's entry starts in ids
	opposites map[string][]string // both ways
	forms     map[string]string
}

// nounEntry is a noun's line: its commonest sense, the ancestors that
// join it to other kinds of one thing (deep), those that only rule a
// pair out (shallow ancestors and the wholes it is part of), and its
// other senses, in one slice: [sense, instance, nDeep, deep…, nOut, out…,
// other…], instance 1 when the sense names one thing (Chicago) rather
// than a kind (a city).
type nounEntry []uint32

func (e nounEntry) sense() uint32   { return e[0] }
func (e nounEntry) instance() bool  { return e[1] == 1 }
func (e nounEntry) deep() []uint32  { return e[3 : 3+e[2]] }
func (e nounEntry) out() []uint32   { n := 3 + e[2]; return e[n+1 : n+1+e[n]] }
func (e nounEntry) other() []uint32 { n := 3 + e[2]; return e[n+1+e[n]:] }

// nounParser reads noun lines into one slice of ids, reusing its
// scratch space: reading the file leaves no garbage behind (an idle
// server's resident set would keep it).
type nounParser struct{ deep, out, other []uint32 }

// append appends the entry of the fields "[*]id ancestor… -id… =id…" to
// dst, or reports that they do not read or name no deep ancestor.
func (p *nounParser) append(dst []uint32, f []string) ([]uint32, bool) {
	if len(f) < 2 {
		return dst, false
	}
	var sense, instance uint32
	p.deep, p.out, p.other = p.deep[:0], p.out[:0], p.other[:0]
	for i, s := range f {
		kind := s[0]
		if kind == '-' || kind == '=' || kind == '*' {
			s = s[1:]
		}
		v, err := strconv.ParseUint(s, 36, 32)
		if err != nil || i == 0 && (kind == '-' || kind == '=') || i > 0 && kind == '*' {
			return dst, false
		}
		if kind == '*' {
			instance = 1
		}
		switch {
		case i == 0:
			sense = uint32(v)
		case kind == '-':
			p.out = append(p.out, uint32(v))
		case kind == '=':
			p.other = append(p.other, uint32(v))
		default:
			p.deep = append(p.deep, uint32(v))
		}
	}
	if len(p.deep) == 0 {
		return dst, false
	}
	dst = append(dst, sense, instance, uint32(len(p.deep)))
	dst = append(dst, p.deep...)
	dst = append(dst, uint32(len(p.out)))
	dst = append(dst, p.out...)
	return append(dst, p.other...), true
}

var (
	lexOnce sync.Once
	lex     *lexicon
)

// theLexicon parses the embedded file once, into slices sized by a first
// count so that nothing is copied while they grow. The file is ours and
// checked by a test: a line that does not read is skipped, not a panic.
func theLexicon() *lexicon {
	lexOnce.Do(func() {
		var nouns, ids, opposites, forms int
		for line := range strings.Lines(lexiconFile) {
			switch {
			case strings.HasPrefix(line, "n "):
				nouns++
				ids += strings.Count(line, " ") + 2 // at most: the fields past the word and three counts
			case strings.HasPrefix(line, "o "):
				opposites++
			case strings.HasPrefix(line, "x "):
				forms++
			}
		}
		l := &lexicon{
			nouns: make([]string, 0, nouns), at: make([]uint32, 0, nouns), ids: make([]uint32, 0, ids),
			opposites: make(map[string][]string, 2*opposites), forms: make(map[string]string, forms),
		}
		var p nounParser
		f := make([]string, 0, 64)
		for line := range strings.Lines(lexiconFile) {
			f = appendFields(f[:0], line)
			if len(f) < 3 || strings.HasPrefix(f[0], "#") {
				continue
			}
			switch f[0] {
			case "n":
				if len(l.nouns) > 0 && l.nouns[len(l.nouns)-1] >= f[1] {
					continue
				}
				at := len(l.ids)
				var ok bool
				if l.ids, ok = p.append(l.ids, f[2:]); ok {
					l.nouns = append(l.nouns, f[1])
					l.at = append(l.at, uint32(at))
				}
			case "o":
				l.opposites[f[1]] = append(l.opposites[f[1]], f[2])
				l.opposites[f[2]] = append(l.opposites[f[2]], f[1])
			case "x":
				l.forms[f[1]] = f[2]
			}
		}
		lex = l
	})
	return lex
}

// appendFields appends the space-separated fields of line to dst
// (strings.Fields without its allocation).
func appendFields(dst []string, line string) []string {
	for {
		line = strings.TrimLeft(line, " \t\r\n")
		if line == "" {
			return dst
		}
		i := strings.IndexAny(line, " \t\r\n")
		if i < 0 {
			return append(dst, line)
		}
		dst, line = append(dst, line[:i]), line[i:]
	}
}

// Warm reads the contrast guard's lexicon now, so that the first
// comparison does not (about 16 ms and 2.3 MiB; later calls return at
// once). It is safe to call from any goroutine.
func Warm() { theLexicon() }

// noun returns a word's noun entry, nil when the lexicon does not hold it.
func (l *lexicon) noun(w string) nounEntry {
	if i, ok := slices.BinarySearch(l.nouns, w); ok {
		end := uint32(len(l.ids))
		if i+1 < len(l.at) {
			end = l.at[i+1]
		}
		return nounEntry(l.ids[l.at[i]:end:end])
	}
	return nil
}

// bases are the forms a lower-case word may be an inflection of, the word
// itself first: irregular forms from the lexicon, then the regular
// suffixes ("kitchens", "convicted", "closes", "opening").
func (l *lexicon) bases(w string, dst []string) []string {
	dst = append(dst[:0], w)
	if b, ok := l.forms[w]; ok {
		dst = append(dst, b)
	}
	n := len(w)
	for _, r := range [...]struct{ suffix, repl string }{
		{"ies", "y"}, {"ied", "y"}, {"es", ""}, {"s", ""}, {"ed", ""}, {"ed", "e"},
		{"ing", ""}, {"ing", "e"}, {"er", ""}, {"est", ""}, {"men", "man"},
	} {
		if n-len(r.suffix) < 3 || !strings.HasSuffix(w, r.suffix) {
			continue
		}
		b := w[:n-len(r.suffix)] + r.repl
		dst = append(dst, b)
		if m := len(b); r.repl == "" && m >= 4 && b[m-1] == b[m-2] && !strings.ContainsRune("aeiouls", rune(b[m-1])) {
			dst = append(dst, b[:m-1]) // "stopped", "stopping"
		}
	}
	return dst
}

// lexWord is a word looked up once: its possible bases, the opposites of
// any of them, and the noun entry of the first base the lexicon holds.
type lexWord struct {
	word      string
	bases     []string
	opposites [][]string
	noun      nounEntry
}

func (l *lexicon) look(w string) lexWord {
	x := lexWord{word: w, bases: l.bases(w, nil)}
	for _, b := range x.bases {
		if o := l.opposites[b]; o != nil {
			x.opposites = append(x.opposites, o)
		}
		if x.noun == nil {
			x.noun = l.noun(b)
		}
	}
	return x
}

// relation names how two different words relate in the lexicon:
// "kinds" when their nouns are kinds of one thing (and neither is a kind
// or a part of the other, nor are they synonyms in any sense),
// "opposites" when WordNet calls them antonyms, "" otherwise or when the
// two are forms of one word.
func relation(a, b *lexWord) string {
	for _, x := range a.bases {
		if slices.Contains(b.bases, x) {
			return "" // "room" / "rooms"
		}
	}
	for _, os := range a.opposites {
		for _, y := range b.bases {
			if slices.Contains(os, y) {
				return "opposites"
			}
		}
	}
	na, nb := a.noun, b.noun
	if na == nil || nb == nil {
		return ""
	}
	if shareSense(na, nb) {
		return "" // synonyms in some sense: "purse" and "bag"
	}
	if above(na, nb.sense()) || above(nb, na.sense()) {
		return "" // a dog is an animal, England part of Britain
	}
	if na.instance() != nb.instance() {
		return "" // a name and a kind: "the country" / "Israel" rewords
	}
	for _, x := range na.deep() {
		if slices.Contains(nb.deep(), x) {
			return "kinds"
		}
	}
	return ""
}

// shareSense reports whether two nouns have a sense in common, their
// commonest or another.
func shareSense(a, b nounEntry) bool {
	if a.sense() == b.sense() || slices.Contains(b.other(), a.sense()) {
		return true
	}
	for _, o := range a.other() {
		if o == b.sense() || slices.Contains(b.other(), o) {
			return true
		}
	}
	return false
}

// above reports whether sense s stands above e's: an ancestor, or a
// whole it is part of.
func above(e nounEntry, s uint32) bool {
	return slices.Contains(e.deep(), s) || slices.Contains(e.out(), s)
}

// maxSwapWords bounds the words only one side holds for swapped to look
// for a swap: texts that differ in more words than that differ anyway
// (the encoder weighs them), and the guard runs on every comparison.
const maxSwapWords = 8

// swapped returns "w / x" for a word w only in text a and a word x only
// in text b (wa and wb are their words, as words returns them) that are
// kinds of one thing or opposites, and the relation; "" when there is
// none. Function words, negation cues, words of fewer than three letters
// and acronyms ("IAEA", which the other text may spell out) are not
// looked up in the lexicon; acronyms have a rule of their own
// (acronymSwap), tried when no word is swapped. Words are tried in a's
// order, then b's, so the answer is deterministic.
func swapped(a, b string, wa, wb []string) (pair, rel string) {
	aa, ab := acronyms(a), acronyms(b)
	if pair, rel = swappedWords(wa, wb, aa, ab); rel != "" {
		return pair, rel
	}
	if pair = acronymSwap(aa, ab, wa, wb); pair != "" {
		return pair, "kinds"
	}
	return "", ""
}

// swappedWords is swapped over the words the lexicon may hold: aa and ab
// are the texts' acronyms, which it leaves out.
func swappedWords(wa, wb, aa, ab []string) (pair, rel string) {
	ca, cb := candidates(wa), candidates(wb)
	if len(ca) == 0 || len(cb) == 0 {
		return "", ""
	}
	oa, ob := onlyIn(ca, sortedKeys(cb), aa), onlyIn(cb, sortedKeys(ca), ab)
	if len(oa) == 0 || len(ob) == 0 || len(oa) > maxSwapWords || len(ob) > maxSwapWords {
		return "", ""
	}
	l := theLexicon()
	la, lb := make([]lexWord, len(oa)), make([]lexWord, len(ob))
	for i, w := range oa {
		la[i] = l.look(w)
	}
	for i, w := range ob {
		lb[i] = l.look(w)
	}
	// Opposites first, over every pair: which relation is named must not
	// depend on which text comes first.
	kinds := ""
	for i := range la {
		for j := range lb {
			switch relation(&la[i], &lb[j]) {
			case "opposites":
				return la[i].word + " / " + lb[j].word, "opposites"
			case "kinds":
				if kinds == "" {
					kinds = la[i].word + " / " + lb[j].word
				}
			}
		}
	}
	if kinds != "" {
		return kinds, "kinds"
	}
	return "", ""
}

// candidate is a word swapped may try, bare, with its folded key.
type candidate struct{ word, key string }

// candidates are the words of a text swapped may try: no function words
// or negation cues, bare ("Chicago's" is Chicago), of three letters a–z
// at least.
func candidates(ws []string) []candidate {
	var out []candidate
	for _, w := range ws {
		if stopwords[w] || isNegation(w) {
			continue
		}
		if w = bare(w); len(w) >= 3 && isLetters(w) {
			out = append(out, candidate{word: w, key: foldLower(w)})
		}
	}
	return out
}

// sortedKeys are the candidates' keys, sorted.
func sortedKeys(cs []candidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.key
	}
	slices.Sort(out)
	return out
}

// onlyIn returns the distinct words of a none of whose forms the other
// text holds ("houses" is in a text that says "house"; bSorted are its
// candidates' keys, sorted), but those in skip; it stops past
// maxSwapWords of them.
func onlyIn(a []candidate, bSorted, skip []string) []string {
	var out, keys []string
	for _, c := range a {
		if slices.Contains(keys, c.key) || slices.Contains(skip, c.word) {
			continue
		}
		if _, ok := slices.BinarySearch(bSorted, c.key); ok {
			continue
		}
		out, keys = append(out, c.word), append(keys, c.key)
		if len(out) > maxSwapWords {
			break
		}
	}
	return out
}

// acronyms are the words of text written in capitals only (two letters
// or more), in lower case. A line written all in capitals (a headline)
// has none: its words are words. A line "label: value", as a text view
// writes a field, is judged by its value.
func acronyms(text string) []string {
	var out []string
	for line := range strings.Lines(text) {
		if i := strings.Index(line, ": "); i > 0 && !strings.ContainsAny(line[:i], " \t") {
			line = line[i+2:]
		}
		out = lineAcronyms(out, line)
	}
	return out
}

// lineAcronyms appends the acronyms of one line to out.
func lineAcronyms(out []string, line string) []string {
	n := len(out)
	lower, start, upper := false, -1, true
	end := func(i int) {
		if start >= 0 && upper && i-start >= 2 {
			out = append(out, strings.ToLower(line[start:i]))
		}
		start, upper = -1, true
	}
	for i, r := range line {
		switch {
		case !unicode.IsLetter(r):
			end(i)
		default:
			if start < 0 {
				start = i
			}
			if unicode.IsLower(r) {
				lower = true
			}
			if !unicode.IsUpper(r) { // lower case, or a script without case
				upper = false
			}
		}
	}
	end(len(line))
	if !lower {
		return out[:n]
	}
	return out
}

// acronymSwap returns "x / y" for an acronym x only text a holds and an
// acronym y only text b holds ("UN" / "US", "FBI" / "CIA", "USD" /
// "EUR"): two names of one kind, as Chicago and Seattle are, which the
// encoder scores as near-identical. aa and ab are the texts' acronyms,
// wa and wb their words. An acronym the other text holds as a word or
// spells out ("IAEA" for "International Atomic Energy Agency", "CEO" for
// "chief executive officer") is in both; query operators written in
// capitals ("name IN (…)", "a OR b") and "OK" name nothing; and one
// acronym that begins the other ("US" / "USA", "NY" / "NYC") names the
// same thing. "" when there is none.
func acronymSwap(aa, ab, wa, wb []string) string {
	oa, ob := loneAcronyms(aa, ab, wb), loneAcronyms(ab, aa, wa)
	if len(oa) == 0 || len(ob) == 0 || len(oa) > maxSwapWords || len(ob) > maxSwapWords {
		return ""
	}
	for _, x := range oa {
		for _, y := range ob {
			if !strings.HasPrefix(x, y) && !strings.HasPrefix(y, x) {
				return x + " / " + y
			}
		}
	}
	return ""
}

// loneAcronyms are the distinct acronyms of one text (acrs) that are
// names and that the other text (its acronyms and words) neither holds
// nor spells out. Not names: notNames, and function words of three
// letters or more, which capitals only stress ("pay THIS invoice"); a
// two-letter one in capitals is most often a code ("US", "IT", "ME").
func loneAcronyms(acrs, otherAcrs, otherWords []string) []string {
	var out []string
	for _, x := range acrs {
		if notNames[x] || len(x) >= 3 && stopwords[x] || slices.Contains(out, x) || slices.Contains(otherAcrs, x) ||
			slices.Contains(otherWords, x) || spelledOut(x, otherWords) {
			continue
		}
		out = append(out, x)
	}
	return out
}

// notNames are words written in capitals that name nothing: the
// operators of search and query languages (SQL, Lucene, boolean search)
// and "OK".
var notNames = map[string]bool{
	"and": true, "or": true, "not": true, "in": true, "is": true, "xor": true, "like": true,
	"near": true, "to": true, "null": true, "between": true, "ok": true,
}

// spelledOut reports whether consecutive words of ws begin with the
// letters of the acronym acr in order, function words either giving
// their letter or left out ("Department of Justice" is DOJ, "United
// States of America" USA). One pass over the words: at[k] says that the
// words so far can end with acr's first k letters spelled.
func spelledOut(acr string, ws []string) bool {
	at := make([]bool, len(acr)+1)
	next := make([]bool, len(acr)+1)
	at[0] = true
	for _, w := range ws {
		clear(next)
		next[0] = true
		skip := stopwords[w]
		for k, ok := range at {
			if !ok {
				continue
			}
			if skip {
				next[k] = true
			}
			if k < len(acr) && w != "" && w[0] == acr[k] {
				next[k+1] = true
			}
		}
		if next[len(acr)] {
			return true
		}
		at, next = next, at
	}
	return false
}

// bare is a word without its quotes and possessive: "'alpha'" is alpha,
// "Chicago's" Chicago.
func bare(w string) string {
	return trimApostrophes(strings.TrimSuffix(strings.TrimSuffix(trimApostrophes(w), "'s"), "’s"))
}

func isLetters(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}
