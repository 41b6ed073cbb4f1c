package embed

import "github.com/viterin/vek/vek32"

// Matrix kernels come from github.com/viterin/vek (AVX2+FMA assembly with a
// pure-Go fallback). Measured on this machine for [16][512]×[512][1536]
// on one core (BenchmarkKernel): vek32.MatMul 0.61 ms; the same cut into
// L2-sized column panels 0.55 ms for this shape but slower end to end at 8–16
// tokens (more calls); vek32.Dot over a transposed matrix 0.63 ms; gonum's
// blas32.Gemm (pure-Go/SSE) 2.19 ms. So: plain vek32.MatMul.

// matrix is a [k][p] weight matrix, row-major.
type matrix struct {
	k, p int
	data []float32
}

func newMatrix(w []float32, k, p int) matrix { return matrix{k: k, p: p, data: w[:k*p]} }

// mulBias sets dst ([rows][p]) to x ([rows][k]) times w plus bias ([p]).
func (w matrix) mulBias(dst, x, bias []float32, rows int) {
	p := w.p
	vek32.MatMul_Into(dst[:rows*p], x[:rows*w.k], w.data, w.k)
	for i := 0; i < rows; i++ {
		vek32.Add_Inplace(dst[i*p:(i+1)*p], bias)
	}
}

// addTo adds x to dst element-wise.
func addTo(dst, x []float32) { vek32.Add_Inplace(dst, x[:len(dst)]) }
