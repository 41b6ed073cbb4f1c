package badger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/idem-dev/idem/internal/half"
	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/ledger/ledgertest"
)

// openStore opens a store in dir and closes it when the test ends.
func openStore(t testing.TB, dir string, sync bool) *Store {
	t.Helper()
	cfg := DefaultConfig(dir)
	cfg.SyncWrites = sync
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func newLedger(t testing.TB, s ledger.Store, mutate func(*ledger.Config)) *ledger.Ledger {
	t.Helper()
	cfg := ledger.DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	l, err := ledger.New(s, cfg)
	if err != nil {
		t.Fatalf("ledger.New: %v", err)
	}
	return l
}

// TestConformance runs the ledger's conformance suite on real Badger with
// sync writes on (the default).
func TestConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledger.Store { return openStore(t, t.TempDir(), true) })
}

// TestRecordsSurviveReopen: a closed and reopened store has every record,
// byte for byte, and keeps numbering the session after the last arrival.
func TestRecordsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, true)
	l := newLedger(t, s, nil)
	ctx := t.Context()
	var last ledger.Claim
	for i := range 3 {
		c, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: fmt.Sprint("k", i), Session: "s", Embedding: []float32{1, 2, 3}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Complete(ctx, "t", c.Record.Key, c.Token, json.RawMessage(`{"i":`+fmt.Sprint(i)+`}`)); err != nil {
			t.Fatal(err)
		}
		last = c
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, dir, true)
	l2 := newLedger(t, s2, nil)
	for i := range 3 {
		c, err := l2.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: fmt.Sprint("k", i), Session: "s"})
		if err != nil || c.Outcome != ledger.Duplicate || string(c.Record.Result) != `{"i":`+fmt.Sprint(i)+`}` || len(c.Record.Embedding) != 3 {
			t.Fatalf("after reopen k%d: %v %s %v", i, c.Outcome, c.Record.Result, err)
		}
	}
	c, err := l2.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "k3", Session: "s"})
	if err != nil || c.Record.Seq <= last.Record.Seq {
		t.Fatalf("first arrival after reopen has seq %d, last before was %d (%v)", c.Record.Seq, last.Record.Seq, err)
	}
}

// TestRetentionRemovesRecords: Badger's TTL really deletes a finished
// record (and its listings) after a short retention; no ledger clock
// involved. Badger's TTL has whole-second resolution, so this takes ~2 s.
func TestRetentionRemovesRecords(t *testing.T) {
	s := openStore(t, t.TempDir(), false)
	ctx := t.Context()
	l := newLedger(t, s, func(c *ledger.Config) { c.Retention = time.Second })
	c, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "k", Session: "s", Workflow: "w"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := l.Complete(ctx, "t", "k", c.Token, json.RawMessage(`1`))
	if err != nil {
		t.Fatal(err)
	}
	// Until RetainUntil the store must keep it.
	if _, err := s.Get(ctx, "t", "k"); err != nil && time.Now().UnixMilli() < rec.RetainUntil {
		t.Fatalf("record gone before its retention: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.Get(ctx, "t", "k")
		if errors.Is(err, ledger.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("record still stored 10 s after a 1 s retention")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if time.Now().UnixMilli() < rec.RetainUntil {
		t.Fatalf("record vanished before RetainUntil")
	}
	if recs, _ := s.ListSession(ctx, "t", "s", 0, 0); len(recs) != 0 {
		t.Errorf("session still lists %d records", len(recs))
	}
	if recs, _ := s.ListWorkflow(ctx, "t", "w"); len(recs) != 0 {
		t.Errorf("workflow still lists %d records", len(recs))
	}
}

func TestExpiresAtRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want uint64
	}{{0, 0}, {1000, 1}, {1001, 2}, {1999, 2}, {1_700_000_000_123, 1_700_000_001}} {
		if got := expiresAt(tc.ms); got != tc.want {
			t.Errorf("expiresAt(%d) = %d, want %d", tc.ms, got, tc.want)
		}
	}
}

// TestRace: 64 goroutines claim the same 1,000 keys concurrently. Exactly
// one claim per key wins and every loser is told the winner's state. Sync
// writes are off here: the race is decided by Badger's conflict detection,
// which sync does not change, and fsyncs would only make the test slow.
func TestRace(t *testing.T) {
	s := openStore(t, t.TempDir(), false)
	ledgertest.Race(t, []*ledger.Ledger{newLedger(t, s, nil)}, 64, 1000)
}

// TestCorruptRecordIsReported: a damaged value reads as ledger.ErrCorrupt,
// never as a different record.
func TestCorruptRecordIsReported(t *testing.T) {
	rec := ledger.Record{Tenant: "t", Key: "k", Status: ledger.StatusSuccess, Result: json.RawMessage(`{"a":1}`), Embedding: []float32{1}}
	good := encodeRecord(nil, &rec)
	back, err := decodeRecord(good)
	if err != nil || string(back.Result) != `{"a":1}` || back.Key != "k" {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x10
		if _, err := decodeRecord(bad); !errors.Is(err, ledger.ErrCorrupt) {
			t.Fatalf("flipping byte %d: %v, want ErrCorrupt", i, err)
		}
	}
	for n := range len(good) {
		if _, err := decodeRecord(good[:n]); !errors.Is(err, ledger.ErrCorrupt) {
			t.Fatalf("truncated to %d: %v, want ErrCorrupt", n, err)
		}
	}
	s := openStore(t, t.TempDir(), false)
	bad := bytes.Clone(good)
	bad[3] ^= 1
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(recordKey("t", "k"), bad) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "t", "k"); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("Get of a corrupt record: %v", err)
	}
}

// TestCorruptRecordOnDisk: a record whose bytes were damaged at rest (the
// store closed, the value rewritten in the directory with one byte
// flipped, the store reopened) reads as a *ledger.CorruptError naming its
// key, its session and workflow still list, and Forget removes it.
func TestCorruptRecordOnDisk(t *testing.T) {
	ledgertest.Corrupt(t, func(t *testing.T) ledger.Store { return reopenable(t, t.TempDir()) },
		func(t *testing.T, st ledger.Store, tenant, key string) {
			r := st.(*reopenableStore)
			if err := r.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			db, err := badger.Open(badger.DefaultOptions(r.dir).WithLogger(nil))
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(txn *badger.Txn) error {
				item, err := txn.Get(recordKey(tenant, key))
				if err != nil {
					return err
				}
				v, err := item.ValueCopy(nil)
				if err != nil {
					return err
				}
				v[len(v)/2] ^= 0x40
				return txn.SetEntry(badger.NewEntry(recordKey(tenant, key), v).WithTTL(time.Hour))
			})
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			r.Store = openStore(t, r.dir, true)
		})
}

// reopenableStore is a Store whose directory a test may close, damage and
// reopen under the same value.
type reopenableStore struct {
	*Store
	dir string
}

func reopenable(t *testing.T, dir string) *reopenableStore {
	return &reopenableStore{Store: openStore(t, dir, true), dir: dir}
}

// FuzzDecodeRecord: whatever the bytes, decoding never panics and fails
// only with ErrCorrupt; what decodes re-encodes within encodedBound, in the
// current version, to a record that decodes as the same. The current
// version re-encodes to the same bytes, but for an embedding of halves
// stored as floats, which shrinks; version 1 has no Confirmed.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(nil, &ledger.Record{Tenant: "t", Key: "k", Status: ledger.StatusPending, Embedding: []float32{1, 2}}))
	f.Add(encodeRecord(nil, &ledger.Record{Tenant: "t", Key: "k", Status: ledger.StatusPending, Embedding: []float32{0.1, 2}}))
	f.Add(encodeRecord(nil, &ledger.Record{Tenant: "t", Key: "k", Status: ledger.StatusSuccess, Result: json.RawMessage(`1`), Confirmed: "w:1:send_email"}))
	f.Add(golden(f, goldenV1))
	f.Add(golden(f, goldenV2))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			if !errors.Is(err, ledger.ErrCorrupt) {
				t.Fatalf("error not matching ErrCorrupt: %v", err)
			}
			return
		}
		again := encodeRecord(nil, &r)
		if len(again) > encodedBound(&r) {
			t.Fatalf("encoding of %d bytes past encodedBound %d", len(again), encodedBound(&r))
		}
		back, err := decodeRecord(again)
		if err != nil || again[0] != codecVersion || !sameRecord(back, r) {
			t.Fatalf("re-encoded in version %d, decodes as %+v (%v), want %+v", again[0], back, err, r)
		}
		switch b[0] {
		case codecVersion:
			if !bytes.Equal(again, b) && !(len(again) < len(b) && half.Exact(r.Embedding)) {
				t.Fatalf("decoded record re-encodes differently")
			}
		case codecVersionV2:
		case codecVersionV1:
			if r.Confirmed != "" {
				t.Fatalf("version 1 record with a Confirmed %q", r.Confirmed)
			}
		default:
			t.Fatalf("decoded a record of version %d", b[0])
		}
	})
}

// sameRecord compares records with their embeddings bit for bit (a NaN
// is the same NaN).
func sameRecord(a, b ledger.Record) bool {
	bits := func(v []float32) []uint32 {
		out := make([]uint32, len(v))
		for i, f := range v {
			out[i] = math.Float32bits(f)
		}
		return out
	}
	if !slices.Equal(bits(a.Embedding), bits(b.Embedding)) {
		return false
	}
	a.Embedding, b.Embedding = nil, nil
	return reflect.DeepEqual(a, b)
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		field  string
	}{
		{"no dir", func(c *Config) { c.Dir = "" }, "Dir"},
		{"zero GC interval", func(c *Config) { c.GCInterval = 0 }, "GCInterval"},
		{"discard ratio 1", func(c *Config) { c.GCDiscardRatio = 1 }, "GCDiscardRatio"},
		{"tiny memtable", func(c *Config) { c.MemTableSize = 1024 }, "MemTableSize"},
		{"no memtables", func(c *Config) { c.NumMemtables = 0 }, "NumMemtables"},
		{"huge value threshold", func(c *Config) { c.ValueThreshold = 2 << 20 }, "ValueThreshold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig(t.TempDir())
			tc.mutate(&cfg)
			_, err := Open(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Open: %v, want an error naming %s", err, tc.field)
			}
		})
	}
	if err := DefaultConfig("x").Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
}

// TestBadgerLogsGoToSlog: Badger's own chatter goes to the injected
// logger, not to stderr.
func TestBadgerLogsGoToSlog(t *testing.T) {
	var buf syncBuffer
	cfg := DefaultConfig(t.TempDir())
	cfg.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "component=badger") {
		t.Fatalf("no Badger log lines reached slog: %q", buf.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCloseStopsGC: Close returns with a short GC interval running, and a
// second Close is harmless.
func TestCloseStopsGC(t *testing.T) {
	cfg := DefaultConfig(t.TempDir())
	cfg.GCInterval = time.Millisecond
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // let a few GC passes run
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	default:
		t.Fatal("GC goroutine still running after Close")
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestLargeResult: a result at the default 1 MiB bound is stored (in
// pieces) and replayed byte for byte, also after a reopen; one byte more
// is refused with ErrTooLarge.
func TestLargeResult(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, true)
	l := newLedger(t, s, nil)
	ctx := t.Context()
	limit := ledger.DefaultConfig().MaxResultBytes
	result := json.RawMessage(`"` + strings.Repeat("r", limit-2) + `"`)
	c, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "big", Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	tooBig := append(bytes.Clone(result[:len(result)-1]), 'r', '"')
	if _, err := l.Complete(ctx, "t", "big", c.Token, tooBig); !errors.Is(err, ledger.ErrTooLarge) {
		t.Fatalf("Complete with %d bytes: %v, want ErrTooLarge", len(tooBig), err)
	}
	if _, err := l.Complete(ctx, "t", "big", c.Token, result); err != nil {
		t.Fatalf("Complete with %d bytes: %v", len(result), err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l = newLedger(t, openStore(t, dir, true), nil)
	got, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "big", Session: "s"})
	if err != nil || got.Outcome != ledger.Duplicate || !bytes.Equal(got.Record.Result, result) {
		t.Fatalf("replay of the 1 MiB result: %v, %d bytes, %v", got.Outcome, len(got.Record.Result), err)
	}
}

// TestSmallMemoryAtOpen: the default options keep an open store's heap
// near 11 MiB (Badger's own defaults take ~86 MiB).
func TestSmallMemoryAtOpen(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := openStore(t, t.TempDir(), true)
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap in use grew by %.1f MiB at open", float64(grown)/(1<<20))
	if grown > 32<<20 {
		t.Fatalf("opening a store took %.1f MiB of heap, want about 11", float64(grown)/(1<<20))
	}
	runtime.KeepAlive(s)
}

// TestCloseGivesUpWhenTheDiskIsGone: with its directory removed, Badger's
// flush on close retries forever; Close returns when its ctx ends, so a
// process can still shut down.
func TestCloseGivesUpWhenTheDiskIsGone(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(DefaultConfig(dir)) // not openStore: its cleanup expects a clean close
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger(t, s, nil)
	if _, err := l.Claim(t.Context(), ledger.ClaimRequest{Tenant: "t", Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// Badger's flush goroutine keeps retrying until the test binary ends.
	if err := s.Close(ctx); err == nil {
		t.Fatal("Close with the directory gone reported success")
	}
}

// TestSessionTailListsAsTheIterator: a listing near the session's end
// (read number by number from the counter this store keeps) lists exactly
// what a listing by iteration does (after a reopen, with no counter kept):
// with records forgotten, and a key failed transiently and claimed again
// under a new number.
func TestSessionTailListsAsTheIterator(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, true)
	l := newLedger(t, s, nil)
	ctx := t.Context()
	for i := range 40 {
		key := fmt.Sprint("k", i)
		c, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: key, Session: "s"})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case i%7 == 3:
			if err := l.Forget(ctx, "t", key, true); err != nil {
				t.Fatal(err)
			}
		case i%9 == 4:
			if _, err := l.Fail(ctx, "t", key, c.Token, json.RawMessage(`"503"`), ledger.ClassTransient); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: key, Session: "s"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	list := func(s *Store, after uint64, limit int) string {
		recs, err := s.ListSession(ctx, "t", "s", after, limit)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, r := range recs {
			fmt.Fprintf(&b, "%s@%d ", r.Key, r.Seq)
		}
		return b.String()
	}
	var tail []string
	for after := range uint64(50) {
		tail = append(tail, list(s, after, 0), list(s, after, 3))
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, true)
	for after := range uint64(50) {
		if got, want := tail[2*after], list(s, after, 0); got != want {
			t.Errorf("after %d: the tail lists %q, iteration %q", after, got, want)
		}
		if got, want := tail[2*after+1], list(s, after, 3); got != want {
			t.Errorf("after %d, limit 3: the tail lists %q, iteration %q", after, got, want)
		}
	}
}

// formatted counts how often it is formatted.
type formatted struct{ n *int }

func (f formatted) String() string { *f.n++; return "x" }

// TestBadgerLogger: Badger's errors and warnings reach the log at their
// level and its chatter at debug, and a line below the log's level is not
// even formatted (Badger writes some for every batch of commits).
func TestBadgerLogger(t *testing.T) {
	var out bytes.Buffer
	n := 0
	l := badgerLogger{slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	l.Debugf("writeRequests called %v\n", formatted{&n})
	l.Infof("flushed %v", formatted{&n})
	if out.Len() != 0 || n != 0 {
		t.Fatalf("debug and info lines at level info: logged %q, formatted %d times", out.String(), n)
	}
	l.Warningf("slow %v\n", formatted{&n})
	l.Errorf("failed %v", formatted{&n})
	got := out.String()
	if n != 2 || !strings.Contains(got, `level=WARN msg="slow x"`) || !strings.Contains(got, `level=ERROR msg="failed x"`) {
		t.Fatalf("formatted %d times, logged %q", n, got)
	}
}
