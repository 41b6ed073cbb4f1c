package embed

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/viterin/vek/vek32"
)

// The dense layers are matrix products of a batch's stacked token rows
// ([rows][k]) with a weight matrix ([k][p]). They run on our own kernels, not
// on github.com/viterin/vek's MatMul, for two reasons measured in
// BenchmarkKernel: the fastest loop order depends on the CPU (on an Intel
// Xeon vek.MatMul was 3x slower than dot products over transposed weights;
// on an AMD EPYC they were equal), and no kernel there fuses the bias and the
// activation or reads weights laid out for it.
//
// Every kernel computes each output as one chain of fused multiply-adds in k
// order, starting from the bias: acc = fma(x[i][k], w[k][j], acc). So all of
// them, assembly (AVX2, AVX-512) and pure Go alike, give bit-identical
// vectors: the kernel a machine picks changes its speed, never a vector or a
// duplicate decision. Weights are packed once, at load, into panels of the
// chosen kernel's width (panel-major, [k][nr] inside a panel), so a tile
// reads its weights contiguously.

// kernel is one implementation of the tile product.
type kernel struct {
	name string
	nr   int // columns per weight panel
	mr   int // most rows per tile
	// tile sets c[i][0:nr] (row stride ldc) for i < mr to bias[0:nr] plus
	// a[i][0:k] (row stride lda) times the panel b ([k][nr]), then applies
	// ReLU if flags&tileReLU.
	tile func(mr, k int, a []float32, lda int, b, c []float32, ldc int, bias []float32, flags int)
}

// tileReLU, in a tile's flags, applies max(x, 0) at the end (NaN and -0
// become 0).
const tileReLU = 1

// goKernel is the portable kernel; the assembly ones are added per CPU.
var goKernel = kernel{name: "go", nr: 16, mr: 4, tile: tileGo}

// kernels lists the kernels this CPU can run, best guess first.
func kernels() []kernel { return append(cpuKernels(), goKernel) }

// KernelNames lists the matrix kernels the built-in encoder can use on this
// machine (for USEConfig.Kernel).
func KernelNames() []string {
	var names []string
	for _, k := range kernels() {
		names = append(names, k.name)
	}
	return names
}

// kernelByName returns the named kernel, or the fastest one measured on
// this machine for "" or "auto".
func kernelByName(name string) (kernel, error) {
	if name == "" || name == KernelAuto {
		return fastestKernel(), nil
	}
	for _, k := range kernels() {
		if k.name == name {
			return k, nil
		}
	}
	return kernel{}, fmt.Errorf("%w: kernel %q not available on this CPU (have %v)", ErrConfig, name, KernelNames())
}

// fastestKernel measures each assembly kernel once per process on the
// feed-forward's shape, for one text of 16 tokens and for a batch of 8 such
// texts, interleaved, best of 3 each, and returns the one with the lowest
// sum of time per text. Only speed depends on it: all kernels give the same
// bits.
var fastestKernel = sync.OnceValue(func() kernel {
	ks := cpuKernels()
	if len(ks) == 0 {
		return goKernel
	}
	if len(ks) == 1 {
		return ks[0]
	}
	const k, p = modelDim, ffnDim
	shapes := []int{16, 8 * 16}
	w := make([]float32, k*p)
	for i := range w {
		w[i] = rand.Float32() - 0.5
	}
	x, bias, dst := w[:shapes[1]*k], w[:p], make([]float32, shapes[1]*p)
	mats := make([]matrix, len(ks))
	best := make([][]time.Duration, len(ks))
	for i, kn := range ks {
		mats[i] = packMatrix(kn, w, k, p)
		mats[i].mulBias(dst, x, bias, shapes[0], false) // warm the caches
		best[i] = []time.Duration{math.MaxInt64, math.MaxInt64}
	}
	for range 3 {
		for i := range ks {
			for s, rows := range shapes {
				start := time.Now()
				mats[i].mulBias(dst, x, bias, rows, false)
				best[i][s] = min(best[i][s], time.Since(start))
			}
		}
	}
	pick, pickT := 0, time.Duration(math.MaxInt64)
	for i := range ks {
		if t := best[i][0] + best[i][1]/8; t < pickT {
			pick, pickT = i, t
		}
	}
	return ks[pick]
})

// matrix is a [k][p] weight matrix packed for one kernel: panels of nr
// columns, each [k][nr] row-major. p is a multiple of nr.
type matrix struct {
	k, p int
	kern kernel
	data []float32
}

// packMatrix packs w ([k][p], row-major) for kern.
func packMatrix(kern kernel, w []float32, k, p int) matrix {
	nr := kern.nr
	if p%nr != 0 {
		panic(fmt.Sprintf("embed: matrix width %d is not a multiple of %d", p, nr))
	}
	data := make([]float32, k*p)
	for j0 := 0; j0 < p; j0 += nr {
		panel := data[j0*k : (j0+nr)*k]
		for r := 0; r < k; r++ {
			copy(panel[r*nr:(r+1)*nr], w[r*p+j0:r*p+j0+nr])
		}
	}
	return matrix{k: k, p: p, kern: kern, data: data}
}

// mulBias sets dst ([rows][p]) to x ([rows][k]) times w plus bias ([p]), then
// to max(·, 0) if relu. Each output row depends on its input row only, so
// rows stacked from several texts give each text the values it would get
// alone.
func (w matrix) mulBias(dst, x, bias []float32, rows int, relu bool) {
	k, p, nr, mr := w.k, w.p, w.kern.nr, w.kern.mr
	flags := 0
	if relu {
		flags = tileReLU
	}
	if rows == 0 {
		return
	}
	_, _, _ = dst[rows*p-1], x[rows*k-1], bias[p-1]
	// Tiles of near-equal height: 16 rows on a 12-row kernel as 8+8, not
	// 12+4 (a short tile does few multiply-adds per load).
	tiles := (rows + mr - 1) / mr
	for j0 := 0; j0 < p; j0 += nr {
		panel := w.data[j0*k : (j0+nr)*k]
		for t, i := 0, 0; t < tiles; t++ {
			m := (rows - i) / (tiles - t)
			w.kern.tile(m, k, x[i*k:], k, panel, dst[i*p+j0:], p, bias[j0:j0+nr], flags)
			i += m
		}
	}
}

// tileGo is the portable tile kernel. Its chain of float32 fused
// multiply-adds is the assembly kernels' chain, element for element.
func tileGo(mr, k int, a []float32, lda int, b, c []float32, ldc int, bias []float32, flags int) {
	const nr = 16
	var acc [nr]float32
	for i := range mr {
		copy(acc[:], bias[:nr])
		row := a[i*lda : i*lda+k]
		for kk, av := range row {
			bk := b[kk*nr : kk*nr+nr]
			for j, bv := range bk {
				// fma32, inlined by hand (the compiler will not).
				s := math.FMA(float64(av), float64(bv), float64(acc[j]))
				if math.Float64bits(s)&(1<<29-1) == 1<<28 {
					acc[j] = fma32Halfway(av, bv, acc[j], s)
				} else {
					acc[j] = float32(s)
				}
			}
		}
		if flags&tileReLU != 0 {
			for j, v := range acc {
				if !(v > 0) {
					acc[j] = 0
				}
			}
		}
		copy(c[i*ldc:i*ldc+nr], acc[:])
	}
}

// fma32 returns x*y+z rounded once to float32, as VFMADD231PS does. The
// product of two float32 is exact in float64, so math.FMA gives the exact
// sum rounded once to float64; rounding that to float32 is a second
// rounding, wrong only when the float64 lands exactly halfway between two
// float32 (its low 29 bits 1 followed by zeros). Then fma32Halfway decides.
func fma32(x, y, z float32) float32 {
	s := math.FMA(float64(x), float64(y), float64(z))
	if math.Float64bits(s)&(1<<29-1) != 1<<28 {
		return float32(s)
	}
	return fma32Halfway(x, y, z, s)
}

// fma32Halfway rounds s, the float64 sum of x*y and z that lies halfway
// between two float32, toward the exact sum: the exact error of
// s = x*y + z (Knuth's two-sum; x*y is exact in float64) tells which side.
func fma32Halfway(x, y, z float32, s float64) float32 {
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s)
	}
	p := float64(x) * float64(y)
	pz := s - float64(z)
	e := (float64(z) - (s - pz)) + (p - pz)
	switch {
	case e > 0:
		s = math.Nextafter(s, math.Inf(1))
	case e < 0:
		s = math.Nextafter(s, math.Inf(-1))
	}
	return float32(s)
}

// addTo adds x to dst element-wise.
func addTo(dst, x []float32) { vek32.Add_Inplace(dst, x[:len(dst)]) }
