package badger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/idem-dev/idem/internal/half"
	"github.com/idem-dev/idem/ledger"
)

// Storage keys. Every key starts with a kind byte, then the tenant with a
// length prefix, so no tenant's keys can be read as another's.
const (
	kindRecord  = 'r' // r | tenant | key                → record
	kindSession = 's' // s | tenant | session | seq(8 BE) → key
	kindWork    = 'w' // w | tenant | workflow | key      → empty
	kindCounter = 'c' // c | tenant | session             → last seq (8 BE)
	// kindPiece (pieces.go): the pieces of large records.
)

func appendLP(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func recordKey(tenant, key string) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen16*2+len(tenant)+len(key))
	b = appendLP(append(b, kindRecord), tenant)
	return append(b, key...)
}

func sessionPrefix(tenant, session string) []byte {
	return appendLP(appendLP([]byte{kindSession}, tenant), session)
}

func sessionKey(tenant, session string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(sessionPrefix(tenant, session), seq)
}

func workflowPrefix(tenant, workflow string) []byte {
	return appendLP(appendLP([]byte{kindWork}, tenant), workflow)
}

func workflowKey(tenant, workflow, key string) []byte {
	return append(workflowPrefix(tenant, workflow), key...)
}

func counterKey(tenant, session string) []byte {
	return append(appendLP([]byte{kindCounter}, tenant), session...)
}

// Record encoding: a version byte, the fields in a fixed order (strings and
// byte slices length-prefixed with uvarints, numbers as uvarints or fixed
// 8 bytes, the embedding's values as IEEE 754 halves or floats), then a
// CRC-32C of everything before it. Hand-written because no well-kept
// library fits: the record is hot (every claim writes one) and JSON costs
// ~10x more for a 384-d embedding.
//
// Versions: 1 ends with Seq; 2 appends Confirmed after it; 3 (written
// since) puts a width byte after the embedding's length: 2 when every
// value is a half-precision value (the funnel rounds its embeddings so:
// half.Round) and is stored in 2 bytes, 4 otherwise. Versions 1 and 2
// store 4-byte floats. Every version is read; a field a version lacks
// reads as its zero value. A version newer than the binary's is refused as
// corrupt (an older idem cannot read what a newer one wrote).
const (
	codecVersion   = 3 // the version encodeRecord writes
	codecVersionV2 = 2 // floats only
	codecVersionV1 = 1 // without Confirmed
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodedBound is at least the length of r's encoding: the version byte,
// 19 varints (13 lengths, the attempt, 4 times, Seq) at their longest, the
// two hashes, the embedding's width and values, status and class, the CRC,
// and the bytes.
func encodedBound(r *ledger.Record) int {
	return 1 + 19*binary.MaxVarintLen64 + 16 + 1 + 4*len(r.Embedding) + 2 + 4 +
		len(r.Tenant) + len(r.Key) + len(r.Session) + len(r.Workflow) + len(r.Step) + len(r.Tool) +
		len(r.Canonical) + len(r.EmbeddingModel) + len(r.Result) + len(r.Error) + len(r.Token) + len(r.Confirmed)
}

func encodeRecord(dst []byte, r *ledger.Record) []byte {
	b := append(slices.Grow(dst, encodedBound(r)), codecVersion)
	for _, s := range []string{r.Tenant, r.Key, r.Session, r.Workflow, r.Step, r.Tool} {
		b = appendLP(b, s)
	}
	b = appendLP(b, string(r.Canonical))
	b = binary.LittleEndian.AppendUint64(b, r.Hash)
	b = binary.LittleEndian.AppendUint64(b, r.Identity)
	b = binary.AppendUvarint(b, uint64(len(r.Embedding)))
	if len(r.Embedding) > 0 {
		var halves bool
		if b, halves = half.Append(append(b, 2), r.Embedding); !halves {
			b = append(b[:len(b)-1], 4)
			for _, f := range r.Embedding {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
			}
		}
	}
	b = appendLP(b, r.EmbeddingModel)
	b = append(b, byte(r.Status), byte(r.Class))
	b = appendLP(b, string(r.Result))
	b = appendLP(b, string(r.Error))
	b = binary.AppendVarint(b, int64(r.Attempt))
	b = appendLP(b, r.Token)
	for _, t := range []int64{r.LeaseUntil, r.CreatedAt, r.UpdatedAt, r.RetainUntil} {
		b = binary.AppendVarint(b, t)
	}
	b = binary.AppendUvarint(b, r.Seq)
	b = appendLP(b, r.Confirmed) // version 2
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

var errShort = errors.New("truncated")

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errShort
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) fixed(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.err = errShort
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

// embedding reads n values: 4-byte floats before version 3, from it as wide
// as the width byte ahead of them says.
func (d *decoder) embedding(n uint64, version byte) []float32 {
	width := uint64(4)
	if version >= codecVersion {
		if w := d.fixed(1); w != nil {
			width = uint64(w[0])
		}
		if width != 2 && width != 4 && d.err == nil {
			d.err = fmt.Errorf("embedding values of %d bytes", width)
		}
	}
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b))/width {
		d.err = errShort
		return nil
	}
	raw := d.fixed(int(n * width))
	v := make([]float32, n)
	if width == 2 {
		half.Decode(v, raw)
		return v
	}
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return v
}

// decodeRecord decodes b into a record that owns its memory (b may be
// reused by the caller). Any damage yields an error matching
// ledger.ErrCorrupt.
func decodeRecord(b []byte) (ledger.Record, error) {
	var r ledger.Record
	if len(b) < 5 {
		return r, fmt.Errorf("%w: %d bytes", ledger.ErrCorrupt, len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return r, fmt.Errorf("%w: checksum mismatch", ledger.ErrCorrupt)
	}
	version := body[0]
	if version != codecVersion && version != codecVersionV2 && version != codecVersionV1 {
		return r, fmt.Errorf("%w: unknown version %d", ledger.ErrCorrupt, version)
	}
	// b may be Badger's, valid only while its Item.Value callback runs:
	// every field is copied out of it (strings by the conversion, byte
	// fields by ownBytes), and nothing decoded aliases it.
	d := decoder{b: body[1:]}
	str := func() string { return string(d.bytes()) }
	r.Tenant, r.Key, r.Session, r.Workflow, r.Step, r.Tool = str(), str(), str(), str(), str(), str()
	r.Canonical = ownBytes(d.bytes())
	if f := d.fixed(16); f != nil {
		r.Hash = binary.LittleEndian.Uint64(f)
		r.Identity = binary.LittleEndian.Uint64(f[8:])
	}
	if n := d.uvarint(); n > 0 && d.err == nil {
		r.Embedding = d.embedding(n, version)
	}
	r.EmbeddingModel = str()
	if f := d.fixed(2); f != nil {
		r.Status, r.Class = ledger.Status(f[0]), ledger.ErrorClass(f[1])
	}
	r.Result = ownBytes(d.bytes())
	r.Error = ownBytes(d.bytes())
	r.Attempt = int(d.varint())
	r.Token = str()
	r.LeaseUntil, r.CreatedAt, r.UpdatedAt, r.RetainUntil = d.varint(), d.varint(), d.varint(), d.varint()
	r.Seq = d.uvarint()
	if version >= codecVersionV2 {
		r.Confirmed = str()
	}
	switch {
	case d.err != nil:
		return ledger.Record{}, fmt.Errorf("%w: %v", ledger.ErrCorrupt, d.err)
	case len(d.b) != 0:
		return ledger.Record{}, fmt.Errorf("%w: %d trailing bytes", ledger.ErrCorrupt, len(d.b))
	case r.Status < ledger.StatusPending || r.Status > ledger.StatusFailed:
		return ledger.Record{}, fmt.Errorf("%w: status %d", ledger.ErrCorrupt, r.Status)
	}
	return r, nil
}

// ownBytes is a copy of b, nil when b is empty.
func ownBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
