package ledger

import (
	"context"
	"errors"
	"fmt"
)

// SessionRef names one session of one tenant.
type SessionRef struct {
	Tenant, Session string
}

// RecentSessionsStore is a Store that can list the sessions with the most
// recent activity, which a cache of sessions warms itself with at start.
// ledger/badger and ledger/postgres implement it.
type RecentSessionsStore interface {
	Store
	// RecentSessions returns up to limit sessions, those whose records
	// are kept longest (the most recently active) first.
	RecentSessions(ctx context.Context, limit int) ([]SessionRef, error)
}

// RecentSessions returns up to limit sessions of every tenant, the most
// recently active first, or an error matching errors.ErrUnsupported when
// the store cannot list them.
func (l *Ledger) RecentSessions(ctx context.Context, limit int) ([]SessionRef, error) {
	rs, ok := l.store.(RecentSessionsStore)
	if !ok {
		return nil, fmt.Errorf("recent sessions: %w", errors.ErrUnsupported)
	}
	if limit < 1 {
		return nil, nil
	}
	out, err := rs.RecentSessions(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("recent sessions: %w", err)
	}
	return out, nil
}

// TenantStore is a Store that can list a tenant's records by creation
// time, which an index of a tenant's calls (a tenant-wide semantic scope)
// is rebuilt from. ledger/badger and ledger/postgres implement it.
type TenantStore interface {
	Store
	// ListTenant returns up to limit records of tenant created at or after
	// since (Unix ms), in creation order (CreatedAt, then Key); limit <= 0
	// means all.
	ListTenant(ctx context.Context, tenant string, since int64, limit int) ([]Record, error)
}

// Tenant returns up to limit live records of tenant created at or after
// since (Unix ms), oldest first, or an error matching errors.ErrUnsupported
// when the store cannot list a tenant.
func (l *Ledger) Tenant(ctx context.Context, tenant string, since int64, limit int) ([]Record, error) {
	if err := checkTenant(tenant); err != nil {
		return nil, fmt.Errorf("list tenant: %w", err)
	}
	ts, ok := l.store.(TenantStore)
	if !ok {
		return nil, fmt.Errorf("list tenant: %w", errors.ErrUnsupported)
	}
	recs, err := ts.ListTenant(ctx, tenant, since, limit)
	if err != nil {
		return nil, fmt.Errorf("list tenant: %w", err)
	}
	return l.live(recs), nil
}
