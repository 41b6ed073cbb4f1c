package badger

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/idem-dev/idem/ledger"
)

// pieceCount counts the piece entries stored for (tenant, key).
func pieceCount(t *testing.T, s *Store, tenant, key string) int {
	t.Helper()
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: appendLP(appendLP([]byte{kindPiece}, tenant), key), PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func valueLogBytes(t *testing.T, dir string) int64 {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, l := range logs {
		st, err := os.Stat(l)
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// TestLargeRecordsInPieces: a record past ValueThreshold (a large call, a
// large result) is stored in pieces in the write-ahead log, never in
// Badger's value log; it reads back whole, in every listing too (session, workflow, tenant); a new version
// takes the old one's pieces with it, and forgetting the record removes
// them all.
func TestLargeRecordsInPieces(t *testing.T) {
	ctx := t.Context()
	empty := t.TempDir() // a closed store that never wrote: its value log's size
	if err := openStore(t, empty, true).Close(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := valueLogBytes(t, empty)
	dir := t.TempDir()
	s := openStore(t, dir, true)
	l := newLedger(t, s, nil)

	call := []byte(`{"body":"` + strings.Repeat("c", 200<<10) + `"}`)
	result := json.RawMessage(`"` + strings.Repeat("r", 300<<10) + `"`)
	c, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "big", Session: "s", Workflow: "w", Canonical: call, Confirmed: "w:1:upload"})
	if err != nil || c.Outcome != ledger.Claimed {
		t.Fatalf("claim: %v %v", c.Outcome, err)
	}
	claimed := pieceCount(t, s, "t", "big")
	if claimed < 2 {
		t.Fatalf("a 200 KiB call is stored in %d pieces", claimed)
	}
	if _, err := l.Complete(ctx, "t", "big", c.Token, result); err != nil {
		t.Fatal(err)
	}
	if got := pieceCount(t, s, "t", "big"); got <= claimed {
		t.Errorf("the completed record (200 + 300 KiB) has %d pieces stored, the claim had %d: the claim's were not replaced", got, claimed)
	}
	got, err := l.Get(ctx, "t", "big")
	if err != nil || got.Outcome != ledger.Duplicate || string(got.Record.Result) != string(result) || string(got.Record.Canonical) != string(call) {
		t.Fatalf("read back: %v, %d-byte result, %v", got.Outcome, len(got.Record.Result), err)
	}
	if got.Record.Confirmed != "w:1:upload" {
		t.Errorf("read back confirmed %q, want the claim's w:1:upload", got.Record.Confirmed)
	}
	recs, err := l.Session(ctx, "t", "s", 0, 0)
	if err != nil || len(recs) != 1 || recs[0].Seq != c.Record.Seq || string(recs[0].Result) != string(result) {
		t.Fatalf("session listing: %d records, %v", len(recs), err)
	}
	recs, err = s.ListTenant(ctx, "t", 0, 0) // what a tenant-wide scope is rebuilt from
	if err != nil || len(recs) != 1 || string(recs[0].Result) != string(result) || string(recs[0].Canonical) != string(call) {
		t.Fatalf("tenant listing: %d records, %v", len(recs), err)
	}
	recs, err = s.ListWorkflow(ctx, "t", "w")
	if err != nil || len(recs) != 1 || string(recs[0].Result) != string(result) {
		t.Fatalf("workflow listing: %d records, %v", len(recs), err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if grown := valueLogBytes(t, dir) - fresh; grown != 0 {
		t.Errorf("the value log grew by %d bytes", grown)
	}

	s = openStore(t, dir, true)
	l = newLedger(t, s, nil)
	if got, err := l.Get(ctx, "t", "big"); err != nil || string(got.Record.Result) != string(result) || got.Record.Confirmed != "w:1:upload" {
		t.Fatalf("after reopening: %v", err)
	}
	if err := l.Forget(ctx, "t", "big", false); err != nil {
		t.Fatal(err)
	}
	if n := pieceCount(t, s, "t", "big"); n != 0 {
		t.Errorf("%d pieces left after the record was forgotten", n)
	}
}

// TestMissingPieceIsCorrupt: a stub whose pieces are not all there reads
// as a corrupt record, never as a shorter one, and can be deleted.
func TestMissingPieceIsCorrupt(t *testing.T) {
	s := openStore(t, t.TempDir(), true)
	l := newLedger(t, s, nil)
	ctx := t.Context()
	c, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "big", Session: "s", Canonical: []byte(`"` + strings.Repeat("c", 150<<10) + `"`)})
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.View(func(txn *badger.Txn) error {
		_, meta, err := getRecord(txn, "t", "big")
		if err != nil || meta.stub == nil {
			t.Fatalf("the claim is not stored in pieces: %v", err)
		}
		return s.db.Update(func(w *badger.Txn) error { return w.Delete(pieceKey("t", "big", meta.stub.id, 1)) })
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "t", "big"); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("get with a piece missing: %v, want ErrCorrupt", err)
	}
	if err := s.Delete(ctx, "t", "big"); err != nil {
		t.Fatalf("delete of the corrupt record: %v", err)
	}
	if n := pieceCount(t, s, "t", "big"); n != 0 {
		t.Errorf("%d pieces left after deleting the corrupt record", n)
	}
	if c2, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: "big"}); err != nil || c2.Outcome != ledger.Claimed || c2.Token == c.Token {
		t.Fatalf("claim after the delete: %v %v", c2.Outcome, err)
	}
}

func FuzzDecodeStub(f *testing.F) {
	f.Add(encodeStub(stub{id: 7, seq: 3, size: 200000, pieces: 4}))
	f.Add([]byte{stubVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeStub(b)
		if err != nil {
			if !errors.Is(err, ledger.ErrCorrupt) {
				t.Fatalf("error not matching ErrCorrupt: %v", err)
			}
			return
		}
		if back, err := decodeStub(encodeStub(st)); err != nil || back != st {
			t.Fatalf("round trip of %+v: %+v %v", st, back, err)
		}
	})
}
