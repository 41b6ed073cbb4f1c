package embed

import (
	"strings"
	"unicode/utf16"

	"golang.org/x/text/unicode/norm"
)

// tokenizer is the SentencePiece unigram tokenizer of the reference
// implementation (TensorFlow.js universal-sentence-encoder, as shipped in
// @energetic-ai/embeddings), reproduced quirk for quirk so that token ids
// match it exactly:
//
//   - the text is NFKC-normalized, prefixed with "▁" and every ASCII space
//     becomes "▁";
//   - the lattice is built over code points from a trie of every piece but
//     the six reserved ones; a position no piece starts at gets an unknown
//     piece (id 0, score 0) of one code point;
//   - Viterbi keeps, for each end position, the last candidate whose score
//     is >= the best so far, and treats a best score of exactly 0 as unset;
//   - the backward pass steps back by the piece's length in UTF-16 code
//     units (JavaScript's String.length);
//   - consecutive unknown ids are merged into one.
//
// A tokenizer is immutable after construction and safe for concurrent use.
type tokenizer struct {
	pieces []piece
	u16len []int            // UTF-16 length of each piece
	next   map[uint64]int32 // trie edges: node<<32 | rune → child node
	end    []int32          // per trie node: piece id + 1, or 0 if no piece ends here
	score  []float64        // per trie node: score of the piece ending here
	depth  []int            // per trie node: length in code points
}

// reservedPieces are the ids (0..5: unknown, <s>, </s>, three extras) the
// reference never produces from text, except 0 for unknown code points.
const reservedPieces = 6

// unknownID is the id of an unknown code point.
const unknownID = 0

func newTokenizer(pieces []piece) *tokenizer {
	t := &tokenizer{
		pieces: pieces,
		u16len: make([]int, len(pieces)),
		next:   make(map[uint64]int32, 4*len(pieces)),
		end:    []int32{0},
		score:  []float64{0},
		depth:  []int{0},
	}
	for i, p := range pieces {
		t.u16len[i] = len(utf16.Encode([]rune(p.text)))
		if i < reservedPieces {
			continue
		}
		node := int32(0)
		for _, r := range p.text {
			k := uint64(node)<<32 | uint64(uint32(r))
			child, ok := t.next[k]
			if !ok {
				child = int32(len(t.end))
				t.next[k] = child
				t.end = append(t.end, 0)
				t.score = append(t.score, 0)
				t.depth = append(t.depth, t.depth[node]+1)
			}
			node = child
		}
		if node != 0 {
			t.end[node] = int32(i) + 1
			t.score[node] = p.score
		}
	}
	return t
}

// prepare normalizes text as the reference does before tokenizing it.
func prepare(text string) []rune {
	s := norm.NFKC.String(text)
	if s == "" {
		return nil
	}
	return []rune("\u2581" + strings.ReplaceAll(s, " ", "\u2581"))
}

// encode returns the token ids of text (not clipped).
func (t *tokenizer) encode(text string) []int {
	sym := prepare(text)
	n := len(sym)
	if n == 0 {
		return nil
	}
	words := t.bestWords(sym)
	var ids []int
	for it := n; it > 0; {
		id := words[it]
		ids = append(ids, id)
		it -= t.u16len[id]
	}
	// Merge consecutive unknowns (in backward order, as the reference).
	out := ids[:0]
	prevUnk := false
	for _, id := range ids {
		if !(prevUnk && id == unknownID) {
			out = append(out, id)
		}
		prevUnk = id == unknownID
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// bestWords returns, for every end position of sym, the token of the best
// segmentation of sym up to it (the reference's Viterbi pass).
func (t *tokenizer) bestWords(sym []rune) []int {
	n := len(sym)
	best := make([]float64, n+1)
	words := make([]int, n+1)
	// The reference's lattice walk considers every match [i, i+len) in
	// order of end position, then start position, keeping the last of the
	// best. Relaxing the matches of each start in ascending order, as
	// they are found, considers those of each end position in the same
	// order (a start has at most one match per end), and best[i] is final
	// when start i is reached (every match ending at i starts before it):
	// the same answer, without keeping the matches.
	relax := func(start, end, id int, score float64) {
		if s := score + best[start]; best[end] == 0 || s >= best[end] {
			best[end], words[end] = s, id
		}
	}
	for i := range n {
		t.matches(sym, i, func(end, id int, score float64) { relax(i, end, id, score) })
	}
	return words
}

// matches calls fn for every vocabulary piece that sym holds from start,
// shortest first (end is one past its last symbol), or once for the
// unknown piece [start, start+1) when none does.
func (t *tokenizer) matches(sym []rune, start int, fn func(end, id int, score float64)) {
	node := int32(0)
	found := false
	for j := start; j < len(sym); j++ {
		child, ok := t.next[uint64(node)<<32|uint64(uint32(sym[j]))]
		if !ok {
			break
		}
		node = child
		if e := t.end[node]; e != 0 {
			fn(j+1, int(e-1), t.score[node])
			found = true
		}
	}
	if !found {
		fn(start+1, unknownID, 0)
	}
}
