// Package hnsw is a Hierarchical Navigable Small World graph over
// L2-normalized float32 vectors, searched by cosine similarity, written from
// Malkov & Yashunin, "Efficient and robust approximate nearest neighbor
// search using Hierarchical Navigable Small World graphs" (2016/2018),
// Algorithms 1 (insert), 2 (search a layer), 4 (the neighbour-selection
// heuristic) and 5 (k-NN search).
//
// The contract:
//
//   - Add validates a vector (length Config.Dim, not all zeros, no NaN or
//     ±Inf, a norm that fits float32) and returns an error, never panics;
//     nothing of a rejected vector reaches the graph. An accepted vector is
//     stored L2-normalized and gets the next node number (0, 1, 2, …).
//   - Search returns up to k live nodes, the most similar first (ties: the
//     lower node first). Every Score is the exact dot product of the
//     normalized query and the node's stored vector, and the candidates are
//     ranked exactly by it: a node the graph walk did not reach may be
//     missing (that is the approximation), but no node is ever returned
//     with a score it does not have, and a deleted node is never returned.
//   - Delete marks a node as a tombstone: it still routes searches but is
//     never a result. Rebuild returns a fresh graph of the live nodes (and
//     the renumbering); the caller decides when the tombstones cost enough.
//   - The same Config (Seed included) and the same sequence of Adds and
//     Deletes give the same graph, link for link: levels come from a PCG
//     generator seeded with Config.Seed, and every tie is broken by node.
//   - A Graph is safe for concurrent use: searches run in parallel under a
//     read lock, Add, Delete and Rebuild take the write lock.
//
// Layout: vectors are one contiguous []float32; layer-0 links are one
// []uint32 with 2·M slots per node (plus a count), upper-layer links M per
// node and layer in a second slab, so a 512-d vector costs about 2.2 KB.
// Level factor 1/ln M; separate efConstruction and efSearch; greedy descent
// on the upper layers; a visited set reused across searches (a generation
// counter per node, no map, no clearing per search). Dot products go
// through github.com/viterin/vek (AVX2 where the CPU has it).
//
// Why our own: DESIGN.md records that github.com/coder/hnsw, the library
// the design first named, loses recall (no heuristic selection, no 2·M
// layer 0, level factor 0.25), allocates a map per step, panics on
// Delete-then-Add and on a wrong dimension, and races Add with Search. It
// stays a baseline in idem's ANN benchmark only.
//
// Vectors are derived from customers' data; nothing in this package logs.
package hnsw

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/viterin/vek/vek32"
)

// Sentinel errors; returned errors wrap them with the detail.
var (
	// ErrDimension: a vector's length is not Config.Dim.
	ErrDimension = errors.New("hnsw: wrong dimension")
	// ErrInvalidVector: a vector is all zeros, holds NaN or ±Inf, or its
	// norm does not fit float32.
	ErrInvalidVector = errors.New("hnsw: zero or non-finite vector")
	// ErrInvalidArgument: k < 1, or ef < 1.
	ErrInvalidArgument = errors.New("hnsw: invalid argument")
	// ErrFull: the graph holds MaxNodes nodes.
	ErrFull = errors.New("hnsw: graph full")
	// ErrConfig: Validate rejected the configuration.
	ErrConfig = errors.New("hnsw: bad config")
)

// NoNode is the node number Rebuild maps a deleted node to.
const NoNode = math.MaxUint32

// maxLevel caps the level of a node; with M >= 2 the chance of drawing
// it is below 2^-32 per node.
const maxLevel = 32

// MaxNodes is how many nodes one graph can number.
const MaxNodes = math.MaxUint32 - 1

// Config configures a Graph. Start from DefaultConfig.
type Config struct {
	// Dim is the length of every vector.
	Dim int
	// M is the number of links a node keeps on each layer above 0, and the
	// number a new node picks; layer 0 keeps up to 2·M.
	M int
	// EfConstruction is the candidate list of the search that finds a new
	// node's neighbours: larger builds slower and links better.
	EfConstruction int
	// EfSearch is the candidate list of Search (at least k is used).
	EfSearch int
	// Seed seeds the level generator.
	Seed uint64
}

// DefaultConfig returns Dim 512, M 16, EfConstruction 100, EfSearch 100,
// Seed 1: recall@10 about 0.99 on 100,000 real 512-d sentence embeddings
// (see the README's measured table).
func DefaultConfig() Config {
	return Config{Dim: 512, M: 16, EfConstruction: 100, EfSearch: 100, Seed: 1}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Dim < 1:
		return fmt.Errorf("%w: Dim must be >= 1", ErrConfig)
	case c.M < 2 || c.M > 1<<12:
		return fmt.Errorf("%w: M must be in 2..4096", ErrConfig)
	case c.EfConstruction < 1:
		return fmt.Errorf("%w: EfConstruction must be >= 1", ErrConfig)
	case c.EfSearch < 1:
		return fmt.Errorf("%w: EfSearch must be >= 1", ErrConfig)
	}
	return nil
}

// Result is one search result.
type Result struct {
	Node  uint32
	Score float32 // the dot product of the normalized query and the node's vector
}

// Graph is an HNSW graph. It is safe for concurrent use.
type Graph struct {
	cfg   Config
	dim   int
	m, m0 int     // link caps: layers above 0, layer 0
	ml    float64 // level factor 1/ln M

	mu       sync.RWMutex // guards everything below
	vecs     []float32    // node i is vecs[i*dim:(i+1)*dim], L2-normalized
	levels   []uint8      // node i's top layer
	links0   []uint32     // node i's layer-0 block at i*(m0+1): count, then m0 slots
	upperOff []uint32     // node i's first upper block in upper (levels[i] > 0 only)
	upper    []uint32     // blocks of m+1: count, then m slots; layer l of node i at upperOff[i]+(l-1)*(m+1)
	dead     []uint64     // tombstones, one bit per node
	ndead    int
	entry    uint32 // the entry point (valid when len(levels) > 0)
	top      int    // the entry point's level
	rng      *rand.Rand

	pool sync.Pool // *searcher
}

// New returns an empty graph for cfg.
func New(cfg Config) (*Graph, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Graph{
		cfg: cfg, dim: cfg.Dim, m: cfg.M, m0: 2 * cfg.M,
		ml:  1 / math.Log(float64(cfg.M)),
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x686e7377)),
	}
	g.pool.New = func() any { return &searcher{} }
	return g, nil
}

// Config returns the graph's configuration.
func (g *Graph) Config() Config { return g.cfg }

// Len returns the number of nodes, deleted ones included.
func (g *Graph) Len() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return len(g.levels)
}

// Live returns the number of nodes not deleted.
func (g *Graph) Live() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return len(g.levels) - g.ndead
}

// Bytes returns the memory the graph's arrays hold (vectors, links,
// levels, tombstones), not counting pooled search buffers.
func (g *Graph) Bytes() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return 4*cap(g.vecs) + cap(g.levels) + 4*cap(g.links0) + 4*cap(g.upperOff) + 4*cap(g.upper) + 8*cap(g.dead)
}

// Grow reserves room for n more nodes, so that adding them allocates
// nothing but upper-layer links (a graph built to a known size holds no
// growth slack).
func (g *Graph) Grow(n int) {
	if n <= 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.vecs = slices.Grow(g.vecs, n*g.dim)
	g.levels = slices.Grow(g.levels, n)
	g.links0 = slices.Grow(g.links0, n*(g.m0+1))
	g.upperOff = slices.Grow(g.upperOff, n)
	g.upper = slices.Grow(g.upper, n*(g.m+1)/(g.m-1)+g.m+1) // expected upper layers per node: 1/(M-1)
	g.dead = slices.Grow(g.dead, max(0, (len(g.levels)+n+63)/64-len(g.dead)))
}

// Norm validates v against dim and returns its L2 norm: ErrDimension for
// a wrong length, ErrInvalidVector for a zero or non-finite vector or a
// norm (or inverse norm) that does not fit float32.
func Norm(v []float32, dim int) (float64, error) {
	if len(v) != dim {
		return 0, fmt.Errorf("%w: %d values, want %d", ErrDimension, len(v), dim)
	}
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	// NaN and ±Inf propagate into ss.
	if ss == 0 || math.IsNaN(ss) || math.IsInf(ss, 0) {
		return 0, ErrInvalidVector
	}
	n := math.Sqrt(ss)
	if n > math.MaxFloat32 || 1/n > math.MaxFloat32 {
		return 0, ErrInvalidVector
	}
	return n, nil
}

// Vector returns a copy of node's stored (normalized) vector, or nil for a
// node the graph does not have.
func (g *Graph) Vector(node uint32) []float32 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if int(node) >= len(g.levels) {
		return nil
	}
	return slices.Clone(g.vec(node))
}

// Deleted reports whether node is a tombstone (false for an unknown node).
func (g *Graph) Deleted(node uint32) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return int(node) < len(g.levels) && g.isDead(node)
}

// Add validates v, stores it normalized and links it into the graph
// (Algorithm 1). It returns the new node's number.
func (g *Graph) Add(v []float32) (uint32, error) {
	n, err := Norm(v, g.dim)
	if err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.levels) >= MaxNodes {
		return 0, ErrFull
	}
	return g.insert(v, float32(1/n)), nil
}

// Delete marks node as deleted and reports whether it was live.
func (g *Graph) Delete(node uint32) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if int(node) >= len(g.levels) || g.isDead(node) {
		return false
	}
	g.dead[node/64] |= 1 << (node % 64)
	g.ndead++
	return true
}

// Search returns up to k live nodes most similar to q, searching with a
// candidate list of max(Config.EfSearch, k) (Algorithm 5).
func (g *Graph) Search(q []float32, k int) ([]Result, error) {
	return g.SearchEf(q, k, g.cfg.EfSearch)
}

// SearchEf is Search with the candidate list max(ef, k).
func (g *Graph) SearchEf(q []float32, k, ef int) ([]Result, error) {
	if k < 1 || ef < 1 {
		return nil, fmt.Errorf("%w: k = %d, ef = %d", ErrInvalidArgument, k, ef)
	}
	n, err := Norm(q, g.dim)
	if err != nil {
		return nil, err
	}
	s := g.pool.Get().(*searcher)
	defer g.pool.Put(s)
	s.query = slices.Grow(s.query[:0], g.dim)[:g.dim]
	vek32.MulNumber_Into(s.query, q, float32(1/n))

	g.mu.RLock()
	defer g.mu.RUnlock()
	if len(g.levels) == g.ndead {
		return nil, nil
	}
	ep := g.descend(s.query, g.entry, g.top, 0)
	s.eps = append(s.eps[:0], ep)
	w := g.searchLayer(s, s.query, s.eps, max(ef, k), 0, true)
	slices.SortFunc(w, byScore)
	out := make([]Result, 0, min(k, len(w)))
	for _, c := range w[:min(k, len(w))] {
		out = append(out, Result{Node: c.id, Score: c.sim})
	}
	return out, nil
}

// Rebuild returns a new graph (same Config) holding the live nodes in
// node order, and old[i], the new number of node i (NoNode if deleted).
// The receiver is unchanged.
func (g *Graph) Rebuild() (*Graph, []uint32, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	ng, err := New(g.cfg)
	if err != nil {
		return nil, nil, err
	}
	ng.Grow(len(g.levels) - g.ndead)
	old := make([]uint32, len(g.levels))
	for i := range g.levels {
		if g.isDead(uint32(i)) {
			old[i] = NoNode
			continue
		}
		old[i] = ng.insert(g.vec(uint32(i)), 1)
	}
	return ng, old, nil
}

func (g *Graph) vec(i uint32) []float32 {
	o := int(i) * g.dim
	return g.vecs[o : o+g.dim : o+g.dim]
}

func (g *Graph) isDead(i uint32) bool { return g.dead[i/64]&(1<<(i%64)) != 0 }

// links returns node i's links on layer l.
func (g *Graph) links(i uint32, l int) []uint32 {
	if l == 0 {
		b := int(i) * (g.m0 + 1)
		return g.links0[b+1 : b+1+int(g.links0[b])]
	}
	b := int(g.upperOff[i]) + (l-1)*(g.m+1)
	return g.upper[b+1 : b+1+int(g.upper[b])]
}

// setLinks replaces node i's links on layer l (len(ns) <= the layer's cap).
func (g *Graph) setLinks(i uint32, l int, ns []uint32) {
	b := int(i) * (g.m0 + 1)
	block := g.links0
	if l > 0 {
		b, block = int(g.upperOff[i])+(l-1)*(g.m+1), g.upper
	}
	block[b] = uint32(len(ns))
	copy(block[b+1:], ns)
}

// randomLevel draws floor(-ln(U) · mL), U uniform in (0, 1].
func (g *Graph) randomLevel() int {
	u := 1 - g.rng.Float64() // (0, 1]
	return min(int(-math.Log(u)*g.ml), maxLevel)
}

// insert adds v·inv as a new node and links it (Algorithm 1). g.mu must be
// held for writing.
func (g *Graph) insert(v []float32, inv float32) uint32 {
	id := uint32(len(g.levels))
	lvl := g.randomLevel()
	g.vecs = slices.Grow(g.vecs, g.dim)[:len(g.vecs)+g.dim]
	q := g.vec(id)
	if inv == 1 {
		copy(q, v)
	} else {
		vek32.MulNumber_Into(q, v, inv)
	}
	g.levels = append(g.levels, uint8(lvl))
	g.links0 = extend(g.links0, g.m0+1)
	off := uint32(0)
	if lvl > 0 {
		off = uint32(len(g.upper))
		g.upper = extend(g.upper, lvl*(g.m+1))
	}
	g.upperOff = append(g.upperOff, off)
	if int(id)/64 >= len(g.dead) {
		g.dead = append(g.dead, 0)
	}
	if id == 0 {
		g.entry, g.top = 0, lvl
		return id
	}

	s := g.pool.Get().(*searcher)
	defer g.pool.Put(s)
	ep := g.descend(q, g.entry, g.top, lvl)
	s.eps = append(s.eps[:0], ep)
	for l := min(lvl, g.top); l >= 0; l-- {
		w := g.searchLayer(s, q, s.eps, g.cfg.EfConstruction, l, false)
		slices.SortFunc(w, byScore)
		// The next layer starts from every candidate found here.
		s.eps = append(s.eps[:0], w...)
		s.sel = g.selectNeighbors(s.sel[:0], w, g.m)
		for _, c := range s.sel {
			s.ids = append(s.ids, c.id)
		}
		g.setLinks(id, l, s.ids)
		limit := g.m
		if l == 0 {
			limit = g.m0
		}
		for _, n := range s.ids {
			g.link(s, n, id, l, limit)
		}
		s.ids = s.ids[:0]
	}
	if lvl > g.top {
		g.entry, g.top = id, lvl
	}
	return id
}

// extend returns s with n more zeroed elements.
func extend(s []uint32, n int) []uint32 {
	s = slices.Grow(s, n)
	s = s[:len(s)+n]
	clear(s[len(s)-n:])
	return s
}

// link adds to node n's links on layer l a link to node id, pruning n's
// list back to limit with the heuristic when it is full.
func (g *Graph) link(s *searcher, n, id uint32, l, limit int) {
	ns := g.links(n, l)
	if len(ns) < limit {
		ns = append(ns, id) // within the block: len < cap slot count
		g.setLinks(n, l, ns)
		return
	}
	base := g.vec(n)
	s.prune = s.prune[:0]
	for _, o := range ns {
		s.prune = append(s.prune, cand{sim: vek32.Dot(base, g.vec(o)), id: o})
	}
	s.prune = append(s.prune, cand{sim: vek32.Dot(base, g.vec(id)), id: id})
	slices.SortFunc(s.prune, byScore)
	s.psel = g.selectNeighbors(s.psel[:0], s.prune, limit)
	s.pids = s.pids[:0]
	for _, c := range s.psel {
		s.pids = append(s.pids, c.id)
	}
	g.setLinks(n, l, s.pids)
}

// selectNeighbors is the heuristic of Algorithm 4 (without extending the
// candidates and without keeping pruned ones, as hnswlib does): walking
// the candidates from the most similar, keep one only if it is more
// similar to the base than to every one kept so far, up to m. cands must
// be sorted by byScore; the kept ones are appended to dst.
func (g *Graph) selectNeighbors(dst, cands []cand, m int) []cand {
	if len(cands) <= m {
		return append(dst, cands...)
	}
	start := len(dst)
	for _, c := range cands {
		if len(dst)-start >= m {
			break
		}
		cv := g.vec(c.id)
		keep := true
		for _, r := range dst[start:] {
			if vek32.Dot(cv, g.vec(r.id)) > c.sim {
				keep = false
				break
			}
		}
		if keep {
			dst = append(dst, c)
		}
	}
	return dst
}

// descend walks greedily from ep on layers from down to stop+1 (Algorithm
// 5's upper-layer phase, ef = 1) and returns the closest node found.
func (g *Graph) descend(q []float32, ep uint32, from, stop int) cand {
	cur := cand{sim: vek32.Dot(q, g.vec(ep)), id: ep}
	for l := from; l > stop; l-- {
		for changed := true; changed; {
			changed = false
			for _, n := range g.links(cur.id, l) {
				if sim := vek32.Dot(q, g.vec(n)); sim > cur.sim || sim == cur.sim && n < cur.id {
					cur, changed = cand{sim: sim, id: n}, true
				}
			}
		}
	}
	return cur
}

// searchLayer is Algorithm 2: a best-first walk of layer l from eps
// keeping the ef most similar nodes seen. With liveOnly, tombstones route
// the walk but are not kept. The result is unsorted and valid until the
// searcher's next use.
func (g *Graph) searchLayer(s *searcher, q []float32, eps []cand, ef, l int, liveOnly bool) []cand {
	s.visitStart(len(g.levels))
	s.cands = s.cands[:0]
	s.res = s.res[:0]
	for _, e := range eps {
		if s.visited(e.id) {
			continue
		}
		s.cands = pushBest(s.cands, e)
		if !liveOnly || !g.isDead(e.id) {
			s.res = pushWorst(s.res, e)
			if len(s.res) > ef {
				s.res = popWorst(s.res)
			}
		}
	}
	for len(s.cands) > 0 {
		var c cand
		c, s.cands = popBest(s.cands)
		if len(s.res) >= ef && c.sim < s.res[0].sim {
			break
		}
		for _, n := range g.links(c.id, l) {
			if s.visited(n) {
				continue
			}
			sim := vek32.Dot(q, g.vec(n))
			if len(s.res) < ef || sim > s.res[0].sim {
				s.cands = pushBest(s.cands, cand{sim: sim, id: n})
				if !liveOnly || !g.isDead(n) {
					s.res = pushWorst(s.res, cand{sim: sim, id: n})
					if len(s.res) > ef {
						s.res = popWorst(s.res)
					}
				}
			}
		}
	}
	return s.res
}

// cand is a node and its similarity to the vector being searched or
// inserted.
type cand struct {
	sim float32
	id  uint32
}

// byScore orders by similarity descending, then node ascending.
func byScore(a, b cand) int {
	switch {
	case a.sim > b.sim:
		return -1
	case a.sim < b.sim:
		return 1
	case a.id < b.id:
		return -1
	case a.id > b.id:
		return 1
	}
	return 0
}

// searcher is the scratch space of one search or insert, pooled.
type searcher struct {
	marks []uint16 // marks[i] == epoch: node i visited in this walk
	epoch uint16

	query      []float32
	eps        []cand
	cands, res []cand // heaps: best on top, worst on top
	sel, psel  []cand
	prune      []cand
	ids, pids  []uint32
}

// visitStart begins a walk over a graph of n nodes: bumping the epoch
// forgets every earlier mark without touching the array.
func (s *searcher) visitStart(n int) {
	if len(s.marks) < n {
		s.marks = make([]uint16, n+n/4+64)
		s.epoch = 0
	}
	s.epoch++
	if s.epoch == 0 { // wrapped: old marks could collide
		clear(s.marks)
		s.epoch = 1
	}
}

// visited marks node i and reports whether it was marked already.
func (s *searcher) visited(i uint32) bool {
	if s.marks[i] == s.epoch {
		return true
	}
	s.marks[i] = s.epoch
	return false
}

// Binary heaps on []cand. "Best" keeps the most similar on top (ties: the
// lower node); "worst" keeps the least similar on top (ties: the higher
// node), so the walk is deterministic.

func better(a, b cand) bool { return a.sim > b.sim || a.sim == b.sim && a.id < b.id }

func pushBest(h []cand, c cand) []cand {
	h = append(h, c)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !better(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func popBest(h []cand) (cand, []cand) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, b := 2*i+1, i
		if l < len(h) && better(h[l], h[b]) {
			b = l
		}
		if r := l + 1; r < len(h) && better(h[r], h[b]) {
			b = r
		}
		if b == i {
			break
		}
		h[i], h[b] = h[b], h[i]
		i = b
	}
	return top, h
}

func pushWorst(h []cand, c cand) []cand {
	h = append(h, c)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !better(h[p], h[i]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func popWorst(h []cand) []cand {
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, w := 2*i+1, i
		if l < len(h) && better(h[w], h[l]) {
			w = l
		}
		if r := l + 1; r < len(h) && better(h[w], h[r]) {
			w = r
		}
		if w == i {
			break
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
	return h
}
