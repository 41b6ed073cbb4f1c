package badger

// Durable writes, in groups.
//
// With Config.SyncWrites the store still opens Badger without its
// SyncWrites: Badger's own syncing fsyncs the write-ahead log once per
// commit inside its single write pipeline, and a new transaction's read
// timestamp waits for every commit in that pipeline (oracle.readTs →
// WaterMark.WaitForMark), so every reader queued behind other sessions'
// fsyncs. Instead, a commit here returns once it is in Badger's logs (the
// operating system's page cache), and an operation answers only once a
// sync round has made it durable:
//
//   - a write (Update that wrote, Delete) waits for the next round;
//   - a read (Get, Update that wrote nothing, the listings) waits only if
//     what it returns was written by a commit no round has covered yet: it
//     must not hand out a record that a power cut could take back. A read
//     of a durable record never waits, whatever is being written.
//
// A round takes a read timestamp (which waits for the commits already in
// Badger's pipeline, without any fsync), fsyncs the logs those commits went
// to, and then declares every version up to that timestamp durable. Every
// operation that joined before the round started is covered, so concurrent
// operations share one round: group commit. No lock of the store is held
// while a round runs. With Config.SyncDelay a round waits that long after
// it was asked for before it starts, so that writes coming one at a time
// share it too: an fsync costs the machine CPU (about 0.2 ms of kernel time
// on a virtual disk), which key hits running beside the writes then lack.
// It waits only when writes of more than one session came within the last
// companyWindow (as PostgreSQL's commit_siblings): a session writing alone
// would only wait for itself.
//
// The logs are Badger's write-ahead logs (Badger v4's layout: NNNNN.mem,
// one per memtable, each new one numbered one past the newest, which is
// the one being written; no value goes to a value log, see pieces.go),
// listed from its directory once, then looked for by number: the newest
// is fsynced every round; any other once, after it stopped growing (a
// memtable rotates every MemTableSize of writes, and Badger does not
// fsync the old log when SyncWrites is off, nor until its memtable is
// flushed to a table); and the directory when a log appeared. A failed
// fsync fails every later operation: after one, Linux may have dropped
// the pages it could not write, so a later fsync that succeeds proves
// nothing (the store must be reopened, which replays Badger's logs).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/idem-dev/idem/ledger"
)

// errClosed is what operations waiting for durability get once the store
// is closing.
var errClosed = errors.New("ledger/badger: store closed")

// groupSync makes commits durable in rounds shared by concurrent
// operations. It is safe for concurrent use; its loop goroutine is owned
// by the Store (run, then close).
type groupSync struct {
	db  *badger.DB
	dir string

	mu sync.Mutex // guards the fields below
	// durable: every version up to it is on disk.
	durable uint64
	// next is the round that operations joining now wait for; it starts
	// after they joined.
	next *round
	// err is the first failed round's error (or errClosed), sticky.
	err error

	kick chan struct{} // 1-buffered: next has waiters

	// delay is how long a round waits, after it was asked for, for more
	// operations to join (Config.SyncDelay); after makes that wait (tests
	// replace it before the first write). Set before the loop starts.
	delay time.Duration
	after func(time.Duration) <-chan time.Time
	now   func() time.Time
	// lastWriter is the session of the last write that said (guarded by
	// mu); company is when a write of another session than the one before
	// it came: a round waits Config.SyncDelay only within companyWindow of
	// that, so a writer alone is never delayed.
	lastWriter string
	company    time.Time

	// stats: the rounds run and operations covered (guarded by mu), and
	// the nanoseconds operations waited (waited, atomic).
	stats  ledger.SyncStats
	waited atomic.Int64

	// syncFile makes a log's written data durable: fdatasync where there
	// is one (the logs never change size but by growing, which it covers).
	// Tests replace it before the loop starts.
	syncFile func(*os.File) error

	// Used by the loop goroutine only: the number of the newest log
	// found (-1 before the first round), and the logs open, by number:
	// the newest, and older ones until their last fsync.
	newest int
	files  map[int]*os.File
}

// round is one sync round; done is closed when it ended, with err set.
type round struct {
	done    chan struct{}
	err     error
	waiters int // joined so far (tests read it); guarded by groupSync.mu
}

func newGroupSync(db *badger.DB, dir string) *groupSync {
	return &groupSync{
		db: db, dir: dir, next: &round{done: make(chan struct{})}, kick: make(chan struct{}, 1),
		syncFile: fdatasync, after: time.After, now: time.Now, newest: -1, files: map[int]*os.File{},
	}
}

// wait returns once every commit that returned before the call is durable:
// at the end of the next round. writer is the session that wrote ("" when
// not known).
func (g *groupSync) wait(writer string) error {
	g.mu.Lock()
	if writer != "" {
		if g.lastWriter != "" && writer != g.lastWriter {
			g.company = g.now()
		}
		g.lastWriter = writer
	}
	if g.err != nil {
		err := g.err
		g.mu.Unlock()
		return err
	}
	r := g.next
	r.waiters++
	g.mu.Unlock()
	start := g.now()
	select {
	case g.kick <- struct{}{}:
	default: // a round is already asked for
	}
	<-r.done
	g.waited.Add(int64(g.now().Sub(start)))
	return r.err
}

// syncStats reports the rounds run so far (SyncStats).
func (g *groupSync) syncStats() ledger.SyncStats {
	g.mu.Lock()
	st := g.stats
	g.mu.Unlock()
	st.WaitSeconds = time.Duration(g.waited.Load()).Seconds()
	return st
}

// covered returns once version v (a commit that returned before the call)
// is durable: at once if a round has covered it, else at the end of the
// next round.
func (g *groupSync) covered(v uint64) error {
	g.mu.Lock()
	durable, err := g.durable, g.err
	g.mu.Unlock()
	if v <= durable {
		return nil
	}
	if err != nil {
		return err
	}
	return g.wait("")
}

// run performs rounds as they are asked for, until ctx ends; then it
// performs a last one for the operations still waiting, and fails every
// later one with errClosed.
func (g *groupSync) run(ctx context.Context) {
	for {
		select {
		case <-g.kick:
		case <-ctx.Done():
		}
		g.mu.Lock()
		idle := g.next.waiters == 0
		company := g.delay > 0 && g.now().Sub(g.company) < companyWindow(g.delay)
		g.mu.Unlock()
		if idle && ctx.Err() == nil {
			// A kick left by an operation that the last round covered:
			// nothing waits, nothing to fsync.
			continue
		}
		if company && ctx.Err() == nil {
			// Let the operations that come within delay join this round.
			select {
			case <-g.after(g.delay):
			case <-ctx.Done():
			}
		}
		closing := ctx.Err() != nil
		g.mu.Lock()
		r := g.next
		g.next = &round{done: make(chan struct{})}
		failed := g.err
		if closing && g.err == nil {
			g.err = errClosed // from now on wait answers at once
		}
		g.mu.Unlock()
		if failed == nil && (!closing || r.waiters > 0) {
			start := g.now()
			ts, err := g.round()
			took := g.now().Sub(start)
			g.mu.Lock()
			g.stats.Rounds++
			g.stats.Operations += uint64(r.waiters)
			g.stats.Seconds += took.Seconds()
			if err != nil {
				failed = fmt.Errorf("ledger/badger: sync: %w", err)
				if g.err == nil || g.err == errClosed {
					g.err = failed
				}
			} else {
				g.durable = max(g.durable, ts)
			}
			g.mu.Unlock()
		}
		r.err = failed
		close(r.done)
		if closing {
			for _, f := range g.files {
				f.Close()
			}
			return
		}
	}
}

// companyWindow is how recently writes of two sessions must have come for
// a round to wait SyncDelay for more.
func companyWindow(delay time.Duration) time.Duration {
	return max(10*time.Millisecond, 10*delay)
}

// round fsyncs what the commits returned so far wrote, and returns the
// read timestamp up to which they are now durable.
//
// Only the first round lists the directory; later ones look for the log
// after the newest by name (Badger numbers its memtables' logs one by
// one), so that a round costs the same whatever the number of tables
// beside the logs: listing a directory of 300 tables on every round took
// 2.8 GB of garbage over 100,000 calls.
func (g *groupSync) round() (uint64, error) {
	txn := g.db.NewTransaction(false)
	ts := txn.ReadTs() // waits for the commits in Badger's pipeline, which fsyncs nothing
	txn.Discard()

	appeared := false
	if g.newest < 0 {
		logs, err := listLogs(g.dir)
		if err != nil {
			return 0, err
		}
		if len(logs) == 0 {
			// Not Badger v4's layout: fall back on Badger's own sync of the
			// log it writes now.
			return ts, g.db.Sync()
		}
		for _, l := range logs {
			// A log gone since the listing was flushed to a table, which
			// Badger syncs.
			if err := g.open(l.fid, l.name); err != nil && !errors.Is(err, os.ErrNotExist) {
				return 0, err
			}
		}
		g.newest, appeared = logs[len(logs)-1].fid, true
	}
	for { // the memtables rotated since the last round
		err := g.open(g.newest+1, logFile(g.newest+1))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return 0, err
		}
		g.newest, appeared = g.newest+1, true
	}
	for _, fid := range slices.Sorted(maps.Keys(g.files)) {
		f := g.files[fid]
		if err := g.syncFile(f); err != nil {
			return 0, fmt.Errorf("%s: %w", f.Name(), err)
		}
		if fid != g.newest { // it stopped growing, and is now on disk
			f.Close()
			delete(g.files, fid)
		}
	}
	if appeared {
		if err := syncDir(g.dir); err != nil {
			return 0, err
		}
	}
	return ts, nil
}

// open opens the log numbered fid, named name, into g.files.
func (g *groupSync) open(fid int, name string) error {
	f, err := os.Open(filepath.Join(g.dir, name))
	if err != nil {
		return err
	}
	g.files[fid] = f
	return nil
}

// listLogs returns the write-ahead logs in dir, oldest first.
func listLogs(dir string) ([]logName, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var logs []logName
	for _, e := range entries {
		if l, ok := parseLogName(e.Name()); ok {
			logs = append(logs, l)
		}
	}
	slices.SortFunc(logs, func(a, b logName) int { return a.fid - b.fid })
	return logs, nil
}

// logFile is the name Badger gives the log of memtable fid.
func logFile(fid int) string { return fmt.Sprintf("%05d.mem", fid) }

// logName is one of Badger's write-ahead logs.
type logName struct {
	name string
	fid  int
}

func parseLogName(name string) (logName, bool) {
	base, ok := strings.CutSuffix(name, ".mem")
	if !ok {
		return logName{}, false
	}
	fid, err := strconv.Atoi(base)
	if err != nil || fid < 0 {
		return logName{}, false
	}
	return logName{name: name, fid: fid}, true
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeEmptyLogs deletes the write-ahead logs in dir that are empty files.
// Badger creates a log and then sets its size; a power cut between the two
// leaves a file of 0 bytes, which holds no write and which Badger then
// refuses to open ("while opening fid: N err: Create a new file"), so the
// store would never start again. Nothing is lost by deleting it.
func removeEmptyLogs(dir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil // a new store
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, ok := parseLogName(e.Name()); !ok {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if info.Size() != 0 {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
		log.Warn("ledger/badger: removed an empty write-ahead log (a power cut while it was being created)", "file", e.Name())
	}
	return nil
}
