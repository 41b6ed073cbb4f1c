package funnel

import "math"

// qvec is a call's text embedding kept in a session's view for screening:
// window by window, each value an int8 times the window's scale, a quarter
// of the float32 vectors' memory. The exact vectors are in the call's
// record: a candidate the screen cannot rule out is compared exactly.
type qvec struct {
	dim   int
	q     []int8    // len(scale) windows of dim values
	scale []float32 // per window: a value is q × scale
}

// quantize keeps windows (of dim values each) as int8 per window, scaled
// by the window's largest magnitude.
func quantize(windows [][]float32) *qvec {
	if len(windows) == 0 {
		return nil
	}
	dim := len(windows[0])
	v := &qvec{dim: dim, q: make([]int8, 0, dim*len(windows)), scale: make([]float32, len(windows))}
	for i, w := range windows {
		var m float32
		for _, x := range w {
			m = max(m, abs32(x))
		}
		s := m / 127
		v.scale[i] = s
		for _, x := range w {
			var qx int8
			if s > 0 {
				qx = int8(math.Round(float64(x / s)))
			}
			v.q = append(v.q, qx)
		}
	}
	return v
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// bytes is about how much memory v holds.
func (v *qvec) bytes() int { return 64 + cap(v.q) + 4*cap(v.scale) }

// windows is how many windows v holds.
func (v *qvec) windows() int { return len(v.scale) }

// upper returns a bound the lowest aligned cosine of query (windows with
// their L1 norms, l1) and v cannot exceed: each window's cosine from the
// quantized values plus the most rounding can have taken from it (half a
// scale step on every value, weighed by the query's values). A candidate
// whose bound is below a threshold cannot reach it.
func (v *qvec) upper(query [][]float32, l1 []float64) float64 {
	n := min(len(query), v.windows())
	best := 1.0
	for i := range n {
		q := v.q[i*v.dim : (i+1)*v.dim]
		var s float64
		for j, x := range query[i] {
			s += float64(x) * float64(q[j])
		}
		s *= float64(v.scale[i])
		bound := l1[i]*float64(v.scale[i])/2 + 1e-6
		best = math.Min(best, s+bound)
	}
	return best
}

// dequantize returns v's windows as float32: the vectors within rounding.
func (v *qvec) dequantize() [][]float32 {
	out := make([][]float32, v.windows())
	for i := range out {
		w := make([]float32, v.dim)
		for j, x := range v.q[i*v.dim : (i+1)*v.dim] {
			w[j] = float32(x) * v.scale[i]
		}
		out[i] = w
	}
	return out
}

// l1 returns the L1 norm of each window.
func l1(windows [][]float32) []float64 {
	out := make([]float64, len(windows))
	for i, w := range windows {
		for _, x := range w {
			out[i] += math.Abs(float64(x))
		}
	}
	return out
}
