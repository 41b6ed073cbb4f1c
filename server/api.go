package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger"
)

// CheckRequest is the body of POST /v1/check.
type CheckRequest struct {
	SessionID      string          `json:"session_id"`
	WorkflowID     string          `json:"workflow_id,omitempty"`
	StepID         string          `json:"step_id,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Tool           string          `json:"tool"`
	Arguments      json.RawMessage `json:"arguments"`
	Attempt        *Attempt        `json:"attempt,omitempty"`
	WaitMS         int64           `json:"wait_ms,omitempty"`
	Takeover       bool            `json:"takeover,omitempty"`
	// ReferenceTime is the caller's date or time when it made the call
	// ("2019-03-01" or "2019-03-01T21:00:00-08:00"): relative dates in the
	// arguments ("tomorrow", "next Monday") are read against its date.
	ReferenceTime string `json:"reference_time,omitempty"`
	// Confirmed is the key of an earlier call (a confirm's match.key) the
	// caller has decided is another action: the call is not compared with
	// it.
	Confirmed string `json:"confirmed,omitempty"`
}

// Attempt is a check's place among its retries.
type Attempt struct {
	Kind   string          `json:"kind,omitempty"` // first, transient or sampling
	Number int             `json:"number,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"` // the previous attempt's error (any JSON)
}

// CompleteRequest is the body of POST /v1/complete.
type CompleteRequest struct {
	Key    string          `json:"key"`
	Token  string          `json:"token"`
	Result json.RawMessage `json:"result"`
}

// FailRequest is the body of POST /v1/fail. Transient defaults to true:
// an unknown failure may be retried.
type FailRequest struct {
	Key       string          `json:"key"`
	Token     string          `json:"token"`
	Error     json.RawMessage `json:"error"`
	Transient *bool           `json:"transient,omitempty"`
}

// RenewRequest is the body of POST /v1/renew: extend the lease of the
// call holding token by LeaseMS from now (0: the ledger's lease), never
// past ledger.max_lease after its claim.
type RenewRequest struct {
	Key     string `json:"key"`
	Token   string `json:"token"`
	LeaseMS int64  `json:"lease_ms,omitempty"`
}

// Record is a ledger record as the API shows it: never its lease token,
// never its embedding.
type Record struct {
	Key            string          `json:"key"`
	SessionID      string          `json:"session_id,omitempty"`
	WorkflowID     string          `json:"workflow_id,omitempty"`
	StepID         string          `json:"step_id,omitempty"`
	Tool           string          `json:"tool"`
	Status         string          `json:"status"`     // PENDING, SUCCESS or FAILED
	NextCheck      string          `json:"next_check"` // what a check of this key would answer now: see nextCheck
	Result         json.RawMessage `json:"result,omitempty"`
	Error          json.RawMessage `json:"error,omitempty"`
	ErrorClass     string          `json:"error_class,omitempty"`
	Canonical      json.RawMessage `json:"canonical,omitempty"`
	Hash           string          `json:"hash"`
	IdentityDigest string          `json:"identity_digest"`
	Attempt        int             `json:"attempt"`
	Confirmed      string          `json:"confirmed,omitempty"` // the earlier call's key the check confirmed this execution as another action than; omitted when none
	LeaseUntil     int64           `json:"lease_until_ms"`
	CreatedAt      int64           `json:"created_at_ms"`
	UpdatedAt      int64           `json:"updated_at_ms"`
	RetainUntil    int64           `json:"retain_until_ms"`
	Seq            uint64          `json:"seq"`
}

// Workflow is the body of GET /v1/workflows/{id}.
type Workflow struct {
	WorkflowID string   `json:"workflow_id"`
	Steps      []Record `json:"steps"`
}

func recordOf(r *ledger.Record, outcome ledger.Outcome) Record {
	v := Record{
		Key: r.Key, SessionID: r.Session, WorkflowID: r.Workflow, StepID: r.Step, Tool: r.Tool,
		Status: r.Status.String(), NextCheck: nextCheck(outcome), Result: r.Result, Error: r.Error,
		Hash: canon.HashHex(r.Hash), IdentityDigest: canon.HashHex(r.Identity),
		Attempt: r.Attempt, Confirmed: r.Confirmed, LeaseUntil: r.LeaseUntil, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		RetainUntil: r.RetainUntil, Seq: r.Seq,
	}
	if r.Status == ledger.StatusFailed {
		v.ErrorClass = r.Class.String()
	}
	if json.Valid(r.Canonical) {
		v.Canonical = r.Canonical
	}
	return v
}

// nextCheck names what a check of a record's key would answer now, as the
// record's next_check field says it. It is not what happened to the call
// the record holds: a SUCCESS record's call ran once, and replay_result
// says that a check of its key replays its result (decision duplicate).
//
//	in_progress    a live lease: a check waits or answers in_progress
//	replay_result  SUCCESS: the result is replayed (decision duplicate)
//	replay_error   a permanent failure: its error is replayed (decision duplicate)
//	execute        a transient failure: the key may run again
//	uncertain      a lease that ran out without a result
func nextCheck(o ledger.Outcome) string {
	switch o {
	case ledger.Claimed, ledger.InProgress:
		return "in_progress"
	case ledger.Duplicate:
		return "replay_result"
	case ledger.FailedPermanent:
		return "replay_error"
	case ledger.Retryable:
		return "execute"
	case ledger.Uncertain:
		return "uncertain"
	}
	return o.String()
}

// outcomeOf is what a check at now finds in a record the ledger handed
// back from Complete, Fail or Workflow.
func outcomeOf(r *ledger.Record, now time.Time) ledger.Outcome {
	switch r.Status {
	case ledger.StatusSuccess:
		return ledger.Duplicate
	case ledger.StatusFailed:
		if r.Class == ledger.ClassPermanent {
			return ledger.FailedPermanent
		}
		return ledger.Retryable
	}
	if r.LeaseUntil <= now.UnixMilli() {
		return ledger.Uncertain
	}
	return ledger.InProgress
}

func (s *Server) check(w http.ResponseWriter, r *http.Request) error {
	var req CheckRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := checkRequired(&req); err != nil {
		return err
	}
	freq := funnel.Request{
		Tenant: tenantOf(r.Context()), Session: req.SessionID, Workflow: req.WorkflowID,
		Step: req.StepID, Key: req.IdempotencyKey, Tool: req.Tool, Arguments: req.Arguments,
		Wait:     time.Duration(min(req.WaitMS, s.cfg.MaxWait.Milliseconds())) * time.Millisecond,
		Takeover: req.Takeover, Confirmed: req.Confirmed,
	}
	if a := req.Attempt; a != nil {
		freq.Attempt = funnel.Attempt{Kind: funnel.AttemptKind(a.Kind), Number: a.Number, Error: a.Error}
	}
	if req.ReferenceTime != "" {
		d, err := canon.ParseReference(req.ReferenceTime)
		if err != nil {
			return fieldErr("reference_time", err.Error())
		}
		freq.Today = d
	}
	res, err := s.deps.Funnel.Check(r.Context(), freq)
	if err != nil {
		return err
	}
	s.metrics.observeCheck(freq.Tenant, s.toolLabel(req.Tool), &freq, &res)
	switch res.Decision {
	case funnel.Duplicate:
		w.Header().Set("Idempotent-Replayed", "true")
	case funnel.InProgress:
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter(res.LeaseExpiresAt, time.Now())))
	}
	return s.reply(w, http.StatusOK, res.Wire())
}

// maxRetryAfter bounds the Retry-After of an in_progress answer.
const maxRetryAfter = 60 * time.Second

// retryAfter is the Retry-After of an in_progress answer in seconds: when
// the lease ends (by then the call has finished, or its answer turns
// uncertain), at least 1 and at most maxRetryAfter: a call usually
// finishes well within its lease (wait_ms waits for it instead).
func retryAfter(leaseEnd, now time.Time) int {
	d := min(max(leaseEnd.Sub(now), time.Second), maxRetryAfter)
	return int((d + time.Second - 1) / time.Second)
}

// checkRequired refuses a check body without its required members, or
// with an attempt or a wait out of range, naming the field.
func checkRequired(req *CheckRequest) error {
	switch {
	case req.SessionID == "":
		return fieldErr("session_id", "missing")
	case req.Tool == "":
		return fieldErr("tool", "missing")
	case len(req.Arguments) == 0 || string(req.Arguments) == "null":
		return fieldErr("arguments", "missing: want a JSON object, or a string holding one")
	case req.WaitMS < 0:
		return fieldErr("wait_ms", "negative")
	}
	if a := req.Attempt; a != nil {
		switch funnel.AttemptKind(a.Kind) {
		case "", funnel.First, funnel.Transient, funnel.Sampling:
		default:
			return fieldErr("attempt.kind", fmt.Sprintf("%q is not first, transient or sampling", a.Kind))
		}
		if a.Number < 0 {
			return fieldErr("attempt.number", "negative")
		}
	}
	return nil
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) error {
	var req CompleteRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.Result == nil {
		return fieldErr("result", "missing")
	}
	tenant := tenantOf(r.Context())
	rec, err := s.deps.Ledger.Complete(r.Context(), tenant, req.Key, req.Token, req.Result)
	if err != nil {
		return err
	}
	s.metrics.transition(tenant, "success")
	return s.reply(w, http.StatusOK, recordOf(&rec, ledger.Duplicate))
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request) error {
	var req FailRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.Error == nil {
		return fieldErr("error", "missing")
	}
	class, state := ledger.ClassTransient, "failed_transient"
	if req.Transient != nil && !*req.Transient {
		class, state = ledger.ClassPermanent, "failed_permanent"
	}
	tenant := tenantOf(r.Context())
	rec, err := s.deps.Ledger.Fail(r.Context(), tenant, req.Key, req.Token, req.Error, class)
	if err != nil {
		return err
	}
	s.metrics.transition(tenant, state)
	return s.reply(w, http.StatusOK, recordOf(&rec, outcomeOf(&rec, time.Now())))
}

func (s *Server) renew(w http.ResponseWriter, r *http.Request) error {
	var req RenewRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.LeaseMS < 0 {
		return fieldErr("lease_ms", "negative")
	}
	if req.LeaseMS > int64(math.MaxInt64/time.Millisecond) {
		return fieldErr("lease_ms", "out of range")
	}
	rec, err := s.deps.Ledger.Renew(r.Context(), tenantOf(r.Context()), req.Key, req.Token, time.Duration(req.LeaseMS)*time.Millisecond)
	if err != nil {
		return err
	}
	return s.reply(w, http.StatusOK, recordOf(&rec, outcomeOf(&rec, time.Now())))
}

func (s *Server) getRecord(w http.ResponseWriter, r *http.Request) error {
	got, err := s.deps.Ledger.Get(r.Context(), tenantOf(r.Context()), r.PathValue("key"))
	if err != nil {
		return err
	}
	return s.reply(w, http.StatusOK, recordOf(&got.Record, got.Outcome))
}

func (s *Server) forget(w http.ResponseWriter, r *http.Request) error {
	tenant := tenantOf(r.Context())
	force := false
	switch v := r.URL.Query().Get("force"); v {
	case "", "false":
	case "true":
		force = true
	default:
		return fieldErr("force", fmt.Sprintf("%q is not true or false", v))
	}
	if err := s.deps.Ledger.Forget(r.Context(), tenant, r.PathValue("key"), force); err != nil {
		return err
	}
	s.metrics.transition(tenant, "forgotten")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) workflow(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	recs, err := s.deps.Ledger.Workflow(r.Context(), tenantOf(r.Context()), id)
	if err != nil {
		return err
	}
	now := time.Now()
	out := Workflow{WorkflowID: id, Steps: make([]Record, 0, len(recs))}
	for i := range recs {
		out.Steps = append(out.Steps, recordOf(&recs[i], outcomeOf(&recs[i], now)))
	}
	return s.reply(w, http.StatusOK, out)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) error {
	return s.reply(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	if s.deps.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.deps.Ready(ctx); err != nil {
			s.log.WarnContext(r.Context(), "not ready", "err", err)
			return s.reply(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready"})
		}
	}
	return s.reply(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(OpenAPI)
	return err
}

func (s *Server) toolLabel(tool string) string {
	if s.tools[tool] {
		return tool
	}
	return "other"
}

// reply writes v as JSON.
func (s *Server) reply(w http.ResponseWriter, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encoding the response: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

// requestError is a client's mistake found while decoding, with the
// status it gets.
type requestError struct {
	status int
	field  string
	msg    string
}

func (e *requestError) Error() string {
	if e.field == "" {
		return e.msg
	}
	return e.field + ": " + e.msg
}

func fieldErr(field, msg string) error {
	return &requestError{status: http.StatusBadRequest, field: field, msg: msg}
}

// decode reads r's body into v strictly: JSON content type, bounded
// size, valid UTF-8, one value, no unknown fields, numbers kept exact.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return &requestError{status: http.StatusUnsupportedMediaType, field: "Content-Type",
			msg: fmt.Sprintf("want application/json, got %q", ct)}
	}
	body, err := readBody(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), r.ContentLength, s.cfg.MaxBodyBytes)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return &requestError{status: http.StatusRequestEntityTooLarge, field: "body",
				msg: fmt.Sprintf("larger than %d bytes", s.cfg.MaxBodyBytes)}
		}
		// The client's doing: a body shorter than its Content-Length, a
		// connection closed or too slow. Not our fault, not an error line.
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fieldErr("body", "shorter than its Content-Length")
		}
		return fieldErr("body", "could not be read: "+err.Error())
	}
	return decodeJSON(body, v)
}

// readBody reads body to its end, in one allocation where the request
// declares a length within max and presetBody (io.ReadAll starts at 512
// bytes and grows, copying, to the body's size: two or three allocations
// for a check's body). Past presetBody it grows as the bytes arrive, so a
// client that only declares a large body costs no more than it sends.
func readBody(body io.Reader, declared, max int64) ([]byte, error) {
	if declared <= 0 || declared > max {
		return io.ReadAll(body)
	}
	b := make([]byte, 0, min(declared, presetBody)+1) // one more, so that reading its end needs no room
	for {
		if len(b) == cap(b) { // longer than declared (the transport would say so first)
			b = append(b, 0)[:len(b)]
		}
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// presetBody bounds what readBody allocates before the bytes come.
const presetBody = 64 << 10

// decodeJSON is decode without the transport: the fuzz test's target.
func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return fieldErr("body", "empty: want a JSON object")
	}
	if !utf8.Valid(body) {
		return fieldErr("body", "not valid UTF-8")
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := d.Token(); err != io.EOF {
		return fieldErr("body", "more than one JSON value")
	}
	// encoding/json turns a lone surrogate escape into U+FFFD: two
	// session ids "\ud800" and "\udfff" would become one.
	if at := loneSurrogate(body); at >= 0 {
		return fieldErr(pathAt(body, at), "holds a lone UTF-16 surrogate (an unpaired \\uD800-\\uDFFF escape)")
	}
	return nil
}

// loneSurrogate returns the offset of the first \u escape in body (valid
// JSON) that is a UTF-16 surrogate without its pair, or -1.
func loneSurrogate(body []byte) int {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(body); i++ {
		j := bytes.IndexByte(body[i:], '\\')
		if j < 0 {
			return -1
		}
		i += j
		r, ok := hex4(i)
		if !ok {
			i++ // another escape: skip the escaped byte (it may be a backslash)
			continue
		}
		switch {
		case utf16.IsSurrogate(r) && r < 0xdc00: // a high surrogate: a low one must follow
			if lo, ok := hex4(i + 6); ok && lo >= 0xdc00 && lo <= 0xdfff {
				i += 11
				continue
			}
			return i
		case utf16.IsSurrogate(r):
			return i
		}
		i += 5
	}
	return -1
}

// pathAt names the member of body (valid JSON) whose string holds byte
// offset at: "session_id", "attempt.error.m", "items[2]"; "body" if none.
func pathAt(body []byte, at int) string {
	type level struct {
		object bool
		key    string
		index  int
		expect bool // an object expects a key next
	}
	var stack []level
	path := func(last string) string {
		var b strings.Builder
		for i, l := range stack {
			switch {
			case l.object && i == len(stack)-1 && last != "":
				b.WriteString("." + last)
			case l.object:
				b.WriteString("." + l.key)
			default:
				fmt.Fprintf(&b, "[%d]", l.index)
			}
		}
		return strings.TrimPrefix(b.String(), ".")
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	for {
		tok, err := d.Token()
		if err != nil {
			return "body"
		}
		end := int(d.InputOffset())
		var top *level
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if str, ok := tok.(string); ok && top != nil && top.object && top.expect {
			top.key, top.expect = str, false
			if end > at {
				return path(str)
			}
			continue
		}
		if end > at {
			if p := path(""); p != "" {
				return p
			}
			return "body"
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, level{object: true, expect: true})
			continue
		case json.Delim('['):
			stack = append(stack, level{index: 0})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the container moves on.
		if len(stack) > 0 {
			if t := &stack[len(stack)-1]; t.object {
				t.expect = true
			} else {
				t.index++
			}
		}
	}
}

// jsonError names the field (or the offset) of a decoding error.
func jsonError(err error) error {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		field := te.Field
		if field == "" {
			field = "body"
		}
		return fieldErr(field, fmt.Sprintf("want %s, got %s", jsonType(te.Type.String()), te.Value))
	}
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fieldErr("body", fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, se.Error()))
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		return fieldErr(strings.Trim(name, `"`), "unknown field")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fieldErr("body", "truncated JSON")
	}
	return fieldErr("body", msg)
}

func jsonType(goType string) string {
	switch goType {
	case "string":
		return "a string"
	case "int", "int64":
		return "an integer"
	case "bool", "*bool":
		return "a boolean"
	}
	if strings.HasPrefix(goType, "server.") || strings.HasPrefix(goType, "*server.") {
		return "an object"
	}
	return goType
}
