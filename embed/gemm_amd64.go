package embed

import "golang.org/x/sys/cpu"

//go:generate go run ./internal/gemmgen -out gemm_amd64.s

//go:noescape
func tileAVX2(mr, k int, a *float32, lda int, b, c *float32, ldc int, bias *float32, flags int)

//go:noescape
func tileAVX512(mr, k int, a *float32, lda int, b, c *float32, ldc int, bias *float32, flags int)

// cpuKernels returns the assembly kernels this CPU and OS support.
func cpuKernels() []kernel {
	var ks []kernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, kernel{name: "avx512", nr: 32, mr: 12, tile: func(mr, k int, a []float32, lda int, b, c []float32, ldc int, bias []float32, flags int) {
			checkTile(mr, k, a, lda, b, c, ldc, bias, 32)
			tileAVX512(mr, k, &a[0], lda, &b[0], &c[0], ldc, &bias[0], flags)
		}})
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, kernel{name: "avx2", nr: 16, mr: 6, tile: func(mr, k int, a []float32, lda int, b, c []float32, ldc int, bias []float32, flags int) {
			checkTile(mr, k, a, lda, b, c, ldc, bias, 16)
			tileAVX2(mr, k, &a[0], lda, &b[0], &c[0], ldc, &bias[0], flags)
		}})
	}
	return ks
}

// checkTile panics, as a bounds check would, if the assembly would read or
// write outside the slices.
func checkTile(mr, k int, a []float32, lda int, b, c []float32, ldc int, bias []float32, nr int) {
	_, _, _, _ = a[(mr-1)*lda+k-1], b[k*nr-1], c[(mr-1)*ldc+nr-1], bias[nr-1]
}
