package pairscore

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func FuzzParseIDF(f *testing.F) {
	f.Add(idfText)
	f.Add([]byte("# pairscore idf v1\ndocs 10\nmin_df 2\nword 3\n"))
	f.Add([]byte("# pairscore idf v1\ndocs 10\nmin_df 2\nword 30\n"))
	f.Add([]byte("# pairscore idf v1\ndocs x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		idf, err := ParseIDF(bytes.NewReader(data))
		if err != nil {
			return
		}
		// What parses writes back and parses to the same table.
		var b bytes.Buffer
		if _, err := idf.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		again, err := ParseIDF(&b)
		if err != nil {
			t.Fatalf("rewritten table does not parse: %v", err)
		}
		if again.Len() != idf.Len() || again.Docs() != idf.Docs() {
			t.Fatalf("round trip changed the table: %d/%d words, %d/%d docs", again.Len(), idf.Len(), again.Docs(), idf.Docs())
		}
		for k := range idf.df {
			if w := idf.Weight(k); math.IsNaN(w) || w < 1-1e-9 {
				t.Fatalf("weight of %q is %v", k, w)
			}
		}
	})
}

func FuzzParseWeights(f *testing.F) {
	f.Add(weightsJSON)
	f.Add([]byte(`{"model": "pairscore/logistic-v1", "encoder": "e", "bias": 1, "features": [{"name": "cosine", "weight": 2}], "thresholds": {"duplicate": 0.6, "ambiguous": 0.4, "replay": 0.9}}`))
	f.Add([]byte(`{"model": "pairscore/logistic-v1", "encoder": "e", "bias": 1, "features": [{"name": "nope", "weight": 2}]}`))
	f.Add([]byte(`{"model": "x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ParseWeights(data)
		if err != nil {
			return
		}
		again, err := ParseWeights(MarshalWeights(w))
		if err != nil {
			t.Fatalf("marshalled weights do not parse: %v", err)
		}
		if len(again.Features) != len(w.Features) || again.Encoder != w.Encoder {
			t.Fatalf("round trip changed the weights")
		}
		if _, err := New((&IDF{docs: 1, df: map[string]int{}}).weigh(), w); err != nil {
			t.Fatalf("parsed weights make no model: %v", err)
		}
	})
}

// FuzzScore: any two texts and cosines give a probability, the same both
// ways round, without panicking.
func FuzzScore(f *testing.F) {
	m, err := Default()
	if err != nil {
		f.Fatal(err)
	}
	f.Add("search\nquery: How is the word 'anachronism' used?", "search\nquery: How is the word 'mischievous' used?", 0.88)
	f.Add("reset my password", "I need to change my password", 0.91)
	f.Add("", "", math.NaN())
	f.Add("\n\n: \n'\"“", "«»‘’ don't 2.50 up", 2.0)
	f.Fuzz(func(t *testing.T, a, b string, c float64) {
		s := m.Score(Pair{A: a, B: b, Cosines: []float64{c}})
		r := m.Score(Pair{A: b, B: a, Cosines: []float64{c}})
		if math.IsNaN(s.Prob) || s.Prob < 0 || s.Prob > 1 {
			t.Fatalf("probability %v", s.Prob)
		}
		if math.Abs(s.Prob-r.Prob) > 1e-12 {
			t.Fatalf("not symmetric: %v and %v", s.Prob, r.Prob)
		}
		if len(s.Differs) != len(r.Differs) {
			t.Fatalf("differs not mirrored: %q and %q", s.Differs, r.Differs)
		}
		for _, d := range s.Differs {
			if !strings.Contains(d, " / ") {
				t.Fatalf("differs entry %q is not \"a / b\"", d)
			}
		}
	})
}

// FuzzParseNoun: no noun line of the lexicon panics the parser, and an
// entry it returns answers its accessors within its bounds.
func FuzzParseNoun(f *testing.F) {
	f.Add("6 5 2 -7")
	f.Add("8 2 -3 =1")
	f.Add("-1 2")
	f.Add("*9hy 5 9 -a")
	f.Add("5 *9")
	f.Add("zzzzzzzzzzzz 1")
	f.Fuzz(func(t *testing.T, line string) {
		e := parseNoun(strings.Fields(line))
		if e == nil {
			return
		}
		n := 2 + len(e.deep()) + len(e.out()) + len(e.other())
		if len(e.deep()) == 0 || n != len(e)-2 {
			t.Fatalf("%q: entry %v has %d deep ids and %d ids in all", line, e, len(e.deep()), n)
		}
	})
}

// FuzzContrast: the contrast guard names the same difference both ways
// round, finds none between a text and itself, and does not panic on any
// text (acronyms, lines, scripts without case).
func FuzzContrast(f *testing.F) {
	f.Add("UN experts visit Syria", "US says weapons used in Syria")
	f.Add("send_email\nbody: THE UN MET\n", "send_email\nbody: The EU met")
	f.Add("name IN ('alpha')", "name:alpha OR name:beta")
	f.Add("the WHO briefed the CDC", "the World Health Organization briefed the NIH")
	f.Add("거실 에어컨 ÉU", ": \n: A\n")
	f.Fuzz(func(t *testing.T, a, b string) {
		if x, y := Contrast(a, b), Contrast(b, a); x != y {
			t.Fatalf("Contrast(a, b) = %q, Contrast(b, a) = %q", x, y)
		}
		if x := Contrast(a, a); x != "" {
			t.Fatalf("Contrast(a, a) = %q", x)
		}
	})
}
