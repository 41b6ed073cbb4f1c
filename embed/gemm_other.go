//go:build !amd64

package embed

// cpuKernels returns no assembly kernels off amd64: the Go kernel runs.
func cpuKernels() []kernel { return nil }
