package funnel

import (
	"math"
	"testing"
)

// TestQuantizedScreenNeverRulesOutAMatch: the screen's bound is never
// below the exact cosine (so a candidate it rules out cannot reach a
// threshold), and it is tight enough to rule out most unrelated calls.
func TestQuantizedScreenNeverRulesOutAMatch(t *testing.T) {
	const dim = 512
	tight := 0
	for i := range 2000 {
		a := syntheticVector(uint64(2*i), dim)
		b := syntheticVector(uint64(2*i+1), dim)
		if i%2 == 0 { // a near twin of a
			for j := range b {
				b[j] = a[j] + 0.05*b[j]
			}
		}
		n := float32(math.Sqrt(dot(b, b)))
		for j := range b {
			b[j] /= n
		}
		exact := math.Min(dot(a, b), 1)
		q := quantize([][]float32{b})
		up := q.upper([][]float32{a}, l1([][]float32{a}))
		if up < exact {
			t.Fatalf("pair %d: bound %.6f below the exact cosine %.6f", i, up, exact)
		}
		if up-exact < 0.05 {
			tight++
		}
		if d := dot(a, q.dequantize()[0]); math.Abs(d-exact) > up-exact+1e-6 {
			t.Fatalf("pair %d: dequantized cosine %.6f outside the bound of %.6f", i, d, exact)
		}
	}
	if tight < 1900 {
		t.Errorf("the bound was within 0.05 of the exact cosine for %d of 2000 pairs", tight)
	}
}
