package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// maintainLoop sweeps expired records every SweepInterval and re-reads the
// database's clock every ClockSyncInterval, until ctx ends.
func (s *Store) maintainLoop(ctx context.Context) {
	sweep := time.NewTicker(s.cfg.SweepInterval)
	defer sweep.Stop()
	clock := time.NewTicker(s.cfg.ClockSyncInterval)
	defer clock.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
			if n, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("ledger/postgres: sweep", "err", err, "deleted", n)
			} else if n > 0 {
				s.log.Debug("ledger/postgres: sweep", "deleted", n)
			}
		case <-clock.C:
			if err := s.syncClock(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("ledger/postgres: reading the database clock", "err", err)
			}
		}
	}
}

// maxSweepBatches bounds one Sweep: a backlog is worked off over several
// intervals rather than in one long burst.
const maxSweepBatches = 100

// The sweeping statements. Rows past retention by the database's clock go
// first, in batches of $1, skipping rows another replica is deleting or a
// writer holds; idem.quiet keeps the trigger from notifying. A session
// counter goes once its session has no rows and its retain_until is past
// (re-checked on the locked row, so a concurrent claim keeps it).
const (
	nowMs     = `(extract(epoch FROM statement_timestamp()) * 1000)::bigint`
	sweepRows = `DELETE FROM idem_records WHERE (tenant, key) IN (
	SELECT tenant, key FROM idem_records WHERE retain_until < ` + nowMs + `
	ORDER BY retain_until LIMIT $1 FOR UPDATE SKIP LOCKED)`
	sweepCounters = `DELETE FROM idem_sessions WHERE (tenant, session) IN (
	SELECT tenant, session FROM idem_sessions c WHERE retain_until < ` + nowMs + `
	AND NOT EXISTS (SELECT 1 FROM idem_records r WHERE r.tenant = c.tenant AND r.session = c.session AND r.session <> '')
	LIMIT $1 FOR UPDATE SKIP LOCKED)`
)

// Sweep deletes records past their RetainUntil (by the database's clock)
// and the session counters no record needs any more, in bounded batches,
// and returns how many records it deleted. The Store runs it every
// SweepInterval; it is exported for operators and tests.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	var total int64
	for _, stmt := range []string{sweepRows, sweepCounters} {
		for range maxSweepBatches {
			var b pgx.Batch
			b.Queue(`SELECT set_config('idem.quiet', 'on', true)`)
			var n int64
			b.Queue(stmt, s.cfg.SweepBatch).Exec(func(tag pgconn.CommandTag) error {
				n = tag.RowsAffected()
				return nil
			})
			if err := s.pool.SendBatch(ctx, &b).Close(); err != nil {
				return total, s.fail("sweep", err)
			}
			if stmt == sweepRows {
				total += n
			}
			if n < int64(s.cfg.SweepBatch) {
				break
			}
		}
	}
	return total, nil
}

// Now returns the database's clock: its time at the last sync, advanced by
// the local monotonic clock since. Replicas that use it as the ledger's
// clock (ledger.Config.Now) agree on leases to within their round-trip
// time to the database, whatever their own clocks say.
func (s *Store) Now() time.Time {
	s.clockMu.RLock()
	base, db := s.clockBase, s.clockDB
	s.clockMu.RUnlock()
	return db.Add(time.Since(base))
}

// syncClock reads the database's clock three times and keeps the reading
// with the shortest round trip, taken as the middle of it.
func (s *Store) syncClock(ctx context.Context) error {
	var (
		best      time.Duration = -1
		base, db  time.Time
		lastError error
	)
	for range 3 {
		var us int64
		t0 := time.Now()
		err := s.pool.QueryRow(ctx, `SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`).Scan(&us)
		rtt := time.Since(t0)
		if err != nil {
			lastError = err
			continue
		}
		if best < 0 || rtt < best {
			best, base, db = rtt, t0.Add(rtt/2), time.UnixMicro(us)
		}
	}
	if best < 0 {
		return s.fail("read the database clock", lastError)
	}
	skew := db.Sub(base.Round(0)) // the database's clock minus ours
	s.clockMu.Lock()
	s.clockBase, s.clockDB = base, db
	s.clockMu.Unlock()
	if skew > time.Second || skew < -time.Second {
		s.log.Warn("ledger/postgres: this host's clock differs from the database's; the ledger uses the database's",
			"skew", skew.String(), "round_trip", best.String())
	}
	return nil
}
