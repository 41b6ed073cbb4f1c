package funnel

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/idem-dev/idem/ledger"
)

// heapInUse is the live heap once it holds still: two readings, each
// after two collections, 20 ms apart and within 32 KiB (the store's
// background work, a memtable flushing, has ended). A reading moves on
// after 200 tries.
func heapInUse() int64 {
	read := func() int64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	last := read()
	for range 200 {
		time.Sleep(20 * time.Millisecond)
		now := read()
		if d := now - last; -32<<10 < d && d < 32<<10 {
			return now
		}
		last = now
	}
	return last
}

// TestViewBytesEstimate: what a view is charged (the bound on the views'
// memory, Config.MaxViewBytes, counts it) is within a tenth of what its
// calls take on the heap, for calls with text (a quantized embedding
// each), without, and once graded (their identity leaves kept).
func TestViewBytesEstimate(t *testing.T) {
	const n = 4000
	for _, tc := range []struct {
		name    string
		vectors bool
	}{{"with text", true}, {"half without text", false}} {
		t.Run(tc.name, func(t *testing.T) {
			store := openBadger(t, t.TempDir())
			led, err := ledger.New(store, ledger.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			fillSession(t, led, n, tc.vectors)
			f := newFunnel(t, led, time.Now, options{})
			// The view is built from the records in memory (what a load
			// applies), with the store closed first, so that nothing of
			// the store's (its caches, a memtable flushing, its
			// compactions) moves the heap between the readings.
			ctx := context.Background()
			recs, err := led.Session(ctx, "acme", "s1", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Close(ctx); err != nil {
				t.Fatal(err)
			}
			var kept int64 // the records' keys, which the view keeps alive
			for i := range recs {
				kept += int64(len(recs[i].Key)+7) &^ 7
			}
			s := newSession()
			before := heapInUse()
			s.mu.Lock()
			f.apply(s, recs)
			s.mu.Unlock()
			loaded := heapInUse() + kept
			runtime.KeepAlive(recs)
			s.mu.Lock()
			charged := s.acct.size()
			entries := len(s.order)
			s.mu.Unlock()
			if entries != n || s.order[0].key != recs[0].Key || s.order[n-1].key != recs[n-1].Key {
				t.Fatalf("view holds %d calls, want %d", entries, n)
			}
			ratio := float64(charged) / float64(loaded-before)
			t.Logf("loaded: charged %d B a call, heap %d B a call (%.2f)", charged/n, (loaded-before)/n, ratio)
			if ratio < 0.9 || ratio > 1.1 {
				t.Errorf("a loaded view is charged %d bytes, and takes %d on the heap: more than a tenth apart", charged, loaded-before)
			}
			// Graded: every call keeps its identity leaves.
			s.mu.Lock()
			for i, en := range s.order {
				call, err := f.canon.Canonicalize(recs[i].Tool, recs[i].Canonical)
				if err != nil {
					s.mu.Unlock()
					t.Fatal(err)
				}
				en.leaves = call.IdentityLeaves()
				s.resize(en)
			}
			added := s.acct.size() - charged
			s.mu.Unlock()
			graded := heapInUse()
			ratio = float64(added) / float64(graded-loaded)
			t.Logf("leaves: charged %d B a call, heap %d B a call (%.2f)", added/n, (graded-loaded)/n, ratio)
			if ratio < 0.9 || ratio > 1.1 {
				t.Errorf("the leaves are charged %d bytes, and take %d on the heap: more than a tenth apart", added, graded-loaded)
			}
			runtime.KeepAlive(recs)
			runtime.KeepAlive(s)
		})
	}
}

// TestViewsDroppedPastTheirBytes: past MaxViewBytes the least recently
// used views are dropped, the view in use is kept even when it alone is
// larger, the bound's total stays the held views' sizes, and a dropped
// session's duplicate is still caught (its view is loaded again).
func TestViewsDroppedPastTheirBytes(t *testing.T) {
	const bound = 64 << 10
	e := newEnv(t, options{maxViewBytes: bound})
	e.run(t, Request{Session: "a", Step: "1", Tool: "send_email", Arguments: []byte(invoice)}, `{"message_id":"m-1"}`)
	for i := range 200 { // one session past the bound on its own
		e.run(t, Request{Session: "b", Step: fmt.Sprint(i), Tool: "get_order", Arguments: fmt.Appendf(nil, `{"order_id":"W%07d"}`, i)}, `{"ok":true}`)
	}
	if err := e.f.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	held := func(sess string) *session {
		ss := e.f.sessions
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if el, ok := ss.m[Scope("acme", sess)]; ok {
			return el.Value.(*sessionSlot).s
		}
		return nil
	}
	b := held("b")
	switch {
	case held("a") != nil:
		t.Fatal("session a's view is held beside b's, which alone is past the bound")
	case b == nil:
		t.Fatal("the view in use (b) was dropped")
	case b.acct.size() <= bound:
		t.Fatalf("b's view is %d bytes: the test needs it past %d", b.acct.size(), bound)
	}
	st := e.f.ViewStats()
	if st.Views != 1 || st.Bytes != b.acct.size() || st.Dropped != 1 {
		t.Errorf("view stats %+v: want 1 view of %d bytes, 1 dropped", st, b.acct.size())
	}

	res := e.check(t, Request{Session: "a", Step: "7", Tool: "send_email", Arguments: []byte(invoiceReworded)})
	want(t, res, Confirm, StageSemantic)
	if held("b") != nil || held("a") == nil {
		t.Error("after a's check: want a's view held and b's dropped")
	}
	if st := e.f.ViewStats(); st.Bytes != held("a").acct.size() || st.Dropped != 2 {
		t.Errorf("view stats %+v: want a's %d bytes, 2 dropped", st, held("a").acct.size())
	}
}

// TestViewChargesOnlyItsEntries: a key claimed again (a new Seq) replaces
// its entry, and the old entry's embedding landing late is not charged;
// a reset view is charged nothing.
func TestViewChargesOnlyItsEntries(t *testing.T) {
	s := newSession()
	vec := [][]float32{syntheticVector(1, 512)}
	old := &entry{key: "wf:1:send_email", tool: "send_email", seq: 1}
	s.add(old)
	again := &entry{key: "wf:1:send_email", tool: "send_email", seq: 2, qv: quantize(vec)}
	s.add(again)
	if got, want := s.acct.size(), int64(again.size()); got != want {
		t.Fatalf("after the key's new claim the view is charged %d, want its entry's %d", got, want)
	}
	old.qv, old.vecs = quantize(vec), vec // the old claim's embedding lands
	s.resize(old)
	if got, want := s.acct.size(), int64(again.size()); got != want {
		t.Errorf("after the old entry's embedding landed the view is charged %d, want %d", got, want)
	}
	s.reset()
	s.resize(again)
	if got := s.acct.size(); got != 0 {
		t.Errorf("a reset view is charged %d, want 0", got)
	}
}

// BenchmarkViewLoad: what a check pays for a dropped view, loading its
// session again from the ledger (Badger on disk): a session of 100 calls
// with text, as bench/memory.sh's, read and applied. Beside it, the
// listing alone (the ledger's share) in the same run.
//
// go test ./funnel -run '^$' -bench ViewLoad -benchmem
func BenchmarkViewLoad(b *testing.B) {
	e := newEnv(b, options{})
	fillSession(b, e.ledger, 100, true)
	ctx := context.Background()
	b.Run("load", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s := newSession()
			if err := e.f.ready(ctx, ctx, s, "acme", "s1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline-listing", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.ledger.Session(ctx, "acme", "s1", 0, loadPage); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestWarmStopsAtTheViewBound: warming at start loads the most recently
// active sessions until the views' memory bound, and keeps those: not
// the least recent ones, which loading them all would leave.
func TestWarmStopsAtTheViewBound(t *testing.T) {
	e := newEnv(t, options{})
	for _, sess := range []string{"old", "mid", "new"} { // least recently active first
		for i := range 50 {
			e.run(t, Request{Session: sess, Workflow: sess, Step: fmt.Sprint(i), Tool: "get_order", Arguments: fmt.Appendf(nil, `{"order_id":"%s-%d"}`, sess, i)}, `{"ok":true}`)
		}
		e.clock.advance(time.Minute)
	}
	first := newFunnel(t, e.ledger, e.clock.now, options{warm: 1}) // warms the newest alone
	if err := first.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	one := first.ViewStats().Bytes // a warmed session's view
	closeFunnel(t, first)
	warm := newFunnel(t, e.ledger, e.clock.now, options{warm: 3, maxViewBytes: one * 3 / 2})
	if err := warm.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, sess := range []string{"old", "mid", "new"} {
		warm.sessions.mu.Lock()
		if _, ok := warm.sessions.m[Scope("acme", sess)]; ok {
			held = append(held, sess)
		}
		warm.sessions.mu.Unlock()
	}
	if fmt.Sprint(held) != "[mid new]" {
		t.Errorf("warmed views held: %v, want [mid new] (the two most recent; one and a half fit)", held)
	}
	// The next check's view pushes out the least recent warmed one.
	checkOn(t, warm, Request{Session: "other", Step: "1", Tool: "get_order", Arguments: []byte(`{"order_id":"x"}`)})
	warm.sessions.mu.Lock()
	_, newHeld := warm.sessions.m[Scope("acme", "new")]
	warm.sessions.mu.Unlock()
	if !newHeld {
		t.Error("a check of another session pushed out the most recent warmed view")
	}
}
