package embed

import (
	"math"
	"math/rand/v2"
	"testing"
)

// naiveMulBias is the product the kernels must give, element by element:
// one float32 fused multiply-add chain in k order from the bias.
func naiveMulBias(x, w, bias []float32, rows, k, p int, relu bool) []float32 {
	out := make([]float32, rows*p)
	for i := range rows {
		for j := range p {
			acc := bias[j]
			for kk := range k {
				acc = fma32(x[i*k+kk], w[kk*p+j], acc)
			}
			if relu && !(acc > 0) {
				acc = 0
			}
			out[i*p+j] = acc
		}
	}
	return out
}

// TestKernelsBitIdentical checks that every kernel this CPU runs gives the
// same bits as the plain fused multiply-add chain, for every tile height
// (all row counts up to 2 tiles), with and without ReLU.
func TestKernelsBitIdentical(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rnd := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(r.NormFloat64())
		}
		return s
	}
	const k, p = 96, 64
	w, bias := rnd(k*p), rnd(p)
	for _, kern := range kernels() {
		m := packMatrix(kern, w, k, p)
		for rows := 1; rows <= 2*kern.mr+1; rows++ {
			x := rnd(rows * k)
			for _, relu := range []bool{false, true} {
				want := naiveMulBias(x, w, bias, rows, k, p, relu)
				got := make([]float32, rows*p)
				m.mulBias(got, x, bias, rows, relu)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("kernel %s, %d rows, relu %v: element %d = %v, want %v", kern.name, rows, relu, i, got[i], want[i])
					}
				}
			}
		}
	}
	t.Logf("kernels on this CPU: %v; fastest measured: %s", KernelNames(), fastestKernel().name)
}

// TestFMA32 checks the portable fused multiply-add against exact rational
// arithmetic on values built to land halfway between float32 neighbours,
// where rounding twice goes wrong.
func TestFMA32(t *testing.T) {
	cases := []struct{ x, y, z float32 }{
		{1, 1, 1},
		{1 + 1.0/(1<<23), 1 - 1.0/(1<<23), -1},
		// x*y = 1 + 2^-24 + tiny: rounds once up to 1+2^-23; twice, to 1.
		{1 + 1.0/(1<<12), 1 + 1.0/(1<<12), -1.0 / (1 << 11)},
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		cases = append(cases, struct{ x, y, z float32 }{float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64())})
	}
	for _, c := range cases {
		want := exactFMA32(c.x, c.y, c.z)
		if got := fma32(c.x, c.y, c.z); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%v, %v, %v) = %v, want %v", c.x, c.y, c.z, got, want)
		}
	}
}
