package pairscore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Weights are a fitted logistic regression: the probability of a pair is
// sigmoid(Bias + Σ weight·feature). Features not listed weigh 0.
type Weights struct {
	// Encoder names the encoder whose cosines the weights were fitted to.
	Encoder  string          `json:"encoder"`
	Bias     float64         `json:"bias"`
	Features []FeatureWeight `json:"features"`
	// Thresholds are the probabilities chosen on the training run's Dev
	// split for the funnel's two thresholds.
	Thresholds Thresholds `json:"thresholds"`
	// Note says how the weights were made; informative only.
	Note string `json:"note,omitempty"`
}

// Thresholds are default probability thresholds: at or above Duplicate a
// pair is the same (Dev: today's recall at the cosine's duplicate
// threshold with fewer false positives); at or above Ambiguous, a judge
// is worth asking (Dev: the recall of the cosine's ambiguous threshold).
type Thresholds struct {
	Duplicate float64 `json:"duplicate"`
	Ambiguous float64 `json:"ambiguous"`
	// Replay is where a read's free-text match may replay: the lowest
	// probability at and above which Dev precision stays at least
	// ReplayPrecision. A deployment calibrates its own (idem bench
	// calibrate writes semantic_replay).
	Replay float64 `json:"replay"`
}

// ReplayPrecision is the Dev precision Thresholds.Replay keeps.
const ReplayPrecision = 0.98

// FeatureWeight is one feature's weight.
type FeatureWeight struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
}

// ErrWeights reports malformed weights.
var ErrWeights = errors.New("pairscore: weights")

const weightsModel = "pairscore/logistic-v1"

// ParseWeights reads weights MarshalWeights wrote.
func ParseWeights(data []byte) (*Weights, error) {
	var doc struct {
		Model string `json:"model"`
		Weights
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWeights, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the object", ErrWeights)
	}
	if doc.Model != weightsModel {
		return nil, fmt.Errorf("%w: model: %q, want %q", ErrWeights, doc.Model, weightsModel)
	}
	w := doc.Weights
	if w.Encoder == "" {
		return nil, fmt.Errorf("%w: encoder: empty", ErrWeights)
	}
	if math.IsNaN(w.Bias) || math.IsInf(w.Bias, 0) {
		return nil, fmt.Errorf("%w: bias: not finite", ErrWeights)
	}
	t := w.Thresholds
	if !(t.Ambiguous > 0 && t.Ambiguous <= t.Duplicate && t.Duplicate <= 1) {
		return nil, fmt.Errorf("%w: thresholds: want 0 < ambiguous (%v) ≤ duplicate (%v) ≤ 1", ErrWeights, t.Ambiguous, t.Duplicate)
	}
	if !(t.Replay > 0 && t.Replay <= 1) {
		return nil, fmt.Errorf("%w: thresholds.replay: %v not in (0, 1]", ErrWeights, t.Replay)
	}
	seen := map[string]bool{}
	for i, f := range w.Features {
		switch {
		case featureIndex(f.Name) < 0:
			return nil, fmt.Errorf("%w: features[%d].name: unknown feature %q", ErrWeights, i, f.Name)
		case seen[f.Name]:
			return nil, fmt.Errorf("%w: features[%d].name: %q twice", ErrWeights, i, f.Name)
		case math.IsNaN(f.Weight) || math.IsInf(f.Weight, 0):
			return nil, fmt.Errorf("%w: features[%d].weight: not finite", ErrWeights, i)
		}
		seen[f.Name] = true
	}
	return &w, nil
}

// MarshalWeights writes w as indented JSON with every number in fixed
// notation, six decimals: equal weights give equal bytes.
func MarshalWeights(w *Weights) []byte {
	var b bytes.Buffer
	q := func(s string) string { j, _ := json.Marshal(s); return string(j) }
	fmt.Fprintf(&b, "{\n  \"model\": %s,\n  \"encoder\": %s,\n  \"bias\": %s,\n  \"features\": [\n", q(weightsModel), q(w.Encoder), fixed(w.Bias))
	for i, f := range w.Features {
		comma := ","
		if i == len(w.Features)-1 {
			comma = ""
		}
		fmt.Fprintf(&b, "    {\"name\": %s, \"weight\": %s}%s\n", q(f.Name), fixed(f.Weight), comma)
	}
	fmt.Fprintf(&b, "  ],\n  \"thresholds\": {\"duplicate\": %s, \"ambiguous\": %s, \"replay\": %s}",
		fixed(w.Thresholds.Duplicate), fixed(w.Thresholds.Ambiguous), fixed(w.Thresholds.Replay))
	if w.Note != "" {
		fmt.Fprintf(&b, ",\n  \"note\": %s", q(w.Note))
	}
	b.WriteString("\n}\n")
	return b.Bytes()
}

// fixed formats x with six decimals, never as "-0.000000".
func fixed(x float64) string {
	s := strconv.FormatFloat(x, 'f', 6, 64)
	if s == "-0.000000" {
		s = "0.000000"
	}
	return s
}
