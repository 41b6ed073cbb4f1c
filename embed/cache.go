package embed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// CacheConfig bounds a Cache.
type CacheConfig struct {
	// MaxEntries is the most vectors kept.
	MaxEntries int
	// MaxBytes bounds the memory the cached vectors take (4 bytes per value
	// plus a fixed per-entry overhead).
	MaxBytes int64
}

// DefaultCacheConfig keeps up to 100,000 vectors in at most 64 MiB.
func DefaultCacheConfig() CacheConfig {
	return CacheConfig{MaxEntries: 100_000, MaxBytes: 64 << 20}
}

// Validate reports a configuration a Cache cannot run with.
func (c CacheConfig) Validate() error {
	if c.MaxEntries < 1 {
		return fmt.Errorf("%w: cache MaxEntries must be >= 1", ErrConfig)
	}
	if c.MaxBytes < entryOverhead {
		return fmt.Errorf("%w: cache MaxBytes must be >= %d", ErrConfig, entryOverhead)
	}
	return nil
}

// entryOverhead approximates the bytes an entry costs besides its values:
// key, slice header, list element and map slot.
const entryOverhead = 128

// cacheKey identifies a text for a model: the model's name and the
// xxhash64 of the text (the text itself is not kept).
type cacheKey struct {
	model string
	hash  uint64
}

// flight is one in-progress computation of a vector that other callers
// may wait for.
type flight struct {
	done chan struct{} // closed when vec and err are set
	vec  []float32
	err  error
}

// CacheStats are a Cache's counters. Misses counts texts the cache sent to
// its embedder; Hits counts texts served from memory or from another
// caller's computation in flight.
type CacheStats struct {
	Hits, Misses, Evictions uint64
	Entries                 int
	Bytes                   int64
}

// Cache is an LRU cache of vectors in front of an Embedder, keyed by the
// embedder's Name and the xxhash64 of each text, bounded in entries and
// bytes. Concurrent requests for the same text compute it once: a text
// already being computed by another caller is waited for, and the texts of
// a batch that no one is computing go to the embedder together, in one
// call. (golang.org/x/sync/singleflight runs one function per key, which
// would split a batch into one embedder call per text, so the cache keeps
// its own table of computations in flight.) Errors are not cached.
//
// A Cache is safe for concurrent use. Returned vectors are copies.
type Cache struct {
	inner    Embedder
	cfg      CacheConfig
	model    string
	hits     atomic.Uint64
	misses   atomic.Uint64
	evicted  atomic.Uint64
	mu       sync.Mutex // guards lru, bytes and inflight
	lru      *simplelru.LRU[cacheKey, []float32]
	bytes    int64
	inflight map[cacheKey]*flight
}

// NewCache returns a cache in front of inner.
func NewCache(inner Embedder, cfg CacheConfig) (*Cache, error) {
	if inner == nil {
		return nil, fmt.Errorf("%w: nil embedder", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cache{inner: inner, cfg: cfg, model: inner.Name(), inflight: map[cacheKey]*flight{}}
	lru, err := simplelru.NewLRU(cfg.MaxEntries, func(_ cacheKey, v []float32) {
		c.bytes -= entryCost(v) // called with mu held, from Add or RemoveOldest
		c.evicted.Add(1)
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.lru = lru
	return c, nil
}

func entryCost(v []float32) int64 { return int64(4*len(v)) + entryOverhead }

// Name is the inner embedder's name.
func (c *Cache) Name() string { return c.inner.Name() }

// Dim is the inner embedder's dimension.
func (c *Cache) Dim() int { return c.inner.Dim() }

// Stats returns the counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evicted.Load(),
		Entries: c.lru.Len(), Bytes: c.bytes,
	}
}

// Embed returns the vectors of texts, from the cache where it can.
func (c *Cache) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	keys := make([]cacheKey, len(texts))
	for i, t := range texts {
		if isBlank(t) {
			return nil, fmt.Errorf("embed text %d of %d: %w", i, len(texts), ErrEmptyText)
		}
		keys[i] = cacheKey{model: c.model, hash: xxhash.Sum64String(t)}
	}
	for {
		// Under the lock: take hits, find computations to wait for, and
		// register the rest as ours.
		var (
			wait    = map[int]*flight{}
			lead    []int // indexes of texts we compute (first of each key)
			leadFor = map[cacheKey]*flight{}
		)
		c.mu.Lock()
		for i, k := range keys {
			if out[i] != nil {
				continue
			}
			if v, ok := c.lru.Get(k); ok {
				out[i] = append([]float32(nil), v...)
				c.hits.Add(1)
				continue
			}
			if f, ok := c.inflight[k]; ok {
				wait[i] = f
				c.hits.Add(1) // served by another caller's computation
				continue
			}
			if f, ok := leadFor[k]; ok {
				wait[i] = f // same text twice in this batch
				c.hits.Add(1)
				continue
			}
			f := &flight{done: make(chan struct{})}
			leadFor[k] = f
			c.inflight[k] = f
			lead = append(lead, i)
			c.misses.Add(1)
		}
		c.mu.Unlock()

		if len(lead) > 0 {
			c.compute(ctx, texts, keys, lead, leadFor, out)
			for _, i := range lead {
				if f := leadFor[keys[i]]; f.err != nil {
					return nil, f.err
				}
			}
		}
		retry := false
		for i, f := range wait {
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if f.err != nil {
				// Another caller's cancellation is not ours: compute again.
				if isContextErr(f.err) && ctx.Err() == nil {
					retry = true
					continue
				}
				return nil, f.err
			}
			out[i] = append([]float32(nil), f.vec...)
		}
		if !retry {
			return out, nil
		}
	}
}

// compute embeds the texts at lead in one call, stores the vectors, and
// releases everyone waiting for them.
func (c *Cache) compute(ctx context.Context, texts []string, keys []cacheKey, lead []int, flights map[cacheKey]*flight, out [][]float32) {
	batch := make([]string, len(lead))
	for j, i := range lead {
		batch[j] = texts[i]
	}
	vecs, err := c.inner.Embed(ctx, batch)
	if err == nil && len(vecs) != len(batch) {
		err = fmt.Errorf("%w: %d vectors for %d texts", ErrResponse, len(vecs), len(batch))
	}
	c.mu.Lock()
	for j, i := range lead {
		f := flights[keys[i]]
		delete(c.inflight, keys[i])
		if err != nil {
			f.err = err
			continue
		}
		f.vec = vecs[j]
		out[i] = append([]float32(nil), vecs[j]...)
		if cost := entryCost(f.vec); cost <= c.cfg.MaxBytes {
			if old, ok := c.lru.Peek(keys[i]); ok {
				c.bytes -= entryCost(old)
			}
			c.lru.Add(keys[i], f.vec)
			c.bytes += cost
			for c.bytes > c.cfg.MaxBytes {
				c.lru.RemoveOldest()
			}
		}
	}
	c.mu.Unlock()
	for _, i := range lead {
		close(flights[keys[i]].done)
	}
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
