// Package pairscore says how likely two free-text views of tool calls are
// to ask for the same effect.
//
// A sentence encoder's cosine misses the one word that carries a request:
// "How is the word 'anachronism' used in sentences?" and "… 'mischievous'
// …" score 0.88, "best site for learning algorithms" and "… programming"
// 0.92. The scorer is a logistic regression over a handful of transparent
// features of the pair (Features): the cosine the caller computed, the
// IDF-weighted share of content words in one text and not the other, how
// heavy, rare, capitalised or quoted those words are, the contrast
// guard's signals (negation cues, numbers, opposite words; see Contrast),
// and the length ratio. Its output is calibrated on human-labelled pairs
// to a probability; its weights and the IDF table are committed in this
// package (weights.json, idf.txt), written by `go run
// ./bench/cmd/pairtrain`, which reproduces them byte for byte.
//
// The contract: Score(Pair{A, B, Cosines}) for two text views as canon
// writes them (canon.Call.TextView: the tool's name, then one "path:
// value" line per text field; a text of one line is read as one value),
// with Cosines the encoder's cosine of each pair of aligned windows
// (funnel.Windows), returns the probability that the two calls ask for
// the same effect, and the words that weighed against it. The weights are
// fitted to the cosines of one encoder (Model.Encoder): with another,
// probabilities mean nothing. Nothing here logs; Score.Differs holds
// words of the texts, which are customers' data.
package pairscore

import (
	"bytes"
	_ "embed" // the committed weights and IDF table
	"fmt"
	"math"
	"strings"
	"sync"
)

// Pair is two text views to compare and the encoder's cosine of each pair
// of aligned windows (one for views the encoder reads whole). When the
// views have a different number of windows, Cosines holds the aligned
// ones and the caller decides what the unseen tail means (the funnel
// holds such pairs below its duplicate threshold).
type Pair struct {
	A, B    string
	Cosines []float64
}

// Score is the scorer's answer for a pair.
type Score struct {
	// Prob is the probability that the two texts ask for the same effect.
	Prob float64 `json:"prob"`
	// Cosine is the encoder's cosine the scorer read: the lowest over the
	// windows.
	Cosine float64 `json:"cosine"`
	// Differs says what weighed against the match, heaviest first, each
	// as "what A has / what B has" ("anachronism / mischievous", "– /
	// India", "2.47 / 0.39", "not / –", "up / down"). It holds words of
	// the texts: show it to the caller, never log it.
	Differs []string `json:"differs,omitempty"`
}

// Model is a fitted scorer. It is immutable and safe for concurrent use.
type Model struct {
	idf        *IDF
	bias       float64
	w          Features
	encoder    string
	thresholds Thresholds
}

// New builds a model from an IDF table and weights.
func New(idf *IDF, w *Weights) (*Model, error) {
	if idf == nil || w == nil {
		return nil, fmt.Errorf("%w: no idf table or no weights", ErrWeights)
	}
	m := &Model{idf: idf, bias: w.Bias, encoder: w.Encoder, thresholds: w.Thresholds}
	for _, f := range w.Features {
		i := featureIndex(f.Name)
		if i < 0 {
			return nil, fmt.Errorf("%w: unknown feature %q", ErrWeights, f.Name)
		}
		m.w[i] = f.Weight
	}
	return m, nil
}

//go:embed weights.json
var weightsJSON []byte

//go:embed idf.txt
var idfText []byte

var defaultModel = sync.OnceValues(func() (*Model, error) {
	idf, err := ParseIDF(bytes.NewReader(idfText))
	if err != nil {
		return nil, err
	}
	w, err := ParseWeights(weightsJSON)
	if err != nil {
		return nil, err
	}
	return New(idf, w)
})

// Default returns the committed model, loaded once per process.
func Default() (*Model, error) { return defaultModel() }

// Encoder names the encoder whose cosines the weights were fitted to.
func (m *Model) Encoder() string { return m.encoder }

// Thresholds are the default probability thresholds chosen with the
// weights (see Thresholds).
func (m *Model) Thresholds() Thresholds { return m.thresholds }

// IDF is the model's word table.
func (m *Model) IDF() *IDF { return m.idf }

// Score scores a pair.
func (m *Model) Score(p Pair) Score {
	var a analysis
	extract(m.idf, p, &a, true)
	logit := m.logit(a.f)
	s := Score{Prob: sigmoid(logit), Cosine: a.f[FCosine]}
	s.Differs = m.differs(&a)
	return s
}

// CosineFloor is the lowest cosine at which a pair can reach probability
// p whatever its texts: a caller need not score candidates below it (the
// funnel's search can stop there).
func (m *Model) CosineFloor(p float64) float64 {
	if m.w[FCosine] <= 0 || p <= 0 || p >= 1 {
		return -1
	}
	z := math.Log(p/(1-p)) - m.bias
	for i, w := range m.w {
		if i != FCosine && w > 0 {
			z -= w * featureMax[i]
		}
	}
	return math.Max(-1, math.Min(1, z/m.w[FCosine]))
}

// featureMax is the largest value each feature takes.
var featureMax = Features{
	FCosine: 1, FUnshared: 1, FUnsharedMax: 1, FRare: countCap, FCapitalised: countCap, FQuoted: countCap,
	FNegation: 2, FNumbers: countCap, FOpposite: 1, FLengthRatio: 1, FContrastShared: 1,
}

// Prob is the probability for measured features.
func (m *Model) Prob(f Features) float64 { return sigmoid(m.logit(f)) }

func (m *Model) logit(f Features) float64 {
	z := m.bias
	for i := range f {
		z += m.w[i] * f[i]
	}
	return z
}

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

// maxDiffers bounds the pairs of unshared words Differs reports.
const maxDiffers = 3

// differs lists the evidence of the features whose weight pulled the
// probability down.
func (m *Model) differs(a *analysis) []string {
	var out []string
	against := func(fs ...int) bool {
		z := 0.0
		for _, i := range fs {
			z += m.w[i] * a.f[i]
		}
		return z < 0
	}
	if a.opposite != "" && against(FOpposite, FContrastShared) {
		out = append(out, a.opposite)
	}
	if len(a.negA)+len(a.negB) > 0 && against(FNegation, FContrastShared) {
		out = append(out, side(a.negA)+" / "+side(a.negB))
	}
	if len(a.numA)+len(a.numB) > 0 && against(FNumbers, FContrastShared) {
		out = append(out, side(shown(a.numA))+" / "+side(shown(a.numB)))
	}
	if len(a.onlyA)+len(a.onlyB) > 0 && against(FUnshared, FUnsharedMax, FRare, FCapitalised, FQuoted) {
		for i := range min(maxDiffers, max(len(a.onlyA), len(a.onlyB))) {
			out = append(out, surface(a.onlyA, i)+" / "+surface(a.onlyB, i))
		}
	}
	return out
}

// shown writes numbers as numbers are read: numbers keeps "0.39" as
// ".39" and "0" as "" for comparing.
func shown(ns []string) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		if n == "" || n[0] == '.' {
			n = "0" + n
		}
		out[i] = n
	}
	return out
}

func side(ws []string) string {
	if len(ws) == 0 {
		return "–"
	}
	return strings.Join(ws, ", ")
}

func surface(ts []token, i int) string {
	if i >= len(ts) {
		return "–"
	}
	return ts[i].surface
}

func featureIndex(name string) int {
	for i, n := range FeatureNames {
		if n == name {
			return i
		}
	}
	return -1
}
