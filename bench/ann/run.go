package ann

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/viterin/vek/vek32"
)

// ErrConfig: Validate rejected the configuration.
var ErrConfig = errors.New("ann: bad config")

// Config is one benchmark run's parameters.
type Config struct {
	M              int    // HNSW links per node above layer 0 (2·M at layer 0)
	EfConstruction int    // candidate list while building
	EfSearch       []int  // candidate lists searched, one measurement each
	K              int    // neighbours asked of every search (recall@K)
	Seed           uint64 // level PRNG seed of idem's HNSW
	Coder          bool   // also measure github.com/coder/hnsw
}

// DefaultConfig returns M 16, efConstruction 100, efSearch 50/100/200,
// K 10, seed 1, coder/hnsw on.
func DefaultConfig() Config {
	return Config{M: 16, EfConstruction: 100, EfSearch: []int{50, 100, 200}, K: 10, Seed: 1, Coder: true}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.M < 2:
		return fmt.Errorf("%w: M must be >= 2", ErrConfig)
	case c.EfConstruction < 1:
		return fmt.Errorf("%w: EfConstruction must be >= 1", ErrConfig)
	case len(c.EfSearch) == 0:
		return fmt.Errorf("%w: no EfSearch value", ErrConfig)
	case c.K < 1:
		return fmt.Errorf("%w: K must be >= 1", ErrConfig)
	}
	for _, ef := range c.EfSearch {
		if ef < c.K {
			return fmt.Errorf("%w: EfSearch %d below K %d", ErrConfig, ef, c.K)
		}
	}
	return nil
}

// Result is one index measured at one efSearch.
type Result struct {
	Index     string  `json:"index"`               // "idem-hnsw", "idem-index", "exact", "coder-hnsw"
	EfSearch  int     `json:"ef_search,omitempty"` // 0 for the exact scan
	Recall1   float64 `json:"recall_at_1"`         // share of queries whose first hit is the exact first
	RecallK   float64 `json:"recall_at_k"`         // mean share of the exact top K found in the top K
	QPS       float64 `json:"queries_per_s"`       // one goroutine, wall time
	QPSCPU    float64 `json:"queries_per_cpu_s"`   // one goroutine, process CPU time (steadier on a shared machine)
	BuildS    float64 `json:"build_s"`             // wall time to add the N vectors
	BuildCPUS float64 `json:"build_cpu_s"`         // process CPU time while building
	BytesPer  float64 `json:"bytes_per_vector"`    // index memory / N (0: not measured)
}

// Report is one run.
type Report struct {
	N, Queries, Dim int
	K               int
	M               int
	EfConstruction  int
	Seed            uint64
	GOMAXPROCS      int
	Results         []Result
}

// Searcher is one index under measurement: Search returns the positions
// (0..N-1) of the k best base vectors for q.
type Searcher interface {
	Search(q []float32, k, ef int) ([]int, error)
}

// Build is one index's construction: it adds base and reports its memory
// in bytes (0 if it cannot tell).
type Build func(base [][]float32) (Searcher, int, error)

// Truth returns, for every query, the positions of its k exact nearest
// base vectors by dot product (the vectors are L2-normalized), ties to the
// lower position.
func Truth(base, queries [][]float32, k int) [][]int {
	out := make([][]int, len(queries))
	for qi, q := range queries {
		out[qi] = exactTopK(base, q, k)
	}
	return out
}

// Measure builds every index of cfg over base and searches it with
// queries at each cfg.EfSearch (once for the exact scan), on the calling
// goroutine, against truth (from Truth).
func Measure(cfg Config, base, queries [][]float32, truth [][]int, builds map[string]Build, progress func(string)) (*Report, error) {
	r := &Report{N: len(base), Queries: len(queries), Dim: len(base[0]), K: cfg.K, M: cfg.M,
		EfConstruction: cfg.EfConstruction, Seed: cfg.Seed, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	for _, name := range slices.Sorted(maps.Keys(builds)) {
		if progress != nil {
			progress("building " + name)
		}
		runtime.GC()
		cpu0, t0 := cpuTime(), time.Now()
		s, bytes, err := builds[name](base)
		if err != nil {
			return nil, fmt.Errorf("build %s: %w", name, err)
		}
		wall, cpu := time.Since(t0).Seconds(), (cpuTime() - cpu0).Seconds()
		efs := cfg.EfSearch
		if fe, ok := s.(interface{ FixedEf() int }); ok {
			efs = []int{fe.FixedEf()} // it searches with one efSearch, or scans (0)
		}
		for _, ef := range efs {
			if progress != nil {
				progress(fmt.Sprintf("searching %s ef=%d", name, ef))
			}
			res := Result{Index: name, EfSearch: ef, BuildS: wall, BuildCPUS: cpu}
			if bytes > 0 {
				res.BytesPer = float64(bytes) / float64(len(base))
			}
			// The faster of two passes: the machine may be shared.
			best, bestCPU := math.Inf(1), math.Inf(1)
			for pass := range 2 {
				c, t := cpuTime(), time.Now()
				var hit1, hitK int
				for qi, q := range queries {
					got, err := s.Search(q, cfg.K, ef)
					if err != nil {
						return nil, fmt.Errorf("search %s: %w", name, err)
					}
					if pass == 0 {
						h1, hk := overlap(got, truth[qi])
						hit1 += h1
						hitK += hk
					}
				}
				best = min(best, time.Since(t).Seconds())
				bestCPU = min(bestCPU, (cpuTime() - c).Seconds())
				if pass == 0 {
					res.Recall1 = float64(hit1) / float64(len(queries))
					res.RecallK = float64(hitK) / float64(len(queries)*cfg.K)
				}
			}
			res.QPS = float64(len(queries)) / best
			res.QPSCPU = float64(len(queries)) / bestCPU
			r.Results = append(r.Results, res)
		}
		// Nothing of one index may run while the next is measured.
		if c, ok := s.(interface{ Close() error }); ok {
			if err := c.Close(); err != nil {
				return nil, fmt.Errorf("close %s: %w", name, err)
			}
		}
	}
	return r, nil
}

// overlap returns whether got's first is truth's first, and how many of
// truth got holds.
func overlap(got, truth []int) (first, common int) {
	if len(got) > 0 && len(truth) > 0 && got[0] == truth[0] {
		first = 1
	}
	for _, g := range got {
		if slices.Contains(truth, g) {
			common++
		}
	}
	return first, common
}

// exactTopK is the reference: every dot product, a sorted top k.
func exactTopK(base [][]float32, q []float32, k int) []int {
	type sc struct {
		s float32
		i int
	}
	top := make([]sc, 0, k+1)
	for i, v := range base {
		s := vek32.Dot(q, v)
		if len(top) == k && s <= top[k-1].s {
			continue
		}
		j := len(top)
		if j < k {
			top = append(top, sc{})
		} else {
			j = k - 1
		}
		for ; j > 0 && s > top[j-1].s; j-- {
			top[j] = top[j-1]
		}
		top[j] = sc{s, i}
	}
	out := make([]int, len(top))
	for i, t := range top {
		out[i] = t.i
	}
	return out
}
