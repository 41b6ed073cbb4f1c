// Package client is a Go client of idem's HTTP API, and Guard, which
// wraps one side-effecting tool call: check, then run it and record its
// outcome, or hand back the recorded result of the earlier call.
//
// The client holds no state besides its HTTP client and is safe for
// concurrent use. It speaks the API as the OpenAPI document at
// /openapi.json describes it; errors from the server are *APIError values
// carrying the problem document (status, detail naming the field).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Config configures a Client. Start from DefaultConfig.
type Config struct {
	// BaseURL is the server's root: http://127.0.0.1:8080.
	BaseURL string
	// APIKey is sent as a bearer token; empty for a server without auth.
	APIKey string
	// HTTPClient sends the requests; nil means one with Timeout.
	HTTPClient *http.Client
	// Timeout bounds each request when HTTPClient is nil. It must exceed
	// the longest WaitMS a check asks for.
	Timeout time.Duration
	// Wait is what Guard asks the server to wait for an in-flight twin per
	// check (wait_ms), and MaxInProgress how many checks Guard makes
	// before it gives up on a call that stays in progress.
	Wait          time.Duration
	MaxInProgress int
	// Clock times Guard's lease renewals; nil means the system clock.
	// Tests inject one.
	Clock Clock
}

// Clock is what Guard's lease renewals wait on.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the system's clock, the Clock used when none is given.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// DefaultConfig returns a 60 s timeout and, for Guard, waits of 10 s,
// three times.
func DefaultConfig(baseURL string) Config {
	return Config{BaseURL: baseURL, Timeout: 60 * time.Second, Wait: 10 * time.Second, MaxInProgress: 3}
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	u, err := url.Parse(c.BaseURL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("client config: BaseURL %q is not an http(s) URL", c.BaseURL)
	case c.HTTPClient == nil && c.Timeout <= 0:
		return errors.New("client config: Timeout must be positive")
	case c.Wait < 0:
		return errors.New("client config: Wait is negative")
	case c.MaxInProgress < 1:
		return errors.New("client config: MaxInProgress must be at least 1")
	}
	return nil
}

// Client calls one idem server.
type Client struct {
	cfg  Config
	base string
	http *http.Client
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: cfg.Timeout}
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock
	}
	return &Client{cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/"), http: hc}, nil
}

// The decisions a check answers.
const (
	Execute    = "execute"
	Duplicate  = "duplicate"
	InProgress = "in_progress"
	Confirm    = "confirm"
	Uncertain  = "uncertain"
)

// CheckRequest is one check (POST /v1/check).
type CheckRequest struct {
	SessionID      string          `json:"session_id"`
	WorkflowID     string          `json:"workflow_id,omitempty"`
	StepID         string          `json:"step_id,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Tool           string          `json:"tool"`
	Arguments      json.RawMessage `json:"arguments"` // a JSON object, or a JSON string holding one
	Attempt        *Attempt        `json:"attempt,omitempty"`
	WaitMS         int64           `json:"wait_ms,omitempty"`
	Takeover       bool            `json:"takeover,omitempty"`
	// ReferenceTime is the agent's date ("2019-03-01") or time with its
	// offset ("2019-03-01T21:00:00-08:00") when it made the call: relative
	// dates in the arguments ("tomorrow") are read against that date.
	ReferenceTime string `json:"reference_time,omitempty"`
	// Confirmed is the key of the earlier call a confirm decision named:
	// the caller has asked, and this call is meant to run although it
	// resembles that one. A server that predates the field answers 400
	// naming "confirmed".
	Confirmed string `json:"confirmed,omitempty"`
}

// Attempt is a call's place among its retries: Kind is first, transient
// (same intent after an error: answered from the record) or sampling (a
// fresh answer wanted: a derived key).
type Attempt struct {
	Kind   string          `json:"kind,omitempty"`
	Number int             `json:"number,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// Result is a check's answer.
type Result struct {
	Decision   string    `json:"decision"`
	Stage      string    `json:"stage"`
	Key        string    `json:"key"`
	Token      string    `json:"token,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// LeaseExpiresAt is set on in_progress: when the lease of the call in
	// progress ends, unless its holder renews it.
	LeaseExpiresAt time.Time        `json:"lease_expires_at,omitzero"`
	Match          *Match           `json:"match,omitempty"`
	Judge          *Verdict         `json:"judge,omitempty"`
	Policy         string           `json:"policy"`
	Reason         string           `json:"reason"`
	BudgetExceeded bool             `json:"budget_exceeded,omitempty"`
	NotCompared    *NotCompared     `json:"not_compared,omitempty"`
	Notes          []string         `json:"notes,omitempty"`
	ReferenceDate  string           `json:"reference_date,omitempty"`
	Hash           string           `json:"hash"`
	IdentityDigest string           `json:"identity_digest"`
	TimingsUS      map[string]int64 `json:"timings_us"`
	// Replayed is set when the server sent Idempotent-Replayed: true.
	Replayed bool `json:"-"`
	// RetryAfter is the server's Retry-After on in_progress, else 0.
	RetryAfter time.Duration `json:"-"`
	// lease is the execute's lease length by the server's clock, when its
	// answer said (Date header), for Guard's renewals.
	lease time.Duration
}

// Flagged reports whether the call must not execute now.
func (r *Result) Flagged() bool { return r.Decision != Execute }

// NotCompared names the earlier calls a check could not compare with, and
// why (the budget ran out, the encoder was busy or failed, the session was
// still loading).
type NotCompared struct {
	Reason string   `json:"reason"`
	Keys   []string `json:"keys,omitempty"`
}

// Match is the earlier call a decision refers to.
type Match struct {
	Key        string          `json:"key"`
	Tool       string          `json:"tool"`
	WorkflowID string          `json:"workflow_id,omitempty"`
	StepID     string          `json:"step_id,omitempty"`
	Status     string          `json:"status"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      json.RawMessage `json:"error,omitempty"`
	ErrorClass string          `json:"error_class,omitempty"`
	Similarity float64         `json:"similarity"`
	CreatedAt  int64           `json:"created_at_ms"`
}

// Verdict is the judge's answer.
type Verdict struct {
	Duplicate  bool    `json:"duplicate"`
	Confidence float64 `json:"confidence"`
	Reason     string  `json:"reason"`
}

// Record is a ledger record.
type Record struct {
	Key        string `json:"key"`
	SessionID  string `json:"session_id,omitempty"`
	WorkflowID string `json:"workflow_id,omitempty"`
	StepID     string `json:"step_id,omitempty"`
	Tool       string `json:"tool"`
	Status     string `json:"status"` // PENDING, SUCCESS or FAILED
	// NextCheck is what a check of this key would answer now:
	// in_progress, replay_result (SUCCESS), replay_error (a permanent
	// failure), execute (a transient failure) or uncertain (the lease ran
	// out without a result).
	NextCheck      string          `json:"next_check"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          json.RawMessage `json:"error,omitempty"`
	ErrorClass     string          `json:"error_class,omitempty"`
	Canonical      json.RawMessage `json:"canonical,omitempty"`
	Hash           string          `json:"hash"`
	IdentityDigest string          `json:"identity_digest"`
	Attempt        int             `json:"attempt"`
	// Confirmed is the key of the earlier call the check confirmed this
	// execution as another action than (CheckRequest.Confirmed); empty
	// when it was not confirmed.
	Confirmed   string `json:"confirmed,omitempty"`
	LeaseUntil  int64  `json:"lease_until_ms"`
	CreatedAt   int64  `json:"created_at_ms"`
	UpdatedAt   int64  `json:"updated_at_ms"`
	RetainUntil int64  `json:"retain_until_ms"`
	Seq         uint64 `json:"seq"`
}

// Workflow is a workflow's records in arrival order.
type Workflow struct {
	WorkflowID string   `json:"workflow_id"`
	Steps      []Record `json:"steps"`
}

// APIError is an error answer: the server's problem document.
type APIError struct {
	// Type is the problem's class: one of the Problem* URIs.
	Type   string `json:"type"`
	Status int    `json:"status"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Field  string `json:"field,omitempty"`
	// Key names the corrupt record of a ProblemCorrupt.
	Key string `json:"key,omitempty"`
}

// The problem types the server answers, one per class of error (see the
// API's OpenAPI document).
const (
	ProblemInvalidField = "urn:idem:problem:invalid-field"
	ProblemUnauthorized = "urn:idem:problem:unauthorized"
	ProblemNotFound     = "urn:idem:problem:not-found"
	ProblemStaleToken   = "urn:idem:problem:stale-token"
	ProblemNotPending   = "urn:idem:problem:not-pending"
	ProblemInProgress   = "urn:idem:problem:in-progress"
	ProblemLeaseLimit   = "urn:idem:problem:lease-limit"
	ProblemTooLarge     = "urn:idem:problem:too-large"
	ProblemMediaType    = "urn:idem:problem:unsupported-media-type"
	ProblemMismatch     = "urn:idem:problem:payload-mismatch"
	ProblemCorrupt      = "urn:idem:problem:corrupt-record"
	ProblemInternal     = "urn:idem:problem:internal"
	ProblemUnavailable  = "urn:idem:problem:store-unavailable"
)

func (e *APIError) Error() string {
	return fmt.Sprintf("idem: %d %s: %s", e.Status, e.Title, e.Detail)
}

// StatusCode is the HTTP status (so ledger.ClassifyError reads it).
func (e *APIError) StatusCode() int { return e.Status }

// Check asks whether the call may execute.
func (c *Client) Check(ctx context.Context, req CheckRequest) (*Result, error) {
	var res Result
	h, err := c.do(ctx, http.MethodPost, "/v1/check", req, &res)
	if err != nil {
		return nil, err
	}
	res.Replayed = h.Get("Idempotent-Replayed") == "true"
	if secs, err := strconv.Atoi(h.Get("Retry-After")); err == nil && secs > 0 {
		res.RetryAfter = time.Duration(secs) * time.Second
	}
	if res.Decision == Execute {
		res.lease = leaseOf(h, res.LeaseUntil)
	}
	return &res, nil
}

// leaseOf is how long a lease ending at until lasts from the answer that
// carries it, by the server's clock (its Date header, to the second) so
// that a client whose clock is off renews in time; 0 when unknown.
func leaseOf(h http.Header, until time.Time) time.Duration {
	date, err := http.ParseTime(h.Get("Date"))
	if err != nil || until.IsZero() {
		return 0
	}
	return until.Sub(date)
}

// Renew extends the lease of the execution holding token by lease from
// now (0: the server's ledger.lease), so that a call running longer than
// its lease keeps its key. Guard does it by itself.
func (c *Client) Renew(ctx context.Context, key, token string, lease time.Duration) (*Record, error) {
	rec, _, err := c.renew(ctx, key, token, lease)
	return rec, err
}

func (c *Client) renew(ctx context.Context, key, token string, lease time.Duration) (*Record, http.Header, error) {
	var rec Record
	body := struct {
		Key     string `json:"key"`
		Token   string `json:"token"`
		LeaseMS int64  `json:"lease_ms,omitempty"`
	}{key, token, lease.Milliseconds()}
	h, err := c.do(ctx, http.MethodPost, "/v1/renew", body, &rec)
	if err != nil {
		return nil, nil, err
	}
	return &rec, h, nil
}

// Complete records result (JSON) as the outcome of the execution holding
// token.
func (c *Client) Complete(ctx context.Context, key, token string, result json.RawMessage) (*Record, error) {
	var rec Record
	body := struct {
		Key    string          `json:"key"`
		Token  string          `json:"token"`
		Result json.RawMessage `json:"result"`
	}{key, token, result}
	if _, err := c.do(ctx, http.MethodPost, "/v1/complete", body, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// Fail records errJSON as the failure of the execution holding token; a
// transient failure lets the key run again, a permanent one is replayed.
func (c *Client) Fail(ctx context.Context, key, token string, errJSON json.RawMessage, transient bool) (*Record, error) {
	var rec Record
	body := struct {
		Key       string          `json:"key"`
		Token     string          `json:"token"`
		Error     json.RawMessage `json:"error"`
		Transient bool            `json:"transient"`
	}{key, token, errJSON, transient}
	if _, err := c.do(ctx, http.MethodPost, "/v1/fail", body, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// Record returns the record under key.
func (c *Client) Record(ctx context.Context, key string) (*Record, error) {
	var rec Record
	if _, err := c.do(ctx, http.MethodGet, "/v1/records/"+url.PathEscape(key), nil, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// Forget deletes the record under key. A record whose call is executing
// under a live lease is refused (ProblemInProgress, a 409): forgetting it
// would let the call run twice; ForceForget forgets it anyway.
func (c *Client) Forget(ctx context.Context, key string) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/records/"+url.PathEscape(key), nil, nil)
	return err
}

// ForceForget deletes the record under key, also one in progress.
func (c *Client) ForceForget(ctx context.Context, key string) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/records/"+url.PathEscape(key)+"?force=true", nil, nil)
	return err
}

// Workflow returns the workflow's records.
func (c *Client) Workflow(ctx context.Context, id string) (*Workflow, error) {
	var wf Workflow
	if _, err := c.do(ctx, http.MethodGet, "/v1/workflows/"+url.PathEscape(id), nil, &wf); err != nil {
		return nil, err
	}
	return &wf, nil
}

// maxResponseBytes bounds a response body.
const maxResponseBytes = 64 << 20

func (c *Client) do(ctx context.Context, method, path string, in, out any) (http.Header, error) {
	var body io.Reader
	if in != nil {
		// Not json.Marshal: it escapes <, > and & inside the arguments and
		// the result, which idem would then record and replay so.
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(in); err != nil {
			return nil, fmt.Errorf("idem: encoding the request: %w", err)
		}
		body = &b
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("idem: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("idem: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("idem: %s %s: reading the response: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		ae := &APIError{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
		if json.Unmarshal(data, ae) != nil || ae.Detail == "" {
			ae.Detail = strings.TrimSpace(string(data[:min(len(data), 200)]))
		}
		ae.Status = resp.StatusCode
		return resp.Header, ae
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("idem: %s %s: decoding the response: %w", method, path, err)
		}
	}
	return resp.Header, nil
}
