package embed

import "math/big"

// exactFMA32 rounds x*y+z computed exactly to float32 (nearest, ties to even).
func exactFMA32(x, y, z float32) float32 {
	var p, s big.Float
	p.SetPrec(200).Mul(new(big.Float).SetFloat64(float64(x)), new(big.Float).SetFloat64(float64(y)))
	s.SetPrec(200).Add(&p, new(big.Float).SetFloat64(float64(z)))
	f, _ := s.Float32()
	return f
}
