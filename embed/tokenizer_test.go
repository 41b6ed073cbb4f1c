package embed

import (
	"slices"
	"testing"
)

// latticeWords is the Viterbi pass as the reference walks its lattice:
// every match kept by end position, then relaxed end by end. bestWords
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
	for i := 0; i < n; i++ {
		node := int32(0)
		found := false
		for j := i; j < n; j++ {
			child, ok := t.next[uint64(node)<<32|uint64(uint32(sym[j]))]
			if !ok {
				break
			}
			node = child
			if e := t.end[node]; e != 0 {
				byEnd[j+1] = append(byEnd[j+1], cand{start: i, id: int(e - 1), score: t.score[node]})
				found = true
			}
		}
		if !found {
			byEnd[i+1] = append(byEnd[i+1], cand{start: i, id: unknownID})
		}
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
