package pairscore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// IDF holds document frequencies of folded content words, from which the
// scorer weighs a word: a word most texts hold says little about what a
// text asks for, a rare one much. Words seen in fewer than MinDF
// documents are not kept: they count as rare. An IDF is immutable and
// safe for concurrent use.
type IDF struct {
	docs   int
	minDF  int
	df     map[string]int
	w      map[string]float64 // Weight of every word held, computed once
	unseen float64            // Weight of a word not held
}

// weigh computes the weights from the counts.
func (t *IDF) weigh() *IDF {
	t.w = make(map[string]float64, len(t.df))
	for k, n := range t.df {
		t.w[k] = math.Log(float64(t.docs+1)/float64(n+1)) + 1
	}
	t.unseen = math.Log(float64(t.docs+1)) + 1
	return t
}

// ErrIDF reports a malformed IDF table.
var ErrIDF = errors.New("pairscore: idf table")

// BuildIDF counts, for every folded content word, the documents that hold
// it, keeping the words seen in at least minDF of them. A document is
// plain text (every line of it is read).
func BuildIDF(docs []string, minDF int) *IDF {
	df := map[string]int{}
	var toks []token
	for _, d := range docs {
		toks = toks[:0]
		for _, l := range strings.Split(d, "\n") {
			toks = valueWords(l, toks)
		}
		seen := map[string]bool{}
		for _, t := range toks {
			if !seen[t.key] {
				seen[t.key] = true
				df[t.key]++
			}
		}
	}
	for w, n := range df {
		if n < minDF {
			delete(df, w)
		}
	}
	return (&IDF{docs: len(docs), minDF: max(minDF, 1), df: df}).weigh()
}

// Weight is the inverse document frequency of a folded word,
// ln((docs+1)/(df+1)) + 1; a word not in the table has df 0.
func (t *IDF) Weight(key string) float64 {
	if w, ok := t.w[key]; ok {
		return w
	}
	return t.unseen
}

// Rare reports whether a folded word is absent from the table.
func (t *IDF) Rare(key string) bool { _, ok := t.df[key]; return !ok }

// MaxWeight is the weight of a word the table does not hold.
func (t *IDF) MaxWeight() float64 { return t.unseen }

// Docs is the number of documents counted.
func (t *IDF) Docs() int { return t.docs }

// Len is the number of words in the table.
func (t *IDF) Len() int { return len(t.df) }

const idfHeader = "# pairscore idf v1"

// WriteTo writes the table as text, one "word df" line per word in byte
// order after a header: the same table gives the same bytes.
func (t *IDF) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s: document frequencies of folded content words\ndocs %d\nmin_df %d\n", idfHeader, t.docs, t.minDF)
	keys := make([]string, 0, len(t.df))
	for k := range t.df {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d\n", k, t.df[k])
	}
	return b.WriteTo(w)
}

// ParseIDF reads a table WriteTo wrote.
func ParseIDF(r io.Reader) (*IDF, error) {
	t := &IDF{df: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<16)
	line := 0
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: line %d: %s", ErrIDF, line, fmt.Sprintf(format, args...))
	}
	for sc.Scan() {
		line++
		s := sc.Text()
		if line == 1 {
			if !strings.HasPrefix(s, idfHeader) {
				return nil, bad("want a header starting %q", idfHeader)
			}
			continue
		}
		k, v, ok := strings.Cut(s, " ")
		if !ok || k == "" || strings.ContainsAny(v, " \t") {
			return nil, bad("want \"word count\"")
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, bad("count %q is not a positive integer", v)
		}
		switch {
		case line == 2:
			if k != "docs" {
				return nil, bad("want docs")
			}
			t.docs = n
		case line == 3:
			if k != "min_df" {
				return nil, bad("want min_df")
			}
			t.minDF = n
		default:
			if _, dup := t.df[k]; dup {
				return nil, bad("word %q twice", k)
			}
			if n > t.docs {
				return nil, bad("word %q in %d documents of %d", k, n, t.docs)
			}
			t.df[k] = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIDF, err)
	}
	if line < 3 {
		return nil, fmt.Errorf("%w: no docs and min_df lines", ErrIDF)
	}
	return t.weigh(), nil
}
