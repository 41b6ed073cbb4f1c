// Package half stores float32 vectors at IEEE 754 half precision
// (github.com/x448/float16 converts, rounding to nearest with ties to
// even). A text embedding's values (a unit vector's, each well inside ±1)
// keep 11 significant bits in half the bytes: the cosine of two rounded
// embeddings is within about 3e-5 of their float32 cosine.
package half

import (
	"math"

	"github.com/x448/float16"
)

// Max is the largest finite half-precision value.
const Max = 65504

// Exact reports whether every value of v is a half-precision value, so
// that storing v as halves loses nothing.
func Exact(v []float32) bool {
	for _, f := range v {
		if float16.Fromfloat32(f).Float32() != f { // NaN is never equal: not exact
			return false
		}
	}
	return true
}

// Round rounds every value of v to half precision in place and reports
// true, or leaves v as it is and reports false when a value is beyond
// ±Max or not a number (it would not survive the rounding).
func Round(v []float32) bool {
	for _, f := range v {
		if !(f >= -Max && f <= Max) {
			return false
		}
	}
	for i, f := range v {
		v[i] = float16.Fromfloat32(f).Float32()
	}
	return true
}

// Append appends v to dst as little-endian halves (2 bytes a value) and
// reports true when every value of v is a half; otherwise it returns dst
// as it was and false. Normal halves, nearly all of an embedding's values,
// take a branch that needs no rounding.
func Append(dst []byte, v []float32) ([]byte, bool) {
	n := len(dst)
	for _, f := range v {
		b := math.Float32bits(f)
		var h uint16
		if e := b >> 23 & 0xff; e >= 127-14 && e <= 127+15 && b&0x1fff == 0 {
			h = uint16(b>>16&0x8000 | (e-(127-15))<<10 | b>>13&0x3ff)
		} else if x := float16.Fromfloat32(f); x.Float32() == f { // zero or subnormal
			h = x.Bits()
		} else {
			return dst[:n], false
		}
		dst = append(dst, byte(h), byte(h>>8))
	}
	return dst, true
}

// Decode reads dst's values from src, little-endian halves (2 bytes a
// value), exactly as float16 converts them, with a branch for normal
// numbers, nearly all of an embedding's values, that needs no call.
func Decode(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	for i := range dst {
		x := uint32(src[2*i]) | uint32(src[2*i+1])<<8
		if x&0x7c00-0x400 >= 0x7800 { // exponent 0 (wraps round) or 31
			dst[i] = float16.Frombits(uint16(x)).Float32() // zero, subnormal, Inf, NaN
			continue
		}
		dst[i] = math.Float32frombits(x&0x8000<<16 | (x&0x7fff<<13 + (127-15)<<23))
	}
}
