package badger

import (
	"cmp"
	"context"
	"encoding/binary"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/idem-dev/idem/ledger"
)

var _ ledger.RecentSessionsStore = (*Store)(nil)

// RecentSessions implements ledger.RecentSessionsStore. A session's
// counter expires with its longest-kept record, so the counters that
// expire last belong to the sessions most recently written. It reads keys
// only (one per session).
func (s *Store) RecentSessions(ctx context.Context, limit int) ([]ledger.SessionRef, error) {
	type ranked struct {
		ref     ledger.SessionRef
		expires uint64
	}
	var all []ranked
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kindCounter}, PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			k := it.Item().Key()[1:]
			n, w := binary.Uvarint(k)
			if w <= 0 || uint64(len(k)-w) < n {
				continue // not a counter key this store wrote
			}
			exp := it.Item().ExpiresAt()
			if exp == 0 {
				exp = ^uint64(0)
			}
			all = append(all, ranked{ledger.SessionRef{Tenant: string(k[w : w+int(n)]), Session: string(k[w+int(n):])}, exp})
		}
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	slices.SortFunc(all, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(b.expires, a.expires), cmp.Compare(a.ref.Tenant, b.ref.Tenant), cmp.Compare(a.ref.Session, b.ref.Session))
	})
	out := make([]ledger.SessionRef, 0, min(limit, len(all)))
	for _, r := range all[:min(limit, len(all))] {
		out = append(out, r.ref)
	}
	return out, nil
}

var _ ledger.TenantStore = (*Store)(nil)

// ListTenant implements ledger.TenantStore. Records are keyed by tenant and
// key, not by time: it reads every record of the tenant (a rebuild of a
// tenant-wide index does this once; this process adds what it claims
// afterwards itself).
func (s *Store) ListTenant(ctx context.Context, tenant string, since int64, limit int) ([]ledger.Record, error) {
	read := func(txn *badger.Txn, key string, item *badger.Item) (*ledger.Record, stored, error) {
		return itemRecord(txn, tenant, key, item) // a large record is in pieces
	}
	out, err := s.listPrefix(ctx, tenant, recordKey(tenant, ""), read,
		func(r *ledger.Record) bool { return r.CreatedAt >= since })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, err
}
