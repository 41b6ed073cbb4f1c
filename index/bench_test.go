package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/viterin/vek/vek32"
)

// BenchmarkSearch measures Search (validation, scope lookup, lock, scan,
// top-10) against a plain-Go scan of the same rows in the same run:
//
//	go test -run '^$' -bench BenchmarkSearch -benchmem ./index/
//
// "vek" is Flat.Search (AVX2 where the CPU has it); "plain" is a
// straightforward Go loop over the same contiguous rows with the same
// top-k; "vek-noasm" is Flat.Search with vek's pure-Go fallback, as on a
// CPU without AVX2.
func BenchmarkSearch(b *testing.B) {
	for _, d := range []int{384, 512} {
		for _, n := range []int{100, 1000, 10000} {
			f, q := benchIndex(b, n, d, 0)
			s := f.scopes["bench"]
			ctx := context.Background()
			name := fmt.Sprintf("d=%d/n=%d", d, n)
			b.Run(name+"/vek", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := f.Search(ctx, "bench", "t", q, 10); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/vek-noasm", func(b *testing.B) {
				if !vek32.Info().Acceleration {
					b.Skip("no AVX2: vek is already the fallback")
				}
				vek32.SetAcceleration(false)
				defer vek32.SetAcceleration(true)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := f.Search(ctx, "bench", "t", q, 10); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/plain", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					plainSearch(s, d, q, 10)
				}
			})
			_ = f.Close(ctx)
		}
	}
}

// benchIndex builds one scope of n random d-dimensional vectors in 50
// clusters (so scores are not all near zero), one tag; partitions of
// annMin rows get a graph (0: none).
func benchIndex(b testing.TB, n, d, annMin int) (*Flat, []float32) {
	b.Helper()
	cfg := DefaultConfig()
	cfg.Dim, cfg.MaxPerScope, cfg.MaxVectors, cfg.IdleTTL, cfg.ANNMin = d, n, 2*n, 0, annMin
	f, err := New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, uint64(n*d)))
	centres := make([][]float32, 50)
	for i := range centres {
		centres[i] = make([]float32, d)
		for j := range centres[i] {
			centres[i][j] = float32(r.NormFloat64())
		}
	}
	entries := make([]Entry, n)
	for i := range entries {
		c := centres[r.IntN(len(centres))]
		v := make([]float32, d)
		for j := range v {
			v[j] = c[j] + 0.3*float32(r.NormFloat64())
		}
		entries[i] = Entry{ID: fmt.Sprintf("wf:%d:tool", i), Tag: "t", Seq: uint64(i + 1), Vector: v}
	}
	if err := f.Add("bench", entries...); err != nil {
		b.Fatal(err)
	}
	q := append([]float32(nil), entries[n/2].Vector...)
	q[0] += 0.1
	return f, q
}

// plainSearch is the baseline: the same rows, a plain Go dot product and
// the same tag filter and sorted top-k, without the index's validation
// and locking.
func plainSearch(s *scope, d int, q []float32, k int) []Hit {
	var hits []Hit
	t := s.tagIDs["t"]
	for i := range s.ids {
		if s.tags[i] != t {
			continue
		}
		row := s.vecs[i*d : (i+1)*d]
		var dot float32
		for j, x := range row {
			dot += x * q[j]
		}
		h := Hit{ID: s.ids[i], Score: dot, Seq: s.seqs[i]}
		if len(hits) == k && !before(h, hits[k-1]) {
			continue
		}
		if hits == nil {
			hits = make([]Hit, 0, k)
		}
		j := len(hits)
		if j < k {
			hits = append(hits, h)
		} else {
			j = k - 1
		}
		for ; j > 0 && before(h, hits[j-1]); j-- {
			hits[j] = hits[j-1]
		}
		hits[j] = h
	}
	return hits
}

// TestPlainBaselineAgrees keeps the benchmark honest: both scans rank the
// same entries first.
func TestPlainBaselineAgrees(t *testing.T) {
	f, q := benchIndex(t, 500, 64, 0)
	defer f.Close(context.Background())
	got, err := f.Search(context.Background(), "bench", "t", q, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := plainSearch(f.scopes["bench"], 64, q, 10)
	if got[0].ID != want[0].ID || len(got) != len(want) {
		t.Fatalf("index %v, plain %v", ids(got), ids(want))
	}
}

// BenchmarkSearchGraph compares, in one run, Flat.Search of one 512-d
// partition scanned exactly and searched through its graph (efSearch 100,
// the default), by size, to place Config.ANNMin:
//
//	go test -run '^$' -bench BenchmarkSearchGraph -benchmem -cpu 1 ./index/
//
// Random clustered vectors are easier for a graph than real embeddings;
// idem bench ann measures on those.
func BenchmarkSearchGraph(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 4096, 20000} {
		for _, mode := range []string{"exact", "graph"} {
			annMin := 0
			if mode == "graph" {
				annMin = 1
			}
			f, q := benchIndex(b, n, 512, annMin)
			f.Search(ctx, "bench", "t", q, 10)
			if err := f.WaitGraphs(ctx); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("n=%d/%s", n, mode), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := f.Search(ctx, "bench", "t", q, 10); err != nil {
						b.Fatal(err)
					}
				}
			})
			_ = f.Close(ctx)
		}
	}
}
