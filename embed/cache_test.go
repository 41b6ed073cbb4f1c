package embed

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeEmbedder is an Embedder made of funcs, recording what it computes.
type fakeEmbedder struct {
	dim   int
	mu    sync.Mutex // guards calls
	calls [][]string
	embed func(ctx context.Context, call int, texts []string) ([][]float32, error)
}

func (f *fakeEmbedder) Name() string { return "fake" }
func (f *fakeEmbedder) Dim() int     { return f.dim }
func (f *fakeEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	f.mu.Lock()
	f.calls = append(f.calls, slices.Clone(texts))
	n := len(f.calls)
	f.mu.Unlock()
	if f.embed != nil {
		return f.embed(ctx, n, texts)
	}
	return fakeVectors(texts, f.dim), nil
}

func (f *fakeEmbedder) computed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []string
	for _, c := range f.calls {
		all = append(all, c...)
	}
	return all
}

func fakeVectors(texts []string, dim int) [][]float32 {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = vecFor(t, dim)
		Normalize(out[i])
	}
	return out
}

// waitFor polls cond until it holds (the test's own deadline bounds it).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// TestCacheConcurrentIdenticalComputeOnce starts 50 identical requests
// while the first computation is held, then releases it: the embedder must
// have computed the text exactly once and everyone gets the same vector.
func TestCacheConcurrentIdenticalComputeOnce(t *testing.T) {
	release := make(chan struct{})
	inner := &fakeEmbedder{dim: 8, embed: func(_ context.Context, _ int, texts []string) ([][]float32, error) {
		<-release
		return fakeVectors(texts, 8), nil
	}}
	c, err := NewCache(inner, DefaultCacheConfig())
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	results := make([][][]float32, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = c.Embed(context.Background(), []string{"transfer $100 to alice"})
		}()
	}
	waitFor(t, func() bool { s := c.Stats(); return s.Misses+s.Hits == n })
	close(release)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if Cosine(results[i][0], results[0][0]) < 0.9999999 {
			t.Fatalf("request %d got a different vector", i)
		}
	}
	if got := inner.computed(); len(got) != 1 {
		t.Fatalf("embedder computed %d texts for %d identical requests, want 1", len(got), n)
	}
	if s := c.Stats(); s.Misses != 1 || s.Hits != n-1 {
		t.Fatalf("stats %+v, want 1 miss and %d hits", s, n-1)
	}
}

func TestCacheBatchesMissesAndCountsHits(t *testing.T) {
	inner := &fakeEmbedder{dim: 4}
	c, err := NewCache(inner, DefaultCacheConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v1, err := c.Embed(ctx, []string{"a", "b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := c.Embed(ctx, []string{"c", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v1[0], v1[2]) || !slices.Equal(v1[0], v2[1]) || slices.Equal(v1[0], v1[1]) {
		t.Fatal("vectors not placed by text")
	}
	if want := [][]string{{"a", "b"}, {"c"}}; !slices.EqualFunc(inner.calls, want, slices.Equal) {
		t.Fatalf("embedder calls %v, want %v", inner.calls, want)
	}
	if s := c.Stats(); s.Misses != 3 || s.Hits != 2 || s.Entries != 3 {
		t.Fatalf("stats %+v", s)
	}
	// Returned vectors are copies: changing one does not change the cache.
	v2[1][0] = 42
	v3, _ := c.Embed(ctx, []string{"a"})
	if v3[0][0] == 42 {
		t.Fatal("caller's change leaked into the cache")
	}
}

func TestCacheBounded(t *testing.T) {
	const dim = 512
	per := entryCost(make([]float32, dim))
	for _, tc := range []struct {
		name      string
		cfg       CacheConfig
		maxCount  int
		maxMemory int64
	}{
		{"by entries", CacheConfig{MaxEntries: 10, MaxBytes: 1 << 30}, 10, 10 * per},
		{"by bytes", CacheConfig{MaxEntries: 1000, MaxBytes: 5*per + per/2}, 5, 5*per + per/2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &fakeEmbedder{dim: dim}
			c, err := NewCache(inner, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i := range 200 {
				if _, err := c.Embed(ctx, []string{fmt.Sprint("text ", i)}); err != nil {
					t.Fatal(err)
				}
				// Keep text 0 in use: LRU must keep it.
				if _, err := c.Embed(ctx, []string{"text 0"}); err != nil {
					t.Fatal(err)
				}
			}
			s := c.Stats()
			if s.Entries > tc.maxCount || s.Bytes > tc.maxMemory || s.Entries == 0 {
				t.Fatalf("stats %+v: want at most %d entries and %d bytes", s, tc.maxCount, tc.maxMemory)
			}
			if s.Evictions == 0 {
				t.Fatal("no evictions counted")
			}
			before := len(inner.computed())
			if _, err := c.Embed(ctx, []string{"text 0"}); err != nil {
				t.Fatal(err)
			}
			if len(inner.computed()) != before {
				t.Fatal("recently used text was evicted")
			}
		})
	}
}

func TestCacheDoesNotCacheErrors(t *testing.T) {
	boom := errors.New("boom")
	inner := &fakeEmbedder{dim: 4, embed: func(_ context.Context, call int, texts []string) ([][]float32, error) {
		if call == 1 {
			return nil, boom
		}
		return fakeVectors(texts, 4), nil
	}}
	c, err := NewCache(inner, DefaultCacheConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Embed(context.Background(), []string{"x"}); !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	if _, err := c.Embed(context.Background(), []string{"x"}); err != nil {
		t.Fatalf("second try: %v", err)
	}
	if _, err := c.Embed(context.Background(), []string{"x", " "}); !errors.Is(err, ErrEmptyText) {
		t.Fatalf("blank text: %v", err)
	}
}

// TestCacheLeaderCanceled checks that a waiter is not failed by the
// cancellation of the caller whose computation it was waiting for.
func TestCacheLeaderCanceled(t *testing.T) {
	inner := &fakeEmbedder{dim: 4, embed: func(ctx context.Context, call int, texts []string) ([][]float32, error) {
		if call == 1 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return fakeVectors(texts, 4), nil
	}}
	c, err := NewCache(inner, DefaultCacheConfig())
	if err != nil {
		t.Fatal(err)
	}
	leaderCtx, cancel := context.WithCancel(context.Background())
	leaderErr := make(chan error, 1)
	go func() {
		_, err := c.Embed(leaderCtx, []string{"x"})
		leaderErr <- err
	}()
	waitFor(t, func() bool { return c.Stats().Misses == 1 })
	var waiterErr atomic.Value
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := c.Embed(context.Background(), []string{"x"}); err != nil {
			waiterErr.Store(err)
		}
	}()
	waitFor(t, func() bool { return c.Stats().Hits == 1 })
	cancel()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader error %v", err)
	}
	<-done
	if err := waiterErr.Load(); err != nil {
		t.Fatalf("waiter failed with the leader's cancellation: %v", err)
	}
}

func TestCacheWithUSE(t *testing.T) {
	u := testEncoder(t)
	c, err := NewCache(u, DefaultCacheConfig())
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != u.Name() || c.Dim() != u.Dim() {
		t.Fatal("cache does not report its embedder's name and dimension")
	}
	if _, err := NewCache(u, CacheConfig{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("zero config: %v", err)
	}
	var _ Embedder = c
}
