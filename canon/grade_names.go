package canon

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The name readings compare strings of words: names of places, venues,
// people, titles, addresses. A name is split into words at white space and
// at the punctuation between words (, . - ; : ! ? / ( ) [ ] and quotes);
// other symbols (# + & _ $ …) stay in their word, so "C#" is not "C".
// Apostrophes inside a word are not compared ("Mimis" = "Mimi's").
//
// What is never read as a name: a single token shaped like an identifier
// (white space free, with a digit, an underscore or another symbol:
// "pay_8xK2", "A12"); a single word of fewer than four letters under case
// ("Aa" is not "AA"); code (a command, SQL, a path, a URL, an expression:
// by the leaf's class rule, or a "-flag" word).

// maxNameWords bounds the words a name reading looks at: names agents
// restate are short, and the arrays stay on the stack.
const maxNameWords = 16

type nameWords struct {
	n int
	w [maxNameWords]string
}

// splitName splits v into words; false when it has more than
// maxNameWords or none.
func splitName(v string, out *nameWords) bool {
	out.n = 0
	start := -1
	flush := func(end int) bool {
		if start < 0 {
			return true
		}
		w := strings.Trim(v[start:end], "'’")
		start = -1
		if w == "" {
			return true
		}
		if out.n == maxNameWords {
			return false
		}
		out.w[out.n] = w
		out.n++
		return true
	}
	for i, r := range v {
		if isNameSeparator(r) {
			if !flush(i) {
				return false
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	return flush(len(v)) && out.n > 0
}

func isNameSeparator(r rune) bool {
	switch r {
	case ',', '.', '-', ';', ':', '!', '?', '/', '(', ')', '[', ']', '"', '“', '”', '–', '—':
		return true
	}
	return unicode.IsSpace(r)
}

// identifierLike: a white-space-free value with a digit, an underscore
// or another symbol ("pay_8xK2", "A12", "x**2"): compared exactly, never
// read as a name.
func identifierLike(v string) bool {
	for _, r := range v {
		if unicode.IsSpace(r) {
			return false
		}
	}
	for _, r := range v {
		switch {
		case unicode.IsLetter(r), r == '\'', r == '’', r == '"', r == '-', r == '.', r == ',':
		default:
			return true
		}
	}
	return false
}

// hasFlag: a word that starts with "-" (a command's option, "ls -la"):
// the value is code, not a name.
func hasFlag(v string) bool {
	for i := 0; i+1 < len(v); i++ {
		if v[i] == '-' && (i == 0 || v[i-1] == ' ') && v[i+1] != ' ' {
			return true
		}
	}
	return false
}

// foldableWords: two spellings of a single word that a restatement may
// give: four letters or more in any case ("SOrry", "McDonalds", "HATHAT"),
// or three letters capitalized or not ("tom", "Tom"). Shorter words, and
// three letters in capitals, may be codes whose case matters ("Aa" and
// "AA" are two genotypes, "Co" and "CO" cobalt and carbon monoxide).
func foldableWords(a, b string) bool {
	na, nb := letterCount(a), letterCount(b)
	switch {
	case na < 0 || nb < 0 || na != nb || na < 3:
		return false
	case na >= 4:
		return true
	}
	return restLower(a) && restLower(b)
}

// letterCount is the number of letters of a word of letters and
// apostrophes, or -1 for any other word.
func letterCount(t string) int {
	n := 0
	for _, r := range t {
		switch {
		case unicode.IsLetter(r):
			n++
		case r == '\'' || r == '’':
		default:
			return -1
		}
	}
	return n
}

// restLower: every letter after the first is in lower case.
func restLower(t string) bool {
	first := true
	for _, r := range t {
		if !first && unicode.IsUpper(r) {
			return false
		}
		first = false
	}
	return true
}

// lettersOnly: a word of letters (and apostrophes) only.
func lettersOnly(t string) bool {
	for _, r := range t {
		if !unicode.IsLetter(r) && r != '\'' && r != '’' {
			return false
		}
	}
	return true
}

func hasDigit(t string) bool {
	for _, r := range t {
		if unicode.IsDigit(r) {
			return true
		}
	}
	return false
}

// nextLetter returns the next rune of s from i that is not an apostrophe,
// and the index after it; -1 at the end.
func nextLetter(s string, i int) (rune, int) {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if r != '\'' && r != '’' {
			return r, i
		}
	}
	return -1, i
}

func foldRune(r rune) rune { return unicode.ToLower(r) }

// wordEqual compares two words under case folding, apostrophes left
// out.
func wordEqual(a, b string) bool {
	if a == b {
		return true
	}
	i, j := 0, 0
	for {
		ra, ni := nextLetter(a, i)
		rb, nj := nextLetter(b, j)
		if ra < 0 || rb < 0 {
			return ra == rb
		}
		if foldRune(ra) != foldRune(rb) {
			return false
		}
		i, j = ni, nj
	}
}

// wordPrefix: short is long cut short (at least three letters, both
// letters only): "Fran" for "Francisco".
func wordPrefix(short, long string) bool {
	if !lettersOnly(short) || !lettersOnly(long) || utf8.RuneCountInString(short) < 3 {
		return false
	}
	i, j, n := 0, 0, 0
	for {
		ra, ni := nextLetter(short, i)
		if ra < 0 {
			_, more := nextLetter(long, j)
			return more > j && n >= 3 // long has letters left over
		}
		rb, nj := nextLetter(long, j)
		if rb < 0 || foldRune(ra) != foldRune(rb) {
			return false
		}
		i, j, n = ni, nj, n+1
	}
}

// firstLetter is a word's first letter, folded.
func firstLetter(t string) rune {
	r, _ := nextLetter(t, 0)
	return foldRune(r)
}

// stopWords are the function words a name may carry or drop ("The Met",
// "Museum of Modern Art").
var stopWords = setOf("the", "a", "an", "of", "and", "&", "at", "in", "on", "for", "to", "by", "de", "la", "le")

func isStopWord(t string) bool {
	if len(t) > 3 {
		return false
	}
	var b [3]byte
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return stopWords[string(b[:len(t)])]
}

// initialsOf: acr (a word in capitals, two letters or more) is the
// initials of the words of l from i on, with or without their stop
// words. It returns how many words they cover, 0 if none.
func initialsOf(acr string, l *nameWords, i int, used *[maxNameWords]bool) int {
	for _, skipStop := range [2]bool{false, true} {
		k, j := 0, i
		for k < len(acr) && j < l.n {
			if used[j] {
				break
			}
			if skipStop && j > i && isStopWord(l.w[j]) {
				j++
				continue
			}
			r, size := utf8.DecodeRuneInString(acr[k:])
			if foldRune(r) != firstLetter(l.w[j]) {
				break
			}
			k += size
			j++
		}
		if k == len(acr) && j-i >= 2 {
			return j - i
		}
	}
	return 0
}

// isCapitals: a word of two or more capital letters.
func isCapitals(t string) bool {
	n := 0
	for _, r := range t {
		if !unicode.IsUpper(r) {
			return false
		}
		n++
	}
	return n >= 2
}

// shortened reads s as a shortening of l: every word of s (function words
// aside) is a word of l, a word of l cut short, or the initials of a run
// of l's words; the words of l left over hold no digit. It returns the
// reading (the strongest used: initials, then abbreviation, then subset)
// or "" when s is no shortening of l under the readings on.
func shortened(on readingSet, s, l *nameWords) string {
	var used, covered [maxNameWords]bool
	var kind readingSet
	meaningful := false
	for _, t := range s.w[:s.n] {
		j := -1
		for k := 0; k < l.n; k++ {
			if !used[k] && wordEqual(t, l.w[k]) {
				j = k
				break
			}
		}
		if j >= 0 {
			used[j] = true
			kind |= readSubset
			meaningful = meaningful || !isStopWord(t)
			continue
		}
		if isStopWord(t) && !isCapitals(t) {
			continue // "The Met"; "LA" may be initials
		}
		if on&readAbbreviation != 0 {
			for k := 0; k < l.n; k++ {
				if !used[k] && !covered[k] && wordPrefix(t, l.w[k]) {
					j = k
					break
				}
			}
			if j >= 0 {
				used[j] = true
				kind |= readAbbreviation
				meaningful = true
				continue
			}
		}
		if on&readInitials != 0 && isCapitals(t) {
			for k := 0; k < l.n; k++ {
				if covered[k] {
					continue
				}
				if n := initialsOf(t, l, k, &used); n > 0 {
					for c := k; c < k+n; c++ {
						covered[c] = true
					}
					j = k
					break
				}
			}
			if j >= 0 {
				kind |= readInitials
				meaningful = true
				continue
			}
		}
		return ""
	}
	if !meaningful {
		return ""
	}
	if kind == readSubset && s.n == l.n {
		inOrder := true
		for k := 0; k < s.n && inOrder; k++ {
			inOrder = wordEqual(s.w[k], l.w[k])
		}
		if inOrder {
			return "" // the same words in the same order: the case reading's
		}
	}
	for k := 0; k < l.n; k++ {
		if !used[k] && !covered[k] && hasDigit(l.w[k]) {
			return ""
		}
	}
	switch {
	case kind&readInitials != 0:
		return ReadingInitials
	case kind&readAbbreviation != 0:
		return ReadingAbbreviation
	case on&readSubset == 0:
		return ""
	}
	return ReadingSubset
}

// readNames tries the name readings on two strings.
func readNames(r *typedRules, a, b string) (rule, why string) {
	on := r.readings
	if identifierLike(a) || identifierLike(b) || hasFlag(a) || hasFlag(b) {
		return "", ""
	}
	var wa, wb nameWords
	if !splitName(a, &wa) || !splitName(b, &wb) {
		return "", ""
	}
	if on&readCase != 0 && sameWords(&wa, &wb) && (wa.n > 1 && wb.n > 1 || foldableWords(a, b)) {
		return ReadingCase, "case and spacing"
	}
	if on&readRegion != 0 {
		if why := sameRegion(a, b); why != "" {
			return ReadingRegion, why
		}
	}
	if on&readQualifier != 0 {
		if why := qualified(r, a, b); why != "" {
			return ReadingQualifier, why
		}
	}
	if on&(readSubset|readAbbreviation|readInitials) != 0 {
		for _, p := range [2][2]*nameWords{{&wa, &wb}, {&wb, &wa}} {
			switch shortened(on, p[0], p[1]) {
			case ReadingSubset:
				return ReadingSubset, "the words of one are among the other's"
			case ReadingAbbreviation:
				return ReadingAbbreviation, "words cut short"
			case ReadingInitials:
				return ReadingInitials, "initials"
			}
		}
	}
	return "", ""
}

// sameWords: the same words in the same order, under wordEqual.
func sameWords(a, b *nameWords) bool {
	if a.n != b.n {
		return false
	}
	for i := 0; i < a.n; i++ {
		if !wordEqual(a.w[i], b.w[i]) {
			return false
		}
	}
	return true
}

// sameRegion: a and b name one US state or one country by their tables
// (periods left out: "U.S." is "US").
func sameRegion(a, b string) string {
	if !regionCode(a) && !regionCode(b) {
		return "" // a code on one side at least: names are spelled alike or not at all
	}
	a, b = strings.ReplaceAll(a, ".", ""), strings.ReplaceAll(b, ".", "")
	if x, ok := lookupUSState(a); ok {
		if y, ok := lookupUSState(b); ok && x == y {
			return "the same US state"
		}
	}
	if x, ok := lookupCountry(a); ok {
		if y, ok := lookupCountry(b); ok && x == y {
			return "the same country"
		}
	}
	return ""
}

// regionCode: a value shaped like a state or country code: two or three
// letters, periods aside ("CA", "USA", "U.S.").
func regionCode(v string) bool {
	n := 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
			n++
		case c == '.':
		default:
			return false
		}
	}
	return n == 2 || n == 3
}

// qualified: one name is the other with a qualifier after a comma
// ("Seattle, WA" for "Seattle"), or both carry qualifiers that name the
// same place ("Austin, TX" for "Austin, Texas").
func qualified(r *typedRules, a, b string) string {
	ha, qa, ca := strings.Cut(a, ",")
	hb, qb, cb := strings.Cut(b, ",")
	ha, qa, hb, qb = strings.TrimSpace(ha), strings.TrimSpace(qa), strings.TrimSpace(hb), strings.TrimSpace(qb)
	switch {
	case ca && cb:
		if qa == "" || qb == "" || !sameName(r, ha, hb) || sameRegion(qa, qb) == "" {
			return ""
		}
		return "the qualifiers name the same place"
	case ca && qa != "" && sameName(r, ha, b), cb && qb != "" && sameName(r, hb, a):
		return "a qualifier after the comma"
	}
	return ""
}

// sameName: two names with the same words (under case folding), or an
// alias of the tool and what it names.
func sameName(r *typedRules, a, b string) bool {
	var wa, wb nameWords
	if !splitName(a, &wa) || !splitName(b, &wb) {
		return false
	}
	if sameWords(&wa, &wb) {
		return true
	}
	if r.aliases == nil {
		return false
	}
	ka, kb := foldKey(a), foldKey(b)
	if x, ok := r.aliases[ka]; ok {
		ka = x
	}
	if x, ok := r.aliases[kb]; ok {
		kb = x
	}
	return ka == kb
}
