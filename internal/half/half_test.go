package half

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"
)

// TestRoundsToNearestEven: the values the ledger relies on round as IEEE
// 754 says (ties to even, subnormals, the largest half).
func TestRoundsToNearestEven(t *testing.T) {
	for _, k := range []struct{ f, want float32 }{
		{1 + 1.0/(1<<11), 1}, {1 + 3.0/(1<<11), 1 + 2.0/(1<<10)}, // ties to even
		{1.0 / (1 << 25), 0}, {1.5 / (1 << 24), 2.0 / (1 << 24)}, // subnormals
		{0.1, 0.0999755859375}, {-0.3, -0.300048828125}, {Max, Max},
	} {
		v := []float32{k.f}
		if !Round(v) || v[0] != k.want {
			t.Errorf("Round(%v) = %v, want %v", k.f, v[0], k.want)
		}
	}
}

// TestRound: a unit vector's values keep 11 significant bits (its cosine
// with the original moves by far less than a threshold's precision); a
// value out of range leaves the vector as it was.
func TestRound(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	v := make([]float32, 512)
	var n float64
	for i := range v {
		v[i] = float32(r.NormFloat64())
		n += float64(v[i]) * float64(v[i])
	}
	for i := range v {
		v[i] /= float32(math.Sqrt(n))
	}
	orig := append([]float32(nil), v...)
	if Exact(v) {
		t.Fatal("a random unit vector is already half precision")
	}
	if !Round(v) || !Exact(v) {
		t.Fatal("Round did not leave every value a half")
	}
	var dot, a, b float64
	for i := range v {
		dot += float64(v[i]) * float64(orig[i])
		a += float64(v[i]) * float64(v[i])
		b += float64(orig[i]) * float64(orig[i])
		if rel := math.Abs(float64(v[i]-orig[i])) / math.Abs(float64(orig[i])); orig[i] != 0 && math.Abs(float64(orig[i])) > 1.0/(1<<14) && rel > 1.0/(1<<11) {
			t.Fatalf("value %d: %v rounded to %v (relative error %g)", i, orig[i], v[i], rel)
		}
	}
	if c := dot / math.Sqrt(a*b); 1-c > 1e-6 {
		t.Fatalf("cosine with the original %v", c)
	}
	big := []float32{0.5, 70000}
	if Round(big) || big[0] != 0.5 {
		t.Fatalf("Round of a value past Max: %v", big)
	}
	nan := []float32{0.1, float32(math.NaN())}
	if Round(nan) || nan[0] != 0.1 || Exact(nan) {
		t.Fatalf("Round of a NaN: %v", nan)
	}
}

// TestDecode: every one of the 65,536 halves reads as float16 reads it,
// bit for bit.
func TestDecode(t *testing.T) {
	src := make([]byte, 2<<16)
	for h := range 1 << 16 {
		src[2*h], src[2*h+1] = byte(h), byte(h>>8)
	}
	dst := make([]float32, 1<<16)
	Decode(dst, src)
	for h, got := range dst {
		if want := float16.Frombits(uint16(h)).Float32(); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("half %#04x reads as %v (%#08x), want %v (%#08x)", h, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}

// TestAppend: every finite half, as a float32, is appended with float16's
// bits and reads back as itself; a vector holding one value that is no
// half (0.1, a NaN, a finite value past Max, one below the smallest
// subnormal) is refused whole.
func TestAppend(t *testing.T) {
	var v []float32
	for h := range 1 << 16 {
		if x := float16.Frombits(uint16(h)); x.IsFinite() {
			v = append(v, x.Float32())
		}
	}
	b, ok := Append([]byte{9}, v)
	if !ok || len(b) != 1+2*len(v) || b[0] != 9 {
		t.Fatalf("Append of every finite half: ok %v, %d bytes", ok, len(b))
	}
	back := make([]float32, len(v))
	Decode(back, b[1:])
	for i, f := range v {
		if want := float16.Fromfloat32(f).Bits(); uint16(b[1+2*i])|uint16(b[2+2*i])<<8 != want || math.Float32bits(back[i]) != math.Float32bits(f) {
			t.Fatalf("value %v: bits %#04x, read back %v; want %#04x", f, uint16(b[1+2*i])|uint16(b[2+2*i])<<8, back[i], want)
		}
	}
	for _, bad := range []float32{0.1, float32(math.NaN()), 65520, 1.0 / (1 << 26)} {
		if got, ok := Append([]byte{9}, []float32{0.5, bad}); ok || len(got) != 1 {
			t.Errorf("Append of %v: ok %v, %d bytes", bad, ok, len(got))
		}
	}
}
