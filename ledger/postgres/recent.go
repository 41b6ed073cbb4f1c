package postgres

import (
	"context"

	"github.com/idem-dev/idem/ledger"
)

var _ ledger.RecentSessionsStore = (*Store)(nil)

// RecentSessions implements ledger.RecentSessionsStore: a session's
// counter row is kept as long as its longest-kept record, so the rows kept
// longest belong to the sessions most recently written.
func (s *Store) RecentSessions(ctx context.Context, limit int) ([]ledger.SessionRef, error) {
	for attempt := 1; ; attempt++ {
		out, err := s.recentSessions(ctx, limit)
		if err == nil {
			return out, nil
		}
		if attempt == 1 && s.reconnect(err, true) {
			continue
		}
		return nil, s.fail("recent sessions", err)
	}
}

func (s *Store) recentSessions(ctx context.Context, limit int) ([]ledger.SessionRef, error) {
	rows, err := s.pool.Query(ctx, `SELECT tenant, session FROM idem_sessions
		ORDER BY retain_until DESC, tenant, session LIMIT $1`, int64(limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ledger.SessionRef
	for rows.Next() {
		var r ledger.SessionRef
		if err := rows.Scan(&r.Tenant, &r.Session); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

var _ ledger.TenantStore = (*Store)(nil)

// ListTenant implements ledger.TenantStore.
func (s *Store) ListTenant(ctx context.Context, tenant string, since int64, limit int) ([]ledger.Record, error) {
	lim := int64(-1)
	if limit > 0 {
		lim = int64(limit)
	}
	q := `SELECT key, ` + recordCols + ` FROM idem_records
		WHERE tenant = $1 AND created_at >= $2 ORDER BY created_at, key`
	if lim > 0 {
		return s.list(ctx, "list tenant", tenant, q+` LIMIT $3`, tenant, since, lim)
	}
	return s.list(ctx, "list tenant", tenant, q, tenant, since)
}
