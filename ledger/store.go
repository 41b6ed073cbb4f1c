package ledger

import "context"

// Store keeps records durably and decides concurrent writes. The Ledger
// holds the state machine; a Store only has to provide an atomic
// read-modify-write per key, secondary listings, and change notification.
// ledger/ledgertest checks an implementation; every Store must pass it.
//
// Implementations must be safe for concurrent use. Records passed in and
// returned are never retained or aliased by the other side: a record a
// Store returns, or passes to Update's fn, is the receiver's to keep and
// modify.
//
// For a SQL backend: Update is a transaction that locks the row
// (INSERT … ON CONFLICT DO NOTHING, then SELECT … FOR UPDATE), Seq comes
// from a per-(tenant, session) counter row updated in the same transaction,
// expiry is a sweeper deleting rows past retain_until, and Watch is
// LISTEN/NOTIFY on the key.
type Store interface {
	// Get returns the record stored under (tenant, key), or an error
	// matching ErrNotFound. It may return a record past its RetainUntil
	// that the store has not removed yet; the Ledger filters those.
	Get(ctx context.Context, tenant, key string) (Record, error)

	// Update atomically reads the record under (tenant, key), passes it to
	// fn (nil when absent), and writes what fn returns: a non-nil record
	// replaces the stored one, nil leaves it as it is. If fn returns an
	// error, nothing is written and Update returns that error unchanged.
	//
	// The decision must be the store's: when two Updates of one key race,
	// the later commit must see the earlier one's write (Update re-runs fn
	// on the new state, so fn may run more than once and must only compute
	// its answer). If it cannot settle after a few rounds it returns an
	// error matching ErrConflict.
	//
	// The store owns these fields of the written record, and sets them on
	// the record fn returned before Update returns: Tenant and Key are set
	// to the arguments; when Seq is 0 and Session is not empty, Seq is
	// set to the next arrival number of (Tenant, Session), unique and
	// increasing in commit order (a reader that sees Seq n also sees every
	// record of the session with a lower Seq). The record must be kept at
	// least until RetainUntil and may vanish any time after it.
	Update(ctx context.Context, tenant, key string, fn func(cur *Record) (*Record, error)) error

	// Delete removes the record under (tenant, key), or returns an error
	// matching ErrNotFound.
	Delete(ctx context.Context, tenant, key string) error

	// ListSession returns up to limit records of (tenant, session) with Seq
	// greater than after, in increasing Seq order. limit <= 0 means no limit.
	ListSession(ctx context.Context, tenant, session string, after uint64, limit int) ([]Record, error)

	// ListWorkflow returns the records of (tenant, workflow) in arrival
	// order (CreatedAt, then Key).
	ListWorkflow(ctx context.Context, tenant, workflow string) ([]Record, error)

	// Watch returns a channel that is closed at the next change (Update
	// that wrote, or Delete) of (tenant, key) after the call, and a stop
	// function that releases it; stop must be called exactly once. A
	// backend that cannot observe every change must close the channel
	// spuriously rather than miss one: waiters re-read after each wake-up.
	Watch(tenant, key string) (changed <-chan struct{}, stop func())
}

// FencedStore is a Store that can make a write conditional on a session's
// counter, which is what a fenced claim (ClaimRequest.Fenced) needs. A
// Store that does not implement it refuses fenced claims (errors.ErrUnsupported).
// ledger/badger and ledger/postgres implement it.
type FencedStore interface {
	Store

	// UpdateFenced is Update with a fence on the counter of the written
	// record's (Tenant, Session): when the record fn returns would take a
	// new Seq (Seq 0, Session not empty), it is written only if that
	// counter's committed value is exactly seen (a counter never used, or
	// one that expired, counts as 0), checked atomically with the write.
	// Otherwise nothing is written and UpdateFenced returns a
	// *SessionMovedError holding the counter's value, at once, without
	// re-running fn. When fn writes nothing, or writes a record that keeps
	// its Seq, the fence plays no part and UpdateFenced is Update.
	UpdateFenced(ctx context.Context, tenant, key string, seen uint64, fn func(cur *Record) (*Record, error)) error
}

// SyncStats is what a store that makes its writes durable in shared sync
// rounds (group commit) has done since it opened. Rates of its fields over
// time give the round's mean fsync time (Seconds / Rounds), how many
// operations shared a round (Operations / Rounds), and how long an
// operation waited for the disk (WaitSeconds / Operations).
type SyncStats struct {
	// Rounds is the sync rounds run: each fsynced the logs once.
	Rounds uint64
	// Operations is the operations that waited for a round: writes, and
	// reads of a record no round had covered yet.
	Operations uint64
	// Seconds is the time the rounds took, fsyncs included.
	Seconds float64
	// WaitSeconds is the time operations waited for their round, from
	// asking for it to its end.
	WaitSeconds float64
}
