package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger"
)

// Problem is an RFC 9457 problem document, the body of every error.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	// Detail says what is wrong, naming the field.
	Detail string `json:"detail"`
	// Field is the offending field when one is known: "session_id",
	// "arguments.items[2].note", "Authorization".
	Field string `json:"field,omitempty"`
}

var (
	errUnauthorized = errors.New("missing or unknown API key")
	errNoRoute      = errors.New("no such endpoint")
)

// statusOf maps an error to its HTTP status, the detail shown to the
// client and the field it names. It is the only place that does. Our own
// faults get a generic detail; the caller logs the error.
func statusOf(err error) (status int, detail, field string) {
	if re, ok := errors.AsType[*requestError](err); ok {
		return re.status, re.Error(), re.field
	}
	if ce, ok := errors.AsType[*canon.Error](err); ok {
		status := http.StatusBadRequest
		if errors.Is(err, canon.ErrTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		return status, strings.TrimPrefix(ce.Error(), "canon: "), ce.Path
	}
	if fe, ok := errors.AsType[*ledger.FieldError](err); ok {
		status := http.StatusBadRequest
		if errors.Is(err, ledger.ErrTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		return status, strings.TrimPrefix(fe.Error(), "ledger: "), fe.Field
	}
	switch {
	case errors.Is(err, errUnauthorized):
		return http.StatusUnauthorized, "Authorization: " + err.Error() + " (send Authorization: Bearer <key>)", "Authorization"
	case errors.Is(err, errNoRoute):
		return http.StatusNotFound, err.Error(), ""
	case errors.Is(err, funnel.ErrInvalidRequest):
		return http.StatusBadRequest, strings.TrimPrefix(err.Error(), "funnel: invalid request: "), ""
	case errors.Is(err, funnel.ErrKeyReuse):
		return http.StatusUnprocessableEntity, strings.TrimPrefix(err.Error(), "funnel: ") +
			": the strict policy refuses it; use a new idempotency_key", "idempotency_key"
	case errors.Is(err, ledger.ErrNotFound):
		return http.StatusNotFound, "key: no record under this key (never claimed, forgotten, or past retention)", "key"
	case errors.Is(err, ledger.ErrStaleToken):
		return http.StatusConflict, "token: not the key's current lease token (the lease was taken over or the key claimed again)", "token"
	case errors.Is(err, ledger.ErrNotPending):
		return http.StatusConflict, "key: the record is already completed or failed", "key"
	case errors.Is(err, ledger.ErrConflict), errors.Is(err, ledger.ErrSessionMoved),
		errors.Is(err, ledger.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		// ErrSessionMoved: the session kept changing under a claim (other
		// replicas claiming in it); nothing was written, a retry is safe.
		return http.StatusServiceUnavailable, "busy: try again", ""
	}
	return http.StatusInternalServerError, "internal error (details are in the server's log)", ""
}

// problem writes err as a problem document.
func (s *Server) problem(w http.ResponseWriter, r *http.Request, err error) int {
	status, detail, field := statusOf(err)
	if status >= 500 {
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.Pattern, "err", err)
	}
	p := Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Field: field}
	b, _ := json.Marshal(p) // a struct of strings and an int: cannot fail
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="idem"`)
	}
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
	return status
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
		s.log.DebugContext(r.Context(), "request", "method", r.Method, "route", rt.path,
			"status", sw.status, "tenant", tenant, "duration_us", d.Microseconds())
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
