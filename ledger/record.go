// Package ledger records every side effect idem lets through and answers
// every retry from that record: one key, one effect.
//
// The contract:
//
//   - A record is identified by (tenant, key). Nothing crosses tenants: the
//     same key in two tenants is two records.
//   - A key is workflow_id:step_id:tool, or the caller's explicit
//     idempotency key in the namespace of its tool; a sampling retry gets a
//     derived key and may run afresh, a transient retry keeps its key and is
//     answered from the record. The three namespaces never alias (see
//     KeyFor); only KeyFor builds keys.
//   - Claim inserts a PENDING record with a fresh lease token if the key is
//     free (absent, expired, or FAILED transient). The Store decides the
//     race, never read-then-write in this package: exactly one concurrent
//     claimant wins, and every loser is told what it lost to (in progress,
//     duplicate success, permanent failure, or uncertain).
//   - Only the holder of the current lease token may Complete, Fail or
//     Renew a PENDING record. A worker whose lease expired may still finish
//     or renew it as long as nobody took it over; once someone has, its
//     token is stale. No lease ends later than Config.MaxLease after its
//     claim.
//   - A PENDING record whose lease has expired is uncertain: the effect may
//     or may not have happened. Claim reports it; Takeover claims it anew.
//   - SUCCESS and FAILED records are kept for the retention period and
//     replayed verbatim; after it they are gone, as if never written.
//   - Records of one session are numbered in arrival order (Seq); a reader
//     that sees Seq n has seen every earlier arrival of that session.
//
// Allowed transitions: (none) → PENDING; PENDING → SUCCESS; PENDING → FAILED
// (transient or permanent); FAILED transient → PENDING (a new claim);
// PENDING with an expired lease → PENDING (a takeover, new token); PENDING
// → PENDING with a later lease end (a renewal, same token). Anything else
// is refused with a sentinel error.
//
// A record that fails its store's integrity check is reported as a
// *CorruptError naming its key, and Forget removes it.
//
// The package has no dependency on a database: backends implement Store
// (ledger/badger and ledger/postgres) and are checked by the conformance
// suite in ledger/ledgertest.
package ledger

import (
	"encoding/json"
	"fmt"
)

// Status is the state of a record.
type Status uint8

// The states of a record.
const (
	StatusPending Status = iota + 1 // claimed, being executed
	StatusSuccess                   // executed, Result recorded
	StatusFailed                    // executed and failed, Error and Class recorded
)

// String returns PENDING, SUCCESS or FAILED.
func (s Status) String() string {
	switch s {
	case StatusPending:
		return "PENDING"
	case StatusSuccess:
		return "SUCCESS"
	case StatusFailed:
		return "FAILED"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// ErrorClass says whether a failure may be retried.
type ErrorClass uint8

// The classes of a failure.
const (
	ClassNone      ErrorClass = iota // not a failure
	ClassTransient                   // may succeed if run again: the key may be claimed again
	ClassPermanent                   // will fail again: the error is replayed
)

// String returns none, transient or permanent.
func (c ErrorClass) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassTransient:
		return "transient"
	case ClassPermanent:
		return "permanent"
	}
	return fmt.Sprintf("ErrorClass(%d)", uint8(c))
}

// Record is one entry of the ledger. Times are Unix milliseconds.
//
// A Record is a plain value, not safe for concurrent mutation; the ledger
// hands out deep copies, and the Token of a record is only ever returned to
// the claimant that holds it.
type Record struct {
	Tenant   string // the tenant owning the key; never empty
	Key      string // the idempotency key within the tenant; never empty
	Session  string // agent session the call arrived in; may be empty
	Workflow string // workflow id; may be empty
	Step     string // step id within the workflow; may be empty
	Tool     string // tool name

	Canonical      []byte    // canonical bytes of the call
	Hash           uint64    // hash of Canonical
	Identity       uint64    // digest of the call's identity fields
	Embedding      []float32 // embedding of the call's text view; may be nil
	EmbeddingModel string    // model that produced Embedding

	Status Status
	Result json.RawMessage // the recorded result when Status is SUCCESS
	Error  json.RawMessage // the recorded error when Status is FAILED
	Class  ErrorClass      // the failure's class when Status is FAILED

	Attempt int    // the caller's attempt number for this claim
	Token   string // lease token of the current claim; empty in records returned to non-holders
	// Confirmed is the key of an earlier call this execution was confirmed
	// as another action than (the caller's confirmed, after a confirm
	// decision named that call); empty otherwise. Set by the claim.
	Confirmed string

	LeaseUntil  int64  // when the PENDING lease expires (ms)
	CreatedAt   int64  // when the key was first claimed (ms)
	UpdatedAt   int64  // when the record last changed status or holder (ms): a PENDING record's claim time, which a renewal leaves
	RetainUntil int64  // when the record may vanish (ms)
	Seq         uint64 // arrival number within (Tenant, Session); assigned by the Store
}

// clone returns a deep copy of r, so callers cannot alias a store's memory.
func (r *Record) clone() Record {
	c := *r
	c.Canonical = cloneBytes(r.Canonical)
	c.Result = cloneBytes(r.Result)
	c.Error = cloneBytes(r.Error)
	if r.Embedding != nil {
		c.Embedding = append([]float32(nil), r.Embedding...)
	}
	return c
}

func cloneBytes[T ~[]byte](b T) T {
	if b == nil {
		return nil
	}
	return append(T(nil), b...)
}

// Outcome says what a Claim, Get or Wait found.
type Outcome uint8

// The outcomes.
const (
	// Claimed: the caller holds the lease (Claim.Token) and must execute,
	// then Complete or Fail.
	Claimed Outcome = iota + 1
	// InProgress: another claimant holds a live lease; wait or come back.
	InProgress
	// Duplicate: the effect happened; replay Record.Result.
	Duplicate
	// FailedPermanent: the effect failed permanently; replay Record.Error.
	FailedPermanent
	// Retryable: the last execution failed transiently; a Claim will
	// claim the key again. Returned by Get and Wait, never by Claim.
	Retryable
	// Uncertain: a PENDING record's lease expired; the effect may or may
	// not have happened. Takeover claims it with a new token.
	Uncertain
)

// String returns the outcome's name as the API reports it.
func (o Outcome) String() string {
	switch o {
	case Claimed:
		return "claimed"
	case InProgress:
		return "in_progress"
	case Duplicate:
		return "duplicate"
	case FailedPermanent:
		return "failed_permanent"
	case Retryable:
		return "retryable"
	case Uncertain:
		return "uncertain"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Claim is the answer of Claim, Takeover, Get and Wait: a plain value the
// caller owns.
type Claim struct {
	Outcome Outcome
	// Record is the record as it stands: the caller's own when Outcome is
	// Claimed, else the one it lost to (without its Token).
	Record Record
	// Token is the lease token when Outcome is Claimed, else empty.
	Token string
	// Previous is the record a claim replaced (a FAILED transient record,
	// or an uncertain one taken over), else nil.
	Previous *Record
}
