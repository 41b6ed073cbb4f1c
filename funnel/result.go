package funnel

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/idem-dev/idem/canon"
)

// Decision is the answer to a check.
type Decision string

// The decisions. Every one but Execute flags the call: the agent must not
// execute it now.
const (
	// Execute: run the call, then complete or fail the key with the token.
	Execute Decision = "execute"
	// Duplicate: the effect already happened; Match holds its result (or,
	// for a permanent failure, its error) to hand back instead.
	Duplicate Decision = "duplicate"
	// InProgress: the same effect is being executed right now under Match.
	InProgress Decision = "in_progress"
	// Confirm: a call very like this one ran (Match); ask before running.
	Confirm Decision = "confirm"
	// Uncertain: the earlier execution's lease expired without a result:
	// the effect may or may not have happened. Pass Match.Key downstream,
	// or take the key over (Request.Takeover) after checking.
	Uncertain Decision = "uncertain"
)

// Stage names the stage that decided.
type Stage string

// The stages.
const (
	StageKey      Stage = "key"      // the ledger record of the call's own key
	StageExact    Stage = "exact"    // same tool and canonical hash in the session
	StageSemantic Stage = "semantic" // embedding similarity past the identity gate
	StageJudge    Stage = "judge"    // the LLM judge, for the ambiguous band
	StageNew      Stage = "new"      // nothing matched: a new effect
)

// AttemptKind says why a call is being made again.
type AttemptKind string

// The attempt kinds.
const (
	// First is a call made for the first time.
	First AttemptKind = "first"
	// Transient is the same intent again after a timeout or error: it keeps
	// its key and is answered from the record.
	Transient AttemptKind = "transient"
	// Sampling wants a fresh answer: it gets a derived key and may execute
	// afresh, and is never flagged against its own base key's records.
	Sampling AttemptKind = "sampling"
)

// Attempt describes the call's place among its retries.
type Attempt struct {
	Kind AttemptKind
	// Number is the attempt's number (1 for the first).
	Number int
	// Error is the previous attempt's error (JSON or text); a sampling
	// retry without Number derives its key from it.
	Error []byte
}

// Request is one check.
type Request struct {
	Tenant  string // required
	Session string // required: the scope of semantic search
	// Workflow and Step give the key workflow:step:tool when Key is empty.
	Workflow, Step string
	// Key is the caller's explicit idempotency key.
	Key  string
	Tool string
	// Arguments is a JSON object or a JSON string holding one.
	Arguments []byte
	Attempt   Attempt
	// Wait is how long to wait for an in-flight twin to finish before
	// answering in_progress; bounded by Config.MaxWait.
	Wait time.Duration
	// Today is the caller's local date when it made the call: relative
	// dates in its identity fields ("tomorrow", "next Monday") are read as
	// the dates they name on that day (see canon.Canonicalizer.CanonicalizeOn).
	// Zero: the day the check runs in the tool's typed timezone, when one
	// is configured, else relative dates stay strings.
	Today canon.Date
	// Confirmed is the key of an earlier call the caller (the agent, or a
	// person) has confirmed is another action than this one, after a
	// confirm naming it: the call is not compared with it, and executes
	// unless something else matches.
	Confirmed string
	// Takeover claims a key whose earlier execution is uncertain, with a
	// new token (the caller has checked that the effect did not happen, or
	// passes the key downstream to an idempotent API).
	Takeover bool
}

// Match is the earlier call a decision refers to.
type Match struct {
	Key      string `json:"key"`
	Tool     string `json:"tool"`
	Workflow string `json:"workflow_id,omitempty"`
	// Session is the session the earlier call was made in (another one
	// when the policy's scope is a workflow or the tenant).
	Session    string          `json:"session_id,omitempty"`
	Step       string          `json:"step_id,omitempty"`
	Status     string          `json:"status"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      json.RawMessage `json:"error,omitempty"`
	ErrorClass string          `json:"error_class,omitempty"`
	// Similarity is the cosine of the text views (1 for the key and exact
	// stages, and for calls without text whose identity fields are equal).
	Similarity float64 `json:"similarity"`
	// Probability is the pair scorer's probability that the two calls'
	// text views ask for the same effect, when the scorer is on.
	Probability float64 `json:"probability,omitempty"`
	CreatedAt   int64   `json:"created_at_ms"`
	leaseUntil  int64   // the record's lease end (ms), for LeaseExpiresAt
}

// Verdict is the judge's answer, when it was asked.
type Verdict struct {
	Duplicate  bool    `json:"duplicate"`
	Confidence float64 `json:"confidence"`
	Reason     string  `json:"reason"`
}

// Result is the answer to a check, with everything that explains it.
type Result struct {
	Decision Decision `json:"decision"`
	Stage    Stage    `json:"stage"`
	// Key is the call's own ledger key: pass it downstream, and to
	// complete or fail when the decision is Execute.
	Key string `json:"key"`
	// Token and LeaseUntil are set when the decision is Execute.
	Token      string    `json:"token,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// LeaseExpiresAt is set when the decision is InProgress: when the
	// lease of the call in progress ends, unless its holder renews it.
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`
	Match          *Match    `json:"match,omitempty"`
	Judge          *Verdict  `json:"judge,omitempty"`
	// Scope is "workflow" or "tenant" when the match came from that scope
	// (the policy's scope), across sessions.
	Scope string `json:"scope,omitempty"`
	// Policy names the action type whose policy applied.
	Policy string `json:"policy"`
	// Reason says in a sentence why.
	Reason string `json:"reason"`
	// BudgetExceeded: the budget ran out before the semantic stage or the
	// judge could finish; the policy's fallback decided.
	BudgetExceeded bool `json:"budget_exceeded,omitempty"`
	// NotCompared is set when earlier calls that passed the identity gate
	// could not be compared with this one; the policy's Uncompared
	// fallback decided.
	NotCompared *NotCompared `json:"not_compared,omitempty"`
	// Notes are facts worth knowing about the decision: a text view split
	// into windows, a judge error, arguments that differ from the record
	// a key replays.
	Notes []string `json:"notes,omitempty"`
	// ReferenceDate is the day relative dates in the call are read
	// against (YYYY-MM-DD): the request's Today or the day in the tool's
	// typed timezone; "" when the check had neither.
	ReferenceDate string `json:"reference_date,omitempty"`
	// Hash and IdentityDigest of the canonical call (hex in JSON).
	Hash           uint64 `json:"-"`
	IdentityDigest uint64 `json:"-"`
	// TimingsUS is the time each stage took, in microseconds.
	TimingsUS map[string]int64 `json:"timings_us"`
}

// MarshalJSON writes r with the hash and identity digest in hex.
func (r Result) MarshalJSON() ([]byte, error) { return json.Marshal(r.Wire()) }

// Wire returns r in the form MarshalJSON writes. An encoder given it
// (json.NewEncoder(w).Encode(r.Wire())) writes the same bytes in one pass:
// encoding/json checks and compacts whatever a MarshalJSON returns, which
// for a check's answer took as long again as encoding it
// (BenchmarkResultJSON).
func (r Result) Wire() any {
	return resultWire{plainResult(r), canon.HashHex(r.Hash), canon.HashHex(r.IdentityDigest)}
}

// plainResult is Result without its methods, so that encoding it does not
// call MarshalJSON again.
type plainResult Result

type resultWire struct {
	plainResult
	Hash     string `json:"hash"`
	Identity string `json:"identity_digest"`
}

// NotCompared says which earlier calls a check could not compare with, and
// why.
type NotCompared struct {
	// Reason: "budget", "the encoder queue is full", "encoder error: …",
	// "the session's earlier calls are still loading from the ledger", …
	Reason string `json:"reason"`
	// Keys of the (newest) earlier calls left uncompared whose effect
	// counts; empty when the session's calls were not known yet.
	Keys []string `json:"keys,omitempty"`
}

// Flagged reports whether the agent must not execute the call now.
func (r *Result) Flagged() bool { return r.Decision != Execute }

// Errors of a check. Input errors wrap the canon or ledger error that names
// the field.
var (
	// ErrInvalidRequest: a required field is missing or malformed.
	ErrInvalidRequest = errors.New("funnel: invalid request")
	// ErrKeyReuse: an explicit idempotency key was reused with other
	// identity fields under a strict policy (the default).
	ErrKeyReuse = errors.New("funnel: idempotency key reused with different arguments")
)
