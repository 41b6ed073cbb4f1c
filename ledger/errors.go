package ledger

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Match them with errors.Is; the returned errors wrap them
// with the operation and the detail.
var (
	// ErrNotFound: no live record under the key (never claimed, forgotten,
	// or past its retention).
	ErrNotFound = errors.New("ledger: not found")
	// ErrStaleToken: the lease token is not the record's current one (the
	// lease was taken over, or the key was claimed again).
	ErrStaleToken = errors.New("ledger: stale lease token")
	// ErrNotPending: the record is already SUCCESS or FAILED, so it cannot
	// be completed or failed (again).
	ErrNotPending = errors.New("ledger: record is not pending")
	// ErrTooLarge: a result, error or canonical call exceeds
	// Config.MaxResultBytes.
	ErrTooLarge = errors.New("ledger: too large")
	// ErrInvalidInput: an argument is missing or malformed; the error is a
	// *FieldError naming the field.
	ErrInvalidInput = errors.New("ledger: invalid input")
	// ErrConflict: the store kept losing a write race on this key and
	// gave up; the caller may retry.
	ErrConflict = errors.New("ledger: write conflict, retry")
	// ErrCorrupt: a stored record failed its integrity check. Reads and
	// writes of its key fail with a *CorruptError naming it until the
	// record is forgotten (Forget removes the raw entry); listings skip it.
	ErrCorrupt = errors.New("ledger: corrupt record")
	// ErrLeaseLimit: a renewal would hold the key past Config.MaxLease
	// from its claim; the lease was not extended.
	ErrLeaseLimit = errors.New("ledger: lease cannot be extended past the maximum lease")
	// ErrInProgress: Forget of a record whose call is executing under a
	// live lease, which would let it run a second time (force it to).
	ErrInProgress = errors.New("ledger: the record's call is in progress")
	// ErrUnavailable: the store cannot be reached right now (a database
	// connection lost, a statement timed out); the caller may retry.
	ErrUnavailable = errors.New("ledger: store unavailable")
	// ErrSessionMoved: a fenced claim (ClaimRequest.Fenced) would have
	// taken a new Seq, but the session's counter was no longer the one the
	// caller had compared against; nothing was written. The error is a
	// *SessionMovedError saying where the counter stands. The caller
	// compares its call with what arrived since and claims again.
	ErrSessionMoved = errors.New("ledger: session moved on")
)

// SessionMovedError reports a fenced claim refused because the session's
// counter had moved; it matches ErrSessionMoved and is immutable.
type SessionMovedError struct {
	Seen uint64 // the counter value the claim was fenced on
	// Last is the counter's committed value when the store refused: a
	// listing of the session started after the refusal holds every live
	// record numbered up to Last. It is lower than Seen when the session's
	// numbering restarted (its records and counter expired).
	Last uint64
}

func (e *SessionMovedError) Error() string {
	return fmt.Sprintf("ledger: session moved on: fenced at seq %d, counter at %d", e.Seen, e.Last)
}

// Is reports whether target is ErrSessionMoved.
func (e *SessionMovedError) Is(target error) bool { return target == ErrSessionMoved }

// CorruptError reports a stored record that failed its integrity check,
// naming its key; it matches ErrCorrupt and is immutable.
type CorruptError struct {
	Key    string // the record's key
	Reason string // what the check found: "checksum mismatch", …
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("ledger: corrupt record under key %q: %s", e.Key, e.Reason)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Corrupt returns a *CorruptError for key. Stores wrap their integrity
// failures with it (err's text becomes the reason).
func Corrupt(key string, err error) error {
	if ce, ok := errors.AsType[*CorruptError](err); ok {
		return ce
	}
	return &CorruptError{Key: key, Reason: strings.TrimPrefix(err.Error(), ErrCorrupt.Error()+": ")}
}

// FieldError reports a bad argument and names it; it is immutable. It matches
// ErrInvalidInput, or ErrTooLarge when the value is over a size limit.
type FieldError struct {
	Field  string // the argument's name: "tenant", "key", "workflow_id", "result", …
	Reason string // what is wrong with it: "empty", "not valid JSON", …
	tooBig bool
}

func (e *FieldError) Error() string {
	if e.tooBig {
		return fmt.Sprintf("ledger: %s: too large: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("ledger: invalid input: %s: %s", e.Field, e.Reason)
}

// Is reports whether target is ErrInvalidInput (or ErrTooLarge for a size
// violation).
func (e *FieldError) Is(target error) bool {
	if e.tooBig {
		return target == ErrTooLarge
	}
	return target == ErrInvalidInput
}

func invalid(field, reason string) error {
	return &FieldError{Field: field, Reason: reason}
}

func tooLarge(field string, size, limit int) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf("%d bytes, limit %d", size, limit), tooBig: true}
}
