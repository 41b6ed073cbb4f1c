package embed

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/viterin/vek/vek32"
)

func randSlice(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = rand.Float32() - 0.5
	}
	return s
}

// BenchmarkKernel compares matrix kernels on the FFN's shape at 16 tokens
// ([16][512]×[512][1536]) and at a batch of 8 such texts (128 rows): vek's
// MatMul and dot products over transposed weights (the kernels before ours)
// beside each of ours, with bias (and ReLU) fused; see kernels.go.
func BenchmarkKernel(b *testing.B) {
	const m, k, p = 16, 512, 1536
	x, w := randSlice(8*m*k), randSlice(k*p)
	bias := randSlice(p)
	dst := make([]float32, 8*m*p)
	gflops := func(b *testing.B, rows int) {
		b.ReportMetric(2*float64(rows*k*p)*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "GFLOP/s")
	}
	for _, kern := range kernels() {
		mat := packMatrix(kern, w, k, p)
		for _, rows := range []int{m, 8 * m} {
			b.Run(fmt.Sprintf("%s/rows=%d", kern.name, rows), func(b *testing.B) {
				for b.Loop() {
					mat.mulBias(dst, x, bias, rows, true)
				}
				gflops(b, rows)
			})
		}
	}
	b.Run("vek.MatMul/rows=16", func(b *testing.B) {
		for b.Loop() {
			vek32.MatMul_Into(dst[:m*p], x[:m*k], w, k)
		}
		gflops(b, m)
	})
	wt := make([]float32, k*p)
	for r := 0; r < k; r++ {
		for c := 0; c < p; c++ {
			wt[c*k+r] = w[r*p+c]
		}
	}
	b.Run("vek.DotTransposed/rows=16", func(b *testing.B) {
		for b.Loop() {
			for j := 0; j < p; j++ {
				col := wt[j*k : (j+1)*k]
				for i := 0; i < m; i++ {
					dst[i*p+j] = vek32.Dot(x[i*k:(i+1)*k], col)
				}
			}
		}
		gflops(b, m)
	})
}
