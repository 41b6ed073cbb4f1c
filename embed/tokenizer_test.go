package embed

import (
	"slices"
	"testing"
)

// latticeWords is the Viterbi pass as the reference walks its lattice:
// every match kept by end position, then relaxed end by end (the matches
// found by the same trie walk, which the change to bestWords left alone). bestWords
// must give the same tokens without keeping the matches.
func latticeWords(t *tokenizer, sym []rune) []int {
	n := len(sym)
	best := make([]float64, n+1)
	words := make([]int, n+1)
	type cand struct {
		start, id int
		score     float64
	}
	byEnd := make([][]cand, n+1)
	for i := range n {
		t.matches(sym, i, func(end, id int, score float64) {
			byEnd[end] = append(byEnd[end], cand{start: i, id: id, score: score})
		})
	}
	for e := 1; e <= n; e++ {
		for _, c := range byEnd[e] {
			if s := c.score + best[c.start]; best[e] == 0 || s >= best[e] {
				best[e], words[e] = s, c.id
			}
		}
	}
	return words
}

// FuzzBestWordsMatchesTheLattice: on any text, the tokenizer's single pass
// picks the tokens the reference's lattice walk picks (ties included).
func FuzzBestWordsMatchesTheLattice(f *testing.F) {
	for _, s := range []string{"hello world", "café", "\xff\xfe", "東京タワー", "aaaaaaaa", "unbelievably unbelievable", "😀😀 :) ://", "x1y2z3 ABC abc"} {
		f.Add(s)
	}
	u := testEncoder(f)
	tk := u.tok
	f.Fuzz(func(t *testing.T, s string) {
		sym := prepare(s)
		if got, want := tk.bestWords(sym), latticeWords(tk, sym); !slices.Equal(got, want) {
			t.Fatalf("%q: tokens %v, the lattice's %v", s, got, want)
		}
	})
}
