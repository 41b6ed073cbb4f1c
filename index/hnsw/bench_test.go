package hnsw

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkBuild measures adding n clustered 512-d vectors (M 16,
// efConstruction 100), and BenchmarkSearch one query at efSearch 100:
//
//	go test -run '^$' -bench . -benchmem -cpu 1 ./index/hnsw/
//
// idem bench ann measures the same on real embeddings, beside the exact
// scan, github.com/coder/hnsw and (bench/ann_reference.py) hnswlib.
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		vecs := clusteredVectors(rand.New(rand.NewPCG(1, uint64(n))), n, 512, 50, 0.3)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				g, _ := New(DefaultConfig())
				g.Grow(n)
				for _, v := range vecs {
					if _, err := g.Add(v); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/add")
		})
	}
}

func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		r := rand.New(rand.NewPCG(2, uint64(n)))
		vecs := clusteredVectors(r, n+100, 512, 50, 0.3)
		g, _ := New(DefaultConfig())
		g.Grow(n)
		for _, v := range vecs[:n] {
			g.Add(v)
		}
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := g.Search(vecs[n+i%100], 10); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
