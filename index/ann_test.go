package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// annConfig is a 16-d index whose partitions of 200 rows get a graph.
func annConfig() Config {
	cfg := DefaultConfig()
	cfg.Dim, cfg.IdleTTL = 16, 0
	cfg.ANNMin = 200
	cfg.MaxPerScope, cfg.MaxVectors = 5000, 20000
	return cfg
}

// clustered returns n entries of tag in 20 clusters, IDs prefix-0..n-1,
// Seq from seq0+1.
func clustered(r *rand.Rand, prefix, tag string, n int, seq0 uint64) []Entry {
	centres := make([][]float32, 20)
	for i := range centres {
		centres[i] = make([]float32, 16)
		for j := range centres[i] {
			centres[i][j] = float32(r.NormFloat64())
		}
	}
	out := make([]Entry, n)
	for i := range out {
		c := centres[r.IntN(len(centres))]
		v := make([]float32, 16)
		for j := range v {
			v[j] = c[j] + 0.3*float32(r.NormFloat64())
		}
		out[i] = Entry{ID: fmt.Sprintf("%s-%d", prefix, i), Tag: tag, Seq: seq0 + uint64(i) + 1, Vector: v}
	}
	return out
}

func waitGraphs(t *testing.T, f *Flat) {
	t.Helper()
	if err := f.WaitGraphs(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestGraphSearchAgreesWithExact: a partition above ANNMin is searched
// through its graph once built (exactly before), a small one stays
// scanned, and every hit the graph gives carries the exact scan's score.
func TestGraphSearchAgreesWithExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	big := clustered(r, "a", "big", 1500, 0)
	small := clustered(r, "b", "small", 150, 2000)
	queries := clustered(r, "q", "big", 100, 0)

	cfg := annConfig()
	f, _ := newIndex(t, cfg, nil)
	ecfg := cfg
	ecfg.ANNMin = 0
	exact, _ := newIndex(t, ecfg, nil)
	for _, x := range []*Flat{f, exact} {
		if err := x.Add("s", append(append([]Entry{}, big...), small...)...); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	// The first search scans (the graph is not built yet) and asks for one.
	got, _ := f.Search(ctx, "s", "big", queries[0].Vector, 10)
	want, _ := exact.Search(ctx, "s", "big", queries[0].Vector, 10)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("before the graph: %v, exact %v", got, want)
	}
	waitGraphs(t, f)
	if st := f.Stats(); st.Graphs != 1 || st.GraphNodes != 1500 || st.Vectors != 1650 {
		t.Fatalf("stats %+v: want one graph of 1,500 nodes, 1,650 rows", st)
	}
	var found, total int
	for _, q := range queries {
		got, err := f.Search(ctx, "s", "big", q.Vector, 10)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := exact.Search(ctx, "s", "big", q.Vector, 10)
		scores := map[string]float32{}
		for _, h := range want {
			scores[h.ID] = h.Score
		}
		for i, h := range got {
			if i > 0 && before(h, got[i-1]) {
				t.Fatalf("unsorted %v", got)
			}
			if s, ok := scores[h.ID]; ok {
				found++
				if s != h.Score {
					t.Fatalf("%s: graph score %v, exact %v", h.ID, h.Score, s)
				}
			} else if len(want) == 10 && h.Score > want[9].Score {
				t.Fatalf("%s scores %v, above the exact 10th %v, yet the scan did not rank it", h.ID, h.Score, want[9].Score)
			}
		}
		total += len(want)
	}
	if rec := float64(found) / float64(total); rec < 0.95 {
		t.Fatalf("recall@10 through the graph %.3f", rec)
	}
	// The small partition is scanned: the same answer as exact.
	for _, q := range queries[:10] {
		got, _ := f.Search(ctx, "s", "small", q.Vector, 5)
		want, _ := exact.Search(ctx, "s", "small", q.Vector, 5)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("small partition: %v, exact %v", got, want)
		}
	}
}

// TestGraphKeptCurrent: once a partition is searched through its graph,
// added, replaced, deleted and evicted rows show at once.
func TestGraphKeptCurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	cfg := annConfig()
	cfg.MaxPerScope = 1000
	f, _ := newIndex(t, cfg, nil)
	rows := clustered(r, "a", "t", 1000, 0)
	if err := f.Add("s", rows...); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f.Search(ctx, "s", "t", rows[0].Vector, 1)
	waitGraphs(t, f)
	if f.Stats().Graphs != 1 {
		t.Fatal("no graph built")
	}
	top := func(v []float32) Hit {
		t.Helper()
		hits, err := f.Search(ctx, "s", "t", v, 3)
		if err != nil || len(hits) == 0 {
			t.Fatalf("search: %v %v", hits, err)
		}
		return hits[0]
	}
	// Added: a new row is its own nearest neighbour. The scope is full,
	// so the oldest row (a-0) is evicted.
	fresh := clustered(r, "new", "t", 1, 5000)[0]
	if err := f.Add("s", fresh); err != nil {
		t.Fatal(err)
	}
	if h := top(fresh.Vector); h.ID != fresh.ID || h.Score < 0.9999 {
		t.Fatalf("added row: top hit %+v", h)
	}
	if h := top(rows[0].Vector); h.ID == rows[0].ID {
		t.Fatalf("evicted row %s still returned", h.ID)
	}
	// Replaced: a-5 takes a-7's vector, and is found there.
	moved := rows[5]
	moved.Vector, moved.Seq = rows[7].Vector, 6000
	if err := f.Add("s", moved); err != nil {
		t.Fatal(err)
	}
	hits, _ := f.Search(ctx, "s", "t", rows[7].Vector, 2)
	if len(hits) != 2 || hits[0].Score < 0.9999 || hits[1].Score < 0.9999 {
		t.Fatalf("replaced row: %+v, want a-5 and a-7 both at 1", hits)
	}
	// Deleted: never returned.
	for _, e := range rows[100:200] {
		f.Delete("s", e.ID)
	}
	for _, e := range rows[100:200] {
		for _, h := range mustSearch(t, f, "s", "t", e.Vector, 10) {
			if h.ID == e.ID {
				t.Fatalf("deleted %s returned", h.ID)
			}
		}
	}
}

// TestGraphTombstonesAndShrink: a graph mostly of tombstones is rebuilt
// from the rows; a partition below ANNMin/2 drops its graph and is scanned.
func TestGraphTombstonesAndShrink(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	f, _ := newIndex(t, annConfig(), nil)
	rows := clustered(r, "a", "t", 1000, 0)
	f.Add("s", rows...)
	mustSearch(t, f, "s", "t", rows[0].Vector, 1)
	waitGraphs(t, f)
	for _, e := range rows[:600] {
		f.Delete("s", e.ID)
	}
	waitGraphs(t, f) // the deletes asked for a rebuild
	if st := f.Stats(); st.Graphs != 1 || st.GraphNodes != 400 {
		t.Fatalf("after 600 of 1,000 deleted: %+v, want a rebuilt graph of 400 nodes", st)
	}
	for _, e := range rows[600:910] {
		f.Delete("s", e.ID)
	}
	if st := f.Stats(); st.Graphs != 0 || st.GraphNodes != 0 || st.Vectors != 90 {
		t.Fatalf("90 rows left: %+v, want no graph", st)
	}
	for _, e := range rows[910:] {
		if h := mustSearch(t, f, "s", "t", e.Vector, 1); h[0].ID != e.ID {
			t.Fatalf("scan after the graph: %v for %s", h, e.ID)
		}
	}
}

// TestGraphRebuiltThroughLoader: a dropped scope comes back from the
// Loader and gets its graph again, answering as before.
func TestGraphRebuiltThroughLoader(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	l := newFakeLedger()
	rows := clustered(r, "a", "t", 800, 0)
	l.append("s", rows...)
	l.append("other", clustered(r, "o", "t", 10, 0)...)
	cfg := annConfig()
	cfg.MaxScopes = 1
	f, _ := newIndex(t, cfg, l)
	q := clustered(r, "q", "t", 5, 0)
	first := make([][]Hit, len(q))
	mustSearch(t, f, "s", "t", q[0].Vector, 1)
	waitGraphs(t, f)
	for i := range q {
		first[i] = mustSearch(t, f, "s", "t", q[i].Vector, 10)
	}
	// Using another scope drops s (MaxScopes 1), graph and all.
	if _, err := f.Search(context.Background(), "other", "t", q[0].Vector, 1); err != nil {
		t.Fatal(err)
	}
	if st := f.Stats(); st.Graphs != 0 || st.GraphNodes != 0 {
		t.Fatalf("s dropped, yet %+v", st)
	}
	mustSearch(t, f, "s", "t", q[0].Vector, 1) // reloads s, asks for its graph
	waitGraphs(t, f)
	if st := f.Stats(); st.Graphs != 1 || st.GraphNodes != 800 {
		t.Fatalf("after reload: %+v", st)
	}
	for i := range q {
		if got := mustSearch(t, f, "s", "t", q[i].Vector, 10); fmt.Sprint(got) != fmt.Sprint(first[i]) {
			t.Fatalf("query %d: %v after the rebuild, %v before", i, got, first[i])
		}
	}
}

// TestGraphCountsTowardMaxVectors: a graph's copy of the vectors counts
// against MaxVectors, so building one drops least recently used scopes.
func TestGraphCountsTowardMaxVectors(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	cfg := annConfig()
	cfg.MaxPerScope, cfg.MaxVectors = 1000, 2000
	f, _ := newIndex(t, cfg, nil)
	f.Add("old", clustered(r, "o", "t", 500, 0)...)
	f.Add("s", clustered(r, "a", "t", 1000, 0)...)
	mustSearch(t, f, "s", "t", make16(1), 1)
	waitGraphs(t, f)
	st := f.Stats()
	if st.Vectors+st.GraphNodes > cfg.MaxVectors || st.Graphs != 1 || st.Scopes != 1 {
		t.Fatalf("%+v: rows and graph nodes must fit MaxVectors %d by dropping scope old", st, cfg.MaxVectors)
	}
}

func make16(x float32) []float32 {
	v := make([]float32, 16)
	v[0] = x
	return v
}

// TestGraphConcurrentUse races adds, deletes and searches with graph
// builds (run with -race).
func TestGraphConcurrentUse(t *testing.T) {
	cfg := annConfig()
	cfg.ANNMin = 100
	f, _ := newIndex(t, cfg, nil)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			rows := clustered(r, fmt.Sprintf("w%d", w), "t", 600, uint64(w*1000))
			for i, e := range rows {
				switch i % 5 {
				case 0, 1, 2:
					if err := f.Add("s", e); err != nil {
						t.Error(err)
						return
					}
				case 3:
					hits, err := f.Search(context.Background(), "s", "t", e.Vector, 5)
					if err != nil {
						t.Error(err)
						return
					}
					for j := 1; j < len(hits); j++ {
						if before(hits[j], hits[j-1]) {
							t.Errorf("unsorted %v", hits)
						}
					}
				case 4:
					f.Delete("s", rows[i-4].ID)
				}
			}
		}()
	}
	wg.Wait()
	waitGraphs(t, f)
	st := f.Stats()
	if st.Vectors != 4*600*2/5 || st.Graphs != 1 {
		t.Fatalf("%+v: want %d rows and one graph", st, 4*600*2/5)
	}
	f.mu.RLock()
	s := f.scopes["s"]
	f.mu.RUnlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, a := range s.graphs {
		if len(a.byID) != len(s.ids) {
			t.Fatalf("graph holds %d live nodes for %d rows", len(a.byID), len(s.ids))
		}
		for id, node := range a.byID {
			i, ok := s.pos[id]
			if !ok || a.orders[node] != s.orders[i] {
				t.Fatalf("graph node %d for %s does not match its row", node, id)
			}
		}
	}
}

// FuzzGraphOperations drives adds, replacements, deletes, searches and
// graph builds of one partition that crosses ANNMin back and forth, beside
// an index that only scans: the graph may miss a row, but every hit it
// gives is held by the scan with the same score, and a deleted row never
// comes back.
func FuzzGraphOperations(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8, 0, 9, 3, 0, 2, 1, 4, 4, 1, 3, 2, 2})
	f.Add([]byte{0, 255, 0, 0, 0, 17, 1, 17, 2, 0, 3, 17, 4, 0, 2, 255})
	f.Fuzz(func(t *testing.T, ops []byte) {
		cfg := DefaultConfig()
		cfg.Dim, cfg.IdleTTL, cfg.ANNMin, cfg.MaxPerScope, cfg.MaxVectors = 4, 0, 6, 64, 256
		cfg.ANN.M, cfg.ANN.EfConstruction, cfg.ANN.EfSearch = 2, 4, 4
		g, _ := newIndex(t, cfg, nil)
		cfg.ANNMin = 0
		scan, _ := newIndex(t, cfg, nil)
		ctx := context.Background()
		vec := func(b byte) []float32 {
			return []float32{float32(b%5) - 2, float32(b/5%3) - 1, float32(b % 2), 1}
		}
		var seq uint64
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%5, ops[i+1]
			id := fmt.Sprintf("k%d", arg%24)
			switch op {
			case 0, 1:
				seq++
				e := Entry{ID: id, Tag: "t", Seq: seq, Vector: vec(arg / 24)}
				if err := g.Add("s", e); err != nil {
					t.Fatal(err)
				}
				scan.Add("s", e)
			case 2:
				if g.Delete("s", id) != scan.Delete("s", id) {
					t.Fatalf("Delete(%s) differs between graph and scan", id)
				}
			case 3:
				k := 1 + int(arg%6)
				got, err := g.Search(ctx, "s", "t", vec(arg), k)
				if err != nil {
					t.Fatal(err)
				}
				all, _ := scan.Search(ctx, "s", "t", vec(arg), 64)
				held := map[string]float32{}
				for _, h := range all {
					held[h.ID] = h.Score
				}
				for j, h := range got {
					if s, ok := held[h.ID]; !ok || s != h.Score {
						t.Fatalf("hit %+v: scan holds %v (%v)", h, s, ok)
					}
					if j > 0 && before(h, got[j-1]) {
						t.Fatalf("unsorted %v", got)
					}
				}
				if len(got) > k {
					t.Fatalf("%d hits for k %d", len(got), k)
				}
			case 4:
				if err := g.WaitGraphs(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
