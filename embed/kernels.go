package embed

import "github.com/viterin/vek/vek32"

// matmulBias sets dst ([m][p]) to x ([m][k]) times w ([k][p]) plus bias ([p]).
func matmulBias(dst, x, w, bias []float32, m, k, p int) {
	vek32.MatMul_Into(dst[:m*p], x[:m*k], w[:k*p], k)
	for i := 0; i < m; i++ {
		vek32.Add_Inplace(dst[i*p:(i+1)*p], bias)
	}
}

// addTo adds x to dst element-wise.
func addTo(dst, x []float32) { vek32.Add_Inplace(dst, x[:len(dst)]) }

// axpy adds a*x to dst.
func axpy(dst, x []float32, a float32) {
	for i, v := range x {
		dst[i] += a * v
	}
}
