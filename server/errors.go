package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger"
)

// Problem is an RFC 9457 problem document, the body of every error.
type Problem struct {
	// Type names the class of error, one URI per class (the Problem*
	// constants); Title is its status text.
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	// Detail says what is wrong, naming the field.
	Detail string `json:"detail"`
	// Field is the offending field when one is known: "session_id",
	// "arguments.items[2].note", "Authorization".
	Field string `json:"field,omitempty"`
	// Key is the ledger key a corrupt-record problem is about.
	Key string `json:"key,omitempty"`
}

// The problem types: one per class of error. They are URNs, compared as
// strings; README.md and openapi.json say what each means.
const (
	ProblemInvalidField = "urn:idem:problem:invalid-field"          // 400: a field is missing or malformed (Field names it), or the body is
	ProblemUnauthorized = "urn:idem:problem:unauthorized"           // 401: no or unknown API key
	ProblemNotFound     = "urn:idem:problem:not-found"              // 404: no record under the key, or no such endpoint
	ProblemStaleToken   = "urn:idem:problem:stale-token"            // 409: not the key's current lease token
	ProblemNotPending   = "urn:idem:problem:not-pending"            // 409: the record is already completed or failed
	ProblemInProgress   = "urn:idem:problem:in-progress"            // 409: the key's call is executing under a live lease
	ProblemLeaseLimit   = "urn:idem:problem:lease-limit"            // 409: a renewal past ledger.max_lease
	ProblemTooLarge     = "urn:idem:problem:too-large"              // 413: the body or a field is over its limit
	ProblemMediaType    = "urn:idem:problem:unsupported-media-type" // 415: the body is not application/json
	ProblemMismatch     = "urn:idem:problem:payload-mismatch"       // 422: an explicit key reused with other identity fields
	ProblemCorrupt      = "urn:idem:problem:corrupt-record"         // 500: the record under Key failed its integrity check
	ProblemInternal     = "urn:idem:problem:internal"               // 500: our fault; the detail is in the server's log
	ProblemUnavailable  = "urn:idem:problem:store-unavailable"      // 503: the store is busy or unreachable; retry (Retry-After)
)

var (
	errUnauthorized = errors.New("missing or unknown API key")
	errNoRoute      = errors.New("no such endpoint")
)

// problemOf maps an error to its problem: status, type, the detail shown
// to the client and the field it names. It is the only place that does.
// Our own faults get a generic detail; the caller logs the error.
func problemOf(err error) Problem {
	p := problemFor(err)
	p.Title = http.StatusText(p.Status)
	return p
}

func problemFor(err error) Problem {
	if re, ok := errors.AsType[*requestError](err); ok {
		typ := ProblemInvalidField
		switch re.status {
		case http.StatusRequestEntityTooLarge:
			typ = ProblemTooLarge
		case http.StatusUnsupportedMediaType:
			typ = ProblemMediaType
		}
		return Problem{Status: re.status, Type: typ, Detail: re.Error(), Field: re.field}
	}
	if ce, ok := errors.AsType[*canon.Error](err); ok {
		p := Problem{Status: http.StatusBadRequest, Type: ProblemInvalidField, Detail: strings.TrimPrefix(ce.Error(), "canon: "), Field: ce.Path}
		if errors.Is(err, canon.ErrTooLarge) {
			p.Status, p.Type = http.StatusRequestEntityTooLarge, ProblemTooLarge
		}
		return p
	}
	if fe, ok := errors.AsType[*ledger.FieldError](err); ok {
		p := Problem{Status: http.StatusBadRequest, Type: ProblemInvalidField, Detail: strings.TrimPrefix(fe.Error(), "ledger: "), Field: fe.Field}
		if errors.Is(err, ledger.ErrTooLarge) {
			p.Status, p.Type = http.StatusRequestEntityTooLarge, ProblemTooLarge
		}
		return p
	}
	if ce, ok := errors.AsType[*ledger.CorruptError](err); ok {
		return Problem{Status: http.StatusInternalServerError, Type: ProblemCorrupt, Key: ce.Key,
			Detail: fmt.Sprintf("the record under key %q is corrupt (it failed the store's integrity check); "+
				"DELETE /v1/records/{key} removes it, and the key may then run again", ce.Key)}
	}
	switch {
	case errors.Is(err, errUnauthorized):
		return Problem{Status: http.StatusUnauthorized, Type: ProblemUnauthorized, Field: "Authorization",
			Detail: "Authorization: " + err.Error() + " (send Authorization: Bearer <key>)"}
	case errors.Is(err, errNoRoute):
		return Problem{Status: http.StatusNotFound, Type: ProblemNotFound, Detail: err.Error()}
	case errors.Is(err, funnel.ErrInvalidRequest):
		return Problem{Status: http.StatusBadRequest, Type: ProblemInvalidField, Detail: strings.TrimPrefix(err.Error(), "funnel: invalid request: ")}
	case errors.Is(err, funnel.ErrKeyReuse):
		return Problem{Status: http.StatusUnprocessableEntity, Type: ProblemMismatch, Field: "idempotency_key",
			Detail: strings.TrimPrefix(err.Error(), "funnel: ") +
				": the strict policy refuses it (strict: false replays the first call's result); use a new idempotency_key"}
	case errors.Is(err, ledger.ErrNotFound):
		return Problem{Status: http.StatusNotFound, Type: ProblemNotFound, Field: "key",
			Detail: "key: no record under this key (never claimed, forgotten, or past retention)"}
	case errors.Is(err, ledger.ErrStaleToken):
		return Problem{Status: http.StatusConflict, Type: ProblemStaleToken, Field: "token",
			Detail: "token: not the key's current lease token (the lease was taken over or the key claimed again)"}
	case errors.Is(err, ledger.ErrNotPending):
		return Problem{Status: http.StatusConflict, Type: ProblemNotPending, Field: "key",
			Detail: "key: the record is already completed or failed"}
	case errors.Is(err, ledger.ErrLeaseLimit):
		return Problem{Status: http.StatusConflict, Type: ProblemLeaseLimit, Field: "lease_ms",
			Detail: "lease_ms: the claim has held its key for ledger.max_lease: it cannot be renewed; record its outcome"}
	case errors.Is(err, ledger.ErrInProgress):
		return Problem{Status: http.StatusConflict, Type: ProblemInProgress, Field: "key",
			Detail: "key: its call is executing under a live lease; forgetting it now would let it run twice " +
				"(wait for it, or send force=true)"}
	case errors.Is(err, ledger.ErrConflict), errors.Is(err, ledger.ErrSessionMoved),
		errors.Is(err, ledger.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		// ErrSessionMoved: the session kept changing under a claim (other
		// replicas claiming in it); nothing was written, a retry is safe.
		return Problem{Status: http.StatusServiceUnavailable, Type: ProblemUnavailable, Detail: "busy: try again"}
	}
	return Problem{Status: http.StatusInternalServerError, Type: ProblemInternal, Detail: "internal error (details are in the server's log)"}
}

// problem writes err as a problem document.
func (s *Server) problem(w http.ResponseWriter, r *http.Request, err error) int {
	p := problemOf(err)
	if p.Status >= 500 {
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.Pattern, "err", err)
	}
	if p.Type == ProblemCorrupt {
		s.metrics.corrupt(tenantOf(r.Context()))
	}
	b, _ := json.Marshal(p) // a struct of strings and an int: cannot fail
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="idem"`)
	}
	if p.Status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(p.Status)
	w.Write(append(b, '\n'))
	return p.Status
}

type tenantKey struct{}

func tenantOf(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// authenticate returns the tenant of r's bearer key, or "default" when
// the server has no keys. Keys are compared by their SHA-256, so the
// lookup's timing says nothing about a key's bytes.
func (s *Server) authenticate(r *http.Request) (string, error) {
	if len(s.cfg.Keys) == 0 {
		return "default", nil
	}
	h := r.Header.Get("Authorization")
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
		return "", errUnauthorized
	}
	tenant, ok := s.cfg.Keys[sha256.Sum256([]byte(strings.TrimSpace(key)))]
	if !ok {
		return "", errUnauthorized
	}
	return tenant, nil
}

// statusWriter records the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// wrap authenticates, runs the handler, writes its error as a problem,
// and logs and counts the request.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		tenant := ""
		err := func() error {
			if rt.auth {
				t, err := s.authenticate(r)
				if err != nil {
					return err
				}
				tenant = t
				r = r.WithContext(context.WithValue(r.Context(), tenantKey{}, t))
			}
			return rt.h(sw, r)
		}()
		if err != nil && sw.status == 0 {
			s.problem(sw, r, err)
		} else if err != nil {
			s.log.WarnContext(r.Context(), "writing a response", "path", rt.path, "err", err)
		}
		d := time.Since(start)
		s.metrics.request(rt.path, sw.status, d)
		// Checked first: the arguments of a line not logged still cost
		// their slice and boxes on every request.
		if s.log.Enabled(r.Context(), slog.LevelDebug) {
			s.log.DebugContext(r.Context(), "request", "method", r.Method, "route", rt.path,
				"status", sw.status, "tenant", tenant, "duration_us", d.Microseconds())
		}
	})
}

// instrument counts a plain handler's requests.
func (s *Server) instrument(path string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		s.metrics.request(path, sw.status, time.Since(start))
	})
}
