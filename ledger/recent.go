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
