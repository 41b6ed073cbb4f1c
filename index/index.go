// Package index finds, within one scope (a tenant's session), the stored
// vectors nearest to a query, exactly.
//
// The contract:
//
//   - A scope holds entries {ID, Tag, Seq, Vector}. Vectors are L2-normalized
//     on the way in, so a hit's Score is the cosine similarity of the query
//     and the stored vector, in [-1, 1].
//   - Search(ctx, scope, tag, query, k) scans every vector of the scope that
//     carries tag (one tag per search: the funnel stores the tool name or the
//     action type; large partitions go through a graph, below) and returns
//     the k best, sorted by Score descending; equal
//     scores are ordered by Seq ascending (the earlier call first), then by
//     ID ascending, so the same data always gives the same answer.
//   - Adding an ID that is already present replaces it. Delete removes it
//     (swap-remove: O(1) after the lookup).
//   - Wrong dimension, zero, NaN or Inf vectors are errors (ErrDimension,
//     ErrInvalidVector), never panics, and nothing of a rejected Add is
//     stored.
//   - Bounds: a scope keeps at most Config.MaxPerScope vectors; adding past
//     it evicts the oldest entry (lowest Seq, then earliest added), because
//     refusing would make the funnel fail on the sessions that need it most.
//     At most Config.MaxScopes scopes and Config.MaxVectors vectors are held
//     in all; past either bound the least recently used scopes are dropped.
//     Scopes unused for Config.IdleTTL are dropped by a background sweeper
//     that Close stops.
//   - A dropped scope loses nothing: the index is a cache of the ledger. The
//     Loader, implemented by the caller from the ledger's session listing,
//     rebuilds a scope at its next Search (Load with afterSeq 0), and brings
//     it up to date incrementally (Load with afterSeq = the highest Seq it
//     has covered) on Refresh, or before every Search when
//     Config.RefreshOnSearch is set (for several replicas on one ledger).
//     Concurrent refreshes of one scope share one Loader call.
//   - Large partitions go through a graph: the rows of one tag in one scope
//     that number at least Config.ANNMin are searched through an HNSW
//     graph (index/hnsw, built in the background; exact scans serve until
//     it is ready) whose k best are re-scored exactly as the scan scores
//     them. A graph miss can lose a match, never invent one or change a
//     score. See ann.go for how the graph is kept current and dropped.
//
// Scope names are the caller's: a session, a workflow or a whole tenant
// are all scopes, and the Loader lists a scope's rows from its name. Wide
// scopes want their own Flat, whose MaxPerScope fits them (a tenant's
// 100,000 calls) while sessions keep theirs.
//
// The consumer-facing surface is Add, Delete, Search and Refresh, the same
// for scanned and graph-searched scopes. Small scopes are scanned exactly
// (an AVX2 scan through github.com/viterin/vek, with a pure-Go fallback on
// other CPUs, takes about 20 µs at 1,000 vectors); DESIGN.md records why
// github.com/coder/hnsw must not decide anything, hence our own graph.
//
// Vectors are derived from customers' data; nothing in this package logs.
package index

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/viterin/vek/vek32"

	"github.com/idem-dev/idem/index/hnsw"
)

// Sentinel errors. Match them with errors.Is; returned errors wrap them
// with the detail.
var (
	// ErrDimension: a vector's length is not Config.Dim.
	ErrDimension = errors.New("index: wrong dimension")
	// ErrInvalidVector: a vector is all zeros, or holds NaN or ±Inf, or its
	// norm overflows.
	ErrInvalidVector = errors.New("index: zero or non-finite vector")
	// ErrInvalidArgument: an empty scope or ID, or k < 1.
	ErrInvalidArgument = errors.New("index: invalid argument")
	// ErrLoad: the Loader failed (or the caller's ctx ended while waiting
	// for it); the scope was not searched. The Loader's error is wrapped.
	ErrLoad = errors.New("index: load failed")
	// ErrClosed: the index has been closed.
	ErrClosed = errors.New("index: closed")
	// ErrConfig: Validate rejected the configuration.
	ErrConfig = errors.New("index: bad config")
)

// Entry is one vector of a scope.
type Entry struct {
	// ID identifies the entry within its scope (the ledger key).
	ID string
	// Tag partitions a scope: Search considers one tag only (the tool name
	// or the action type).
	Tag string
	// Seq is the ledger's per-session arrival number; it orders entries for
	// eviction and ties, and marks how far a scope is loaded.
	Seq uint64
	// Vector has Config.Dim values; it need not be normalized (the index
	// stores a normalized copy) but must be non-zero and finite.
	Vector []float32
	// Blind marks a call whose vector is not known yet (its embedding is
	// still to be computed): Vector is ignored, Search does not return it,
	// Blind lists it, until an entry with a vector replaces it.
	Blind bool
}

// Hit is one search result.
type Hit struct {
	ID    string
	Score float32 // cosine similarity with the query
	Seq   uint64
}

// Loader reads a scope's entries from the source of truth (the ledger). The
// index calls it with afterSeq 0 to rebuild a scope, and with the highest
// Seq it has covered to catch up.
//
// Load returns the entries with Seq > afterSeq, and through, the highest
// Seq the listing covered, including records that carry no vector (calls
// with no text fields are not embedded); the next incremental Load starts
// after it. A through of 0 means "the highest Seq among the entries". The
// ledger guarantees that a reader seeing Seq n sees every lower Seq of the
// session, so nothing below through is missed later.
//
// Entries that fail validation (wrong dimension, zero or non-finite vector,
// empty ID, or a Seq not above a non-zero afterSeq) are skipped and counted
// in Stats.Skipped rather than failing the scope: a session with one bad row
// stays searchable. The index copies vectors: Load may return slices it
// keeps using.
//
// Implementations must be safe for concurrent use; the index never calls
// Load concurrently for one scope.
type Loader interface {
	Load(ctx context.Context, scope string, afterSeq uint64) (entries []Entry, through uint64, err error)
}

// LoaderFunc adapts a function to Loader.
type LoaderFunc func(ctx context.Context, scope string, afterSeq uint64) ([]Entry, uint64, error)

// Load calls f.
func (f LoaderFunc) Load(ctx context.Context, scope string, afterSeq uint64) ([]Entry, uint64, error) {
	return f(ctx, scope, afterSeq)
}

// Config configures a Flat index. Start from DefaultConfig.
type Config struct {
	// Dim is the length of every vector (512 for the built-in encoder).
	Dim int
	// MaxPerScope bounds the vectors of one scope; past it the oldest entry
	// (lowest Seq) is evicted.
	MaxPerScope int
	// MaxScopes bounds the scopes held; past it the least recently used
	// scope is dropped (and reloaded on its next Search).
	MaxScopes int
	// MaxVectors bounds the vectors held in all scopes (memory is about
	// MaxVectors × Dim × 4 bytes); past it least recently used scopes are
	// dropped. Must be at least MaxPerScope.
	MaxVectors int
	// IdleTTL drops a scope not used (Add, Search, Refresh) for this long;
	// 0 keeps idle scopes until another bound drops them.
	IdleTTL time.Duration
	// SweepInterval is how often idle scopes are looked for (when IdleTTL
	// > 0).
	SweepInterval time.Duration
	// RefreshOnSearch calls the Loader for rows newer than the scope has
	// seen before every Search (several replicas on one ledger). Off, a
	// loaded scope is searched as it is and Refresh catches it up.
	RefreshOnSearch bool
	// ANNMin is the partition size (rows of one tag in one scope) from
	// which searches go through an HNSW graph instead of the exact scan;
	// a partition that falls below ANNMin/2 is scanned again. 0 scans
	// every partition exactly.
	ANNMin int
	// ANN configures the graphs; its Dim is taken from Dim.
	ANN hnsw.Config
}

// DefaultANNMin is the default Config.ANNMin: measured on real 512-d
// sentence embeddings (README, "The ANN index"), the graph at efSearch 100
// (recall@10 above 0.99) overtakes the exact scan between 2,000 and 4,000
// rows (at 2,000: 15,100 vs 17,200 queries per CPU second; at 4,000:
// 11,100 vs 8,500; at 10,000: 5,800 vs 1,900). Below, both take tens of
// microseconds and the scan misses nothing.
const DefaultANNMin = 4096

// DefaultConfig returns Dim 512, 4,096 vectors per scope, 1,024 scopes,
// 524,288 vectors in all (1 GiB at 512-d), idle scopes dropped after 30
// minutes (swept every minute), RefreshOnSearch off, graphs from
// DefaultANNMin rows with hnsw.DefaultConfig (M 16, efConstruction 100,
// efSearch 100).
func DefaultConfig() Config {
	return Config{
		Dim:           512,
		MaxPerScope:   4096,
		MaxScopes:     1024,
		MaxVectors:    1 << 19,
		IdleTTL:       30 * time.Minute,
		SweepInterval: time.Minute,
		ANNMin:        DefaultANNMin,
		ANN:           hnsw.DefaultConfig(),
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Dim < 1:
		return fmt.Errorf("%w: Dim must be >= 1", ErrConfig)
	case c.MaxPerScope < 1:
		return fmt.Errorf("%w: MaxPerScope must be >= 1", ErrConfig)
	case c.MaxScopes < 1:
		return fmt.Errorf("%w: MaxScopes must be >= 1", ErrConfig)
	case c.MaxVectors < c.MaxPerScope:
		return fmt.Errorf("%w: MaxVectors (%d) must be >= MaxPerScope (%d)", ErrConfig, c.MaxVectors, c.MaxPerScope)
	case c.IdleTTL < 0:
		return fmt.Errorf("%w: negative IdleTTL", ErrConfig)
	case c.IdleTTL > 0 && c.SweepInterval <= 0:
		return fmt.Errorf("%w: SweepInterval must be > 0 when IdleTTL is set", ErrConfig)
	case c.ANNMin < 0:
		return fmt.Errorf("%w: negative ANNMin", ErrConfig)
	}
	if c.ANNMin > 0 {
		a := c.ANN
		a.Dim = c.Dim
		if err := a.Validate(); err != nil {
			return fmt.Errorf("%w: ANN: %w", ErrConfig, err)
		}
	}
	return nil
}

// Stats describes what the index holds.
type Stats struct {
	Scopes     int   // scopes held
	Vectors    int   // vectors held in all scopes
	Skipped    int64 // Loader entries skipped as invalid, since New
	Graphs     int   // partitions searched through a graph
	GraphNodes int   // nodes of those graphs, tombstones included (each holds a copy of its vector)
}

// Flat is an exact (flat-scan) index of many scopes. It is safe for
// concurrent use: each scope has its own lock, so searches of different
// scopes never wait for each other, and searches of one scope run in
// parallel with each other. Close stops its sweeper.
type Flat struct {
	cfg    Config
	loader Loader
	now    func() time.Time // the clock; tests replace it

	mu     sync.RWMutex // guards scopes and closed
	scopes map[string]*scope
	closed bool

	total      atomic.Int64 // vectors held by live scopes
	graphNodes atomic.Int64 // graph nodes held by live scopes
	skipped    atomic.Int64 // invalid Loader entries

	stop      context.CancelFunc // stops the sweeper and the builder; nil without them
	sweepDone chan struct{}      // closed when the sweeper has returned; nil without one
	builder   *builder           // nil when ANNMin is 0
	buildDone chan struct{}      // closed when the builder has returned
	closeOnce sync.Once
}

// scope is the vectors of one scope and their bookkeeping.
type scope struct {
	name     string
	lastUsed atomic.Int64 // f.now() in Unix nanoseconds at the last use

	// Loader calls of this scope run one at a time, holding loadSem; a
	// waiter whose request is covered by a load that began after it asked
	// skips its own (see sync).
	loadSem   chan struct{}
	started   atomic.Uint64 // number of Loader calls begun
	completed atomic.Uint64 // the number of the last successful Loader call
	loaded    atomic.Bool   // a full load has succeeded

	mu        sync.RWMutex // guards everything below
	vecs      []float32    // row i is vecs[i*dim:(i+1)*dim], L2-normalized
	ids       []string     // row i's ID
	tags      []uint32     // row i's tag, interned in tagIDs
	seqs      []uint64     // row i's Seq
	orders    []uint64     // row i's insertion number (eviction among equal Seq)
	pos       map[string]int
	tagIDs    map[string]uint32
	nextOrder uint64
	through   uint64                       // the highest Seq the Loader has covered
	dead      bool                         // dropped from the index; writers must look the scope up again
	perTag    []int                        // rows per tag
	graphs    map[uint32]*annGraph         // by tag: the partitions searched through a graph
	dropped   uint64                       // calls left out by the MaxPerScope bound since the scope was loaded
	blind     map[string]map[string]uint64 // by tag: the blind entries' IDs and Seqs
}

// New returns an index for cfg. loader may be nil: scopes then live only in
// memory, and a dropped scope is lost. If cfg.IdleTTL > 0 a sweeper
// goroutine runs until Close.
func New(cfg Config, loader Loader) (*Flat, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f := &Flat{cfg: cfg, loader: loader, now: time.Now, scopes: make(map[string]*scope)}
	if cfg.IdleTTL == 0 && cfg.ANNMin == 0 {
		return f, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.stop = cancel
	if cfg.IdleTTL > 0 {
		f.sweepDone = make(chan struct{})
		go func() {
			defer close(f.sweepDone)
			f.sweepLoop(ctx)
		}()
	}
	if cfg.ANNMin > 0 {
		f.builder = newBuilder()
		f.buildDone = make(chan struct{})
		go func() {
			defer close(f.buildDone)
			f.buildLoop(ctx)
		}()
	}
	return f, nil
}

// Close stops the sweeper and the graph builder, waiting for them until
// ctx ends, and drops every scope; later calls return ErrClosed. Calling
// Close again returns nil.
func (f *Flat) Close(ctx context.Context) error {
	first := false
	f.closeOnce.Do(func() {
		first = true
		f.mu.Lock()
		f.closed = true
		for name, s := range f.scopes {
			f.dropLocked(name, s)
		}
		f.mu.Unlock()
		if f.stop != nil {
			f.stop()
		}
	})
	if !first {
		return nil
	}
	for _, done := range []chan struct{}{f.sweepDone, f.buildDone} {
		if done == nil {
			continue
		}
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("index close: %w", ctx.Err())
		}
	}
	return nil
}

// Dim returns the configured vector length.
func (f *Flat) Dim() int { return f.cfg.Dim }

// Stats returns what the index holds now.
func (f *Flat) Stats() Stats {
	f.mu.RLock()
	n, graphs := len(f.scopes), 0
	for _, s := range f.scopes {
		s.mu.RLock()
		graphs += len(s.graphs)
		s.mu.RUnlock()
	}
	f.mu.RUnlock()
	return Stats{Scopes: n, Vectors: int(f.total.Load()), Skipped: f.skipped.Load(),
		Graphs: graphs, GraphNodes: int(f.graphNodes.Load())}
}

// Add stores entries in scope, replacing entries with the same ID (the last
// one wins within one call). It validates every entry first and stores
// nothing if one is invalid. Add does not call the Loader: a scope's earlier
// entries are loaded at its first Search and merged with what was added.
func (f *Flat) Add(scope string, entries ...Entry) error {
	if scope == "" {
		return fmt.Errorf("%w: empty scope", ErrInvalidArgument)
	}
	inv := make([]float32, len(entries))
	for i, e := range entries {
		if e.ID == "" {
			return fmt.Errorf("add entry %d: %w: empty ID", i, ErrInvalidArgument)
		}
		if e.Blind {
			continue
		}
		n, err := f.norm(e.Vector)
		if err != nil {
			return fmt.Errorf("add entry %d: %w", i, err)
		}
		inv[i] = float32(1 / n)
	}
	for {
		s, err := f.lookup(scope, true)
		if err != nil {
			return err
		}
		s.mu.Lock()
		if s.dead { // dropped between lookup and lock: use the new one
			s.mu.Unlock()
			continue
		}
		before := len(s.ids)
		for i, e := range entries {
			if e.Blind {
				s.addBlind(e)
				continue
			}
			s.upsert(f, e, inv[i], true)
		}
		f.total.Add(int64(len(s.ids) - before))
		s.mu.Unlock()
		f.enforceTotal(s)
		return nil
	}
}

// Delete removes the entry id from scope and reports whether it was held.
// It acts on what is in memory: the Loader is the source of truth, so an
// entry the ledger still lists comes back when the scope is reloaded.
func (f *Flat) Delete(scope, id string) bool {
	s, err := f.lookup(scope, false)
	if err != nil || s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.blind {
		delete(b, id)
	}
	i, ok := s.pos[id]
	if !ok {
		return false
	}
	s.remove(f, i)
	if !s.dead {
		f.total.Add(-1)
	}
	return true
}

// Search returns up to k entries of scope tagged tag, most similar to query
// first (ties: lower Seq, then lower ID). A scope not in memory is loaded
// through the Loader first; with Config.RefreshOnSearch, entries newer than
// the scope has seen are loaded before every search. An unknown scope or
// tag gives no hits and no error.
func (f *Flat) Search(ctx context.Context, scope, tag string, query []float32, k int) ([]Hit, error) {
	if scope == "" {
		return nil, fmt.Errorf("search: %w: empty scope", ErrInvalidArgument)
	}
	if k < 1 {
		return nil, fmt.Errorf("search: %w: k = %d", ErrInvalidArgument, k)
	}
	n, err := f.norm(query)
	if err != nil {
		return nil, fmt.Errorf("search query: %w", err)
	}
	s, err := f.current(ctx, scope)
	if err != nil || s == nil {
		return nil, err
	}
	s.mu.RLock()
	t, ok := s.tagIDs[tag]
	if a := s.graphs[t]; ok && a != nil {
		defer s.mu.RUnlock()
		if a.stale() {
			f.builder.request(graphKey{s, t})
		}
		return f.searchGraph(s, a, query, float32(1/n), k), nil
	}
	hits := s.search(f.cfg.Dim, tag, query, float32(1/n), k)
	need := ok && s.needsGraph(f.cfg, t)
	s.mu.RUnlock()
	if need {
		f.builder.request(graphKey{s, t})
	}
	return hits, nil
}

// Dropped is how many calls scope has left out because of the
// Config.MaxPerScope bound (its oldest) since it was last loaded: a search
// of it did not see them. 0 for a scope not in memory.
func (f *Flat) Dropped(scope string) uint64 {
	s, err := f.lookup(scope, false)
	if err != nil || s == nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.dropped
}

// Has reports whether scope has held entries tagged tag (loading the scope
// as Search does): a caller can spare itself computing a query for a tag
// the scope never saw. It may report true for a tag whose entries were all
// deleted.
func (f *Flat) Has(ctx context.Context, scope, tag string) (bool, error) {
	if scope == "" {
		return false, fmt.Errorf("has: %w: empty scope", ErrInvalidArgument)
	}
	s, err := f.current(ctx, scope)
	if err != nil || s == nil {
		return false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.tagIDs[tag]
	return ok || len(s.blind[tag]) > 0, nil
}

// Blind lists the blind entries of scope tagged tag (Entry.Blind), oldest
// first: calls the caller must embed itself to compare. It reads the scope
// as it is in memory, as Has or Search last loaded or refreshed it (a
// caller asks right after them), and lists nothing for a scope not in
// memory.
func (f *Flat) Blind(scope, tag string) []string {
	s, err := f.lookup(scope, false)
	if err != nil || s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	b := s.blind[tag]
	ids := make([]string, 0, len(b))
	for id := range b {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(x, y string) int {
		if c := cmp.Compare(b[x], b[y]); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	return ids
}

// addBlind records a blind entry. s.mu must be held for writing.
func (s *scope) addBlind(e Entry) {
	if s.blind == nil {
		s.blind = map[string]map[string]uint64{}
	}
	if s.blind[e.Tag] == nil {
		s.blind[e.Tag] = map[string]uint64{}
	}
	s.blind[e.Tag][e.ID] = e.Seq
}

// current returns scope as a search should see it: loaded through the
// Loader if it is not in memory, and caught up when RefreshOnSearch is
// set; nil for an unknown scope without a Loader.
func (f *Flat) current(ctx context.Context, scope string) (*scope, error) {
	s, err := f.lookup(scope, f.loader != nil)
	if err != nil || s == nil {
		return nil, err
	}
	if f.loader != nil {
		if !s.loaded.Load() {
			err = f.sync(ctx, s, true)
		} else if f.cfg.RefreshOnSearch {
			err = f.sync(ctx, s, false)
		}
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Refresh brings scope up to date with the Loader: a full load if it is
// not in memory, else the entries with Seq above the highest it has
// covered. If another Refresh of the scope began after this call and has
// completed, the Loader is not called again. Without a Loader it does
// nothing.
func (f *Flat) Refresh(ctx context.Context, scope string) error {
	if scope == "" {
		return fmt.Errorf("refresh: %w: empty scope", ErrInvalidArgument)
	}
	if f.loader == nil {
		return nil
	}
	s, err := f.lookup(scope, true)
	if err != nil {
		return err
	}
	return f.sync(ctx, s, !s.loaded.Load())
}

// norm validates v and returns its L2 norm (hnsw.Norm, with this
// package's errors).
func (f *Flat) norm(v []float32) (float64, error) {
	n, err := hnsw.Norm(v, f.cfg.Dim)
	switch {
	case errors.Is(err, hnsw.ErrDimension):
		return 0, fmt.Errorf("%w: %d values, want %d", ErrDimension, len(v), f.cfg.Dim)
	case err != nil:
		return 0, ErrInvalidVector
	}
	return n, nil
}

// lookup returns the scope named name, creating it if create is set (else
// nil when absent), and marks it used.
func (f *Flat) lookup(name string, create bool) (*scope, error) {
	now := f.now().UnixNano()
	f.mu.RLock()
	s, closed := f.scopes[name], f.closed
	f.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if s != nil || !create {
		if s != nil {
			s.lastUsed.Store(now)
		}
		return s, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrClosed
	}
	if s = f.scopes[name]; s == nil {
		s = &scope{
			name:    name,
			loadSem: make(chan struct{}, 1),
			pos:     make(map[string]int),
			tagIDs:  make(map[string]uint32),
			graphs:  make(map[uint32]*annGraph),
		}
		f.scopes[name] = s
		for len(f.scopes) > f.cfg.MaxScopes {
			if !f.dropLRULocked(s) {
				break
			}
		}
	}
	s.lastUsed.Store(now)
	return s, nil
}

// sync calls the Loader for s: a full load (afterSeq 0) if full, else an
// incremental one. A full load is skipped if s got loaded meanwhile; an
// incremental one if a load that began after this call has succeeded.
func (f *Flat) sync(ctx context.Context, s *scope, full bool) error {
	asked := s.started.Load()
	select {
	case s.loadSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: scope waiting for its loader: %w", ErrLoad, ctx.Err())
	}
	defer func() { <-s.loadSem }()
	if full && s.loaded.Load() || !full && s.completed.Load() > asked {
		return nil
	}
	n := s.started.Add(1)
	var after uint64
	if !full {
		s.mu.RLock()
		after = s.through
		s.mu.RUnlock()
	}
	entries, through, err := f.loader.Load(ctx, s.name, after)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrLoad, err)
	}
	f.apply(s, entries, after, through)
	s.completed.Store(n)
	s.loaded.Store(true)
	return nil
}

// apply merges loaded entries into s. An entry replaces a held one of the
// same ID unless the held one has a higher Seq (it was added since).
func (f *Flat) apply(s *scope, entries []Entry, after, through uint64) {
	valid := make([]Entry, 0, len(entries))
	inv := make([]float32, 0, len(entries))
	var blind []Entry
	for _, e := range entries {
		through = max(through, e.Seq)
		if e.Blind && e.ID != "" && (e.Seq > after || after == 0) {
			blind = append(blind, e)
			continue
		}
		n, err := f.norm(e.Vector)
		if err != nil || e.ID == "" || e.Seq <= after && after > 0 {
			f.skipped.Add(1)
			continue
		}
		valid = append(valid, e)
		inv = append(inv, float32(1/n))
	}
	if len(valid) > f.cfg.MaxPerScope {
		// Only the newest MaxPerScope can survive the bound: skip the rest
		// instead of inserting and evicting them one by one.
		idx := make([]int, len(valid))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int {
			switch {
			case valid[a].Seq > valid[b].Seq:
				return -1
			case valid[a].Seq < valid[b].Seq:
				return 1
			}
			return b - a // later in the listing first
		})
		dropped := uint64(len(idx) - f.cfg.MaxPerScope)
		idx = idx[:f.cfg.MaxPerScope]
		slices.Sort(idx) // keep the listing's order
		kv, ki := make([]Entry, len(idx)), make([]float32, len(idx))
		for j, i := range idx {
			kv[j], ki[j] = valid[i], inv[i]
		}
		valid, inv = kv, ki
		s.mu.Lock()
		s.dropped += dropped
		s.mu.Unlock()
	}
	s.mu.Lock()
	for _, e := range blind {
		if _, held := s.pos[e.ID]; !held {
			s.addBlind(e)
		}
	}
	before := len(s.ids)
	for i, e := range valid {
		s.upsert(f, e, inv[i], false)
	}
	s.through = max(s.through, after, through)
	if !s.dead {
		f.total.Add(int64(len(s.ids) - before))
	}
	s.mu.Unlock()
	f.enforceTotal(s)
}

// enforceTotal drops least recently used scopes other than keep while more
// than MaxVectors vectors are held (rows and graph nodes).
func (f *Flat) enforceTotal(keep *scope) {
	held := func() int64 { return f.total.Load() + f.graphNodes.Load() }
	if held() <= int64(f.cfg.MaxVectors) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for held() > int64(f.cfg.MaxVectors) {
		if !f.dropLRULocked(keep) {
			return
		}
	}
}

// dropLRULocked drops the least recently used scope other than keep and
// reports whether there was one. f.mu must be held for writing.
func (f *Flat) dropLRULocked(keep *scope) bool {
	var victim *scope
	var oldest int64
	for _, s := range f.scopes {
		if s == keep {
			continue
		}
		if t := s.lastUsed.Load(); victim == nil || t < oldest || t == oldest && s.name < victim.name {
			victim, oldest = s, t
		}
	}
	if victim == nil {
		return false
	}
	f.dropLocked(victim.name, victim)
	return true
}

// dropLocked removes s from the index. f.mu must be held for writing. A
// goroutine still holding s may finish a search on it; writers see dead and
// look the scope up again.
func (f *Flat) dropLocked(name string, s *scope) {
	delete(f.scopes, name)
	s.mu.Lock()
	s.dead = true
	f.total.Add(-int64(len(s.ids)))
	for _, a := range s.graphs {
		f.graphNodes.Add(-int64(len(a.ids)))
	}
	clear(s.graphs)
	s.mu.Unlock()
}

// sweep drops the scopes unused for IdleTTL.
func (f *Flat) sweep() {
	cut := f.now().Add(-f.cfg.IdleTTL).UnixNano()
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, s := range f.scopes {
		if s.lastUsed.Load() < cut {
			f.dropLocked(name, s)
		}
	}
}

func (f *Flat) sweepLoop(ctx context.Context) {
	t := time.NewTicker(f.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.sweep()
		}
	}
}

// upsert stores e (whose vector has norm 1/inv) in s. When e's ID is held,
// it replaces it if force is set or the held entry's Seq is not higher.
// s.mu must be held for writing.
func (s *scope) upsert(f *Flat, e Entry, inv float32, force bool) {
	cfg := f.cfg
	d := cfg.Dim
	i, held := s.pos[e.ID]
	if held && !force && s.seqs[i] > e.Seq {
		return
	}
	tag, ok := s.tagIDs[e.Tag]
	if !ok {
		tag = uint32(len(s.tagIDs))
		s.tagIDs[e.Tag] = tag
	}
	s.nextOrder++
	if !held {
		if len(s.ids) >= cfg.MaxPerScope {
			// Evict the oldest, unless e is older than all of them.
			o := s.oldest()
			s.dropped++ // e or the oldest
			if e.Seq < s.seqs[o] {
				return
			}
			delete(s.pos, s.ids[o])
			s.untag(f, o)
			i = o
		} else {
			i = len(s.ids)
			s.vecs = slices.Grow(s.vecs, d)[:(i+1)*d]
			s.ids = append(s.ids, "")
			s.tags = append(s.tags, 0)
			s.seqs = append(s.seqs, 0)
			s.orders = append(s.orders, 0)
		}
		s.pos[e.ID] = i
	} else {
		s.untag(f, i)
	}
	if b := s.blind[e.Tag]; b != nil {
		delete(b, e.ID)
	}
	vek32.MulNumber_Into(s.vecs[i*d:(i+1)*d], e.Vector, inv)
	s.ids[i], s.tags[i], s.seqs[i], s.orders[i] = e.ID, tag, e.Seq, s.nextOrder
	if int(tag) >= len(s.perTag) {
		s.perTag = append(s.perTag, make([]int, int(tag)+1-len(s.perTag))...)
	}
	s.perTag[tag]++
	f.graphAdd(s, i)
}

// untag takes row i out of its tag's count and graph, before the row is
// overwritten or removed. s.mu must be held for writing.
func (s *scope) untag(f *Flat, i int) {
	t := s.tags[i]
	s.perTag[t]--
	f.graphRemove(s, t, s.ids[i], s.perTag[t])
}

// oldest returns the row with the lowest (Seq, insertion order).
func (s *scope) oldest() int {
	o := 0
	for i := 1; i < len(s.ids); i++ {
		if s.seqs[i] < s.seqs[o] || s.seqs[i] == s.seqs[o] && s.orders[i] < s.orders[o] {
			o = i
		}
	}
	return o
}

// remove deletes row i by moving the last row into it. s.mu must be held
// for writing.
func (s *scope) remove(f *Flat, i int) {
	d := f.cfg.Dim
	s.untag(f, i)
	last := len(s.ids) - 1
	delete(s.pos, s.ids[i])
	if i != last {
		copy(s.vecs[i*d:(i+1)*d], s.vecs[last*d:(last+1)*d])
		s.ids[i], s.tags[i], s.seqs[i], s.orders[i] = s.ids[last], s.tags[last], s.seqs[last], s.orders[last]
		s.pos[s.ids[i]] = i
	}
	s.vecs = s.vecs[:last*d]
	s.ids[last] = "" // release the string
	s.ids, s.tags, s.seqs, s.orders = s.ids[:last], s.tags[:last], s.seqs[:last], s.orders[:last]
}

// search scans the rows tagged tag and keeps the k best in hits, sorted.
// s.mu must be held (for reading at least).
func (s *scope) search(d int, tag string, q []float32, inv float32, k int) []Hit {
	t, ok := s.tagIDs[tag]
	if !ok {
		return nil
	}
	var hits []Hit
	// floor is the k-th best score so far (-Inf until hits holds k): a row
	// scoring below it cannot enter, and most rows are refused by this one
	// comparison with a local.
	floor := float32(math.Inf(-1))
	vecs := s.vecs[:len(s.tags)*d]
	for i, rt := range s.tags {
		if rt != t {
			continue
		}
		score := vek32.Dot(q, vecs[i*d:i*d+d]) * inv
		if score < floor {
			continue
		}
		h := Hit{ID: s.ids[i], Score: score, Seq: s.seqs[i]}
		if len(hits) == k && !before(h, hits[k-1]) {
			continue
		}
		if hits == nil {
			hits = make([]Hit, 0, min(k, len(s.tags)))
		}
		j := len(hits)
		if j < k {
			hits = append(hits, h)
		} else {
			j = k - 1
		}
		for ; j > 0 && before(h, hits[j-1]); j-- {
			hits[j] = hits[j-1]
		}
		hits[j] = h
		if len(hits) == k {
			floor = hits[k-1].Score // one equal to it may still enter: ties go to the lower Seq
		}
	}
	return hits
}

// before reports whether a ranks before b: higher score, then lower Seq,
// then lower ID.
func before(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	if a.Seq != b.Seq {
		return a.Seq < b.Seq
	}
	return a.ID < b.ID
}
