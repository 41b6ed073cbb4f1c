package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// notifyKey is the payload the trigger sends for a change of (tenant,
// key): the hex SHA-256 of "<byte length of tenant>:<tenant><key>", as
// computed in migrations/0001_init.sql. Fixed size, whatever the key's.
func notifyKey(tenant, key string) string {
	h := sha256.New()
	h.Write([]byte(strconv.Itoa(len(tenant))))
	h.Write([]byte{':'})
	h.Write([]byte(tenant))
	h.Write([]byte(key))
	return hex.EncodeToString(h.Sum(nil))
}

// Watch implements ledger.Store. The channel is closed by every change
// made through this Store, at once; by a change made through another
// Store on the same schema (another replica) that can end a wait — a
// PENDING record completed, failed or taken over, or any record deleted —
// through the database's notification, within milliseconds; and
// spuriously, after the listening connection is re-established and at
// least every Config.RecheckInterval. So another replica's new claim of a
// watched key is seen at the next re-check at the latest: the ledger never
// waits on a key that is absent or finished, and sparing claims the
// notification keeps them from queueing on PostgreSQL's notify lock (see
// migrations/0001_init.sql).
func (s *Store) Watch(tenant, key string) (<-chan struct{}, func()) {
	return s.watchers.Watch(notifyKey(tenant, key))
}

// wake releases the watchers of notifyKey wk.
func (s *Store) wake(wk string) { s.watchers.Wake(wk) }

// wakeAll releases every watcher: they re-read what they wait on.
func (s *Store) wakeAll() { s.watchers.WakeAll() }

// listenLoop keeps one connection listening on the store's channel until
// ctx ends, reconnecting with backoff. Whenever notifications may have
// been missed (before each connection is listening, and at least every
// RecheckInterval) it wakes every watcher.
func (s *Store) listenLoop(ctx context.Context, cfg *pgx.ConnConfig) {
	const minBackoff, maxBackoff = 50 * time.Millisecond, 5 * time.Second
	backoff := minBackoff
	for {
		start := time.Now()
		err := s.listen(ctx, cfg)
		s.wakeAll()
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			backoff = minBackoff
		}
		s.log.Warn("ledger/postgres: listening connection lost; waiters re-read until it is back", "err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// listen runs one listening connection until it fails or ctx ends.
func (s *Store) listen(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return err
	}
	s.listeningNow.Store(true)
	defer s.listeningNow.Store(false)
	s.wakeAll() // anything before LISTEN took effect was not heard
	recheck := time.Now().Add(s.cfg.RecheckInterval)
	for {
		wctx, cancel := context.WithDeadline(ctx, recheck)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			s.wake(n.Payload)
			if time.Now().Before(recheck) {
				continue
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case !pgconn.Timeout(err) && !errors.Is(err, context.DeadlineExceeded):
			return err
		default:
			// Quiet for a whole interval: make sure the connection is alive.
			pctx, cancel := context.WithTimeout(ctx, s.cfg.StatementTimeout)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
		}
		s.wakeAll()
		recheck = time.Now().Add(s.cfg.RecheckInterval)
	}
}

// listening reports whether the listener is connected and listening.
func (s *Store) listening() bool { return s.listeningNow.Load() }
