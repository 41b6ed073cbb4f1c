package index

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeLedger is a Loader over an in-memory session listing, recording the
// afterSeq of every call.
type fakeLedger struct {
	mu      sync.Mutex // guards rows, through, calls and err
	rows    map[string][]Entry
	through map[string]uint64 // highest Seq of the session, vectors or not
	calls   []uint64
	err     error
	hook    func() // runs inside Load, outside mu (to block it)
}

func newFakeLedger() *fakeLedger {
	return &fakeLedger{rows: map[string][]Entry{}, through: map[string]uint64{}}
}

func (l *fakeLedger) append(scope string, es ...Entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range es {
		l.rows[scope] = append(l.rows[scope], e)
		l.through[scope] = max(l.through[scope], e.Seq)
	}
}

func (l *fakeLedger) Load(ctx context.Context, scope string, after uint64) ([]Entry, uint64, error) {
	if l.hook != nil {
		l.hook()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, after)
	if l.err != nil {
		return nil, 0, l.err
	}
	var out []Entry
	for _, e := range l.rows[scope] {
		if e.Seq > after {
			out = append(out, e)
		}
	}
	return out, l.through[scope], nil
}

func (l *fakeLedger) callLog() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// clock is a fake time source that moves one millisecond per reading, so
// that every use of a scope is strictly later than the previous one.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time { return time.Unix(0, c.ns.Add(int64(time.Millisecond))) }

func newIndex(t *testing.T, cfg Config, l Loader) (*Flat, *clock) {
	t.Helper()
	f, err := New(cfg, l)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	f.now = c.now
	t.Cleanup(func() {
		if err := f.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return f, c
}

func smallConfig() Config {
	cfg := DefaultConfig()
	cfg.Dim = 4
	cfg.IdleTTL = 0
	return cfg
}

func ent(id, tag string, seq uint64, v ...float32) Entry {
	return Entry{ID: id, Tag: tag, Seq: seq, Vector: v}
}

func ids(hits []Hit) []string {
	out := []string{}
	for _, h := range hits {
		out = append(out, h.ID)
	}
	return out
}

func mustSearch(t *testing.T, f *Flat, scope, tag string, q []float32, k int) []Hit {
	t.Helper()
	hits, err := f.Search(context.Background(), scope, tag, q, k)
	if err != nil {
		t.Fatalf("search %s/%s: %v", scope, tag, err)
	}
	return hits
}

func TestSearchTopK(t *testing.T) {
	entries := []Entry{
		ent("far", "t", 1, 0, 0, 0, 1),
		ent("near", "t", 2, 1, 0.1, 0, 0),
		ent("exact", "t", 3, 2, 0, 0, 0), // not normalized: the index normalizes
		ent("mid", "t", 4, 1, 1, 0, 0),
		ent("opposite", "t", 5, -1, 0, 0, 0),
		ent("tie-b", "u", 7, 0, 1, 0, 0),
		ent("tie-a", "u", 7, 0, 1, 0, 0),
		ent("tie-early", "u", 6, 0, 1, 0, 0),
	}
	tests := []struct {
		name string
		tag  string
		q    []float32
		k    int
		want []string
	}{
		{"best first", "t", []float32{1, 0, 0, 0}, 5, []string{"exact", "near", "mid", "far", "opposite"}},
		{"k cuts", "t", []float32{1, 0, 0, 0}, 2, []string{"exact", "near"}},
		{"k=1", "t", []float32{0, 0, 0, 3}, 1, []string{"far"}},
		{"k above size", "t", []float32{-1, 0, 0, 0}, 100, []string{"opposite", "far", "mid", "near", "exact"}},
		{"ties: lower seq, then lower id", "u", []float32{0, 1, 0, 0}, 3, []string{"tie-early", "tie-a", "tie-b"}},
		{"ties cut by k", "u", []float32{0, 1, 0, 0}, 2, []string{"tie-early", "tie-a"}},
	}
	f, _ := newIndex(t, smallConfig(), nil)
	if err := f.Add("s", entries...); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits := mustSearch(t, f, "s", tt.tag, tt.q, tt.k)
			if got := ids(hits); !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := 1; i < len(hits); i++ {
				if hits[i].Score > hits[i-1].Score {
					t.Fatalf("not sorted: %v", hits)
				}
			}
		})
	}
	t.Run("scores are cosines", func(t *testing.T) {
		hits := mustSearch(t, f, "s", "t", []float32{5, 0, 0, 0}, 5)
		want := map[string]float64{"exact": 1, "near": 1 / math.Sqrt(1.01), "mid": 1 / math.Sqrt2, "far": 0, "opposite": -1}
		for _, h := range hits {
			if math.Abs(float64(h.Score)-want[h.ID]) > 1e-5 {
				t.Errorf("%s: score %v, want %v", h.ID, h.Score, want[h.ID])
			}
		}
		if hits[0].Seq != 3 {
			t.Errorf("exact: seq %d, want 3", hits[0].Seq)
		}
	})
}

func TestTagFilter(t *testing.T) {
	f, _ := newIndex(t, smallConfig(), nil)
	if err := f.Add("s",
		ent("email-1", "send_email", 1, 1, 0, 0, 0),
		ent("pay-1", "pay", 2, 1, 0, 0, 0),
		ent("email-2", "send_email", 3, 0, 1, 0, 0),
	); err != nil {
		t.Fatal(err)
	}
	if err := f.Add("other", ent("email-x", "send_email", 1, 1, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, scope, tag string
		want             []string
	}{
		{"only the tag", "s", "send_email", []string{"email-1", "email-2"}},
		{"other tag", "s", "pay", []string{"pay-1"}},
		{"unknown tag", "s", "delete_file", []string{}},
		{"empty tag is a tag", "s", "", []string{}},
		{"other scope", "other", "send_email", []string{"email-x"}},
		{"unknown scope", "nobody", "send_email", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ids(mustSearch(t, f, tt.scope, tt.tag, []float32{1, 0, 0, 0}, 10))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDeleteAndReplace(t *testing.T) {
	q := []float32{1, 0, 0, 0}
	tests := []struct {
		name    string
		do      func(f *Flat) error
		want    []string
		vectors int
	}{
		{"delete middle (swap-remove keeps the rest)", func(f *Flat) error {
			if !f.Delete("s", "b") {
				return errors.New("b not deleted")
			}
			return nil
		}, []string{"a", "c", "d"}, 3},
		{"delete last", func(f *Flat) error {
			f.Delete("s", "d")
			return nil
		}, []string{"a", "b", "c"}, 3},
		{"delete all", func(f *Flat) error {
			for _, id := range []string{"a", "b", "c", "d"} {
				f.Delete("s", id)
			}
			return nil
		}, []string{}, 0},
		{"delete absent", func(f *Flat) error {
			if f.Delete("s", "zz") || f.Delete("nobody", "a") {
				return errors.New("deleted something absent")
			}
			return nil
		}, []string{"a", "b", "c", "d"}, 4},
		{"delete then re-add", func(f *Flat) error {
			f.Delete("s", "a")
			return f.Add("s", ent("a", "t", 1, 1, 0, 0, 0))
		}, []string{"a", "b", "c", "d"}, 4},
		{"replace moves the entry", func(f *Flat) error {
			return f.Add("s", ent("a", "t", 9, 0, 0, 0, 1))
		}, []string{"b", "c", "d", "a"}, 4},
		{"replace in one batch: last wins", func(f *Flat) error {
			return f.Add("s", ent("e", "t", 5, 0, 0, 0, 1), ent("e", "t", 6, 1, 0, 0, 0))
		}, []string{"a", "e", "b", "c", "d"}, 5},
		{"replace changes the tag", func(f *Flat) error {
			return f.Add("s", ent("b", "other", 2, 1, 0, 0, 0))
		}, []string{"a", "c", "d"}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := newIndex(t, smallConfig(), nil)
			if err := f.Add("s",
				ent("a", "t", 1, 1, 0, 0, 0),
				ent("b", "t", 2, 1, 0.5, 0, 0),
				ent("c", "t", 3, 1, 1, 0, 0),
				ent("d", "t", 4, 0.5, 1, 0, 0),
			); err != nil {
				t.Fatal(err)
			}
			if err := tt.do(f); err != nil {
				t.Fatal(err)
			}
			got := ids(mustSearch(t, f, "s", "t", q, 10))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			if n := f.Stats().Vectors; n != tt.vectors {
				t.Fatalf("Stats.Vectors = %d, want %d", n, tt.vectors)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tests := []struct {
		name  string
		scope string
		e     Entry
		want  error
	}{
		{"short", "s", ent("x", "t", 1, 1, 0, 0), ErrDimension},
		{"long", "s", ent("x", "t", 1, 1, 0, 0, 0, 0), ErrDimension},
		{"nil", "s", ent("x", "t", 1), ErrDimension},
		{"zero", "s", ent("x", "t", 1, 0, 0, 0, 0), ErrInvalidVector},
		{"NaN", "s", ent("x", "t", 1, 1, nan, 0, 0), ErrInvalidVector},
		{"+Inf", "s", ent("x", "t", 1, 1, inf, 0, 0), ErrInvalidVector},
		{"-Inf", "s", ent("x", "t", 1, -inf, 0, 0, 0), ErrInvalidVector},
		{"norm overflows float32", "s", ent("x", "t", 1, 3e38, 3e38, 3e38, 3e38), ErrInvalidVector},
		{"denormal", "s", ent("x", "t", 1, 1e-45, 0, 0, 0), ErrInvalidVector},
		{"empty id", "s", ent("", "t", 1, 1, 0, 0, 0), ErrInvalidArgument},
		{"empty scope", "", ent("x", "t", 1, 1, 0, 0, 0), ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run("add "+tt.name, func(t *testing.T) {
			f, _ := newIndex(t, smallConfig(), nil)
			good := ent("good", "t", 1, 1, 0, 0, 0)
			err := f.Add(tt.scope, good, tt.e)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if n := f.Stats().Vectors; n != 0 {
				t.Fatalf("a rejected batch stored %d vectors", n)
			}
		})
		if tt.scope == "" || tt.e.ID == "" {
			continue
		}
		t.Run("search "+tt.name, func(t *testing.T) {
			f, _ := newIndex(t, smallConfig(), nil)
			if err := f.Add("s", ent("good", "t", 1, 1, 0, 0, 0)); err != nil {
				t.Fatal(err)
			}
			hits, err := f.Search(context.Background(), "s", "t", tt.e.Vector, 3)
			if !errors.Is(err, tt.want) || hits != nil {
				t.Fatalf("hits %v, err = %v, want %v", hits, err, tt.want)
			}
		})
	}
	f, _ := newIndex(t, smallConfig(), nil)
	for _, k := range []int{0, -1} {
		if _, err := f.Search(context.Background(), "s", "t", []float32{1, 0, 0, 0}, k); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("k=%d: err = %v, want ErrInvalidArgument", k, err)
		}
	}
	if _, err := f.Search(context.Background(), "", "t", []float32{1, 0, 0, 0}, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("empty scope: err = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"zero dim", func(c *Config) { c.Dim = 0 }},
		{"zero per scope", func(c *Config) { c.MaxPerScope = 0 }},
		{"zero scopes", func(c *Config) { c.MaxScopes = 0 }},
		{"total below per scope", func(c *Config) { c.MaxVectors = c.MaxPerScope - 1 }},
		{"negative ttl", func(c *Config) { c.IdleTTL = -time.Second }},
		{"ttl without sweep", func(c *Config) { c.SweepInterval = 0 }},
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.edit(&cfg)
			if _, err := New(cfg, nil); !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
		})
	}
}

func TestPerScopeBound(t *testing.T) {
	q := []float32{1, 0, 0, 0}
	tests := []struct {
		name string
		adds []Entry
		want []string
	}{
		{"oldest seq evicted", []Entry{
			ent("s1", "t", 1, 1, 0, 0, 0), ent("s2", "t", 2, 1, 0, 0, 0), ent("s3", "t", 3, 1, 0, 0, 0),
			ent("s4", "t", 4, 1, 0, 0, 0), ent("s5", "t", 5, 1, 0, 0, 0),
		}, []string{"s3", "s4", "s5"}},
		{"an entry older than all is not kept", []Entry{
			ent("s5", "t", 5, 1, 0, 0, 0), ent("s6", "t", 6, 1, 0, 0, 0), ent("s7", "t", 7, 1, 0, 0, 0),
			ent("s1", "t", 1, 1, 0, 0, 0),
		}, []string{"s5", "s6", "s7"}},
		{"without seqs, first added evicted", []Entry{
			ent("a", "t", 0, 1, 0, 0, 0), ent("b", "t", 0, 1, 0, 0, 0), ent("c", "t", 0, 1, 0, 0, 0),
			ent("d", "t", 0, 1, 0, 0, 0),
		}, []string{"b", "c", "d"}},
		{"replacing does not evict", []Entry{
			ent("a", "t", 1, 1, 0, 0, 0), ent("b", "t", 2, 1, 0, 0, 0), ent("c", "t", 3, 1, 0, 0, 0),
			ent("a", "t", 1, 1, 0, 0, 0),
		}, []string{"a", "b", "c"}},
		{"bound counts all tags", []Entry{
			ent("a", "t", 1, 1, 0, 0, 0), ent("x", "u", 2, 1, 0, 0, 0), ent("y", "u", 3, 1, 0, 0, 0),
			ent("z", "u", 4, 1, 0, 0, 0),
		}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := smallConfig()
			cfg.MaxPerScope = 3
			f, _ := newIndex(t, cfg, nil)
			for _, e := range tt.adds { // one at a time, as the funnel adds them
				if err := f.Add("s", e); err != nil {
					t.Fatal(err)
				}
			}
			if got := ids(mustSearch(t, f, "s", "t", q, 10)); !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			if n := f.Stats().Vectors; n != 3 {
				t.Fatalf("Stats.Vectors = %d, want 3", n)
			}
		})
	}
}

func TestScopeBoundsDropLRUAndReload(t *testing.T) {
	q := []float32{1, 0, 0, 0}
	l := newFakeLedger()
	for _, s := range []string{"a", "b", "c"} {
		l.append(s, ent(s+"1", "t", 1, 1, 0, 0, 0), ent(s+"2", "t", 2, 0, 1, 0, 0))
	}
	t.Run("MaxScopes", func(t *testing.T) {
		cfg := smallConfig()
		cfg.MaxScopes = 2
		f, _ := newIndex(t, cfg, l)
		mustSearch(t, f, "a", "t", q, 1)
		mustSearch(t, f, "b", "t", q, 1)
		mustSearch(t, f, "a", "t", q, 1) // a is now more recent than b
		mustSearch(t, f, "c", "t", q, 1) // drops b
		if st := f.Stats(); st.Scopes != 2 || st.Vectors != 4 {
			t.Fatalf("stats %+v, want 2 scopes, 4 vectors", st)
		}
		before := len(l.callLog())
		mustSearch(t, f, "a", "t", q, 1)
		if len(l.callLog()) != before {
			t.Fatal("a was reloaded, but it was recently used")
		}
		if got := ids(mustSearch(t, f, "b", "t", q, 2)); !slices.Equal(got, []string{"b1", "b2"}) {
			t.Fatalf("b after reload: %v", got)
		}
		if got := l.callLog(); len(got) != before+1 || got[len(got)-1] != 0 {
			t.Fatalf("b reload: loader calls %v, want one more with afterSeq 0", got)
		}
	})
	t.Run("MaxVectors", func(t *testing.T) {
		cfg := smallConfig()
		cfg.MaxPerScope, cfg.MaxVectors = 2, 4
		f, _ := newIndex(t, cfg, l)
		mustSearch(t, f, "a", "t", q, 1)
		mustSearch(t, f, "b", "t", q, 1)
		mustSearch(t, f, "c", "t", q, 1) // 6 vectors > 4: a goes
		if st := f.Stats(); st.Scopes != 2 || st.Vectors != 4 {
			t.Fatalf("stats %+v, want 2 scopes, 4 vectors", st)
		}
		if got := ids(mustSearch(t, f, "a", "t", q, 2)); !slices.Equal(got, []string{"a1", "a2"}) {
			t.Fatalf("a after reload: %v", got)
		}
	})
}

func TestIdleEvictionAndRebuild(t *testing.T) {
	q := []float32{1, 0, 0, 0}
	l := newFakeLedger()
	l.append("sess", ent("k1", "t", 1, 1, 0, 0, 0), ent("k2", "t", 2, 0, 1, 0, 0))
	cfg := smallConfig()
	cfg.IdleTTL, cfg.SweepInterval = time.Hour, time.Hour // the sweep is run by hand below
	f, c := newIndex(t, cfg, l)

	if got := ids(mustSearch(t, f, "sess", "t", q, 5)); !slices.Equal(got, []string{"k1", "k2"}) {
		t.Fatalf("first search: %v", got)
	}
	// The funnel adds a new call after its claim.
	l.append("sess", ent("k3", "t", 3, 1, 0.1, 0, 0))
	if err := f.Add("sess", ent("k3", "t", 3, 1, 0.1, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if err := f.Add("busy", ent("x", "t", 1, 1, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}

	c.ns.Add(int64(30 * time.Minute))
	mustSearch(t, f, "busy", "t", q, 1) // used within the hour
	f.sweep()
	if st := f.Stats(); st.Scopes != 2 {
		t.Fatalf("after 30 min: %+v, want both scopes kept", st)
	}
	c.ns.Add(int64(45 * time.Minute))
	f.sweep()
	if st := f.Stats(); st.Scopes != 1 || st.Vectors != 1 {
		t.Fatalf("after 75 min: %+v, want only busy", st)
	}

	// "A restart loses no semantic memory": the next search rebuilds it.
	calls := len(l.callLog())
	if got := ids(mustSearch(t, f, "sess", "t", q, 5)); !slices.Equal(got, []string{"k1", "k3", "k2"}) {
		t.Fatalf("after rebuild: %v", got)
	}
	if got := l.callLog()[calls:]; !slices.Equal(got, []uint64{0}) {
		t.Fatalf("rebuild loader calls %v, want [0]", got)
	}
}

func TestSweeperRunsAndCloseStopsIt(t *testing.T) {
	cfg := smallConfig()
	cfg.IdleTTL, cfg.SweepInterval = time.Nanosecond, time.Millisecond
	f, err := New(cfg, nil) // real clock: every scope is idle at once
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Add("s", ent("a", "t", 1, 1, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	for f.Stats().Scopes != 0 {
		time.Sleep(time.Millisecond)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := f.Add("s", ent("a", "t", 1, 1, 0, 0, 0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Close: %v", err)
	}
	if _, err := f.Search(context.Background(), "s", "t", []float32{1, 0, 0, 0}, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Search after Close: %v", err)
	}
}

func TestIncrementalRefresh(t *testing.T) {
	q := []float32{1, 0, 0, 0}
	t.Run("Refresh loads only newer rows", func(t *testing.T) {
		l := newFakeLedger()
		l.append("s", ent("k1", "t", 1, 1, 0, 0, 0))
		f, _ := newIndex(t, smallConfig(), l)
		mustSearch(t, f, "s", "t", q, 5)

		// Another replica claims k2 (seq 2) and a call with no text (seq 3,
		// no vector): the listing covers seq 3.
		l.append("s", ent("k2", "t", 2, 1, 0, 0, 0))
		l.mu.Lock()
		l.through["s"] = 3
		l.mu.Unlock()
		if got := ids(mustSearch(t, f, "s", "t", q, 5)); !slices.Equal(got, []string{"k1"}) {
			t.Fatalf("without refresh: %v (RefreshOnSearch is off)", got)
		}
		if err := f.Refresh(context.Background(), "s"); err != nil {
			t.Fatal(err)
		}
		if got := ids(mustSearch(t, f, "s", "t", q, 5)); !slices.Equal(got, []string{"k1", "k2"}) {
			t.Fatalf("after refresh: %v", got)
		}
		if err := f.Refresh(context.Background(), "s"); err != nil {
			t.Fatal(err)
		}
		if got := l.callLog(); !slices.Equal(got, []uint64{0, 1, 3}) {
			t.Fatalf("loader afterSeq per call %v, want [0 1 3]", got)
		}
	})
	t.Run("RefreshOnSearch", func(t *testing.T) {
		l := newFakeLedger()
		l.append("s", ent("k1", "t", 1, 1, 0, 0, 0))
		cfg := smallConfig()
		cfg.RefreshOnSearch = true
		f, _ := newIndex(t, cfg, l)
		mustSearch(t, f, "s", "t", q, 5)
		l.append("s", ent("k2", "t", 2, 1, 0, 0, 0), ent("k3", "t", 3, 1, 0, 0, 0))
		if got := ids(mustSearch(t, f, "s", "t", q, 5)); !slices.Equal(got, []string{"k1", "k2", "k3"}) {
			t.Fatalf("got %v", got)
		}
		mustSearch(t, f, "s", "t", q, 5)
		if got := l.callLog(); !slices.Equal(got, []uint64{0, 1, 3}) {
			t.Fatalf("loader afterSeq per call %v, want [0 1 3]", got)
		}
	})
	t.Run("added before the first load is merged", func(t *testing.T) {
		l := newFakeLedger()
		l.append("s", ent("k1", "t", 1, 1, 0, 0, 0), ent("k2", "t", 2, 0, 0, 0, 1))
		f, _ := newIndex(t, smallConfig(), l)
		// k2 was re-embedded (seq 2 → its newer vector) and k3 claimed here,
		// before anything searched the scope.
		if err := f.Add("s", ent("k2", "t", 2, 1, 1, 0, 0), ent("k3", "t", 3, 1, 0.1, 0, 0)); err != nil {
			t.Fatal(err)
		}
		hits := mustSearch(t, f, "s", "t", q, 5)
		if got := ids(hits); !slices.Equal(got, []string{"k1", "k3", "k2"}) {
			t.Fatalf("got %v", got)
		}
		if f.Stats().Vectors != 3 {
			t.Fatalf("stats %+v", f.Stats())
		}
	})
	t.Run("a loaded row never overwrites a newer added one", func(t *testing.T) {
		l := newFakeLedger()
		l.append("s", ent("k", "t", 1, 0, 0, 0, 1))
		f, _ := newIndex(t, smallConfig(), l)
		if err := f.Add("s", ent("k", "t", 5, 1, 0, 0, 0)); err != nil {
			t.Fatal(err)
		}
		if hits := mustSearch(t, f, "s", "t", q, 5); len(hits) != 1 || hits[0].Seq != 5 || hits[0].Score < 0.99 {
			t.Fatalf("got %+v, want k at seq 5", hits)
		}
	})
	t.Run("load keeps the newest MaxPerScope", func(t *testing.T) {
		l := newFakeLedger()
		for i := uint64(1); i <= 10; i++ {
			l.append("s", ent(fmt.Sprint("k", i), "t", i, 1, 0, 0, 0))
		}
		cfg := smallConfig()
		cfg.MaxPerScope = 3
		f, _ := newIndex(t, cfg, l)
		if got := ids(mustSearch(t, f, "s", "t", q, 10)); !slices.Equal(got, []string{"k8", "k9", "k10"}) {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("invalid rows are skipped, not fatal", func(t *testing.T) {
		l := newFakeLedger()
		l.append("s", ent("ok", "t", 1, 1, 0, 0, 0), ent("short", "t", 2, 1, 0), ent("zero", "t", 3, 0, 0, 0, 0), ent("", "t", 4, 1, 0, 0, 0))
		f, _ := newIndex(t, smallConfig(), l)
		if got := ids(mustSearch(t, f, "s", "t", q, 10)); !slices.Equal(got, []string{"ok"}) {
			t.Fatalf("got %v", got)
		}
		if st := f.Stats(); st.Skipped != 3 {
			t.Fatalf("Skipped = %d, want 3", st.Skipped)
		}
	})
}

func TestLoaderErrors(t *testing.T) {
	q := []float32{1, 0, 0, 0}
	boom := errors.New("ledger down")
	t.Run("failed load is an error and is retried", func(t *testing.T) {
		l := newFakeLedger()
		l.append("s", ent("k1", "t", 1, 1, 0, 0, 0))
		l.err = boom
		f, _ := newIndex(t, smallConfig(), l)
		hits, err := f.Search(context.Background(), "s", "t", q, 1)
		if !errors.Is(err, ErrLoad) || !errors.Is(err, boom) || hits != nil {
			t.Fatalf("hits %v err %v, want ErrLoad wrapping the loader's error", hits, err)
		}
		l.mu.Lock()
		l.err = nil
		l.mu.Unlock()
		if got := ids(mustSearch(t, f, "s", "t", q, 1)); !slices.Equal(got, []string{"k1"}) {
			t.Fatalf("after recovery: %v", got)
		}
	})
	t.Run("failed refresh is an error, not stale hits", func(t *testing.T) {
		l := newFakeLedger()
		l.append("s", ent("k1", "t", 1, 1, 0, 0, 0))
		cfg := smallConfig()
		cfg.RefreshOnSearch = true
		f, _ := newIndex(t, cfg, l)
		mustSearch(t, f, "s", "t", q, 1)
		l.mu.Lock()
		l.err = boom
		l.mu.Unlock()
		if _, err := f.Search(context.Background(), "s", "t", q, 1); !errors.Is(err, ErrLoad) {
			t.Fatalf("err = %v, want ErrLoad", err)
		}
	})
	t.Run("waiting for a slow loader honours ctx", func(t *testing.T) {
		l := newFakeLedger()
		release := make(chan struct{})
		entered := make(chan struct{}, 1)
		l.hook = func() {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
		}
		f, _ := newIndex(t, smallConfig(), l)
		done := make(chan error, 1)
		go func() { _, err := f.Search(context.Background(), "s", "t", q, 1); done <- err }()
		<-entered
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := f.Search(ctx, "s", "t", q, 1); !errors.Is(err, ErrLoad) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want ErrLoad wrapping context.Canceled", err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestConcurrentRefreshesShareLoads(t *testing.T) {
	l := newFakeLedger()
	l.append("s", ent("k1", "t", 1, 1, 0, 0, 0))
	f, _ := newIndex(t, smallConfig(), l)
	if err := f.Refresh(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	entered := make(chan struct{}, 100)
	l.hook = func() { entered <- struct{}{}; <-release }
	var wg sync.WaitGroup
	refresh := func() {
		defer wg.Done()
		if err := f.Refresh(context.Background(), "s"); err != nil {
			t.Error(err)
		}
	}
	wg.Add(1)
	go refresh()
	<-entered // a load is in flight; everyone below asks during it
	const waiters = 8
	wg.Add(waiters)
	for range waiters {
		go refresh()
	}
	time.Sleep(20 * time.Millisecond) // let the waiters queue (not asserted on)
	close(release)
	wg.Wait()
	if n := len(l.callLog()); n >= 1+waiters {
		t.Fatalf("%d loader calls for %d concurrent refreshes: not shared", n, 1+waiters)
	}
}

func TestConcurrentUse(t *testing.T) {
	l := newFakeLedger()
	cfg := smallConfig()
	cfg.MaxScopes, cfg.MaxPerScope, cfg.MaxVectors = 3, 20, 40
	cfg.IdleTTL, cfg.SweepInterval = time.Millisecond, time.Millisecond
	cfg.RefreshOnSearch = true
	f, err := New(cfg, l)
	if err != nil {
		t.Fatal(err)
	}
	scopes := []string{"a", "b", "c", "d"}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				s := scopes[(w+i)%len(scopes)]
				id := fmt.Sprintf("w%d-%d", w, i%25)
				v := []float32{float32(w + 1), float32(i%7 + 1), 1, 0}
				switch i % 4 {
				case 0:
					l.append(s, Entry{ID: id, Tag: "t", Seq: uint64(i + 1), Vector: v})
					fallthrough
				case 1:
					if err := f.Add(s, Entry{ID: id, Tag: "t", Seq: uint64(i + 1), Vector: v}); err != nil {
						t.Error(err)
						return
					}
				case 2:
					hits, err := f.Search(context.Background(), s, "t", v, 5)
					if err != nil {
						t.Error(err)
						return
					}
					for j := 1; j < len(hits); j++ {
						if before(hits[j], hits[j-1]) {
							t.Errorf("unsorted hits %v", hits)
						}
					}
				case 3:
					f.Delete(s, id)
				}
			}
		}()
	}
	wg.Wait()
	f.mu.RLock()
	sum := 0
	for _, s := range f.scopes {
		s.mu.RLock()
		sum += len(s.ids)
		if len(s.vecs) != len(s.ids)*cfg.Dim || len(s.pos) != len(s.ids) {
			t.Errorf("scope %s inconsistent: %d ids, %d values, %d positions", s.name, len(s.ids), len(s.vecs), len(s.pos))
		}
		s.mu.RUnlock()
	}
	f.mu.RUnlock()
	if st := f.Stats(); st.Vectors != sum || st.Vectors > cfg.MaxVectors || st.Scopes > cfg.MaxScopes {
		t.Fatalf("stats %+v, scopes hold %d vectors; bounds %d scopes, %d vectors", st, sum, cfg.MaxScopes, cfg.MaxVectors)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestHas: a scope is loaded through the Loader to answer whether it holds
// a tag, as a search would be.
func TestHas(t *testing.T) {
	l := newFakeLedger()
	l.append("s1", ent("a", "send", 1, 1, 0, 0, 0))
	f, _ := newIndex(t, smallConfig(), l)
	for _, tc := range []struct {
		scope, tag string
		want       bool
	}{{"s1", "send", true}, {"s1", "refund", false}, {"s2", "send", false}} {
		got, err := f.Has(context.Background(), tc.scope, tc.tag)
		if err != nil || got != tc.want {
			t.Errorf("Has(%s, %s) = %v, %v; want %v", tc.scope, tc.tag, got, err, tc.want)
		}
	}
	if err := f.Add("s2", ent("b", "refund", 1, 0, 1, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Has(context.Background(), "s2", "refund"); !got {
		t.Error("Has after Add: false")
	}
}

// TestDroppedCountsCallsPastTheBound: Dropped says how many calls a scope
// left out because of MaxPerScope, whether they came one at a time or in
// one load; a replaced entry is not one; a scope not in memory has none.
func TestDroppedCountsCallsPastTheBound(t *testing.T) {
	cfg := smallConfig()
	cfg.MaxPerScope = 3
	f, _ := newIndex(t, cfg, nil)
	for i := range 5 {
		if err := f.Add("s", ent(fmt.Sprint("c", i), "t", uint64(i+1), 1, 0, 0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Add("s", ent("c4", "t", 5, 0, 1, 0, 0)); err != nil { // replaced
		t.Fatal(err)
	}
	if n := f.Dropped("s"); n != 2 {
		t.Errorf("5 calls one at a time into a scope of 3: Dropped = %d, want 2", n)
	}
	if n := f.Dropped("elsewhere"); n != 0 {
		t.Errorf("a scope not in memory: Dropped = %d, want 0", n)
	}

	l := newFakeLedger()
	for i := range 5 {
		l.append("big", ent(fmt.Sprint("b", i), "t", uint64(i+1), 1, 0, 0, 0))
	}
	l.append("small", ent("s1", "t", 1, 1, 0, 0, 0))
	g, _ := newIndex(t, cfg, l)
	mustSearch(t, g, "big", "t", []float32{1, 0, 0, 0}, 1)
	mustSearch(t, g, "small", "t", []float32{1, 0, 0, 0}, 1)
	if n := g.Dropped("big"); n != 2 {
		t.Errorf("a load of 5 calls into a scope of 3: Dropped = %d, want 2", n)
	}
	if n := g.Dropped("small"); n != 0 {
		t.Errorf("a scope within its bound: Dropped = %d, want 0", n)
	}
}

// TestBlindEntries: a call whose vector is not known yet is listed by
// Blind (and makes Has true) but never returned by Search, until an entry
// with its vector replaces it; the Loader may list blind entries too, and
// Delete forgets them.
func TestBlindEntries(t *testing.T) {
	ctx := context.Background()
	q := []float32{1, 0, 0, 0}
	f, _ := newIndex(t, smallConfig(), nil)
	if err := f.Add("s", Entry{ID: "b", Tag: "t", Seq: 2, Blind: true}, Entry{ID: "a", Tag: "t", Seq: 1, Blind: true}); err != nil {
		t.Fatal(err)
	}
	if has, err := f.Has(ctx, "s", "t"); err != nil || !has {
		t.Errorf("Has with only blind entries: %v, %v", has, err)
	}
	if got := ids(mustSearch(t, f, "s", "t", q, 10)); len(got) != 0 {
		t.Errorf("Search returned blind entries %v", got)
	}
	if got := f.Blind("s", "t"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Blind = %v; want [a b], oldest first", got)
	}
	if err := f.Add("s", ent("a", "t", 1, 1, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if got := f.Blind("s", "t"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("after a's vector came: Blind = %v, want [b]", got)
	}
	if got := ids(mustSearch(t, f, "s", "t", q, 10)); !slices.Equal(got, []string{"a"}) {
		t.Errorf("after a's vector came: Search = %v, want [a]", got)
	}
	f.Delete("s", "b")
	if got := f.Blind("s", "t"); len(got) != 0 {
		t.Errorf("after Delete: Blind = %v", got)
	}

	l := newFakeLedger()
	l.append("w", ent("v", "t", 1, 1, 0, 0, 0), Entry{ID: "x", Tag: "t", Seq: 2, Blind: true})
	g, _ := newIndex(t, smallConfig(), l)
	if got := g.Blind("w", "t"); len(got) != 0 {
		t.Errorf("a scope not loaded yet: Blind = %v, want none", got)
	}
	if got := ids(mustSearch(t, g, "w", "t", q, 10)); !slices.Equal(got, []string{"v"}) {
		t.Errorf("a loaded scope: Search = %v, want [v]", got)
	}
	if got := g.Blind("w", "t"); !slices.Equal(got, []string{"x"}) {
		t.Errorf("a loaded scope: Blind = %v; want [x]", got)
	}
}
