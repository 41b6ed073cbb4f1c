// Package postgres is a ledger.Store on PostgreSQL, shared by several idem
// replicas: the database decides every claim, so replicas agree without
// talking to each other.
//
// Every write is one statement (or one pipelined batch) in an implicit
// transaction, so nothing is ever half-written and no client holds a lock
// across round trips:
//
//   - A claim of a free key is one round trip: a batch of
//     INSERT … ON CONFLICT DO NOTHING (taking the session's next Seq in the
//     same statement) and a SELECT of the row it lost to, if it lost. Two
//     concurrent first claims resolve in the primary key: one inserts, the
//     other waits for it, sees the winner's row, and re-runs fn on it.
//   - Any other write (complete, fail, a takeover, a claim of a transient
//     failure) reads the row, runs fn, and writes with a compare-and-swap
//     UPDATE guarded by the row's version and lease token in its WHERE
//     clause; a lost swap re-reads and re-runs fn (at most 8 rounds, then
//     ledger.ErrConflict).
//   - Seq comes from a per-(tenant, session) counter row taken in the
//     writing statement; its row lock is held to commit, so Seq order is
//     commit order.
//   - A fenced write (UpdateFenced) takes its number only if the counter
//     still stands where the caller saw it: the condition sits in the
//     counter's UPDATE … WHERE, which READ COMMITTED re-checks on the
//     newest row version, so of concurrent writes fenced on one value at
//     most one takes a number and the others write nothing.
//
// Waiters on any replica are woken by a trigger that NOTIFYs when a
// PENDING row changes or a row is deleted (what ends a wait; claims do
// not notify, see Watch); each Store keeps one listening connection and
// fans the notifications out in process. A lost notification (the listening
// connection dropped) cannot strand a waiter: every waiter is woken after
// each reconnection and at least every Config.RecheckInterval, and
// re-reads (the Store interface allows spurious wake-ups).
//
// Records past RetainUntil are deleted by a sweeper in every replica, in
// bounded batches (FOR UPDATE SKIP LOCKED, so replicas do not contend).
// The schema is created and migrated by Open, under an advisory lock, so
// replicas may start together.
//
// Clocks: the ledger decides leases with its Config.Now. Replicas whose
// clocks disagree would disagree on leases, so Store.Now gives the
// database's clock (sampled every Config.ClockSyncInterval, advanced by the
// local monotonic clock in between): set ledger.Config.Now = store.Now.
package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/ledger"
)

// ErrUnavailable: the database could not be reached or did not answer in
// time. The operation was not applied, or (for a write whose answer was
// lost) its outcome is unknown and the error says so; the caller may retry.
var ErrUnavailable = fmt.Errorf("ledger/postgres: database unavailable: %w", ledger.ErrUnavailable)

// Config configures a Store. Start from DefaultConfig. A plain value; Open
// copies it.
type Config struct {
	// DSN is a libpq connection string or URL
	// (postgres://user@host:5432/db?sslmode=verify-full); required. Keep
	// the password out of it: set Password.
	DSN string
	// Password, when not empty, replaces the DSN's. The caller (cmd/idem)
	// reads it from the environment; this package reads no environment.
	Password string
	// Schema holds idem's tables; Open creates and migrates it. Lower-case
	// letters, digits and '_', at most 50 bytes. Deployments (and tests)
	// sharing one database use different schemas.
	Schema string
	// PoolSize is the most connections a Store opens for requests (the
	// listening connection comes on top).
	PoolSize int32
	// StatementTimeout bounds every statement on the server; a statement
	// past it is cancelled and reported as ErrUnavailable.
	StatementTimeout time.Duration
	// ConnectTimeout bounds establishing one connection.
	ConnectTimeout time.Duration
	// SweepInterval is how often records past retention are deleted.
	SweepInterval time.Duration
	// SweepBatch is how many rows one sweeping statement deletes at most.
	SweepBatch int
	// RecheckInterval bounds how long a waiter can miss a change whose
	// notification was lost: every waiter re-reads at least this often.
	RecheckInterval time.Duration
	// ClockSyncInterval is how often Now re-reads the database's clock.
	ClockSyncInterval time.Duration
	// Logger receives the store's log lines (never record contents); nil
	// discards them.
	Logger *slog.Logger
}

// DefaultConfig returns schema "idem", 10 connections, a 5 s statement
// timeout, a 5 s connect timeout, a sweep of at most 1,000 rows per
// statement every minute, a re-check of waiters every 2 s and a clock sync
// every 30 s.
func DefaultConfig(dsn string) Config {
	return Config{
		DSN:               dsn,
		Schema:            "idem",
		PoolSize:          10,
		StatementTimeout:  5 * time.Second,
		ConnectTimeout:    5 * time.Second,
		SweepInterval:     time.Minute,
		SweepBatch:        1000,
		RecheckInterval:   2 * time.Second,
		ClockSyncInterval: 30 * time.Second,
	}
}

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,49}$`)

// Validate reports the first invalid field. It does not connect.
func (c Config) Validate() error {
	switch {
	case c.DSN == "":
		return errors.New("ledger/postgres config: DSN is empty")
	case !schemaName.MatchString(c.Schema):
		return fmt.Errorf("ledger/postgres config: Schema %q must be 1-50 of [a-z0-9_], not starting with a digit", c.Schema)
	case c.PoolSize < 1:
		return fmt.Errorf("ledger/postgres config: PoolSize must be at least 1, got %d", c.PoolSize)
	case c.StatementTimeout < time.Millisecond:
		return fmt.Errorf("ledger/postgres config: StatementTimeout must be at least 1ms, got %v", c.StatementTimeout)
	case c.ConnectTimeout <= 0:
		return fmt.Errorf("ledger/postgres config: ConnectTimeout must be positive, got %v", c.ConnectTimeout)
	case c.SweepInterval <= 0:
		return fmt.Errorf("ledger/postgres config: SweepInterval must be positive, got %v", c.SweepInterval)
	case c.SweepBatch < 1:
		return fmt.Errorf("ledger/postgres config: SweepBatch must be at least 1, got %d", c.SweepBatch)
	case c.RecheckInterval <= 0:
		return fmt.Errorf("ledger/postgres config: RecheckInterval must be positive, got %v", c.RecheckInterval)
	case c.ClockSyncInterval <= 0:
		return fmt.Errorf("ledger/postgres config: ClockSyncInterval must be positive, got %v", c.ClockSyncInterval)
	}
	if _, err := pgx.ParseConfig(c.DSN); err != nil {
		// pgx's message may quote the DSN, password included: say only what is wrong.
		return errors.New("ledger/postgres config: DSN does not parse as a connection string or URL")
	}
	return nil
}

// maxRounds bounds how often Update re-runs fn after losing a race.
const maxRounds = 8

// Store is a ledger.Store on PostgreSQL. It is safe for concurrent use.
// Open it with Open and release it with Close; it owns a connection pool,
// the listening connection's goroutine and the sweeper's.
type Store struct {
	pool    *pgxpool.Pool
	cfg     Config
	log     *slog.Logger
	channel string // the NOTIFY channel of cfg.Schema

	watchers ledger.Watchers // by notifyKey

	clockMu sync.RWMutex // guards clockBase and clockDB
	// clockBase is a local reading (with its monotonic clock) taken when
	// the database's clock read clockDB.
	clockBase, clockDB time.Time

	listeningNow atomic.Bool // the listener's connection is listening

	cancel    context.CancelFunc
	wg        sync.WaitGroup // the listener and the sweeper
	closeOnce sync.Once
}

var _ ledger.FencedStore = (*Store)(nil)

// Open connects, creates or migrates the schema, reads the database's
// clock, and starts the listener and the sweeper. It fails if the
// database cannot be reached within ctx.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, errors.New("ledger/postgres: DSN does not parse")
	}
	cc := pc.ConnConfig
	if cfg.Password != "" {
		cc.Password = cfg.Password
	}
	if cc.ConnectTimeout == 0 || cc.ConnectTimeout > cfg.ConnectTimeout {
		cc.ConnectTimeout = cfg.ConnectTimeout
	}
	cc.RuntimeParams["search_path"] = cfg.Schema
	cc.RuntimeParams["statement_timeout"] = strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10)
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = "idem"
	}
	pc.MaxConns = cfg.PoolSize
	pc.MinConns = 0

	s := &Store{
		cfg: cfg, log: log,
		channel: "idem:" + cfg.Schema,
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return nil, s.fail("open", err)
	}
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	if err := s.syncClock(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	lc := cc.Copy()
	// The listener waits with deadlines; a cancel request per wait (pgx's
	// default) would open a connection each time.
	lc.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	bg, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.listenLoop(bg, lc) }()
	go func() { defer s.wg.Done(); s.maintainLoop(bg) }()
	return s, nil
}

// Close stops the listener and the sweeper, waits for them (or for ctx),
// wakes every waiter, and closes the pool. Calling it again does nothing.
func (s *Store) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		s.cancel()
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = fmt.Errorf("ledger/postgres: close: %w", ctx.Err())
		}
		s.wakeAll()
		s.pool.Close()
	})
	return err
}

// The columns of a record after (tenant, key), in scan order.
const recordCols = `session, workflow, step, tool, canonical, hash, identity, embedding, embedding_model,
	status, result, error, class, attempt, token, lease_until, created_at, updated_at, retain_until, seq, version, confirmed`

// stored is a record as read, with the version its next write must match.
type stored struct {
	rec     ledger.Record
	version int64
}

func scanRecord(row pgx.Row, tenant, key string) (*stored, error) {
	return scanWith(row, tenant, key, false)
}

// scanWith scans a row of recordCols, preceded by the key column when
// keyFirst (listings), else under key.
func scanWith(row pgx.Row, tenant, key string, keyFirst bool) (*stored, error) {
	var (
		st                   stored
		r                    = &st.rec
		hash, identity, seq  int64
		status, class        int16
		emb, result, errJSON []byte
	)
	dest := []any{&r.Session, &r.Workflow, &r.Step, &r.Tool, &r.Canonical, &hash, &identity, &emb,
		&r.EmbeddingModel, &status, &result, &errJSON, &class, &r.Attempt, &r.Token, &r.LeaseUntil,
		&r.CreatedAt, &r.UpdatedAt, &r.RetainUntil, &seq, &st.version, &r.Confirmed}
	r.Key = key
	if keyFirst {
		dest = append([]any{&r.Key}, dest...)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	r.Tenant = tenant
	var err error
	r.Hash, r.Identity, r.Seq = uint64(hash), uint64(identity), uint64(seq)
	r.Status, r.Class = ledger.Status(status), ledger.ErrorClass(class)
	if result != nil {
		r.Result = result
	}
	if errJSON != nil {
		r.Error = errJSON
	}
	if r.Embedding, err = decodeEmbedding(emb); err != nil {
		return nil, fmt.Errorf("record %q: %w", r.Key, err)
	}
	if seq < 0 || st.version < 1 {
		return nil, fmt.Errorf("%w: record %q has seq %d, version %d", ledger.ErrCorrupt, r.Key, seq, st.version)
	}
	return &st, nil
}

func encodeEmbedding(v []float32) []byte {
	if v == nil {
		return nil
	}
	b := make([]byte, 0, 4*len(v))
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

func decodeEmbedding(b []byte) ([]float32, error) {
	if b == nil {
		return nil, nil
	}
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%w: embedding of %d bytes", ledger.ErrCorrupt, len(b))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

// recordArgs are $3…$22 of the insert and update statements: the record's
// fields after (tenant, key), before seq, in insertCols' order (confirmed
// last: migration 0003 added it).
func recordArgs(r *ledger.Record) []any {
	return []any{r.Session, r.Workflow, r.Step, r.Tool, nilIfNil(r.Canonical), int64(r.Hash), int64(r.Identity),
		encodeEmbedding(r.Embedding), r.EmbeddingModel, int16(r.Status), nilIfNil(r.Result), nilIfNil(r.Error),
		int16(r.Class), int64(r.Attempt), r.Token, r.LeaseUntil, r.CreatedAt, r.UpdatedAt, r.RetainUntil, r.Confirmed}
}

// nilIfNil keeps the nil/empty distinction: nil is NULL, empty is empty.
func nilIfNil[T ~[]byte](b T) []byte {
	if b == nil {
		return nil
	}
	return []byte(b)
}

func cloneRecord(r *ledger.Record) *ledger.Record {
	c := *r
	c.Canonical = cloneBytes(r.Canonical)
	c.Result = cloneBytes(r.Result)
	c.Error = cloneBytes(r.Error)
	if r.Embedding != nil {
		c.Embedding = append([]float32(nil), r.Embedding...)
	}
	return &c
}

func cloneBytes[T ~[]byte](b T) T {
	if b == nil {
		return nil
	}
	return append(T(nil), b...)
}

// Get implements ledger.Store.
func (s *Store) Get(ctx context.Context, tenant, key string) (ledger.Record, error) {
	st, err := s.read(ctx, tenant, key)
	if err != nil {
		return ledger.Record{}, err
	}
	if st == nil {
		return ledger.Record{}, ledger.ErrNotFound
	}
	return st.rec, nil
}

const selectSQL = `SELECT ` + recordCols + ` FROM idem_records WHERE tenant = $1 AND key = $2`

// read returns the row under (tenant, key), or nil if there is none. A
// read on a connection that turns out dead is retried once: it changes
// nothing.
func (s *Store) read(ctx context.Context, tenant, key string) (*stored, error) {
	for attempt := 1; ; attempt++ {
		st, err := scanRecord(s.pool.QueryRow(ctx, selectSQL, tenant, key), tenant, key)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil, nil
		case err == nil:
			return st, nil
		case attempt == 1 && s.reconnect(err, true):
			continue
		}
		return nil, s.fail("read", err)
	}
}

// Update implements ledger.Store.
func (s *Store) Update(ctx context.Context, tenant, key string, fn func(cur *ledger.Record) (*ledger.Record, error)) error {
	return s.updateFenced(ctx, tenant, key, fence{}, fn)
}

// UpdateFenced implements ledger.FencedStore. The fence is a condition on
// the counter row in the statement that takes the number: an UPDATE …
// WHERE last = seen (or, for seen 0, an INSERT of a counter that must not
// exist yet). Under READ COMMITTED PostgreSQL re-checks that condition on
// the newest version of the row once a concurrent writer of it commits,
// so of two claims fenced on one value at most one takes a number. When
// the statement wrote nothing and did not lose to a row of its key, the
// counter is read to tell a failed fence from a lost race.
func (s *Store) UpdateFenced(ctx context.Context, tenant, key string, seen uint64, fn func(cur *ledger.Record) (*ledger.Record, error)) error {
	if seen > math.MaxInt64 {
		return fmt.Errorf("ledger/postgres: %w: fence seq %d out of range", ledger.ErrInvalidInput, seen)
	}
	return s.updateFenced(ctx, tenant, key, fence{on: true, seen: seen}, fn)
}

// fence is UpdateFenced's condition; the zero value is no fence.
type fence struct {
	on   bool
	seen uint64
}

// applies reports whether the fence conditions writing r.
func (f fence) applies(r *ledger.Record) bool { return f.on && newSeq(r) }

func (s *Store) updateFenced(ctx context.Context, tenant, key string, f fence, fn func(cur *ledger.Record) (*ledger.Record, error)) error {
	var (
		cur   *stored
		known bool // cur is what a read found (nil: absent)
	)
	for round := 1; round <= maxRounds; round++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var arg *ledger.Record
		if cur != nil {
			arg = cloneRecord(&cur.rec)
		}
		next, err := fn(arg)
		if !known && (err != nil || next == nil) {
			// fn answered for an absent key, which is a guess: read, then ask again.
			if cur, err = s.read(ctx, tenant, key); err != nil {
				return err
			}
			known = true
			round--
			continue
		}
		if err != nil {
			return err // fn's answer, unchanged
		}
		if next == nil {
			return nil
		}
		next.Tenant, next.Key = tenant, key
		if cur == nil {
			won, lost, err := s.insert(ctx, next, f)
			if err != nil {
				return err
			}
			if won {
				s.wake(notifyKey(tenant, key))
				return nil
			}
			cur, known = lost, true
			if cur == nil { // lost to a row the batch could not show: read it
				if cur, err = s.read(ctx, tenant, key); err != nil {
					return err
				}
			}
			continue
		}
		swapped, err := s.swap(ctx, cur, next, f)
		if err != nil {
			return err
		}
		if swapped {
			s.wake(notifyKey(tenant, key))
			return nil
		}
		if cur, err = s.read(ctx, tenant, key); err != nil {
			return err
		}
	}
	return fmt.Errorf("ledger/postgres: update after %d rounds: %w", maxRounds, ledger.ErrConflict)
}

// newSeq reports whether writing r takes the session's next number.
func newSeq(r *ledger.Record) bool { return r.Seq == 0 && r.Session != "" }

// takeSeq is a CTE "s" that takes (tenant $1, session $3)'s next number,
// with $21 the new row's retain_until; cond limits it to when the write
// will happen, so a no-op costs no number.
func takeSeq(cond string) string {
	return `WITH s AS (
	INSERT INTO idem_sessions AS c (tenant, session, last, retain_until)
	SELECT $1, $3, 1, $21 WHERE ` + cond + `
	ON CONFLICT (tenant, session) DO UPDATE
		SET last = c.last + 1, retain_until = GREATEST(c.retain_until, EXCLUDED.retain_until)
	RETURNING last
)
`
}

// takeSeqFenced is takeSeq on the condition that the counter stands at
// seen: for 0, that it does not exist (a concurrent insert of it makes this
// one do nothing); else an UPDATE whose WHERE PostgreSQL re-checks on the
// row's newest version after waiting for its lock. seenParam is the
// parameter holding seen.
func takeSeqFenced(cond string, seen uint64, seenParam string) string {
	if seen == 0 {
		return `WITH s AS (
	INSERT INTO idem_sessions AS c (tenant, session, last, retain_until)
	SELECT $1, $3, 1, $21 WHERE ` + cond + `
	ON CONFLICT (tenant, session) DO NOTHING
	RETURNING last
)
`
	}
	return `WITH s AS (
	UPDATE idem_sessions AS c SET last = c.last + 1, retain_until = GREATEST(c.retain_until, $21)
	WHERE c.tenant = $1 AND c.session = $3 AND c.last = ` + seenParam + ` AND ` + cond + `
	RETURNING last
)
`
}

const insertCols = `INSERT INTO idem_records (tenant, key, session, workflow, step, tool, canonical, hash, identity,
	embedding, embedding_model, status, result, error, class, attempt, token, lease_until, created_at, updated_at,
	retain_until, confirmed, seq, version)
`

const (
	insertAbsent = `NOT EXISTS (SELECT 1 FROM idem_records WHERE tenant = $1 AND key = $2)`
	insertFromS  = insertCols +
		`SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, s.last, 1 FROM s
ON CONFLICT (tenant, key) DO NOTHING
RETURNING seq`
)

var (
	insertSeqSQL = takeSeq(insertAbsent) + insertFromS
	// The fenced inserts: $23 is the fence when not 0.
	insertSeqFenced0SQL = takeSeqFenced(insertAbsent, 0, "") + insertFromS
	insertSeqFencedSQL  = takeSeqFenced(insertAbsent, 1, "$23") + insertFromS
	insertSQL           = insertCols +
		`VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, 1)
ON CONFLICT (tenant, key) DO NOTHING
RETURNING seq`
	// lostToSQL reads the row an insert lost to, in the same round trip;
	// $3 is the inserted token, so a won insert reads nothing.
	lostToSQL = selectSQL + ` AND token <> $3`
)

// insert writes next if (tenant, key) is free, in one round trip. It
// returns whether it won, else the row it lost to (nil if that row was
// not visible to the batch: read it).
// A fenced insert that neither won nor lost to a row of its key returns
// a *ledger.SessionMovedError if the counter has moved.
func (s *Store) insert(ctx context.Context, next *ledger.Record, f fence) (won bool, lost *stored, err error) {
	args := append([]any{next.Tenant, next.Key}, recordArgs(next)...)
	sql := insertSeqSQL
	switch {
	case !newSeq(next):
		sql, args = insertSQL, append(args, int64(next.Seq))
	case f.on && f.seen == 0:
		sql = insertSeqFenced0SQL
	case f.on:
		sql, args = insertSeqFencedSQL, append(args, int64(f.seen))
	}
	if next.Seq > math.MaxInt64 {
		return false, nil, fmt.Errorf("ledger/postgres: %w: seq %d out of range", ledger.ErrInvalidInput, next.Seq)
	}
	for attempt := 1; ; attempt++ {
		var b pgx.Batch
		var seq int64
		b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&seq)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			won = err == nil
			return err
		})
		b.Queue(lostToSQL, next.Tenant, next.Key, next.Token).QueryRow(func(row pgx.Row) error {
			st, err := scanRecord(row, next.Tenant, next.Key)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			lost = st
			return err
		})
		won, lost = false, nil
		err = s.pool.SendBatch(ctx, &b).Close()
		if err == nil {
			if won {
				next.Seq = uint64(seq)
			}
			if !won && lost == nil && f.applies(next) {
				if err := s.checkFence(ctx, next, f); err != nil {
					return false, nil, err
				}
			}
			return won, lost, nil
		}
		if attempt == 1 && s.reconnect(err, false) {
			continue
		}
		if isConflict(err) {
			return false, nil, nil // a deadlock or serialization failure: read and retry
		}
		if ambiguous(err) {
			// The batch may have committed before the answer was lost.
			return s.verify(ctx, "insert", next, 1, err)
		}
		return false, nil, s.fail("insert", err)
	}
}

var (
	updateSet = `UPDATE idem_records SET session = $3, workflow = $4, step = $5, tool = $6, canonical = $7, hash = $8,
	identity = $9, embedding = $10, embedding_model = $11, status = $12, result = $13, error = $14, class = $15,
	attempt = $16, token = $17, lease_until = $18, created_at = $19, updated_at = $20, retain_until = $21,
	confirmed = $22, `
	swapWhere = `version = version + 1
WHERE tenant = $1 AND key = $2 AND version = $23 AND token = $24
RETURNING seq`
	swapSeqSQL = takeSeq(swapExists) +
		updateSet + `seq = (SELECT last FROM s), ` + swapWhere
	swapSQL = updateSet + `seq = $25, ` + swapWhere
	// The fenced swaps: $25 is the fence when not 0. A failed fence leaves
	// s empty, and the row as it is.
	swapExists      = `EXISTS (SELECT 1 FROM idem_records WHERE tenant = $1 AND key = $2 AND version = $23 AND token = $24)`
	swapFencedWhere = `version = version + 1
WHERE tenant = $1 AND key = $2 AND version = $23 AND token = $24 AND EXISTS (SELECT 1 FROM s)
RETURNING seq`
	swapSeqFenced0SQL = takeSeqFenced(swapExists, 0, "") + updateSet + `seq = (SELECT last FROM s), ` + swapFencedWhere
	swapSeqFencedSQL  = takeSeqFenced(swapExists, 1, "$25") + updateSet + `seq = (SELECT last FROM s), ` + swapFencedWhere
)

// swap replaces cur with next if the row is still cur (same version and
// lease token), in one round trip, and reports whether it did. A fenced
// swap that did not happen returns a *ledger.SessionMovedError if the
// counter has moved.
func (s *Store) swap(ctx context.Context, cur *stored, next *ledger.Record, f fence) (bool, error) {
	args := append([]any{next.Tenant, next.Key}, recordArgs(next)...)
	args = append(args, cur.version, cur.rec.Token)
	sql := swapSeqSQL
	switch {
	case f.applies(next) && f.seen == 0:
		sql = swapSeqFenced0SQL
	case f.applies(next):
		sql, args = swapSeqFencedSQL, append(args, int64(f.seen))
	case !newSeq(next):
		if next.Seq > math.MaxInt64 {
			return false, fmt.Errorf("ledger/postgres: %w: seq %d out of range", ledger.ErrInvalidInput, next.Seq)
		}
		sql, args = swapSQL, append(args, int64(next.Seq))
	}
	for attempt := 1; ; attempt++ {
		var seq int64
		err := s.pool.QueryRow(ctx, sql, args...).Scan(&seq)
		switch {
		case err == nil:
			next.Seq = uint64(seq)
			return true, nil
		case errors.Is(err, pgx.ErrNoRows):
			if f.applies(next) {
				return false, s.checkFence(ctx, next, f)
			}
			return false, nil
		case attempt == 1 && s.reconnect(err, false):
			continue
		case ambiguous(err):
			won, _, err := s.verify(ctx, "update", next, cur.version+1, err)
			return won, err
		case isConflict(err):
			return false, nil // a deadlock or serialization failure: re-read and retry
		}
		return false, s.fail("update", err)
	}
}

// checkFence reads the counter of next's session after a fenced write
// that did not happen, and returns a *ledger.SessionMovedError if it is
// not at f.seen (the fence failed); nil means the write lost a race of its
// own key instead. The read is a statement of its own, after the write's:
// what it reads is committed, and so are all the records numbered up to it.
func (s *Store) checkFence(ctx context.Context, next *ledger.Record, f fence) error {
	for attempt := 1; ; attempt++ {
		var last int64
		err := s.pool.QueryRow(ctx, `SELECT last FROM idem_sessions WHERE tenant = $1 AND session = $2`,
			next.Tenant, next.Session).Scan(&last)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			last, err = 0, nil
		case err != nil && attempt == 1 && s.reconnect(err, true):
			continue
		case err != nil:
			return s.fail("read session counter", err)
		}
		if uint64(last) == f.seen {
			return nil
		}
		return &ledger.SessionMovedError{Seen: f.seen, Last: uint64(last)}
	}
}

// verify settles a write whose answer was lost (it may have committed):
// the write won if the row carries its (random) lease token at the
// version it wrote; then next.Seq is set from the row. Otherwise it
// returns an ErrUnavailable saying the outcome is unknown (a claim that
// did commit is then held by nobody and turns uncertain at its lease).
func (s *Store) verify(ctx context.Context, op string, next *ledger.Record, version int64, cause error) (bool, *stored, error) {
	st, err := s.read(ctx, next.Tenant, next.Key)
	if err == nil && st != nil && st.version == version && st.rec.Token == next.Token {
		next.Seq = st.rec.Seq
		s.log.Info("ledger/postgres: write committed though its answer was lost", "op", op, "tenant", next.Tenant, "key", next.Key)
		return true, nil, nil
	}
	s.log.Warn("ledger/postgres: write outcome unknown", "op", op, "tenant", next.Tenant, "key", next.Key, "err", cause)
	return false, nil, fmt.Errorf("ledger/postgres: %s: connection lost before the answer, outcome unknown: %w: %w", op, ErrUnavailable, cause)
}

// Delete implements ledger.Store.
func (s *Store) Delete(ctx context.Context, tenant, key string) error {
	for attempt := 1; ; attempt++ {
		tag, err := s.pool.Exec(ctx, `DELETE FROM idem_records WHERE tenant = $1 AND key = $2`, tenant, key)
		if err != nil {
			if attempt == 1 && s.reconnect(err, false) {
				continue
			}
			return s.fail("delete", err)
		}
		if tag.RowsAffected() == 0 {
			return ledger.ErrNotFound
		}
		s.wake(notifyKey(tenant, key))
		return nil
	}
}

// ListSession implements ledger.Store.
func (s *Store) ListSession(ctx context.Context, tenant, session string, after uint64, limit int) ([]ledger.Record, error) {
	if after >= math.MaxInt64 {
		return nil, nil
	}
	var lim any // NULL: no limit
	if limit > 0 {
		lim = int64(limit)
	}
	return s.list(ctx, "list session", tenant,
		`SELECT key, `+recordCols+` FROM idem_records
		WHERE tenant = $1 AND session = $2 AND session <> '' AND seq > $3 ORDER BY seq LIMIT $4`,
		tenant, session, int64(after), lim)
}

// ListWorkflow implements ledger.Store.
func (s *Store) ListWorkflow(ctx context.Context, tenant, workflow string) ([]ledger.Record, error) {
	return s.list(ctx, "list workflow", tenant,
		`SELECT key, `+recordCols+` FROM idem_records
		WHERE tenant = $1 AND workflow = $2 AND workflow <> '' ORDER BY created_at, key`,
		tenant, workflow)
}

func (s *Store) list(ctx context.Context, op, tenant, sql string, args ...any) ([]ledger.Record, error) {
	for attempt := 1; ; attempt++ {
		out, err := s.query(ctx, tenant, sql, args...)
		if err == nil {
			return out, nil
		}
		if attempt == 1 && s.reconnect(err, true) {
			continue
		}
		return nil, s.fail(op, err)
	}
}

func (s *Store) query(ctx context.Context, tenant, sql string, args ...any) ([]ledger.Record, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ledger.Record
	for rows.Next() {
		st, err := scanWith(rows, tenant, "", true)
		if errors.Is(err, ledger.ErrCorrupt) {
			// One damaged row must not take its session or workflow down
			// with it; reading or deleting its own key reports it.
			s.log.Warn("ledger/postgres: a listing skipped a corrupt record", "tenant", tenant, "err", err)
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, st.rec)
	}
	return out, rows.Err()
}
