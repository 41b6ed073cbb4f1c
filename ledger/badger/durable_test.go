package badger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/ledger"
)

// A heldSync replaces a store's fsync of its logs: the fsyncs of the
// write-ahead log (the .mem files) are counted, and the first one blocks
// until release, so a test can line operations up behind a round in
// flight.
type heldSync struct {
	entered  chan struct{} // closed when the first WAL fsync has begun
	gate     chan struct{} // closed by release
	released atomic.Bool
	fail     atomic.Pointer[error] // when set, every WAL fsync fails with it
	mu       sync.Mutex            // guards walSyncs
	walSyncs int
}

func holdSyncs(t *testing.T, s *Store) *heldSync {
	h := &heldSync{entered: make(chan struct{}), gate: make(chan struct{})}
	t.Cleanup(func() { // a failed test must still close its store
		if !h.released.Load() {
			h.release()
		}
	})
	s.sync.syncFile = func(f *os.File) error {
		if !strings.HasSuffix(f.Name(), ".mem") {
			return fdatasync(f)
		}
		if err := h.fail.Load(); err != nil {
			return *err
		}
		h.mu.Lock()
		h.walSyncs++
		first := h.walSyncs == 1
		h.mu.Unlock()
		if first {
			close(h.entered)
			<-h.gate
		}
		return fdatasync(f)
	}
	return h
}

func (h *heldSync) release() {
	h.released.Store(true)
	close(h.gate)
}

func (h *heldSync) syncs() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.walSyncs
}

// claimHeld claims req in the background and returns once the claim's
// fsync has begun, held by h (the store's first); the claim's error comes
// on the channel once h releases it.
func claimHeld(ctx context.Context, l *ledger.Ledger, h *heldSync, req ledger.ClaimRequest) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := l.Claim(ctx, req)
		done <- err
	}()
	<-h.entered
	return done
}

// queued is how many operations wait for the store's next sync round.
func queued(s *Store) int {
	s.sync.mu.Lock()
	defer s.sync.mu.Unlock()
	return s.sync.next.waiters
}

// waitFor polls cond; the deadline only turns a hang into a failure.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// within runs fn and fails the test if it has not returned after a long
// while: for an operation that must not wait for a blocked fsync (which
// the test releases only after).
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s waited for an fsync that does not concern it", what)
	}
}

func claimReq(session, key string) ledger.ClaimRequest {
	return ledger.ClaimRequest{Tenant: "t", Key: key, Session: session, Workflow: "w-" + session, Tool: "charge", Canonical: []byte(`{"id":"` + key + `"}`)}
}

// TestConcurrentWritesShareAnFsync: claims that arrive while an fsync is
// in flight are all acknowledged by the next one: one fsync of the log
// for eight claims, not eight.
func TestConcurrentWritesShareAnFsync(t *testing.T) {
	s := openStore(t, t.TempDir(), true)
	l := newLedger(t, s, nil)
	ctx := t.Context()
	h := holdSyncs(t, s)

	first := claimHeld(ctx, l, h, claimReq("s0", "k0")) // its fsync is in flight, and held

	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	claims := make([]ledger.Claim, n)
	for i := range n {
		wg.Go(func() {
			claims[i], errs[i] = l.Claim(ctx, claimReq(fmt.Sprint("s", i+1), fmt.Sprint("k", i+1)))
		})
	}
	waitFor(t, "eight claims waiting for the next round", func() bool { return queued(s) == n })
	if got := h.syncs(); got != 1 {
		t.Fatalf("%d fsyncs of the log before the held one ended, want 1", got)
	}
	h.release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if errs[i] != nil || claims[i].Outcome != ledger.Claimed {
			t.Fatalf("claim %d: %v %v", i+1, claims[i].Outcome, errs[i])
		}
	}
	if got := h.syncs(); got != 2 {
		t.Errorf("9 claims took %d fsyncs of the log, want 2 (the held one, then one for the eight behind it)", got)
	}
}

// TestSyncStats: what SyncStats reports of the rounds, on a clock the
// test moves: a claim whose fsync is held for a second, and eight that
// came meanwhile and share the next round, are two rounds of nine
// operations; the held round took the second, and each of the nine
// waited it. A store without sync writes reports none.
func TestSyncStats(t *testing.T) {
	s := openStore(t, t.TempDir(), true)
	l := newLedger(t, s, nil)
	ctx := t.Context()
	var clock atomic.Int64 // ns
	s.sync.now = func() time.Time { return time.Unix(0, clock.Load()) }
	if st, on := s.SyncStats(); !on || st != (ledger.SyncStats{}) {
		t.Fatalf("a store just opened: %+v, %v; want nothing yet, and on", st, on)
	}
	h := holdSyncs(t, s)
	first := claimHeld(ctx, l, h, claimReq("s0", "k0"))
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := l.Claim(ctx, claimReq(fmt.Sprint("s", i+1), fmt.Sprint("k", i+1))); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "eight claims waiting for the next round", func() bool { return queued(s) == n })
	clock.Add(int64(time.Second))
	h.release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	st, _ := s.SyncStats()
	if want := (ledger.SyncStats{Rounds: 2, Operations: n + 1, Seconds: 1, WaitSeconds: n + 1}); st != want {
		t.Errorf("after a held round and the one behind it: %+v, want %+v", st, want)
	}

	off := openStore(t, t.TempDir(), false)
	if _, err := newLedger(t, off, nil).Claim(ctx, claimReq("s", "k")); err != nil {
		t.Fatal(err)
	}
	if st, on := off.SyncStats(); on || st != (ledger.SyncStats{}) {
		t.Errorf("sync writes off: %+v, %v; want nothing, and off", st, on)
	}
}

// TestReadsDoNotWaitForOtherWrites: while another session's claim waits
// for its fsync, reads of durable records answer; a read of the record
// that claim wrote answers only once it is durable; a write waits.
func TestReadsDoNotWaitForOtherWrites(t *testing.T) {
	s := openStore(t, t.TempDir(), true)
	l := newLedger(t, s, nil)
	ctx := t.Context()
	c, err := l.Claim(ctx, claimReq("a", "done"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Complete(ctx, "t", "done", c.Token, json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	h := holdSyncs(t, s)

	pending := claimHeld(ctx, l, h, claimReq("b", "new"))

	within(t, "a key hit", func() {
		got, err := l.Get(ctx, "t", "done")
		if err != nil || got.Outcome != ledger.Duplicate {
			t.Errorf("get of a completed key: %v %v", got.Outcome, err)
		}
	})
	within(t, "a session listing", func() {
		recs, err := l.Session(ctx, "t", "a", 0, 0)
		if err != nil || len(recs) != 1 {
			t.Errorf("session a lists %d records (%v), want 1", len(recs), err)
		}
	})
	within(t, "a claim of a completed key", func() {
		got, err := l.Claim(ctx, claimReq("a", "done"))
		if err != nil || got.Outcome != ledger.Duplicate {
			t.Errorf("claim of a completed key: %v %v", got.Outcome, err)
		}
	})

	type answer struct {
		outcome       ledger.Outcome
		err           error
		afterTheFsync bool
	}
	read := make(chan answer, 1)
	go func() { // the record the held claim wrote: not durable yet
		got, err := l.Get(ctx, "t", "new")
		read <- answer{got.Outcome, err, h.released.Load()}
	}()
	write := make(chan answer, 1)
	go func() {
		_, err := l.Claim(ctx, claimReq("c", "other"))
		write <- answer{err: err, afterTheFsync: h.released.Load()}
	}()
	waitFor(t, "the read and the write waiting for the next round", func() bool { return queued(s) == 2 })
	h.release()
	if err := <-pending; err != nil {
		t.Fatal(err)
	}
	if a := <-read; a.err != nil || a.outcome != ledger.InProgress || !a.afterTheFsync {
		t.Errorf("read of the claim in flight: %v %v, answered after its fsync: %v", a.outcome, a.err, a.afterTheFsync)
	}
	if a := <-write; a.err != nil || !a.afterTheFsync {
		t.Errorf("claim behind the held fsync: %v, acknowledged after it: %v", a.err, a.afterTheFsync)
	}
}

// TestFailedFsyncFailsWrites: a write whose fsync fails is not
// acknowledged, and neither is any later write (after a failed fsync the
// kernel may have dropped the pages, so a later success proves nothing);
// what was durable before stays readable, and what the failed write left
// in memory is not handed out.
func TestFailedFsyncFailsWrites(t *testing.T) {
	s := openStore(t, t.TempDir(), true)
	l := newLedger(t, s, nil)
	ctx := t.Context()
	c, err := l.Claim(ctx, claimReq("a", "before"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Complete(ctx, "t", "before", c.Token, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	h := holdSyncs(t, s)
	h.release() // no holding here
	eio := errors.New("input/output error")
	h.fail.Store(&eio)

	if _, err := l.Claim(ctx, claimReq("a", "lost")); !errors.Is(err, eio) {
		t.Fatalf("claim with a failing fsync: %v, want the fsync's error", err)
	}
	h.fail.Store(nil) // the disk "recovers": the store must not believe it
	if _, err := l.Claim(ctx, claimReq("b", "after")); !errors.Is(err, eio) {
		t.Errorf("claim after a failed fsync: %v, want the first failure", err)
	}
	if got, err := l.Get(ctx, "t", "before"); err != nil || got.Outcome != ledger.Duplicate {
		t.Errorf("durable record after a failed fsync: %v %v", got.Outcome, err)
	}
	if _, err := l.Get(ctx, "t", "lost"); !errors.Is(err, eio) {
		t.Errorf("get of the record whose fsync failed: %v, want the failure", err)
	}
}

// TestCloseAcknowledgesWaiters: an operation still waiting for its fsync
// when the store closes gets it (and its acknowledgement) before the
// store goes; an operation after Close fails.
func TestCloseAcknowledgesWaiters(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(DefaultConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger(t, s, nil)
	h := holdSyncs(t, s)
	first := claimHeld(context.Background(), l, h, claimReq("a", "k0"))
	second := make(chan error, 1)
	go func() {
		_, err := l.Claim(context.Background(), claimReq("b", "k1"))
		second <- err
	}()
	waitFor(t, "a claim waiting for the next round", func() bool { return queued(s) == 1 })
	closed := make(chan error, 1)
	go func() { closed <- s.Close(context.Background()) }()
	h.release()
	if err := errors.Join(<-first, <-second, <-closed); err != nil {
		t.Fatal(err)
	}
	if h.syncs() != 2 {
		t.Errorf("%d fsyncs of the log, want 2: the held one, then the waiting claim's", h.syncs())
	}
	if _, err := l.Claim(context.Background(), claimReq("c", "k2")); err == nil {
		t.Error("a claim on a closed store succeeded")
	}
	s2 := openStore(t, dir, true)
	for _, k := range []string{"k0", "k1"} {
		if _, err := s2.Get(t.Context(), "t", k); err != nil {
			t.Errorf("%s after reopening: %v", k, err)
		}
	}
}

// TestSyncRoundPicksTheLogs: a round fsyncs the write-ahead log being
// written every time, and a log that stopped growing (a memtable rotated
// since) once more, then never again; nothing else.
func TestSyncRoundPicksTheLogs(t *testing.T) {
	s := openStore(t, t.TempDir(), false) // only for the read timestamp
	dir := t.TempDir()
	g := newGroupSync(s.db, dir)
	var synced []string
	g.syncFile = func(f *os.File) error {
		synced = append(synced, filepath.Base(f.Name()))
		return nil
	}
	create := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		name   string
		before func()
		want   []string
	}{
		{"the log being written", func() { create("00001.mem"); create("000001.vlog"); create("MANIFEST"); create("000001.sst") }, []string{"00001.mem"}},
		{"again", func() {}, []string{"00001.mem"}},
		{"a memtable rotated: the old log once more", func() { create("00002.mem") }, []string{"00001.mem", "00002.mem"}},
		{"the old log is settled", func() {}, []string{"00002.mem"}},
		{"flushed and removed", func() { os.Remove(filepath.Join(dir, "00001.mem")) }, []string{"00002.mem"}},
		{"two rotations between rounds", func() { create("00003.mem"); create("00004.mem") }, []string{"00002.mem", "00003.mem", "00004.mem"}},
	} {
		step.before()
		synced = nil
		if _, err := g.round(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if !slices.Equal(synced, step.want) {
			t.Errorf("%s: the round fsynced %v, want %v", step.name, synced, step.want)
		}
	}
}

// TestSyncRoundCostDoesNotGrowWithTheTables: a round after the first
// does not list the directory, so its work does not grow with the tables
// a growing store keeps beside its logs (with 5,000 of them a listing
// allocates over 5,000 objects a round).
func TestSyncRoundCostDoesNotGrowWithTheTables(t *testing.T) {
	s := openStore(t, t.TempDir(), false) // only for the read timestamp
	g := syncRoundWithTables(t, s, 5000)
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := g.round(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 100 {
		t.Errorf("a round allocated %.0f objects beside 5,000 tables, want at most 100", allocs)
	}
}

// syncRoundWithTables returns a groupSync over a directory holding one
// write-ahead log and n table files, its fsyncs counted but not made, its
// first round (the one that lists the directory) done.
func syncRoundWithTables(tb testing.TB, s *Store, n int) *groupSync {
	dir := tb.TempDir()
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%06d.sst", i)), nil, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "00001.mem"), nil, 0o644); err != nil {
		tb.Fatal(err)
	}
	g := newGroupSync(s.db, dir)
	g.syncFile = func(*os.File) error { return nil }
	if _, err := g.round(); err != nil {
		tb.Fatal(err)
	}
	return g
}

// TestEmptyLogAfterAPowerCut: a power cut while Badger creates a
// write-ahead log can leave it a file of 0 bytes; the store still opens,
// with every record, instead of refusing to start.
func TestEmptyLogAfterAPowerCut(t *testing.T) {
	for _, sync := range []bool{true, false} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, sync)
			l := newLedger(t, s, nil)
			ctx := t.Context()
			c, err := l.Claim(ctx, claimReq("a", "k"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Complete(ctx, "t", "k", c.Token, json.RawMessage(`{"sent":1}`)); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			newest := 0
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if n, ok := parseLogName(e.Name()); ok {
					newest = max(newest, n.fid)
				}
			}
			empty := filepath.Join(dir, fmt.Sprintf("%05d.mem", newest+1))
			if err := os.WriteFile(empty, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			s2, err := Open(DefaultConfig(dir))
			if err != nil {
				t.Fatalf("open with an empty write-ahead log: %v", err)
			}
			defer s2.Close(context.Background())
			got, err := newLedger(t, s2, nil).Get(ctx, "t", "k")
			if err != nil || got.Outcome != ledger.Duplicate || string(got.Record.Result) != `{"sent":1}` {
				t.Fatalf("the record after reopening: %v %s %v", got.Outcome, got.Record.Result, err)
			}
		})
	}
}

// TestSyncDelayGathersWritesComingOneAtATime: with Config.SyncDelay, once
// two sessions are writing, claims that come one after the other while a
// round waits share its one fsync (without it, each would take its own); a
// claim answers only when that round has ended.
func TestSyncDelayGathersWritesComingOneAtATime(t *testing.T) {
	cfg := DefaultConfig(t.TempDir())
	cfg.SyncDelay = 5 * time.Millisecond
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	var syncs atomic.Int64
	s.sync.syncFile = func(f *os.File) error {
		if strings.HasSuffix(f.Name(), ".mem") {
			syncs.Add(1)
		}
		return fdatasync(f)
	}
	asked, fire := make(chan time.Duration, 1), make(chan time.Time)
	s.sync.after = func(d time.Duration) <-chan time.Time { asked <- d; return fire }
	l := newLedger(t, s, nil)
	ctx := t.Context()
	// Another session wrote a moment before: company.
	if _, err := l.Claim(ctx, claimReq("earlier", "k-earlier")); err != nil {
		t.Fatal(err)
	}

	const n = 3
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := l.Claim(ctx, claimReq(fmt.Sprint("s", i), fmt.Sprint("k", i)))
			errs <- err
		}()
		if i == 0 {
			if d := <-asked; d != cfg.SyncDelay {
				t.Fatalf("the round waits %v, want SyncDelay %v", d, cfg.SyncDelay)
			}
		}
		waitFor(t, fmt.Sprintf("%d claims waiting in the delayed round", i+1), func() bool { return queued(s) == i+1 })
	}
	select {
	case err := <-errs:
		t.Fatalf("a claim answered before its round's fsync (err %v)", err)
	default:
	}
	before := syncs.Load()
	close(fire)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := syncs.Load() - before; got != 1 {
		t.Errorf("%d claims that came one at a time took %d fsyncs of the log, want 1", n, got)
	}
}

func TestSyncDelayValidated(t *testing.T) {
	for _, d := range []time.Duration{-time.Millisecond, time.Second} {
		cfg := DefaultConfig(t.TempDir())
		cfg.SyncDelay = d
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "SyncDelay") {
			t.Errorf("SyncDelay %v: %v, want an error naming SyncDelay", d, err)
		}
	}
}

// TestSyncDelayNotForAWriterAlone: a session writing alone never waits for
// company that is not there: with Config.SyncDelay its writes still start
// a round at once.
func TestSyncDelayNotForAWriterAlone(t *testing.T) {
	cfg := DefaultConfig(t.TempDir())
	cfg.SyncDelay = 50 * time.Millisecond
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	var delayed atomic.Int64
	s.sync.after = func(d time.Duration) <-chan time.Time { delayed.Add(1); return time.After(d) }
	l := newLedger(t, s, nil)
	ctx := t.Context()
	for i := range 5 {
		c, err := l.Claim(ctx, claimReq("alone", fmt.Sprint("k", i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Complete(ctx, "t", fmt.Sprint("k", i), c.Token, json.RawMessage(`{"ok":true}`)); err != nil {
			t.Fatal(err)
		}
	}
	if n := delayed.Load(); n != 0 {
		t.Errorf("one session's 10 writes waited for company %d times, want 0", n)
	}
	// A second session: now rounds wait.
	if _, err := l.Claim(ctx, claimReq("other", "k-other")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claim(ctx, claimReq("alone", "k-again")); err != nil {
		t.Fatal(err)
	}
	if delayed.Load() == 0 {
		t.Error("with two sessions writing, no round waited for company")
	}
}
