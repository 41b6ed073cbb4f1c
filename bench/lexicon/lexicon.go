// Package lexicon builds the word relations the pair scorer reads
// (pairscore/lexicon.txt) from a WordNet 3.0 database: which nouns are
// kinds of one thing ("kitchen" and "bedroom" are both rooms, "Tuesday"
// and "Friday" both weekdays, "Chicago" and "Seattle" both cities), which
// words are opposites ("acquit" / "convict"), and the irregular forms that
// lead to them ("men" to "man"). A sentence encoder scores two texts that
// differ by such a swap as near-identical ("play it on the kitchen
// speaker" / "… on the bedroom speaker": 0.96), and no count of shared
// words tells "kitchen / bedroom" from "couch / sofa"; WordNet does.
//
// The database is Princeton's WordNet 3.0 in its distributed form (the
// data.*, index.* and *.exc files; on Debian the package wordnet-base
// installs them in /usr/share/wordnet). Build reads nothing else and
// writes the same bytes for the same database.
package lexicon

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The relation the lexicon records: two nouns are kinds of one thing when
// their commonest senses share an ancestor at most Hops hypernym steps
// above each, and that ancestor lies at least MinDepth steps below
// WordNet's root: "room" (depth 8) joins kitchen and bedroom, "object"
// (depth 2) would join almost anything. Neither may stand within Hops
// steps above the other (a "dog" is an "animal", not another animal).
// MinDepth was chosen on the scorer's training and development pairs
// (STS-B train, SGD and BFCL), never on its test set: at depth 5 a few
// more paraphrases lost their match for as many contrasts found.
const (
	Hops     = 2
	MinDepth = 6
)

// Header is the first line of the file Build writes.
const Header = "# pairscore lexicon v1"

// ErrDatabase reports a WordNet file that does not read as one.
var ErrDatabase = errors.New("lexicon: wordnet database")

type synsetID struct {
	pos    byte // n, v, a (satellites too), r
	offset string
}

type pointer struct {
	symbol   string
	target   synsetID
	src, dst int // word numbers of a lexical pointer, 0 for a semantic one
}

type synset struct {
	words    []string
	pointers []pointer
}

type database struct {
	synsets map[synsetID]*synset
	// index: the senses of a lemma by part of speech, commonest first,
	// and how many of them were seen in the tagged corpus.
	senses map[byte]map[string][]string
	tagged map[byte]map[string]int
	exc    map[string][]string // inflected form → base forms, all parts of speech
}

var files = []struct {
	pos  byte
	name string
}{{'n', "noun"}, {'v', "verb"}, {'a', "adj"}, {'r', "adv"}}

// read loads the database in dir.
func read(dir string) (*database, error) {
	db := &database{
		synsets: map[synsetID]*synset{},
		senses:  map[byte]map[string][]string{},
		tagged:  map[byte]map[string]int{},
		exc:     map[string][]string{},
	}
	for _, f := range files {
		if err := eachLine(filepath.Join(dir, "data."+f.name), func(l string) error { return db.dataLine(f.pos, l) }); err != nil {
			return nil, err
		}
		db.senses[f.pos], db.tagged[f.pos] = map[string][]string{}, map[string]int{}
		if err := eachLine(filepath.Join(dir, "index."+f.name), func(l string) error { return db.indexLine(f.pos, l) }); err != nil {
			return nil, err
		}
		if err := eachLine(filepath.Join(dir, f.name+".exc"), db.excLine); err != nil {
			return nil, err
		}
	}
	return db, nil
}

// eachLine calls fn with every line of the file but its licence header
// (lines starting with two spaces).
func eachLine(path string, fn func(string) error) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.HasPrefix(l, "  ") || strings.TrimSpace(l) == "" {
			continue
		}
		if err := fn(l); err != nil {
			return fmt.Errorf("%w: %s line %d: %v", ErrDatabase, filepath.Base(path), n, err)
		}
	}
	return sc.Err()
}

// dataLine reads "offset lex_filenum ss_type w_cnt word lex_id … p_cnt
// [symbol offset pos source/target]… | gloss".
func (db *database) dataLine(pos byte, l string) error {
	if i := strings.Index(l, " | "); i >= 0 {
		l = l[:i]
	}
	f := strings.Fields(l)
	if len(f) < 6 {
		return errors.New("too few fields")
	}
	wc, err := strconv.ParseInt(f[3], 16, 32)
	if err != nil || wc < 1 || len(f) < 5+2*int(wc) {
		return errors.New("bad word count")
	}
	s := &synset{}
	for i := range int(wc) {
		w := strings.ToLower(f[4+2*i])
		if k := strings.IndexByte(w, '('); k > 0 { // adjective markers: "galore(ip)"
			w = w[:k]
		}
		s.words = append(s.words, w)
	}
	i := 4 + 2*int(wc)
	pc, err := strconv.Atoi(f[i])
	if err != nil || pc < 0 || len(f) < i+1+4*pc {
		return errors.New("bad pointer count")
	}
	i++
	for range pc {
		st := f[i+3]
		src, err1 := strconv.ParseInt(st[:min(2, len(st))], 16, 32)
		dst, err2 := strconv.ParseInt(st[min(2, len(st)):], 16, 32)
		if len(st) != 4 || err1 != nil || err2 != nil || len(f[i+2]) != 1 {
			return errors.New("bad pointer")
		}
		tp := f[i+2][0]
		if tp == 's' {
			tp = 'a'
		}
		s.pointers = append(s.pointers, pointer{symbol: f[i], target: synsetID{tp, f[i+1]}, src: int(src), dst: int(dst)})
		i += 4
	}
	db.synsets[synsetID{pos, f[0]}] = s
	return nil
}

// indexLine reads "lemma pos synset_cnt p_cnt [symbol]… sense_cnt
// tagsense_cnt offset…".
func (db *database) indexLine(pos byte, l string) error {
	f := strings.Fields(l)
	if len(f) < 6 {
		return errors.New("too few fields")
	}
	sc, err1 := strconv.Atoi(f[2])
	pc, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || sc < 1 || len(f) != 6+pc+sc {
		return errors.New("bad counts")
	}
	tc, err := strconv.Atoi(f[5+pc])
	if err != nil {
		return errors.New("bad tagged count")
	}
	db.senses[pos][f[0]] = f[6+pc:]
	db.tagged[pos][f[0]] = tc
	return nil
}

// excLine reads "inflected base…".
func (db *database) excLine(l string) error {
	f := strings.Fields(l)
	if len(f) < 2 {
		return errors.New("too few fields")
	}
	for _, b := range f[1:] {
		if !slices.Contains(db.exc[f[0]], b) {
			db.exc[f[0]] = append(db.exc[f[0]], b)
		}
	}
	return nil
}

func (db *database) hypernyms(s synsetID) []synsetID {
	var out []synsetID
	if ss := db.synsets[s]; ss != nil {
		for _, p := range ss.pointers {
			if p.symbol == "@" || p.symbol == "@i" {
				out = append(out, p.target)
			}
		}
	}
	return out
}

// depths are the hypernym steps from every noun synset to the root.
func (db *database) depths() map[synsetID]int {
	d := map[synsetID]int{}
	onPath := map[synsetID]bool{}
	var walk func(s synsetID) int
	walk = func(s synsetID) int {
		if v, ok := d[s]; ok {
			return v
		}
		if onPath[s] { // a cycle: WordNet has none, a damaged file might
			return 0
		}
		onPath[s] = true
		best := -1
		for _, h := range db.hypernyms(s) {
			if v := walk(h) + 1; best < 0 || v < best {
				best = v
			}
		}
		delete(onPath, s)
		best = max(best, 0)
		d[s] = best
		return best
	}
	for s := range db.synsets {
		if s.pos == 'n' {
			walk(s)
		}
	}
	return d
}

// word reports whether a lemma is one the lexicon keeps: a single word of
// at least three letters a–z.
func word(w string) bool {
	if len(w) < 3 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

// Build reads the WordNet database in dir and writes the lexicon to w.
//
// The file, after its header:
//   - "n word [*]id ancestor… =sense…" for every noun the lexicon knows
//     (its commonest sense, when the word is no more often a verb: not
//     "look", nor "playing"): the id of the sense ("*id" when it names
//     one thing, an instance in WordNet's terms), of its ancestors at
//     most Hops steps up ("-id" when shallower than MinDepth, and for the
//     wholes the sense is a part or member of: such an id rules a pair
//     out, it joins none), and of the word's other noun senses ("=id":
//     two words that share a sense are synonyms, "purse" and "bag");
//   - "o word word" for every pair of opposites;
//   - "x form base" for every irregular form of a word the file holds.
//
// Ids number synsets from 1 in the order the file first names them,
// written in base 36.
func Build(dir string, w io.Writer) error {
	db, err := read(dir)
	if err != nil {
		return err
	}
	depth := db.depths()
	ids := map[synsetID]string{}
	id := func(s synsetID) string {
		if v, ok := ids[s]; ok {
			return v
		}
		v := strconv.FormatInt(int64(len(ids)+1), 36)
		ids[s] = v
		return v
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s: from WordNet 3.0 (Princeton University, see LICENSE-WordNet) by bench/cmd/lexicon; hops %d, min depth %d\n", Header, Hops, MinDepth)

	known := map[string]bool{}
	nouns := slices.Sorted(maps.Keys(db.senses['n']))
	for _, lemma := range nouns {
		if !word(lemma) || db.tagged['v'][lemma] > db.tagged['n'][lemma] || db.gerund(lemma) {
			continue
		}
		first := synsetID{'n', db.senses['n'][lemma][0]}
		anc := db.ancestors(first)
		deep := false
		for _, a := range anc {
			deep = deep || depth[a] >= MinDepth
		}
		if !deep {
			continue // a kind of nothing the lexicon could pair it by
		}
		mark := ""
		if db.instance(first) {
			mark = "*"
		}
		fmt.Fprintf(bw, "n %s %s%s", lemma, mark, id(first))
		for _, a := range anc {
			if depth[a] >= MinDepth {
				fmt.Fprintf(bw, " %s", id(a))
			} else {
				fmt.Fprintf(bw, " -%s", id(a))
			}
		}
		for _, h := range db.wholes(first) {
			fmt.Fprintf(bw, " -%s", id(h))
		}
		for _, o := range db.senses['n'][lemma][1:] {
			fmt.Fprintf(bw, " =%s", id(synsetID{'n', o}))
		}
		bw.WriteByte('\n')
		known[lemma] = true
	}

	for _, p := range db.opposites() {
		fmt.Fprintf(bw, "o %s %s\n", p[0], p[1])
		known[p[0]], known[p[1]] = true, true
	}

	for _, form := range slices.Sorted(maps.Keys(db.exc)) {
		if !word(form) || known[form] {
			continue
		}
		for _, b := range db.exc[form] {
			if known[b] {
				fmt.Fprintf(bw, "x %s %s\n", form, b)
				break
			}
		}
	}
	return bw.Flush()
}

// ancestors are the synsets at most Hops steps above s, in a fixed
// order (nearest first, then by offset).
func (db *database) ancestors(s synsetID) []synsetID {
	var out []synsetID
	seen := map[synsetID]bool{s: true}
	frontier := []synsetID{s}
	for range Hops {
		var next []synsetID
		for _, x := range frontier {
			for _, h := range db.hypernyms(x) {
				if !seen[h] {
					seen[h] = true
					next = append(next, h)
				}
			}
		}
		slices.SortFunc(next, func(a, b synsetID) int { return strings.Compare(a.offset, b.offset) })
		out = append(out, next...)
		frontier = next
	}
	return out
}

// wholes are the synsets s is a part or a member of, one step up
// (England of Britain), in a fixed order: a word swapped for one of them
// generalizes, it names nothing else.
func (db *database) wholes(s synsetID) []synsetID {
	var out []synsetID
	for _, p := range db.synsets[s].pointers {
		if (p.symbol == "#p" || p.symbol == "#m") && !slices.Contains(out, p.target) {
			out = append(out, p.target)
		}
	}
	slices.SortFunc(out, func(a, b synsetID) int { return strings.Compare(a.offset, b.offset) })
	return out
}

// instance reports whether s names one thing (Chicago, the IAEA) rather
// than a kind of thing (a city, an agency): a name and a kind are never
// swapped for each other, one rewords the other ("the agency" / "IAEA").
func (db *database) instance(s synsetID) bool {
	for _, p := range db.synsets[s].pointers {
		if p.symbol == "@i" {
			return true
		}
	}
	return false
}

// gerund reports whether a noun is the -ing form of a verb ("playing",
// "meeting"): in a text it is more often the verb, whose kinds the
// lexicon does not record.
func (db *database) gerund(lemma string) bool {
	stem, ok := strings.CutSuffix(lemma, "ing")
	if !ok || len(stem) < 2 {
		return false
	}
	verbs := db.senses['v']
	n := len(stem)
	_, plain := verbs[stem]
	_, withE := verbs[stem+"e"]
	undoubled := n >= 3 && stem[n-1] == stem[n-2]
	if undoubled {
		_, undoubled = verbs[stem[:n-1]]
	}
	return plain || withE || undoubled
}

// opposites are the antonym pairs WordNet names between two single words,
// each pair once, in order.
func (db *database) opposites() [][2]string {
	seen := map[[2]string]bool{}
	for _, s := range db.synsets {
		for _, p := range s.pointers {
			if p.symbol != "!" || p.src < 1 || p.src > len(s.words) {
				continue
			}
			t := db.synsets[p.target]
			if t == nil || p.dst < 1 || p.dst > len(t.words) {
				continue
			}
			a, b := s.words[p.src-1], t.words[p.dst-1]
			if !word(a) || !word(b) || a == b {
				continue
			}
			if a > b {
				a, b = b, a
			}
			seen[[2]string{a, b}] = true
		}
	}
	return slices.SortedFunc(maps.Keys(seen), func(x, y [2]string) int { return slices.Compare(x[:], y[:]) })
}
