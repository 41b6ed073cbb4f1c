package pairscore

import (
	"math"
	"slices"
	"strings"
)

// The features of a pair, in the order of a Features vector. Every one is
// symmetric: swapping the two texts changes nothing.
const (
	// FCosine is the encoder's cosine: the lowest over aligned windows.
	FCosine = iota
	// FUnshared is the IDF-weighted share of the content words that stand
	// in one text and not the other (of both texts' distinct content
	// words, each text's counted once): 0 when both hold the same words,
	// 1 when they share none.
	FUnshared
	// FUnsharedMax is the weight of the heaviest such word, over the
	// weight of a word the table does not hold (0 when there is none):
	// one rare word replaced ("anachronism" for "mischievous") weighs
	// more than several common ones ("reset" for "I need to change").
	FUnsharedMax
	// FRare counts the unshared words absent from the IDF table (at most 3).
	FRare
	// FCapitalised counts the unshared words written with a capital
	// inside a sentence, names mostly (at most 3).
	FCapitalised
	// FQuoted counts the unshared words inside quotation marks (at most 3).
	FQuoted
	// FNegation is the difference in negation cues (at most 2).
	FNegation
	// FNumbers counts the numbers in one text and not the other, as a
	// multiset (at most 3).
	FNumbers
	// FOpposite is 1 when a word of one text has its opposite in the other
	// (the guard's list, or WordNet's antonyms: "acquitted" / "convicted").
	FOpposite
	// FLengthRatio is the shorter text's count of distinct content words
	// over the longer's (1 when both have none).
	FLengthRatio
	// FContrastShared is 1 − FUnshared when any of the contrast signals
	// (negation, numbers, opposite words, words of the same kind, as the
	// contrast guard finds them) is there, else 0: a contrast between
	// texts that otherwise say the same words ("play it without
	// subtitles" / "with subtitles") decides more than one between texts
	// that differ anyway.
	FContrastShared
	// NumFeatures is the length of a Features vector.
	NumFeatures
)

// FeatureNames names the features, as the weights file does.
var FeatureNames = [NumFeatures]string{
	"cosine", "unshared", "unshared_max", "rare", "capitalised", "quoted",
	"negation", "numbers", "opposite", "length_ratio", "contrast_shared",
}

// Features are the measurements of a pair the model weighs.
type Features [NumFeatures]float64

// countCap bounds the count features: past a few, more of the same says
// nothing new, and a linear model must not extrapolate.
const countCap = 3

// analysis is what Extract finds: the features and the evidence behind
// them, for Score.Differs.
type analysis struct {
	f            Features
	onlyA, onlyB []token // unshared words, heaviest first, one per key
	numA, numB   []string
	negA, negB   []string
	opposite     string
}

// Extract measures a pair with the word weights of idf.
func Extract(idf *IDF, p Pair) Features {
	var a analysis
	extract(idf, p, &a, false)
	return a.f
}

// extract fills a; with evidence, the words and numbers behind the
// features too.
func extract(idf *IDF, p Pair, a *analysis, evidence bool) {
	a.f[FCosine] = lowest(p.Cosines)

	ta, tb := dedupe(contentWords(p.A, nil)), dedupe(contentWords(p.B, nil))
	ia, ib := newKeyIndex(ta), newKeyIndex(tb)
	var total, unshared, heaviest float64
	var rare, caps, quoted int
	one := func(t token, other *keyIndex, only *[]token) {
		w := idf.Weight(t.key)
		t.weight = w
		total += w
		if other.matches(t.key) {
			return
		}
		unshared += w
		heaviest = math.Max(heaviest, w)
		if idf.Rare(t.key) {
			rare++
		}
		if t.caps {
			caps++
		}
		if t.quoted {
			quoted++
		}
		if evidence {
			*only = append(*only, t)
		}
	}
	for _, t := range ta {
		one(t, ib, &a.onlyA)
	}
	for _, t := range tb {
		one(t, ia, &a.onlyB)
	}
	if total > 0 {
		a.f[FUnshared] = unshared / total
		a.f[FUnsharedMax] = heaviest / idf.MaxWeight()
	}
	a.f[FRare] = float64(min(rare, countCap))
	a.f[FCapitalised] = float64(min(caps, countCap))
	a.f[FQuoted] = float64(min(quoted, countCap))
	a.f[FLengthRatio] = 1
	if n, m := len(ta), len(tb); max(n, m) > 0 {
		a.f[FLengthRatio] = float64(min(n, m)) / float64(max(n, m))
	}

	wa, wb := words(p.A), words(p.B)
	na, nb := negations(wa), negations(wb)
	a.f[FNegation] = float64(min(abs(na-nb), 2))
	numA, numB := multisetDiff(numbers(p.A), numbers(p.B))
	a.f[FNumbers] = float64(min(len(numA)+len(numB), countCap))
	opp := opposed(wa, wb)
	if opp == "" {
		if o := opposed(wb, wa); o != "" {
			w, x, _ := strings.Cut(o, " / ")
			opp = x + " / " + w // a's word first
		}
	}
	kinds := ""
	if opp == "" {
		switch pair, rel := swapped(p.A, p.B, wa, wb); rel {
		case "opposites":
			opp = pair
		case "kinds":
			kinds = pair
		}
	}
	if opp != "" {
		a.f[FOpposite] = 1
	}
	if na != nb || len(numA)+len(numB) > 0 || opp != "" || kinds != "" {
		a.f[FContrastShared] = 1 - a.f[FUnshared]
	}
	if evidence {
		byWeight := func(x, y token) int {
			switch {
			case x.weight > y.weight:
				return -1
			case x.weight < y.weight:
				return 1
			}
			return strings.Compare(x.key, y.key)
		}
		slices.SortStableFunc(a.onlyA, byWeight)
		slices.SortStableFunc(a.onlyB, byWeight)
		a.numA, a.numB, a.opposite = numA, numB, opp
		if na != nb {
			a.negA, a.negB = negationWords(wa), negationWords(wb)
		}
	}
}

// lowest is the lowest cosine, 0 when there is none.
func lowest(cs []float64) float64 {
	if len(cs) == 0 {
		return 0
	}
	lo := math.Inf(1)
	for _, c := range cs {
		if math.IsNaN(c) {
			return 0
		}
		lo = math.Min(lo, c)
	}
	return math.Max(-1, math.Min(1, lo))
}

// dedupe keeps the first token of every key, marking it capitalised or
// quoted when any occurrence is.
func dedupe(ts []token) []token {
	out := ts[:0]
	seen := make(map[string]int, len(ts))
	for _, t := range ts {
		if i, ok := seen[t.key]; ok {
			out[i].caps = out[i].caps || t.caps
			out[i].quoted = out[i].quoted || t.quoted
			continue
		}
		seen[t.key] = len(out)
		out = append(out, t)
	}
	return out
}

// keyIndex answers whether a text holds a word: its folded keys, sorted.
type keyIndex struct{ keys []string }

func newKeyIndex(ts []token) *keyIndex {
	keys := make([]string, len(ts))
	for i := range ts {
		keys[i] = ts[i].key
	}
	slices.Sort(keys)
	return &keyIndex{keys: keys}
}

// matchPrefix is the least common prefix of two forms of a word.
const matchPrefix = 4

// matches reports whether the text holds key or another form of the same
// word: one whose folded form shares all but at most two of the
// shorter's letters as a prefix, four at least ("syria" and "syrian",
// "greek" and "greec(e)"), which a suffix folding cannot reach.
func (x *keyIndex) matches(key string) bool {
	if len(key) < matchPrefix {
		_, ok := slices.BinarySearch(x.keys, key)
		return ok
	}
	// The keys sharing key's first letters sit together.
	stem := key[:matchPrefix]
	i, _ := slices.BinarySearch(x.keys, stem)
	for ; i < len(x.keys) && strings.HasPrefix(x.keys[i], stem); i++ {
		k := x.keys[i]
		if k == key {
			return true
		}
		n := min(len(k), len(key))
		p := matchPrefix
		for p < n && k[p] == key[p] {
			p++
		}
		if p >= n-2 {
			return true
		}
	}
	return false
}

// multisetDiff returns the elements of sorted a not matched in sorted b,
// and those of b not matched in a.
func multisetDiff(a, b []string) (onlyA, onlyB []string) {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch c := strings.Compare(a[i], b[j]); {
		case c == 0:
			i++
			j++
		case c < 0:
			onlyA = append(onlyA, a[i])
			i++
		default:
			onlyB = append(onlyB, b[j])
			j++
		}
	}
	return append(onlyA, a[i:]...), append(onlyB, b[j:]...)
}

func negationWords(ws []string) []string {
	var out []string
	for _, w := range ws {
		if isNegation(w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
