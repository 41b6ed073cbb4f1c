package badger

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/crc32"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/idem-dev/idem/internal/half"
	"github.com/idem-dev/idem/ledger"
)

// goldenV1 is v1Record as the codec of version 1 (before Confirmed)
// encoded it, captured from that code: records on disk written by earlier
// versions of idem look like this. Never regenerate it.
const goldenV1 = "010461636d651177662d313a323a73656e645f656d61696c0273310477662d3101320a73656e645f656d61696c167b22746f22" +
	"3a2261406578616d706c652e636f6d227d78563412cefaedfe2a00000000000000020000803e000000bf087573652d6c6974650200147b22" +
	"6d6573736167655f6964223a226d2d31227d000400c0c9b2fef96280a0abfef962d0afabfef962d09fded0fa6207506da41c"

// v1Record is the record goldenV1 holds: every field but Confirmed set.
var v1Record = ledger.Record{Tenant: "acme", Key: "wf-1:2:send_email", Session: "s1", Workflow: "wf-1", Step: "2", Tool: "send_email",
	Canonical: []byte(`{"to":"a@example.com"}`), Hash: 0xfeedface12345678, Identity: 42,
	Embedding: []float32{0.25, -0.5}, EmbeddingModel: "use-lite",
	Status: ledger.StatusSuccess, Result: json.RawMessage(`{"message_id":"m-1"}`),
	Attempt: 2, LeaseUntil: 1_700_000_060_000, CreatedAt: 1_700_000_000_000, UpdatedAt: 1_700_000_001_000, RetainUntil: 1_700_086_401_000, Seq: 7}

// goldenV2 is v2Record as the codec of version 2 (floats only) encoded
// it, captured from that code. Never regenerate it.
const goldenV2 = "020461636d651177662d313a323a73656e645f656d61696c0273310477662d3101320a73656e645f656d61696c167b22746f22" +
	"3a2261406578616d706c652e636f6d227d78563412cefaedfe2a00000000000000030000803e000000bfcdcccc3d087573652d6c6974650200147b22" +
	"6d6573736167655f6964223a226d2d31227d000400c0c9b2fef96280a0abfef962d0afabfef962d09fded0fa62071177662d313a313a73656e645f" +
	"656d61696c7be2bb85"

// v2Record is the record goldenV2 holds: v1Record with a Confirmed and an
// embedding value (0.1) that is no half.
var v2Record = func() ledger.Record {
	r := v1Record
	r.Confirmed = "wf-1:1:send_email"
	r.Embedding = []float32{0.25, -0.5, 0.1}
	return r
}()

// TestDecodeRecordOfVersion2: a record written with 4-byte floats reads
// whole; written again it takes the current version, keeps the float that
// is no half exactly, and reads back the same.
func TestDecodeRecordOfVersion2(t *testing.T) {
	old := golden(t, goldenV2)
	r, err := decodeRecord(old)
	if err != nil || !reflect.DeepEqual(r, v2Record) {
		t.Fatalf("version 2 record decoded as\n%+v (%v)\nwant\n%+v", r, err, v2Record)
	}
	again := encodeRecord(nil, &r)
	if again[0] != codecVersion || len(again) != len(old)+1 {
		t.Fatalf("re-encoded in version %d, %d bytes for %d", again[0], len(again), len(old))
	}
	if back, err := decodeRecord(again); err != nil || !reflect.DeepEqual(back, v2Record) {
		t.Fatalf("re-encoded record decodes as %+v, %v", back, err)
	}
}

// TestEmbeddingOfHalvesTakesHalfTheBytes: a 512-value embedding the
// funnel rounded to halves is stored in 1 KiB, not 2, and reads back
// exactly; one value that is no half keeps the whole vector as floats;
// an unknown width is a damaged record.
func TestEmbeddingOfHalvesTakesHalfTheBytes(t *testing.T) {
	r := v1Record
	r.Embedding = make([]float32, 512)
	for i := range r.Embedding {
		r.Embedding[i] = float32(math.Sin(float64(i))) / 23
	}
	floats := encodeRecord(nil, &r)
	if !half.Round(r.Embedding) {
		t.Fatal("Round refused a unit-scale vector")
	}
	halves := encodeRecord(nil, &r)
	if d := len(floats) - len(halves); d != 2*512 {
		t.Fatalf("halves save %d bytes, want %d", d, 2*512)
	}
	back, err := decodeRecord(halves)
	if err != nil || !reflect.DeepEqual(back, r) {
		t.Fatalf("halves decode as %v, %v", back.Embedding[:4], err)
	}
	damaged := bytes.Clone(halves[:len(halves)-4])
	at := bytes.Index(damaged, []byte{0x80, 0x04, 2}) // the length 512 as a uvarint, then the width
	if at < 0 {
		t.Fatal("no width byte after the embedding's length")
	}
	damaged[at+2] = 3
	if _, err := decodeRecord(appendCRC(damaged)); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("width 3: %v, want ErrCorrupt", err)
	}
}

// golden is a golden record's bytes (goldenV1, goldenV2).
func golden(t testing.TB, h string) []byte {
	b, err := hex.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeRecordOfVersion1: a record written before Confirmed existed
// reads whole, with Confirmed empty; written again it takes the current
// version, and reads back the same.
func TestDecodeRecordOfVersion1(t *testing.T) {
	old := golden(t, goldenV1)
	r, err := decodeRecord(old)
	if err != nil {
		t.Fatalf("decoding a version 1 record: %v", err)
	}
	if !reflect.DeepEqual(r, v1Record) {
		t.Fatalf("version 1 record decoded as\n%+v\nwant\n%+v", r, v1Record)
	}
	again := encodeRecord(nil, &r)
	if again[0] != codecVersion || bytes.Equal(again, old) {
		t.Fatalf("re-encoded with version %d", again[0])
	}
	if back, err := decodeRecord(again); err != nil || !reflect.DeepEqual(back, v1Record) {
		t.Fatalf("re-encoded record decodes as %+v, %v", back, err)
	}
}

// TestRecordKeepsConfirmed: Confirmed goes through the codec within
// encodedBound; a version newer than this code, and version 1 bytes
// carrying a Confirmed, are refused as corrupt.
func TestRecordKeepsConfirmed(t *testing.T) {
	r := v1Record
	r.Confirmed = "wf-1:1:send_email"
	b := encodeRecord(nil, &r)
	if len(b) > encodedBound(&r) {
		t.Fatalf("encoding of %d bytes, bound %d", len(b), encodedBound(&r))
	}
	back, err := decodeRecord(b)
	if err != nil || back.Confirmed != r.Confirmed || !reflect.DeepEqual(back, r) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	// A version newer than this code is refused, not read as a shorter record.
	newer := bytes.Clone(b[:len(b)-4])
	newer[0] = codecVersion + 1
	newer = appendCRC(newer)
	if _, err := decodeRecord(newer); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("version %d: %v, want ErrCorrupt", codecVersion+1, err)
	}
	// Version 1 bytes followed by a Confirmed are a damaged record: the
	// field belongs to version 2 only.
	v1plus := bytes.Clone(b[:len(b)-4])
	v1plus[0] = codecVersionV1
	if _, err := decodeRecord(appendCRC(v1plus)); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("version 1 with a Confirmed: %v, want ErrCorrupt", err)
	}
}

// appendCRC ends b as the codec does.
func appendCRC(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// TestStoreReadsRecordOfVersion1: a record left on disk by an earlier idem
// (the version 1 encoding under its key) is answered from: Get returns it
// with no Confirmed, and a claim of its key replays it.
func TestStoreReadsRecordOfVersion1(t *testing.T) {
	s := openStore(t, t.TempDir(), true)
	l := newLedger(t, s, func(c *ledger.Config) {
		c.Now = func() time.Time { return time.UnixMilli(v1Record.UpdatedAt + time.Minute.Milliseconds()) }
	})
	err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(recordKey(v1Record.Tenant, v1Record.Key), golden(t, goldenV1))
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Get(t.Context(), v1Record.Tenant, v1Record.Key)
	if err != nil || got.Outcome != ledger.Duplicate || got.Record.Confirmed != "" || string(got.Record.Result) != `{"message_id":"m-1"}` {
		t.Fatalf("Get of a version 1 record: %v %+v, %v", got.Outcome, got.Record, err)
	}
	c, err := l.Claim(t.Context(), ledger.ClaimRequest{Tenant: v1Record.Tenant, Key: v1Record.Key, Tool: "send_email"})
	if err != nil || c.Outcome != ledger.Duplicate || string(c.Record.Result) != `{"message_id":"m-1"}` {
		t.Fatalf("claim of a version 1 record's key: %v, %v", c.Outcome, err)
	}
}

// BenchmarkDecodeRecord decodes a stored call as a key hit reads it: a
// claimed call with text (a 512-value embedding), completed.
func BenchmarkDecodeRecord(b *testing.B) {
	r := v1Record
	r.Embedding = make([]float32, 512)
	for i := range r.Embedding {
		r.Embedding[i] = float32(i) / 512
	}
	r.Canonical = []byte(`{"body":"Hi Ann, your invoice for March is attached. Let me know if anything is unclear.","subject":"Your invoice","to":"ann@example.com"}`)
	v := encodeRecord(nil, &r)
	b.ReportAllocs()
	b.SetBytes(int64(len(v)))
	for b.Loop() {
		if _, err := decodeRecord(v); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodedRecordOwnsItsBytes: a decoded record shares no memory with
// the value it was decoded from, which Badger reuses once its
// Item.Value callback returns.
func TestDecodedRecordOwnsItsBytes(t *testing.T) {
	v := encodeRecord(nil, &v1Record)
	r, err := decodeRecord(v)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v {
		v[i] = 0xff
	}
	want := v1Record
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("after its value was overwritten, the record reads\n%+v\nwant\n%+v", r, want)
	}
}

// BenchmarkEncodeRecord encodes a stored call as a claim or a completion
// writes it: a 512-value embedding of halves (as the funnel records
// them), and the same with floats that are no halves.
func BenchmarkEncodeRecord(b *testing.B) {
	for _, tc := range []struct {
		name  string
		value func(i int) float32
	}{
		{"halves", func(i int) float32 { return float32(i) / 512 }},
		{"floats", func(i int) float32 { return float32(math.Sin(float64(i))) / 23 }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := v1Record
			r.Embedding = make([]float32, 512)
			for i := range r.Embedding {
				r.Embedding[i] = tc.value(i)
			}
			buf := make([]byte, 0, encodedBound(&r))
			b.ReportAllocs()
			for b.Loop() {
				buf = encodeRecord(buf[:0], &r)
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}
