package embed

import (
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
// ([16][512]×[512][1536]); see kernels.go for the numbers and the choice.
func BenchmarkKernel(b *testing.B) {
	const m, k, p = 16, 512, 1536
	x, w := randSlice(m*k), randSlice(k*p)
	dst := make([]float32, m*p)
	b.Run("vek.MatMul", func(b *testing.B) {
		for b.Loop() {
			vek32.MatMul_Into(dst, x, w, k)
		}
	})
	wt := make([]float32, k*p)
	for r := 0; r < k; r++ {
		for c := 0; c < p; c++ {
			wt[c*k+r] = w[r*p+c]
		}
	}
	b.Run("vek.DotTransposed", func(b *testing.B) {
		for b.Loop() {
			for j := 0; j < p; j++ {
				col := wt[j*k : (j+1)*k]
				for i := 0; i < m; i++ {
					dst[i*p+j] = vek32.Dot(x[i*k:(i+1)*k], col)
				}
			}
		}
	})
}
