// Package embed turns texts into sentence embeddings: L2-normalized float32
// vectors whose dot product is their cosine similarity. Every provider
// returns exactly one vector of Dim() values per input text, in order, or an
// error; an empty or whitespace-only text is ErrEmptyText, never a vector.
// Name() identifies the model; vectors of different names must never be
// compared.
//
// Providers:
//
//   - USE, the built-in Universal Sentence Encoder Lite (Apache-2.0), ported
//     to pure Go and embedded in the binary (no network, no model server).
//     It reads at most 128 tokens per text; Tokenize says how many a text has
//     and EmbedWindows embeds long texts window by window, so that callers
//     never truncate silently.
//   - OpenAI, a client of any OpenAI-compatible embeddings endpoint (OpenAI,
//     Ollama, vLLM, TEI, llama.cpp), with timeouts and retries.
//   - Cache, an LRU cache in front of any Embedder.
//
// The SentencePiece tokenizer and the transformer are written here because no
// Go library implements this model; matrix kernels come from
// github.com/viterin/vek. Texts are customers' data: nothing in this package
// logs them.
package embed

import (
	"context"
	"errors"
	"math"
)

// Embedder is what every provider of this package implements.
type Embedder interface {
	// Embed returns one L2-normalized vector of Dim() values per text.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Dim is the length of every vector.
	Dim() int
	// Name identifies the model (and its dimension), stored with each vector.
	Name() string
}

var (
	// ErrEmptyText is returned for an empty or whitespace-only text.
	ErrEmptyText = errors.New("embed: empty text")
	// ErrConfig is returned by Validate for an unusable configuration.
	ErrConfig = errors.New("embed: bad config")
	// ErrTokenID is returned for a token id outside the vocabulary.
	ErrTokenID = errors.New("embed: token id out of range")
	// ErrResponse is returned when an endpoint answers with the wrong
	// number of vectors, the wrong dimension, or a zero vector.
	ErrResponse = errors.New("embed: bad response")
)

// Normalize scales v to unit L2 norm in place. It reports false, leaving v
// unchanged, for a zero or non-finite vector.
func Normalize(v []float32) bool {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	if ss == 0 || math.IsNaN(ss) || math.IsInf(ss, 0) {
		return false
	}
	r := 1 / math.Sqrt(ss)
	for i, x := range v {
		v[i] = float32(float64(x) * r)
	}
	return true
}

// Cosine is the cosine similarity of a and b (of equal length); 0 if
// either is zero.
func Cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}
