package hnsw

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/viterin/vek/vek32"
)

// randomVectors returns n d-dimensional Gaussian vectors.
func randomVectors(r *rand.Rand, n, d int) [][]float32 {
	out := make([][]float32, n)
	for i := range out {
		out[i] = make([]float32, d)
		for j := range out[i] {
			out[i][j] = float32(r.NormFloat64())
		}
	}
	return out
}

// clusteredVectors returns n vectors around c centres with noise sigma:
// many near-equal scores, the hard case for a graph.
func clusteredVectors(r *rand.Rand, n, d, c int, sigma float64) [][]float32 {
	centres := randomVectors(r, c, d)
	out := make([][]float32, n)
	for i := range out {
		cc := centres[r.IntN(c)]
		out[i] = make([]float32, d)
		for j := range out[i] {
			out[i][j] = cc[j] + float32(sigma*r.NormFloat64())
		}
	}
	return out
}

func normalized(v []float32) []float32 {
	n, err := Norm(v, len(v))
	if err != nil {
		panic(err)
	}
	return vek32.MulNumber(v, float32(1/n))
}

// exact is the reference: the k live vectors most similar to q, by the
// same dot product and tie order as the graph. The model maps hold
// normalized vectors.
func exact(vecs map[uint32][]float32, q []float32, k int) []Result {
	qn := normalized(q)
	var all []Result
	for id, v := range vecs {
		all = append(all, Result{Node: id, Score: vek32.Dot(qn, v)})
	}
	slices.SortFunc(all, func(a, b Result) int { return byScore(cand{a.Score, a.Node}, cand{b.Score, b.Node}) })
	return all[:min(k, len(all))]
}

func newGraph(t testing.TB, cfg Config) *Graph {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// checkResults asserts what holds for every search whatever the graph
// misses: only live nodes, each once, sorted, with its exact score.
func checkResults(t testing.TB, got []Result, live map[uint32][]float32, q []float32, k int) {
	t.Helper()
	if len(got) > k {
		t.Fatalf("%d results for k = %d", len(got), k)
	}
	if len(live) > 0 && len(got) == 0 {
		t.Fatalf("no result with %d live nodes", len(live))
	}
	qn := normalized(q)
	seen := map[uint32]bool{}
	for i, r := range got {
		v, ok := live[r.Node]
		if !ok {
			t.Fatalf("result %d: node %d is deleted or unknown", i, r.Node)
		}
		if seen[r.Node] {
			t.Fatalf("node %d returned twice", r.Node)
		}
		seen[r.Node] = true
		if want := vek32.Dot(qn, v); r.Score != want {
			t.Fatalf("node %d: score %v, exact %v", r.Node, r.Score, want)
		}
		if i > 0 && byScore(cand{got[i-1].Score, got[i-1].Node}, cand{r.Score, r.Node}) > 0 {
			t.Fatalf("results out of order at %d: %v", i, got)
		}
	}
}

func recallAt(got, want []Result) float64 {
	n := 0
	for _, w := range want {
		if slices.ContainsFunc(got, func(r Result) bool { return r.Node == w.Node }) {
			n++
		}
	}
	return float64(n) / float64(len(want))
}

func TestRecallAgainstExact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	cases := []struct {
		name       string
		vecs       [][]float32
		ef         int
		wantRecall float64
	}{
		{"random d=32", randomVectors(r, 3000, 32), 100, 0.95},
		{"clustered d=64", clusteredVectors(r, 3000, 64, 30, 0.3), 100, 0.95},
		{"clustered tight d=64", clusteredVectors(r, 3000, 64, 5, 0.05), 200, 0.95},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Dim = len(c.vecs[0])
			g := newGraph(t, cfg)
			live := map[uint32][]float32{}
			for _, v := range c.vecs[:2800] {
				id, err := g.Add(v)
				if err != nil {
					t.Fatal(err)
				}
				live[id] = normalized(v)
			}
			var sum float64
			queries := c.vecs[2800:]
			for _, q := range queries {
				got, err := g.SearchEf(q, 10, c.ef)
				if err != nil {
					t.Fatal(err)
				}
				checkResults(t, got, live, q, 10)
				sum += recallAt(got, exact(live, q, 10))
			}
			if rec := sum / float64(len(queries)); rec < c.wantRecall {
				t.Fatalf("recall@10 %.3f, want >= %.2f", rec, c.wantRecall)
			}
		})
	}
}

func TestLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cfg := DefaultConfig()
	cfg.Dim, cfg.M = 16, 8
	g := newGraph(t, cfg)
	for _, v := range randomVectors(r, 2000, 16) {
		if _, err := g.Add(v); err != nil {
			t.Fatal(err)
		}
	}
	levels, onLayer := map[int]int{}, map[int]int{}
	for _, lv := range g.levels {
		levels[int(lv)]++
		for l := 0; l <= int(lv); l++ {
			onLayer[l]++
		}
	}
	for i := range g.levels {
		for l := 0; l <= int(g.levels[i]); l++ {
			ns := g.links(uint32(i), l)
			limit := cfg.M
			if l == 0 {
				limit = 2 * cfg.M
			}
			// Only a node alone on its layer may have no links there.
			if len(ns) > limit || len(ns) == 0 && onLayer[l] > 1 {
				t.Fatalf("node %d layer %d: %d links, cap %d", i, l, len(ns), limit)
			}
			for _, n := range ns {
				if n == uint32(i) || int(g.levels[n]) < l {
					t.Fatalf("node %d layer %d links to %d (level %d)", i, l, n, g.levels[n])
				}
			}
		}
	}
	// Level factor 1/ln M: a node reaches layer 1 with probability 1/M.
	if up := 2000 - levels[0]; up < 2000/cfg.M/2 || up > 2000/cfg.M*2 {
		t.Fatalf("%d of 2000 nodes above layer 0, want about %d", up, 2000/cfg.M)
	}
}

func TestSameSeedSameGraph(t *testing.T) {
	vecs := clusteredVectors(rand.New(rand.NewPCG(3, 3)), 1500, 24, 10, 0.2)
	build := func(seed uint64) *Graph {
		cfg := DefaultConfig()
		cfg.Dim, cfg.Seed = 24, seed
		g := newGraph(t, cfg)
		for i, v := range vecs {
			if _, err := g.Add(v); err != nil {
				t.Fatal(err)
			}
			if i%7 == 3 {
				g.Delete(uint32(i / 2))
			}
		}
		return g
	}
	a, b, c := build(42), build(42), build(43)
	same := func(x, y *Graph) bool {
		return slices.Equal(x.levels, y.levels) && slices.Equal(x.links0, y.links0) &&
			slices.Equal(x.upper, y.upper) && slices.Equal(x.upperOff, y.upperOff) &&
			slices.Equal(x.dead, y.dead) && x.entry == y.entry && x.top == y.top
	}
	if !same(a, b) {
		t.Fatal("the same seed and operations built different graphs")
	}
	if same(a, c) {
		t.Fatal("another seed built the same graph: levels ignore the seed")
	}
	q := vecs[17]
	ra, _ := a.Search(q, 10)
	rb, _ := b.Search(q, 10)
	if !slices.Equal(ra, rb) {
		t.Fatalf("same graph, different answers: %v vs %v", ra, rb)
	}
}

func TestDeleteAndRebuild(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	vecs := clusteredVectors(r, 2000, 32, 20, 0.3)
	cfg := DefaultConfig()
	cfg.Dim = 32
	g := newGraph(t, cfg)
	live := map[uint32][]float32{}
	for _, v := range vecs {
		id, _ := g.Add(v)
		live[id] = normalized(v)
	}
	for id := range uint32(2000) {
		if id%3 != 0 {
			if !g.Delete(id) {
				t.Fatalf("Delete(%d) of a live node reported false", id)
			}
			delete(live, id)
		}
	}
	if g.Delete(1) || g.Delete(5000) {
		t.Fatal("Delete of a deleted or unknown node reported true")
	}
	if g.Live() != len(live) || g.Len() != 2000 {
		t.Fatalf("Live %d Len %d, want %d and 2000", g.Live(), g.Len(), len(live))
	}
	var before float64
	for _, q := range vecs[:100] {
		got, err := g.Search(q, 10)
		if err != nil {
			t.Fatal(err)
		}
		checkResults(t, got, live, q, 10)
		before += recallAt(got, exact(live, q, 10))
	}
	ng, old, err := g.Rebuild()
	if err != nil {
		t.Fatal(err)
	}
	if ng.Len() != len(live) || g.Len() != 2000 {
		t.Fatalf("rebuilt Len %d (want %d); original Len %d (want unchanged 2000)", ng.Len(), len(live), g.Len())
	}
	nlive := map[uint32][]float32{}
	for o, n := range old {
		if _, ok := live[uint32(o)]; ok != (n != NoNode) {
			t.Fatalf("node %d: live %v but mapped to %d", o, ok, n)
		}
		if n != NoNode {
			nlive[n] = live[uint32(o)]
			if !slices.Equal(ng.Vector(n), g.Vector(uint32(o))) {
				t.Fatalf("node %d -> %d: vector changed", o, n)
			}
		}
	}
	var after float64
	for _, q := range vecs[:100] {
		got, err := ng.Search(q, 10)
		if err != nil {
			t.Fatal(err)
		}
		checkResults(t, got, nlive, q, 10)
		after += recallAt(got, exact(nlive, q, 10))
	}
	if before < 90 || after < 95 {
		t.Fatalf("recall@10 over 100 queries: %.1f with tombstones, %.1f rebuilt", before, after)
	}
	for id := range uint32(2000) {
		g.Delete(id)
	}
	if got, err := g.Search(vecs[0], 5); err != nil || got != nil {
		t.Fatalf("all deleted: %v, %v; want no result", got, err)
	}
}

func TestBadInput(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Dim = 4
	g := newGraph(t, cfg)
	if _, err := g.Add([]float32{1, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		name string
		v    []float32
		want error
	}{
		{"short", []float32{1, 2, 3}, ErrDimension},
		{"long", []float32{1, 2, 3, 4, 5}, ErrDimension},
		{"nil", nil, ErrDimension},
		{"zero", []float32{0, 0, 0, 0}, ErrInvalidVector},
		{"NaN", []float32{1, nan, 0, 0}, ErrInvalidVector},
		{"+Inf", []float32{1, inf, 0, 0}, ErrInvalidVector},
		{"-Inf", []float32{-inf, 0, 0, 0}, ErrInvalidVector},
		{"norm overflows float32", []float32{3e38, 3e38, 0, 0}, ErrInvalidVector},
		{"subnormal", []float32{1e-45, 0, 0, 0}, ErrInvalidVector},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := g.Add(c.v); !errors.Is(err, c.want) {
				t.Fatalf("Add: %v, want %v", err, c.want)
			}
			if _, err := g.Search(c.v, 3); !errors.Is(err, c.want) {
				t.Fatalf("Search: %v, want %v", err, c.want)
			}
			if g.Len() != 1 {
				t.Fatalf("a rejected vector reached the graph: Len %d", g.Len())
			}
		})
	}
	if _, err := g.Search([]float32{1, 0, 0, 0}, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("k = 0: %v", err)
	}
	if _, err := g.SearchEf([]float32{1, 0, 0, 0}, 1, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("ef = 0: %v", err)
	}
	for _, bad := range []Config{{Dim: 0, M: 16, EfConstruction: 1, EfSearch: 1}, {Dim: 4, M: 1, EfConstruction: 1, EfSearch: 1},
		{Dim: 4, M: 16, EfConstruction: 0, EfSearch: 1}, {Dim: 4, M: 16, EfConstruction: 1, EfSearch: 0}} {
		if _, err := New(bad); !errors.Is(err, ErrConfig) {
			t.Fatalf("New(%+v): %v, want ErrConfig", bad, err)
		}
	}
	empty := newGraph(t, cfg)
	if got, err := empty.Search([]float32{1, 0, 0, 0}, 3); err != nil || got != nil {
		t.Fatalf("empty graph: %v, %v", got, err)
	}
}

// TestRandomOperations drives adds, deletes, re-adds of the same vectors,
// searches and rebuilds against a model of the live set, on random and
// clustered data: no panic, no deleted node, exact scores, and recall that
// stays high.
func TestRandomOperations(t *testing.T) {
	for _, data := range []string{"random", "clustered", "duplicates"} {
		t.Run(data, func(t *testing.T) {
			r := rand.New(rand.NewPCG(11, 13))
			var pool [][]float32
			switch data {
			case "random":
				pool = randomVectors(r, 400, 16)
			case "clustered":
				pool = clusteredVectors(r, 400, 16, 4, 0.05)
			case "duplicates": // many identical vectors: every score ties
				base := randomVectors(r, 10, 16)
				for i := range 400 {
					pool = append(pool, base[i%10])
				}
			}
			cfg := DefaultConfig()
			cfg.Dim, cfg.M, cfg.EfConstruction = 16, 4, 32
			g := newGraph(t, cfg)
			live := map[uint32][]float32{}
			var sum float64
			var searches int
			for step := range 1200 {
				switch op := r.IntN(10); {
				case op < 5:
					v := pool[r.IntN(len(pool))]
					id, err := g.Add(v)
					if err != nil {
						t.Fatal(err)
					}
					live[id] = normalized(v)
				case op < 7:
					id := uint32(r.IntN(g.Len() + 1))
					_, was := live[id]
					if g.Delete(id) != was {
						t.Fatalf("step %d: Delete(%d) disagrees with the model (live %v)", step, id, was)
					}
					delete(live, id)
				case op < 9:
					q := pool[r.IntN(len(pool))]
					k := 1 + r.IntN(12)
					got, err := g.SearchEf(q, k, 64)
					if err != nil {
						t.Fatal(err)
					}
					checkResults(t, got, live, q, k)
					if len(live) > 0 && data != "duplicates" {
						sum += recallAt(got, exact(live, q, k))
						searches++
					}
				default:
					if g.Len() > 300 {
						ng, old, err := g.Rebuild()
						if err != nil {
							t.Fatal(err)
						}
						nl := map[uint32][]float32{}
						for o, n := range old {
							if n != NoNode {
								nl[n] = live[uint32(o)]
							}
						}
						g, live = ng, nl
					}
				}
			}
			if searches > 0 && sum/float64(searches) < 0.95 {
				t.Fatalf("mean recall %.3f over %d searches", sum/float64(searches), searches)
			}
		})
	}
}

// TestConcurrentAddSearch runs adds, deletes and searches at once; under
// -race it proves the locking, and every answer must still hold only
// nodes that were added.
func TestConcurrentAddSearch(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	vecs := randomVectors(r, 1200, 16)
	cfg := DefaultConfig()
	cfg.Dim = 16
	g := newGraph(t, cfg)
	for _, v := range vecs[:200] {
		g.Add(v)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i, v := range vecs[200:] {
			if _, err := g.Add(v); err != nil {
				errs <- err
				return
			}
			if i%10 == 0 {
				g.Delete(uint32(i))
			}
		}
	}()
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				q := vecs[(w*300+i)%len(vecs)]
				got, err := g.Search(q, 5)
				if err != nil {
					errs <- err
					return
				}
				n := g.Len()
				for _, h := range got {
					if int(h.Node) >= n {
						errs <- fmt.Errorf("node %d of a graph of %d", h.Node, n)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if g.Len() != 1200 {
		t.Fatalf("Len %d after 1200 adds", g.Len())
	}
}

// FuzzOperations interprets the input as a sequence of operations on a
// small graph and checks the invariants after each search.
func FuzzOperations(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 0, 0, 4, 5, 0, 9, 200, 7})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3})
	f.Add([]byte{0, 255, 0, 128, 1, 0, 2, 0, 3, 1, 0, 7, 2, 7})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const d = 4
		cfg := DefaultConfig()
		cfg.Dim, cfg.M, cfg.EfConstruction, cfg.EfSearch = d, 2, 4, 4
		g := newGraph(t, cfg)
		live := map[uint32][]float32{}
		vec := func(b byte) []float32 {
			// A few distinct directions, some of them equal: ties and
			// duplicates are where graphs break.
			return []float32{float32(b%5) - 2, float32(b/5%3) - 1, float32(b % 2), 1}
		}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%5, ops[i+1]
			switch op {
			case 0, 1:
				id, err := g.Add(vec(arg))
				if err != nil {
					t.Fatal(err)
				}
				live[id] = normalized(vec(arg))
			case 2:
				id := uint32(arg) % uint32(g.Len()+1)
				_, was := live[id]
				if g.Delete(id) != was {
					t.Fatalf("Delete(%d) disagrees with the model", id)
				}
				delete(live, id)
			case 3:
				k := 1 + int(arg%8)
				got, err := g.Search(vec(arg), k)
				if err != nil {
					t.Fatal(err)
				}
				checkResults(t, got, live, vec(arg), k)
			case 4:
				ng, old, err := g.Rebuild()
				if err != nil {
					t.Fatal(err)
				}
				nl := map[uint32][]float32{}
				for o, n := range old {
					if n != NoNode {
						nl[n] = live[uint32(o)]
					}
				}
				g, live = ng, nl
			}
		}
		if _, err := g.Add([]float32{0, 0, 0, 0}); !errors.Is(err, ErrInvalidVector) {
			t.Fatalf("zero vector: %v", err)
		}
	})
}
