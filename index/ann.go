package index

import (
	"context"
	"slices"
	"sync"

	"github.com/viterin/vek/vek32"

	"github.com/idem-dev/idem/index/hnsw"
)

// The graph side of a scope. A scope's rows of one tag (a partition) that
// number at least Config.ANNMin are searched through an HNSW graph
// (index/hnsw) instead of the exact scan; the graph is a cache of the
// rows, as the rows are a cache of the ledger:
//
//   - it is built in the background, from the rows, by the Flat's builder
//     goroutine the first time a search finds the partition large enough
//     (the search itself, and every search until the graph is ready, scans
//     exactly);
//   - once published it is kept current under the scope's write lock: an
//     added row is inserted, a deleted, replaced or evicted row becomes a
//     tombstone, and when tombstones outnumber live nodes a fresh graph is
//     built in the background (the old one serves meanwhile);
//   - it is dropped when the partition falls below ANNMin/2 (the
//     hysteresis keeps a partition at the threshold from building and
//     dropping graphs in turn), and with its scope.
//
// A graph keeps its own copy of the vectors, so a row in a graph-searched
// partition counts twice toward Config.MaxVectors.

// annGraph is the graph of one partition and its node bookkeeping.
type annGraph struct {
	g      *hnsw.Graph
	ids    []string          // node → entry ID ("" once a tombstone)
	orders []uint64          // node → the row's insertion number when it was added
	byID   map[string]uint32 // entry ID → its live node
}

func newANNGraph(cfg hnsw.Config, n int) (*annGraph, error) {
	g, err := hnsw.New(cfg)
	if err != nil {
		return nil, err
	}
	g.Grow(n)
	return &annGraph{g: g, ids: make([]string, 0, n), orders: make([]uint64, 0, n), byID: make(map[string]uint32, n)}, nil
}

// add inserts a normalized row. An ID already live is tombstoned first.
func (a *annGraph) add(id string, order uint64, v []float32) error {
	a.remove(id)
	node, err := a.g.Add(v)
	if err != nil {
		return err
	}
	a.ids = append(a.ids, id)
	a.orders = append(a.orders, order)
	a.byID[id] = node
	return nil
}

// remove tombstones id's node, if any.
func (a *annGraph) remove(id string) {
	if node, ok := a.byID[id]; ok {
		a.g.Delete(node)
		a.ids[node] = ""
		delete(a.byID, id)
	}
}

// stale reports whether tombstones outnumber live nodes.
func (a *annGraph) stale() bool { return 2*len(a.byID) < len(a.ids) }

// graphKey names a partition waiting for its graph.
type graphKey struct {
	s   *scope
	tag uint32
}

// builder builds partitions' graphs one at a time in the background.
type builder struct {
	mu      sync.Mutex // guards pending, queue and busy
	pending map[graphKey]bool
	queue   []graphKey
	busy    bool
	closed  bool       // the builder has stopped: requests are dropped
	idle    *sync.Cond // signalled when queue is empty and nothing is being built
	wake    chan struct{}
}

func newBuilder() *builder {
	b := &builder{pending: map[graphKey]bool{}, wake: make(chan struct{}, 1)}
	b.idle = sync.NewCond(&b.mu)
	return b
}

// request queues the partition unless it is queued already.
func (b *builder) request(k graphKey) {
	b.mu.Lock()
	if !b.pending[k] && !b.closed {
		b.pending[k] = true
		b.queue = append(b.queue, k)
	}
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// next takes the oldest request, marking the builder busy; ok is false
// when the queue is empty (and the builder is marked idle).
func (b *builder) next() (graphKey, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.busy = false
		b.idle.Broadcast()
		return graphKey{}, false
	}
	k := b.queue[0]
	b.queue = b.queue[1:]
	delete(b.pending, k)
	b.busy = true
	return k, true
}

// buildLoop serves requests until ctx ends.
func (f *Flat) buildLoop(ctx context.Context) {
	for {
		for {
			k, ok := f.builder.next()
			if !ok {
				break
			}
			f.build(ctx, k.s, k.tag)
			if ctx.Err() != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			f.builder.mu.Lock()
			f.builder.queue, f.builder.busy, f.builder.closed = nil, false, true
			clear(f.builder.pending)
			f.builder.idle.Broadcast()
			f.builder.mu.Unlock()
			return
		case <-f.builder.wake:
		}
	}
}

// WaitGraphs blocks until no graph is queued or being built, or ctx ends.
// Searches never wait for a graph (they scan exactly meanwhile); this is
// for benchmarks, warm-up after a restart, and tests.
func (f *Flat) WaitGraphs(ctx context.Context) error {
	if f.builder == nil {
		return nil
	}
	done := make(chan struct{})
	go func() {
		f.builder.mu.Lock()
		for len(f.builder.queue) > 0 || f.builder.busy {
			f.builder.idle.Wait()
		}
		f.builder.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// buildChunk is how many rows the builder copies per read lock, so adds
// to the scope wait for at most one chunk's copy.
const buildChunk = 256

// build makes a graph of s's rows tagged tag and publishes it. Rows are
// copied a chunk at a time under the read lock and inserted with no scope
// lock held; rows added, replaced or removed meanwhile are reconciled
// when the graph is published.
func (f *Flat) build(ctx context.Context, s *scope, tag uint32) {
	d := f.cfg.Dim
	s.mu.RLock()
	n, need := s.tagCount(tag), s.needsGraph(f.cfg, tag)
	s.mu.RUnlock()
	if !need {
		return
	}
	a, err := newANNGraph(f.annConfig(), n)
	if err != nil {
		return // Validate checked the config: not reached
	}
	buf := make([]float32, buildChunk*d)
	var ids []string
	var orders []uint64
	for start := 0; ; start += buildChunk {
		if ctx.Err() != nil {
			return
		}
		ids, orders = ids[:0], orders[:0]
		s.mu.RLock()
		if s.dead {
			s.mu.RUnlock()
			return
		}
		for i := start; i < min(start+buildChunk, len(s.ids)); i++ {
			if s.tags[i] == tag {
				copy(buf[len(ids)*d:], s.vecs[i*d:(i+1)*d])
				ids = append(ids, s.ids[i])
				orders = append(orders, s.orders[i])
			}
		}
		more := start+buildChunk < len(s.ids)
		s.mu.RUnlock()
		for j, id := range ids {
			if err := a.add(id, orders[j], buf[j*d:(j+1)*d]); err != nil {
				return // rows were validated on the way in: not reached
			}
		}
		if !more {
			break
		}
	}
	if f.publish(s, tag, a) {
		f.enforceTotal(s)
	}
}

// publish reconciles a with s's rows of tag and makes it the partition's
// graph, unless the partition no longer needs one. It reports whether it
// did.
func (f *Flat) publish(s *scope, tag uint32, a *annGraph) bool {
	d := f.cfg.Dim
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead || !s.needsGraph(f.cfg, tag) {
		return false
	}
	// Reconcile: rows moved by swap-removal may have been read twice (the
	// later copy won) or not at all; rows may have been added, replaced
	// or removed since their chunk was read.
	for node, id := range a.ids {
		if id == "" {
			continue
		}
		if i, ok := s.pos[id]; !ok || s.tags[i] != tag || s.orders[i] != a.orders[node] {
			a.remove(id)
		}
	}
	for i, t := range s.tags {
		if t == tag {
			if _, ok := a.byID[s.ids[i]]; !ok {
				if err := a.add(s.ids[i], s.orders[i], s.vecs[i*d:(i+1)*d]); err != nil {
					return false
				}
			}
		}
	}
	if old := s.graphs[tag]; old != nil {
		f.graphNodes.Add(-int64(len(old.ids)))
	}
	s.graphs[tag] = a
	f.graphNodes.Add(int64(len(a.ids)))
	return true
}

// annConfig is Config.ANN with the index's dimension.
func (f *Flat) annConfig() hnsw.Config {
	c := f.cfg.ANN
	c.Dim = f.cfg.Dim
	return c
}

// tagCount is the number of rows tagged t. s.mu must be held.
func (s *scope) tagCount(t uint32) int {
	if int(t) < len(s.perTag) {
		return s.perTag[t]
	}
	return 0
}

// needsGraph reports whether tag t should get a (fresh) graph: it is large
// enough and has none, or its graph is mostly tombstones. s.mu must be
// held.
func (s *scope) needsGraph(cfg Config, t uint32) bool {
	if cfg.ANNMin == 0 || s.tagCount(t) < cfg.ANNMin {
		return false
	}
	a := s.graphs[t]
	return a == nil || a.stale()
}

// graphAdd keeps t's graph current after row i was stored. s.mu must be
// held for writing.
func (f *Flat) graphAdd(s *scope, i int) {
	a := s.graphs[s.tags[i]]
	if a == nil {
		return
	}
	d := f.cfg.Dim
	if a.add(s.ids[i], s.orders[i], s.vecs[i*d:(i+1)*d]) == nil && !s.dead {
		f.graphNodes.Add(1)
	}
}

// graphRemove tombstones id in t's graph, and drops the graph once the
// partition (now n rows) has fallen below ANNMin/2. s.mu must be held for
// writing.
func (f *Flat) graphRemove(s *scope, t uint32, id string, n int) {
	a := s.graphs[t]
	if a == nil {
		return
	}
	a.remove(id)
	if n < f.cfg.ANNMin/2 {
		delete(s.graphs, t)
		if !s.dead {
			f.graphNodes.Add(-int64(len(a.ids)))
		}
		return
	}
	if a.stale() {
		f.builder.request(graphKey{s, t})
	}
}

// searchGraph answers a search of partition t through its graph: the
// graph's k best, re-scored exactly as the scan scores them and ranked by
// the scan's order. s.mu must be held (for reading at least).
func (f *Flat) searchGraph(s *scope, a *annGraph, q []float32, inv float32, k int) []Hit {
	d := f.cfg.Dim
	rs, err := a.g.Search(q, k)
	if err != nil {
		return nil // q was validated: not reached
	}
	hits := make([]Hit, 0, len(rs))
	for _, r := range rs {
		id := a.ids[r.Node]
		i, ok := s.pos[id]
		if !ok { // the graph is kept current under the write lock: not reached
			continue
		}
		hits = append(hits, Hit{ID: id, Score: vek32.Dot(q, s.vecs[i*d:(i+1)*d]) * inv, Seq: s.seqs[i]})
	}
	slices.SortFunc(hits, func(x, y Hit) int {
		if before(x, y) {
			return -1
		}
		if before(y, x) {
			return 1
		}
		return 0
	})
	return hits
}
