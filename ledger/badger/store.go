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
// the commit. A commit does not wait for the disk under it: with
// SyncWrites, an operation waits after it for a sync round that concurrent
// operations share (group commit, durable.go), and a read waits only for
// what it reads.
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
	// SyncWrites makes every write durable before it returns, and every
	// read return only durable records; concurrent writes share their
	// fsyncs. On by default: without it a machine crash (not a process
	// crash) can lose the last acknowledged completions, and a lost
	// SUCCESS means a duplicate side effect.
	SyncWrites bool
	// SyncDelay, with SyncWrites, is how long a sync round waits, once an
	// operation asked for it, for others to join before it fsyncs (as
	// PostgreSQL's commit_delay), when writes of more than one session
	// came lately (its commit_siblings; durable.go): fewer fsyncs for
	// writes that come one at a time, at up to SyncDelay more latency
	// each. 0 (the default): a round starts at once; concurrent writes
	// share it anyway.
	SyncDelay time.Duration
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
	// ValueThreshold: a record whose encoding is at least this long is
	// stored in pieces of less than this (pieces.go); at most 1 MiB and a
	// tenth of MemTableSize.
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
	case c.SyncDelay < 0 || c.SyncDelay > maxSyncDelay:
		return fmt.Errorf("ledger/badger config: SyncDelay must be in [0, %v], got %v", maxSyncDelay, c.SyncDelay)
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
	case c.ValueThreshold < 1<<10 || c.ValueThreshold > 1<<20:
		return fmt.Errorf("ledger/badger config: ValueThreshold must be in [1 KiB, 1 MiB], got %d", c.ValueThreshold)
	case c.ValueThreshold > c.MemTableSize/10:
		return fmt.Errorf("ledger/badger config: ValueThreshold (%d) must be at most a tenth of MemTableSize (%d)", c.ValueThreshold, c.MemTableSize)
	}
	return nil
}

// maxSyncDelay bounds Config.SyncDelay: past it every write would wait
// longer than a disk's fsync by far.
const maxSyncDelay = 100 * time.Millisecond

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

	// sync makes acknowledged operations durable (durable.go); nil when
	// Config.SyncWrites is off.
	sync      *groupSync
	cancel    context.CancelFunc // stops value-log GC
	done      chan struct{}      // closed when the GC goroutine has returned
	stopSync  context.CancelFunc
	syncDone  chan struct{} // closed when the sync goroutine has returned
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
		// Never Badger's own syncing: with cfg.SyncWrites the store syncs
		// in groups (durable.go).
		WithSyncWrites(false).
		WithMemTableSize(cfg.MemTableSize).
		WithNumMemtables(cfg.NumMemtables).
		WithBlockCacheSize(cfg.BlockCacheSize).
		WithIndexCacheSize(cfg.IndexCacheSize).
		WithValueThreshold(inlineThreshold(cfg.MemTableSize)).
		WithNumVersionsToKeep(1).
		// Compactions build every table in a buffer of twice its size,
		// eight and more at once, which Badger's pool keeps a while after:
		// with its defaults (2 MiB tables, doubling by level, four
		// compactors) 212 MB of heap after 100,000 calls; tables of 4 MiB
		// at every level and two compactors, 24 MB. Smaller tables cost
		// more: Badger allocates a 3 MiB buffer for the index of every
		// table it writes, whatever its size; with 1 MiB tables that was
		// 4.5 GB of the 12.1 GB allocated over 100,000 calls (4 MiB: 1.05
		// of 8.75 GB), garbage that drives the collector.
		WithBaseTableSize(4 << 20).
		WithNumCompactors(2).
		// Records are mostly embeddings (halves), which do not compress;
		// compressing them only costs compaction CPU.
		WithCompression(options.None).
		WithLogger(badgerLogger{log.With("component", "badger")})
	opts.TableSizeMultiplier = 1
	if err := removeEmptyLogs(cfg.Dir, log); err != nil {
		return nil, fmt.Errorf("ledger/badger: open %s: %w", cfg.Dir, err)
	}
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
	s.syncDone = make(chan struct{})
	if cfg.SyncWrites {
		s.sync = newGroupSync(db, cfg.Dir)
		s.sync.delay = cfg.SyncDelay
		sctx, stop := context.WithCancel(context.Background())
		s.stopSync = stop
		go func() {
			defer close(s.syncDone)
			s.sync.run(sctx)
		}()
	} else {
		s.stopSync = func() {}
		close(s.syncDone)
	}
	go func() {
		defer close(s.done)
		if !cfg.SyncWrites { // see gcLoop
			s.gcLoop(ctx)
		}
	}()
	return s, nil
}

// Close stops value-log GC, waits for it (or for ctx), stops the sync
// rounds after a last one for the operations still waiting (later ones
// fail), and closes the database. Calling it again returns the first
// call's result.
func (s *Store) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.cancel()
		select {
		case <-s.done:
		case <-ctx.Done():
			// A GC pass is still running; Badger's Close waits for it.
		}
		s.stopSync()
		select {
		case <-s.syncDone:
		case <-ctx.Done():
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

// Get implements ledger.Store.
func (s *Store) Get(ctx context.Context, tenant, key string) (ledger.Record, error) {
	if err := ctx.Err(); err != nil {
		return ledger.Record{}, err
	}
	var (
		r       ledger.Record
		version uint64
	)
	err := s.db.View(func(txn *badger.Txn) error {
		rec, meta, err := getRecord(txn, tenant, key)
		if err != nil {
			return err
		}
		if rec == nil {
			return ledger.ErrNotFound
		}
		r, version = *rec, meta.version
		return nil
	})
	if err != nil {
		return ledger.Record{}, translate(err)
	}
	if err := s.durable(version); err != nil {
		return ledger.Record{}, err
	}
	return r, nil
}

// stored is what getRecord learns of a record besides the record: the
// version (commit timestamp) that wrote it, and its stub when it is
// stored in pieces.
type stored struct {
	version uint64
	stub    *stub
}

// getRecord returns the record of (tenant, key), or nil if there is none.
// A record stored in pieces is reassembled; when that fails, the stub
// comes back with the error.
func getRecord(txn *badger.Txn, tenant, key string) (*ledger.Record, stored, error) {
	item, err := txn.Get(recordKey(tenant, key))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, stored{}, nil
	}
	if err != nil {
		return nil, stored{}, err
	}
	return itemRecord(txn, tenant, key, item)
}

// itemRecord decodes the record item holds (the value under
// recordKey(tenant, key)), as getRecord does.
func itemRecord(txn *badger.Txn, tenant, key string, item *badger.Item) (*ledger.Record, stored, error) {
	meta := stored{version: item.Version()}
	var r ledger.Record
	err := item.Value(func(v []byte) error {
		if isStub(v) {
			st, err := decodeStub(v)
			meta.stub = &st
			return err
		}
		var err error
		r, err = decodeRecord(v)
		return err
	})
	if err == nil && meta.stub != nil {
		r, err = readPieces(txn, tenant, key, *meta.stub)
	}
	if err != nil {
		return nil, meta, err
	}
	return &r, meta, nil
}

// SyncStats reports the sync rounds run since the store opened (see
// durable.go); false when Config.SyncWrites is off and there are none.
func (s *Store) SyncStats() (ledger.SyncStats, bool) {
	if s.sync == nil {
		return ledger.SyncStats{}, false
	}
	return s.sync.syncStats(), true
}

// committed returns once this operation's commits are durable (see
// durable.go). writer names whose write it was (tenant and session; ""
// when unknown), for Config.SyncDelay.
func (s *Store) committed(writer string) error {
	if s.sync == nil {
		return nil
	}
	return s.sync.wait(writer)
}

// durable returns once version v, which this operation read, is durable:
// at once for a record that was already (v 0: nothing was read).
func (s *Store) durable(v uint64) error {
	if s.sync == nil || v == 0 {
		return nil
	}
	return s.sync.covered(v)
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
		out, err := s.update(tenant, key, rk, f, fn)
		if errors.Is(err, badger.ErrConflict) {
			if round < maxRounds {
				continue
			}
			return fmt.Errorf("ledger/badger: update after %d rounds: %w", round, ledger.ErrConflict)
		}
		if d, ok := errors.AsType[decided](err); ok {
			// fn's answer, unchanged, once the record it read is durable.
			if err := s.durable(out.read); err != nil {
				return err
			}
			return d.err
		}
		if m, ok := errors.AsType[*ledger.SessionMovedError](err); ok {
			return m
		}
		if err != nil {
			return translate(err)
		}
		if !out.wrote {
			return s.durable(out.read)
		}
		s.notify(rk) // waiters re-read, and wait for the record's durability
		return s.committed(out.writer)
	}
}

// updated is what one transaction of Update did: the version of the
// record it read (0: none), and whether it wrote.
type updated struct {
	read   uint64
	wrote  bool
	writer string // what it wrote: the record's tenant and session
}

// update runs one transaction of Update. It commits without waiting for
// the disk: the caller does, after the stripe lock is released.
func (s *Store) update(tenant, key string, rk []byte, f fence, fn func(cur *ledger.Record) (*ledger.Record, error)) (out updated, err error) {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	cur, meta, err := getRecord(txn, tenant, key)
	if err != nil {
		return out, err
	}
	out.read = meta.version
	var arg *ledger.Record
	if cur != nil {
		c := *cur // fn may keep it; cur's slices are already our own copy
		arg = &c
	}
	next, err := fn(arg)
	if err != nil {
		return out, decided{err}
	}
	if next == nil {
		return out, nil
	}
	next.Tenant, next.Key = tenant, key
	out.writer = tenant + "\x00" + next.Session
	expires := expiresAt(next.RetainUntil)

	// A large record goes in pieces, durable before the stub naming them
	// is committed (pieces.go); this holds no lock of the store.
	var pieces *stub
	if int64(encodedBound(next)) >= s.cfg.ValueThreshold {
		if value := encodeRecord(nil, next); int64(len(value)) >= s.cfg.ValueThreshold {
			st, parts := splitRecord(value, int(s.cfg.ValueThreshold)-1)
			if err := s.writePieces(tenant, key, st, parts, expires); err != nil {
				return out, err
			}
			defer func() {
				if !out.wrote {
					if err := s.deletePieces(nil, tenant, key, st); err != nil {
						s.log.Warn("ledger/badger: deleting the pieces of a write that did not happen", "tenant", tenant, "key", key, "err", err)
					}
				}
			}()
			if err := s.committed(tenant + "\x00" + next.Session); err != nil {
				return out, err
			}
			pieces = &st
		}
	}

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
			return out, err
		}
		if f.on && counter.last != f.seen {
			return out, &ledger.SessionMovedError{Seen: f.seen, Last: counter.last}
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
			return out, err
		}
	}
	if meta.stub != nil { // the current version's pieces go with it
		if err := s.deletePieces(txn, tenant, key, *meta.stub); err != nil {
			return out, err
		}
	}
	if cur != nil {
		if cur.Session != "" && (cur.Session != next.Session || cur.Seq != next.Seq) {
			if err := txn.Delete(sessionKey(tenant, cur.Session, cur.Seq)); err != nil {
				return out, err
			}
		}
		if cur.Workflow != "" && cur.Workflow != next.Workflow {
			if err := txn.Delete(workflowKey(tenant, cur.Workflow, key)); err != nil {
				return out, err
			}
		}
	}
	var value []byte
	if pieces != nil {
		pieces.seq = next.Seq // taken after the pieces were written
		value = encodeStub(*pieces)
	} else {
		value = encodeRecord(nil, next)
	}
	if err := txn.SetEntry(&badger.Entry{Key: rk, Value: value, ExpiresAt: expires}); err != nil {
		return out, err
	}
	// An index entry lives at least as long as its record. One that stays
	// (same session and Seq, same workflow) is rewritten only when the
	// record now outlives it: a completion, a renewal or an embedding
	// writes the record alone.
	outlives := cur == nil || !lasts(expiresAt(cur.RetainUntil), expires)
	if next.Session != "" && (outlives || cur.Session != next.Session || cur.Seq != next.Seq) {
		e := &badger.Entry{Key: sessionKey(tenant, next.Session, next.Seq), Value: []byte(key), ExpiresAt: expires}
		if err := txn.SetEntry(e); err != nil {
			return out, err
		}
	}
	if next.Workflow != "" && (outlives || cur.Workflow != next.Workflow) {
		e := &badger.Entry{Key: workflowKey(tenant, next.Workflow, key), Value: nil, ExpiresAt: expires}
		if err := txn.SetEntry(e); err != nil {
			return out, err
		}
	}
	if err := txn.Commit(); err != nil {
		if stripe != nil {
			delete(stripe.cache, string(ck)) // reload: the outcome may be unknown
		}
		return out, err
	}
	if stripe != nil {
		if len(stripe.cache) >= maxCachedCounters {
			clear(stripe.cache)
		}
		stripe.cache[string(ck)] = counter
	}
	out.wrote = true
	return out, nil
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

// lasts reports whether an entry expiring at old (Badger's expiry, 0 for
// never) lives at least until new.
func lasts(old, new uint64) bool { return old == 0 || (new != 0 && new <= old) }

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
			cur, meta, err := getRecord(txn, tenant, key)
			if meta.stub != nil {
				if err := s.deletePieces(txn, tenant, key, *meta.stub); err != nil {
					return err
				}
			}
			if errors.Is(err, ledger.ErrCorrupt) {
				// Remove the raw entry; its index entries, unreadable, are
				// skipped by the listings until they expire.
				s.log.Warn("ledger/badger: deleting a corrupt record", "tenant", tenant, "key", key, "err", err)
				return txn.Delete(rk)
			}
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
		return s.committed("")
	}
}

// ListSession implements ledger.Store.
func (s *Store) ListSession(ctx context.Context, tenant, session string, after uint64, limit int) ([]ledger.Record, error) {
	var (
		out    []ledger.Record
		newest uint64 // the highest version listed
	)
	// add appends the record an index entry of Seq seq names, unless it
	// moved or expired before its index entry; it reports whether the
	// listing is full.
	add := func(txn *badger.Txn, seq uint64, key string) (bool, error) {
		rec, meta, err := getRecord(txn, tenant, key)
		if s.skipCorrupt(tenant, key, err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if rec == nil || rec.Session != session || rec.Seq != seq {
			return false, nil
		}
		out = append(out, *rec)
		newest = max(newest, meta.version)
		return limit > 0 && len(out) == limit, nil
	}
	last, cached := s.cachedLast(tenant, session) // read before the snapshot, see tailReads
	if cached && last <= after {
		// Nothing was numbered past after: what a check finds when its
		// view is up to date, told without a transaction.
		return nil, nil
	}
	err := s.db.View(func(txn *badger.Txn) error {
		if cached && last-min(last, after) <= tailReads {
			for seq := after + 1; seq <= last; seq++ {
				item, err := txn.Get(sessionKey(tenant, session, seq))
				if errors.Is(err, badger.ErrKeyNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				key, err := item.ValueCopy(nil)
				if err != nil {
					return err
				}
				if full, err := add(txn, seq, string(key)); full || err != nil {
					return err
				}
			}
			return nil
		}
		prefix := sessionPrefix(tenant, session)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
		defer it.Close()
		for it.Seek(sessionKey(tenant, session, after+1)); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			seq := binary.BigEndian.Uint64(it.Item().Key()[len(prefix):])
			key, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if full, err := add(txn, seq, string(key)); full || err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	if err := s.durable(newest); err != nil {
		return nil, err
	}
	return out, nil
}

// tailReads: a listing of at most this many numbers past the last one a
// caller saw (a check bringing its view up to date) reads them one by
// one, which the tables' bloom filters make cheap, instead of seeking an
// iterator through every table. It needs the session's last number from
// the stripe's cache, which is authoritative (only this store takes
// numbers) and is read before the listing's snapshot: every number up to
// it was committed by then, so the listing sees every record up to it, as
// one taken at that instant would; a number taken after may or may not be
// listed, as with the iterator.
const tailReads = 16

// cachedLast returns the last number taken in (tenant, session) if its
// stripe's cache holds it and no write of the stripe holds the lock (a
// listing does not wait for one: it iterates instead).
func (s *Store) cachedLast(tenant, session string) (uint64, bool) {
	stripe := s.stripe(tenant, session)
	if !stripe.mu.TryLock() {
		return 0, false
	}
	defer stripe.mu.Unlock()
	c, ok := stripe.cache[string(counterKey(tenant, session))]
	return c.last, ok
}

// ListWorkflow implements ledger.Store.
func (s *Store) ListWorkflow(ctx context.Context, tenant, workflow string) ([]ledger.Record, error) {
	// The workflow index names records; each is read by its key.
	read := func(txn *badger.Txn, key string, _ *badger.Item) (*ledger.Record, stored, error) {
		return getRecord(txn, tenant, key)
	}
	return s.listPrefix(ctx, tenant, workflowPrefix(tenant, workflow), read,
		func(r *ledger.Record) bool { return r.Workflow == workflow })
}

// listPrefix lists the records the keys under prefix lead to (read gets
// one from its key and the iterator's item), those keep accepts, oldest
// first (then by key), once none of them is one a power cut could take
// back. A corrupt record is left out (skipCorrupt).
func (s *Store) listPrefix(ctx context.Context, tenant string, prefix []byte,
	read func(txn *badger.Txn, key string, item *badger.Item) (*ledger.Record, stored, error),
	keep func(*ledger.Record) bool) ([]ledger.Record, error) {
	var (
		out    []ledger.Record
		newest uint64 // the highest version listed
	)
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			key := string(it.Item().Key()[len(prefix):])
			rec, meta, err := read(txn, key, it.Item())
			if s.skipCorrupt(tenant, key, err) {
				continue
			}
			if err != nil {
				return err
			}
			if rec == nil || !keep(rec) {
				continue
			}
			out = append(out, *rec)
			newest = max(newest, meta.version)
		}
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	if err := s.durable(newest); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b ledger.Record) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), strings.Compare(a.Key, b.Key))
	})
	return out, nil
}

// skipCorrupt reports whether err is a corrupt record, which a listing
// leaves out (and logs): one damaged record must not take its session or
// workflow down with it. Reading or deleting its own key reports it.
func (s *Store) skipCorrupt(tenant, key string, err error) bool {
	if !errors.Is(err, ledger.ErrCorrupt) {
		return false
	}
	s.log.Warn("ledger/badger: a listing skipped a corrupt record", "tenant", tenant, "key", key, "err", err)
	return true
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
// their level, the chatter at debug. A line is formatted only when its
// level is logged: Badger writes debug lines for every batch of commits.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.log(slog.LevelError, f, a) }
func (b badgerLogger) Warningf(f string, a ...any) { b.log(slog.LevelWarn, f, a) }
func (b badgerLogger) Infof(f string, a ...any)    { b.log(slog.LevelDebug, f, a) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.log(slog.LevelDebug, f, a) }

func (b badgerLogger) log(level slog.Level, f string, a []any) {
	ctx := context.Background()
	if b.l.Enabled(ctx, level) {
		b.l.Log(ctx, level, strings.TrimSpace(fmt.Sprintf(f, a...)))
	}
}
