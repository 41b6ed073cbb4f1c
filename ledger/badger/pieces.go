package badger

// Large records, in pieces.
//
// Badger puts a value of at least its value threshold in its value log
// and only a pointer in the write-ahead log. Without Badger's own
// SyncWrites (see durable.go), the pointer can reach the disk before the
// value does (an fsync of the write-ahead log for another operation, the
// flush of a memtable, the kernel's writeback), and a power cut then
// leaves a record that points at nothing: corrupt, where its previous
// version should have been. So the store keeps every value in the
// write-ahead log: Badger's threshold is set to its maximum, and a record
// whose encoding reaches Config.ValueThreshold is written as pieces
// (under keys of their own, in the write-ahead log too) that are made
// durable first, and then a small stub naming them under the record's
// key, in the record's transaction. A stub on disk means its pieces are
// on disk. Pieces of a write that did not happen (a conflict, a crash
// between the two) are deleted, or expire with the record they were for.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"

	"github.com/dgraph-io/badger/v4"

	"github.com/idem-dev/idem/ledger"
)

// kindPiece keys hold the pieces of large records:
// p | tenant | key (length-prefixed) | id (8 BE) | index (4 BE) → bytes.
const kindPiece = 'p'

// stubVersion starts a stub, where codecVersion starts a record.
const stubVersion = 0xC1

// inlineThreshold is the value threshold the store opens Badger with: its
// largest (1 MiB, and at most a transaction's size, 15 % of a memtable).
// Every value the store writes is shorter, so none goes to the value log.
func inlineThreshold(memTableSize int64) int64 { return min(1<<20, 15*memTableSize/100) }

// stub names the pieces of a record stored in pieces.
type stub struct {
	id     uint64 // unique per write, so a new version never overwrites the pieces of the current one
	seq    uint64 // the record's Seq (the pieces are written before it is taken)
	size   int    // the encoded record's length
	pieces int
}

func pieceKey(tenant, key string, id uint64, i int) []byte {
	b := appendLP(appendLP([]byte{kindPiece}, tenant), key)
	b = binary.BigEndian.AppendUint64(b, id)
	return binary.BigEndian.AppendUint32(b, uint32(i))
}

func encodeStub(st stub) []byte {
	b := []byte{stubVersion}
	b = binary.BigEndian.AppendUint64(b, st.id)
	b = binary.AppendUvarint(b, st.seq)
	b = binary.AppendUvarint(b, uint64(st.size))
	b = binary.AppendUvarint(b, uint64(st.pieces))
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// isStub reports whether a stored value is a stub rather than a record.
func isStub(v []byte) bool { return len(v) > 0 && v[0] == stubVersion }

// decodeStub parses a stub; any damage yields an error matching
// ledger.ErrCorrupt.
func decodeStub(b []byte) (stub, error) {
	var st stub
	if len(b) < 1+8+3+4 {
		return st, fmt.Errorf("%w: a stub of %d bytes", ledger.ErrCorrupt, len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return st, fmt.Errorf("%w: stub checksum mismatch", ledger.ErrCorrupt)
	}
	if body[0] != stubVersion {
		return st, fmt.Errorf("%w: not a stub", ledger.ErrCorrupt)
	}
	d := decoder{b: body[9:]}
	st.id = binary.BigEndian.Uint64(body[1:9])
	st.seq = d.uvarint()
	size, pieces := d.uvarint(), d.uvarint()
	switch {
	case d.err != nil:
		return stub{}, fmt.Errorf("%w: stub: %v", ledger.ErrCorrupt, d.err)
	case len(d.b) != 0:
		return stub{}, fmt.Errorf("%w: stub: %d trailing bytes", ledger.ErrCorrupt, len(d.b))
	case size == 0 || size > 1<<40 || pieces == 0 || pieces > size:
		return stub{}, fmt.Errorf("%w: stub of %d bytes in %d pieces", ledger.ErrCorrupt, size, pieces)
	}
	st.size, st.pieces = int(size), int(pieces)
	return st, nil
}

// readPieces reassembles the record a stub names.
func readPieces(txn *badger.Txn, tenant, key string, st stub) (ledger.Record, error) {
	buf := make([]byte, 0, st.size)
	for i := range st.pieces {
		item, err := txn.Get(pieceKey(tenant, key, st.id, i))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return ledger.Record{}, fmt.Errorf("%w: piece %d of %d is missing", ledger.ErrCorrupt, i+1, st.pieces)
		}
		if err != nil {
			return ledger.Record{}, err
		}
		if err := item.Value(func(v []byte) error { buf = append(buf, v...); return nil }); err != nil {
			return ledger.Record{}, err
		}
	}
	if len(buf) != st.size {
		return ledger.Record{}, fmt.Errorf("%w: pieces of %d bytes, the stub says %d", ledger.ErrCorrupt, len(buf), st.size)
	}
	r, err := decodeRecord(buf)
	if err != nil {
		return ledger.Record{}, err
	}
	r.Seq = st.seq
	return r, nil
}

// splitRecord cuts an encoded record into pieces shorter than piece bytes
// under a fresh id, for writePieces.
func splitRecord(value []byte, piece int) (stub, [][]byte) {
	st := stub{id: rand.Uint64(), size: len(value)}
	var parts [][]byte
	for len(value) > 0 {
		n := min(piece, len(value))
		parts = append(parts, value[:n])
		value = value[n:]
	}
	st.pieces = len(parts)
	return st, parts
}

// writePieces writes parts under st's keys, expiring at expires. It does
// not wait for them to be durable.
func (s *Store) writePieces(tenant, key string, st stub, parts [][]byte, expires uint64) error {
	wb := s.db.NewWriteBatch() // splits into transactions Badger accepts
	defer wb.Cancel()
	for i, p := range parts {
		if err := wb.SetEntry(&badger.Entry{Key: pieceKey(tenant, key, st.id, i), Value: p, ExpiresAt: expires}); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// deletePieces deletes the pieces st names (in txn when given, else in a
// batch of their own, not waited for).
func (s *Store) deletePieces(txn *badger.Txn, tenant, key string, st stub) error {
	if txn != nil {
		for i := range st.pieces {
			if err := txn.Delete(pieceKey(tenant, key, st.id, i)); err != nil {
				return err
			}
		}
		return nil
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for i := range st.pieces {
		if err := wb.Delete(pieceKey(tenant, key, st.id, i)); err != nil {
			return err
		}
	}
	return wb.Flush()
}
