// Package badger is a ledger.Store on Badger v4, an embedded key-value
// store: one process, one directory, durable claims decided by Badger's
// transaction conflict detection.
//
// A claim is one read-write transaction: Get the key, and if the ledger's
// decision writes, Set it and Commit. Badger fails the later of two
// conflicting commits with ErrConflict; Update then re-reads and re-decides
// (a few rounds at most), so exactly one of any number of concurrent
// claimants wins and every loser sees the winner's record.
//
// Seq comes from a per-(tenant, session) counter taken under a striped
// mutex held from reading the counter to commit; a fenced write
// (UpdateFenced) checks the counter under that mutex, so it is atomic with
// the commit.
//
// Records expire through Badger's TTL at the first whole second after
// their RetainUntil (Badger truncates expiry to seconds; rounding up means
// never early). Change notification (Watch) is in-process: only this
// Store writes the directory, which Badger locks.
package badger

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/idem-dev/idem/ledger"
)

// Config configures a Store. Start from DefaultConfig. A plain value; Open
// copies it.
type Config struct {
	// Dir is the database directory; required.
	Dir string
	// SyncWrites makes every commit fsync before it returns. On by default:
	// without it a machine crash (not a process crash) can lose the last
	// acknowledged completions, and a lost SUCCESS means a duplicate side
	// effect.
	SyncWrites bool
	// GCInterval is how often the value log is garbage-collected.
	GCInterval time.Duration
	// GCDiscardRatio is the fraction of stale data a value-log file must
	// hold to be rewritten.
	GCDiscardRatio float64
	// Memory: Badger's defaults take ~86 MiB of heap at open; these keep
	// it near 11 MiB.
	MemTableSize   int64
	NumMemtables   int
	BlockCacheSize int64
	IndexCacheSize int64
	// ValueThreshold: values larger than this go to the value log.
	ValueThreshold int64
	// Logger receives Badger's own log lines and the store's; nil discards
	// them.
	Logger *slog.Logger
}

// DefaultConfig returns sync writes on, value-log GC every 5 minutes at
// ratio 0.5, and the small-memory options.
func DefaultConfig(dir string) Config {
	return Config{
		Dir:            dir,
		SyncWrites:     true,
		GCInterval:     5 * time.Minute,
		GCDiscardRatio: 0.5,
		MemTableSize:   8 << 20,
		NumMemtables:   2,
		BlockCacheSize: 8 << 20,
		IndexCacheSize: 4 << 20,
		ValueThreshold: 64 << 10,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("ledger/badger config: Dir is empty")
	case c.GCInterval <= 0:
		return fmt.Errorf("ledger/badger config: GCInterval must be positive, got %v", c.GCInterval)
	case c.GCDiscardRatio <= 0 || c.GCDiscardRatio >= 1:
		return fmt.Errorf("ledger/badger config: GCDiscardRatio must be in (0, 1), got %v", c.GCDiscardRatio)
	case c.MemTableSize < 1<<20:
		return fmt.Errorf("ledger/badger config: MemTableSize must be at least 1 MiB, got %d", c.MemTableSize)
	case c.NumMemtables < 1:
		return fmt.Errorf("ledger/badger config: NumMemtables must be at least 1, got %d", c.NumMemtables)
	case c.BlockCacheSize < 0 || c.IndexCacheSize < 0:
		return errors.New("ledger/badger config: cache sizes must not be negative")
	case c.ValueThreshold < 1 || c.ValueThreshold > 1<<20:
		return fmt.Errorf("ledger/badger config: ValueThreshold must be in [1, 1 MiB], got %d", c.ValueThreshold)
	}
	return nil
}

// maxRounds bounds how often Update re-runs after a conflict.
const maxRounds = 8

// Store is a ledger.Store on Badger. It is safe for concurrent use. Open
// it with Open and release it with Close; it owns the value-log GC
// goroutine.
type Store struct {
	db  *badger.DB
	cfg Config
	log *slog.Logger

	// seqStripes serialize, per (tenant, session) stripe, the writes that
	// take a new Seq, from reading the counter to commit, so that Seq order
	// is commit order.
	seqStripes [64]seqStripe
	seed       maphash.Seed

	watchers ledger.Watchers // by record key

	cancel    context.CancelFunc
	done      chan struct{} // closed when the GC goroutine has returned
	closeOnce sync.Once
	closeErr  error
}

// seqStripe is one stripe of session counters.
type seqStripe struct {
	mu sync.Mutex // guards cache, and is held from reading a counter to committing it
	// cache holds the committed value of recently used counters, so that
	// taking a number needs no read; it is authoritative because only this
	// Store writes counters, under mu. Bounded: cleared when full.
	cache map[string]seqCounter
}

type seqCounter struct {
	last    uint64 // last number taken
	expires uint64 // the counter entry's Badger expiry
}

// maxCachedCounters bounds each stripe's cache.
const maxCachedCounters = 1024

var _ ledger.FencedStore = (*Store)(nil)

// Open opens (or creates) the database in cfg.Dir and starts value-log GC.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	opts := badger.DefaultOptions(cfg.Dir).
		WithSyncWrites(cfg.SyncWrites).
		WithMemTableSize(cfg.MemTableSize).
		WithNumMemtables(cfg.NumMemtables).
		WithBlockCacheSize(cfg.BlockCacheSize).
		WithIndexCacheSize(cfg.IndexCacheSize).
		WithValueThreshold(cfg.ValueThreshold).
		WithNumVersionsToKeep(1).
		// Records are mostly float32 embeddings, which do not compress;
		// compressing them only costs compaction CPU.
		WithCompression(options.None).
		WithLogger(badgerLogger{log.With("component", "badger")})
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("ledger/badger: open %s: %w", cfg.Dir, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		db: db, cfg: cfg, log: log,
		seed:   maphash.MakeSeed(),
		cancel: cancel,
		done:   make(chan struct{}),
	}
	for i := range s.seqStripes {
		s.seqStripes[i].cache = make(map[string]seqCounter)
	}
	go func() {
		defer close(s.done)
		s.gcLoop(ctx)
	}()
	return s, nil
}

// Close stops value-log GC, waits for it (or for ctx), and closes the
// database. Calling it again returns the first call's result.
func (s *Store) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.cancel()
		select {
		case <-s.done:
		case <-ctx.Done():
			// A GC pass is still running; Badger's Close waits for it.
		}
		// Badger's Close flushes the memtable and retries that forever
		// when the disk fails (full, or the directory gone): past ctx the
		// store gives up waiting, so a process can still exit. What was
		// acknowledged is in the write-ahead log already.
		closed := make(chan error, 1)
		go func() { closed <- s.db.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				s.closeErr = fmt.Errorf("ledger/badger: close: %w", err)
			}
		case <-ctx.Done():
			s.closeErr = fmt.Errorf("ledger/badger: close: gave up waiting for the database to flush: %w", ctx.Err())
		}
	})
	return s.closeErr
}

func (s *Store) gcLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rewrites := 0
		for ctx.Err() == nil {
			err := s.db.RunValueLogGC(s.cfg.GCDiscardRatio)
			if err == nil {
				rewrites++
				continue
			}
			if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
				s.log.Warn("ledger/badger: value log GC", "err", err)
			}
			break
		}
		if rewrites > 0 {
			s.log.Debug("ledger/badger: value log GC", "rewritten_files", rewrites)
		}
	}
}

// Get implements ledger.Store.
func (s *Store) Get(ctx context.Context, tenant, key string) (ledger.Record, error) {
	if err := ctx.Err(); err != nil {
		return ledger.Record{}, err
	}
	var r ledger.Record
	err := s.db.View(func(txn *badger.Txn) error {
		rec, err := getRecord(txn, recordKey(tenant, key))
		if err != nil {
			return err
		}
		if rec == nil {
			return ledger.ErrNotFound
		}
		r = *rec
		return nil
	})
	if err != nil {
		return ledger.Record{}, translate(err)
	}
	return r, nil
}

// getRecord returns the record under rk, or nil if there is none.
func getRecord(txn *badger.Txn, rk []byte) (*ledger.Record, error) {
	item, err := txn.Get(rk)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r ledger.Record
	err = item.Value(func(v []byte) error {
		var err error
		r, err = decodeRecord(v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// Update implements ledger.Store.
func (s *Store) Update(ctx context.Context, tenant, key string, fn func(cur *ledger.Record) (*ledger.Record, error)) error {
	return s.updateFenced(ctx, tenant, key, fence{}, fn)
}

// UpdateFenced implements ledger.FencedStore. The counter is checked under
// its stripe's lock, which every write that takes a number of the session
// holds from reading the counter to committing it: no other number can be
// taken between the check and this commit. (That lock, not the
// transaction's conflict detection, is what orders counters here: they are
// written blind, see update.)
func (s *Store) UpdateFenced(ctx context.Context, tenant, key string, seen uint64, fn func(cur *ledger.Record) (*ledger.Record, error)) error {
	return s.updateFenced(ctx, tenant, key, fence{on: true, seen: seen}, fn)
}

// fence is UpdateFenced's condition; the zero value is no fence.
type fence struct {
	on   bool
	seen uint64
}

func (s *Store) updateFenced(ctx context.Context, tenant, key string, f fence, fn func(cur *ledger.Record) (*ledger.Record, error)) error {
	rk := recordKey(tenant, key)
	for round := 1; ; round++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		wrote, err := s.update(tenant, key, rk, f, fn)
		if errors.Is(err, badger.ErrConflict) {
			if round < maxRounds {
				continue
			}
			return fmt.Errorf("ledger/badger: update after %d rounds: %w", round, ledger.ErrConflict)
		}
		if d, ok := errors.AsType[decided](err); ok {
			return d.err // fn's answer, unchanged
		}
		if m, ok := errors.AsType[*ledger.SessionMovedError](err); ok {
			return m
		}
		if err != nil {
			return translate(err)
		}
		if wrote {
			s.notify(rk)
		}
		return nil
	}
}

// update runs one transaction of Update.
func (s *Store) update(tenant, key string, rk []byte, f fence, fn func(cur *ledger.Record) (*ledger.Record, error)) (wrote bool, err error) {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	cur, err := getRecord(txn, rk)
	if err != nil {
		return false, err
	}
	var arg *ledger.Record
	if cur != nil {
		c := *cur // fn may keep it; cur's slices are already our own copy
		arg = &c
	}
	next, err := fn(arg)
	if err != nil {
		return false, decided{err}
	}
	if next == nil {
		return false, nil
	}
	next.Tenant, next.Key = tenant, key
	expires := expiresAt(next.RetainUntil)

	var (
		stripe  *seqStripe
		ck      []byte
		counter seqCounter
	)
	if next.Seq == 0 && next.Session != "" {
		stripe, ck = s.stripe(tenant, next.Session), counterKey(tenant, next.Session)
		stripe.mu.Lock()
		defer stripe.mu.Unlock() // held through Commit: Seq order is commit order
		counter, err = s.loadCounter(stripe, ck)
		if err != nil {
			return false, err
		}
		if f.on && counter.last != f.seen {
			return false, &ledger.SessionMovedError{Seen: f.seen, Last: counter.last}
		}
		switch {
		case counter.last == 0:
			counter.expires = expires // a new counter: it lives as long as its first record
		case expires == 0 || counter.expires == 0:
			counter.expires = 0 // never expires
		default:
			counter.expires = max(counter.expires, expires) // outlives its records
		}
		counter.last++
		next.Seq = counter.last
		// Written blind (not read in txn), so it never makes txn conflict.
		e := &badger.Entry{Key: ck, Value: binary.BigEndian.AppendUint64(nil, counter.last), ExpiresAt: counter.expires}
		if err := txn.SetEntry(e); err != nil {
			return false, err
		}
	}
	if cur != nil {
		if cur.Session != "" && (cur.Session != next.Session || cur.Seq != next.Seq) {
			if err := txn.Delete(sessionKey(tenant, cur.Session, cur.Seq)); err != nil {
				return false, err
			}
		}
		if cur.Workflow != "" && cur.Workflow != next.Workflow {
			if err := txn.Delete(workflowKey(tenant, cur.Workflow, key)); err != nil {
				return false, err
			}
		}
	}
	if err := txn.SetEntry(&badger.Entry{Key: rk, Value: encodeRecord(nil, next), ExpiresAt: expires}); err != nil {
		return false, err
	}
	if next.Session != "" {
		e := &badger.Entry{Key: sessionKey(tenant, next.Session, next.Seq), Value: []byte(key), ExpiresAt: expires}
		if err := txn.SetEntry(e); err != nil {
			return false, err
		}
	}
	if next.Workflow != "" {
		e := &badger.Entry{Key: workflowKey(tenant, next.Workflow, key), Value: nil, ExpiresAt: expires}
		if err := txn.SetEntry(e); err != nil {
			return false, err
		}
	}
	if err := txn.Commit(); err != nil {
		if stripe != nil {
			delete(stripe.cache, string(ck)) // reload: the outcome may be unknown
		}
		return false, err
	}
	if stripe != nil {
		if len(stripe.cache) >= maxCachedCounters {
			clear(stripe.cache)
		}
		stripe.cache[string(ck)] = counter
	}
	return true, nil
}

// decided carries an error returned by Update's fn, so it is passed back
// unchanged rather than translated.
type decided struct{ err error }

func (d decided) Error() string { return d.err.Error() }

// loadCounter returns the committed state of counter ck; the caller holds
// stripe.mu. On a cache miss it reads the counter in a fresh transaction,
// which sees every committed number (the caller's own transaction may have
// started before the last one committed).
func (s *Store) loadCounter(stripe *seqStripe, ck []byte) (seqCounter, error) {
	if c, ok := stripe.cache[string(ck)]; ok {
		return c, nil
	}
	var c seqCounter
	err := s.db.View(func(rtxn *badger.Txn) error {
		item, err := rtxn.Get(ck)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		c.expires = item.ExpiresAt()
		return item.Value(func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("%w: session counter of %d bytes", ledger.ErrCorrupt, len(v))
			}
			c.last = binary.BigEndian.Uint64(v)
			return nil
		})
	})
	return c, err
}

func (s *Store) stripe(tenant, session string) *seqStripe {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(tenant)
	h.WriteByte(0)
	h.WriteString(session)
	return &s.seqStripes[h.Sum64()%uint64(len(s.seqStripes))]
}

// expiresAt converts a retention deadline in ms to Badger's whole-second
// expiry, rounding up so a record never vanishes before RetainUntil.
func expiresAt(retainUntilMs int64) uint64 {
	if retainUntilMs <= 0 {
		return 0 // no expiry
	}
	return uint64((retainUntilMs + 999) / 1000)
}

// Delete implements ledger.Store.
func (s *Store) Delete(ctx context.Context, tenant, key string) error {
	rk := recordKey(tenant, key)
	for round := 1; ; round++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := s.db.Update(func(txn *badger.Txn) error {
			cur, err := getRecord(txn, rk)
			if err != nil {
				return err
			}
			if cur == nil {
				return ledger.ErrNotFound
			}
			if cur.Session != "" {
				if err := txn.Delete(sessionKey(tenant, cur.Session, cur.Seq)); err != nil {
					return err
				}
			}
			if cur.Workflow != "" {
				if err := txn.Delete(workflowKey(tenant, cur.Workflow, key)); err != nil {
					return err
				}
			}
			return txn.Delete(rk)
		})
		if errors.Is(err, badger.ErrConflict) {
			if round < maxRounds {
				continue
			}
			return fmt.Errorf("ledger/badger: delete after %d rounds: %w", round, ledger.ErrConflict)
		}
		if err != nil {
			return translate(err)
		}
		s.notify(rk)
		return nil
	}
}

// ListSession implements ledger.Store.
func (s *Store) ListSession(ctx context.Context, tenant, session string, after uint64, limit int) ([]ledger.Record, error) {
	var out []ledger.Record
	err := s.db.View(func(txn *badger.Txn) error {
		prefix := sessionPrefix(tenant, session)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
		defer it.Close()
		for it.Seek(sessionKey(tenant, session, after+1)); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			k := it.Item().Key()
			seq := binary.BigEndian.Uint64(k[len(prefix):])
			key, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			rec, err := getRecord(txn, recordKey(tenant, string(key)))
			if err != nil {
				return err
			}
			if rec == nil || rec.Session != session || rec.Seq != seq {
				continue // the record moved or expired before its index entry
			}
			out = append(out, *rec)
			if limit > 0 && len(out) == limit {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}

// ListWorkflow implements ledger.Store.
func (s *Store) ListWorkflow(ctx context.Context, tenant, workflow string) ([]ledger.Record, error) {
	var out []ledger.Record
	err := s.db.View(func(txn *badger.Txn) error {
		prefix := workflowPrefix(tenant, workflow)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			key := string(it.Item().Key()[len(prefix):])
			rec, err := getRecord(txn, recordKey(tenant, key))
			if err != nil {
				return err
			}
			if rec == nil || rec.Workflow != workflow {
				continue
			}
			out = append(out, *rec)
		}
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	slices.SortFunc(out, func(a, b ledger.Record) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), strings.Compare(a.Key, b.Key))
	})
	return out, nil
}

// Watch implements ledger.Store.
func (s *Store) Watch(tenant, key string) (<-chan struct{}, func()) {
	return s.watchers.Watch(string(recordKey(tenant, key)))
}

// notify wakes the watchers of record key rk.
func (s *Store) notify(rk []byte) { s.watchers.Wake(string(rk)) }

// translate maps Badger's errors to the ledger's at the boundary.
func translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ledger.ErrNotFound), errors.Is(err, ledger.ErrCorrupt),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, badger.ErrConflict):
		return fmt.Errorf("ledger/badger: %w", ledger.ErrConflict)
	}
	return fmt.Errorf("ledger/badger: %w", err)
}

// badgerLogger routes Badger's log lines to slog: errors and warnings at
// their level, the chatter at debug.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) { b.l.Error(strings.TrimSpace(fmt.Sprintf(f, a...))) }
func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn(strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (b badgerLogger) Infof(f string, a ...any)  { b.l.Debug(strings.TrimSpace(fmt.Sprintf(f, a...))) }
func (b badgerLogger) Debugf(f string, a ...any) { b.l.Debug(strings.TrimSpace(fmt.Sprintf(f, a...))) }
