package pairtrain

import (
	"errors"
	"math"

	"github.com/idem-dev/idem/pairscore"
)

// fitLogistic fits an L2-regularized logistic regression by Newton's
// method on the features in use (the others weigh 0), each standardized
// for the penalty, and returns the weights on the raw features. The sums
// run in the rows' order, so equal rows give equal bits.
func fitLogistic(rows []pairscore.Features, same []bool, weight []float64, use []int, lambda float64) (bias float64, w pairscore.Features, err error) {
	d := len(use)
	var sw float64
	mean, sd := make([]float64, d), make([]float64, d)
	for i, r := range rows {
		sw += weight[i]
		for j, f := range use {
			mean[j] += weight[i] * r[f]
		}
	}
	if sw == 0 {
		return 0, w, errors.New("pairtrain: no rows to fit")
	}
	for j := range mean {
		mean[j] /= sw
	}
	for i, r := range rows {
		for j, f := range use {
			x := r[f] - mean[j]
			sd[j] += weight[i] * x * x
		}
	}
	for j := range sd {
		sd[j] = math.Sqrt(sd[j] / sw)
		if sd[j] < 1e-12 {
			sd[j] = 0 // a constant feature: left out
		}
	}
	z := func(r *pairscore.Features, j int) float64 {
		if sd[j] == 0 {
			return 0
		}
		return (r[use[j]] - mean[j]) / sd[j]
	}
	beta := make([]float64, d+1) // beta[0] is the intercept
	n := d + 1
	for iter := 0; iter < 100; iter++ {
		g := make([]float64, n)
		h := make([]float64, n*n)
		x := make([]float64, n)
		for i := range rows {
			x[0] = 1
			for j := range d {
				x[j+1] = z(&rows[i], j)
			}
			s := 0.0
			for j := range n {
				s += beta[j] * x[j]
			}
			p := 1 / (1 + math.Exp(-s))
			y := 0.0
			if same[i] {
				y = 1
			}
			r := weight[i] * (p - y)
			c := weight[i] * p * (1 - p)
			for j := range n {
				g[j] += r * x[j]
				for k := range n {
					h[j*n+k] += c * x[j] * x[k]
				}
			}
		}
		for j := 1; j < n; j++ {
			g[j] += lambda * beta[j]
			h[j*n+j] += lambda
			if sd[j-1] == 0 {
				h[j*n+j] += 1 // keeps the system regular; its gradient is 0
			}
		}
		step, err := solve(h, g, n)
		if err != nil {
			return 0, w, err
		}
		moved := 0.0
		for j := range n {
			beta[j] -= step[j]
			moved = math.Max(moved, math.Abs(step[j]))
		}
		if moved < 1e-10 {
			break
		}
	}
	bias = beta[0]
	for j, f := range use {
		if sd[j] == 0 {
			continue
		}
		w[f] = beta[j+1] / sd[j]
		bias -= beta[j+1] * mean[j] / sd[j]
	}
	return bias, w, nil
}

// solve solves a·x = b for a symmetric positive-definite n×n matrix by
// Gaussian elimination with partial pivoting.
func solve(a, b []float64, n int) ([]float64, error) {
	m := make([]float64, n*(n+1))
	for i := range n {
		copy(m[i*(n+1):], a[i*n:(i+1)*n])
		m[i*(n+1)+n] = b[i]
	}
	for col := range n {
		p := col
		for r := col + 1; r < n; r++ {
			if math.Abs(m[r*(n+1)+col]) > math.Abs(m[p*(n+1)+col]) {
				p = r
			}
		}
		if math.Abs(m[p*(n+1)+col]) < 1e-300 {
			return nil, errors.New("pairtrain: singular system")
		}
		if p != col {
			for k := range n + 1 {
				m[p*(n+1)+k], m[col*(n+1)+k] = m[col*(n+1)+k], m[p*(n+1)+k]
			}
		}
		for r := col + 1; r < n; r++ {
			f := m[r*(n+1)+col] / m[col*(n+1)+col]
			for k := col; k <= n; k++ {
				m[r*(n+1)+k] -= f * m[col*(n+1)+k]
			}
		}
	}
	x := make([]float64, n)
	for i := n - 1; i >= 0; i-- {
		s := m[i*(n+1)+n]
		for k := i + 1; k < n; k++ {
			s -= m[i*(n+1)+k] * x[k]
		}
		x[i] = s / m[i*(n+1)+i]
	}
	return x, nil
}
