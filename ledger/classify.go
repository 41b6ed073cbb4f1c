package ledger

import (
	"errors"
	"net/http"
)

// ClassifyStatus returns the class of a failed HTTP exchange by its status
// code: 408, 429, 502, 503 and 504 are transient; 400, 401, 403, 404, 409
// and 422 are permanent; a 2xx or 3xx status is not a failure (ClassNone);
// any other status is unknown and therefore transient.
func ClassifyStatus(code int) ErrorClass {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return ClassTransient
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden,
		http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity:
		return ClassPermanent
	}
	if code >= 200 && code < 400 {
		return ClassNone
	}
	return ClassTransient
}

// StatusCoder is implemented by errors that carry an HTTP status code.
// ClassifyError uses it; wrap a client library's error in one to classify
// it by status.
type StatusCoder interface {
	error
	StatusCode() int
}

// Classifier is implemented by errors that know their own class.
type Classifier interface {
	error
	ErrorClass() ErrorClass
}

// ClassifyError returns the class of a Go error: nil is ClassNone; an error
// that says its class (Classifier) or its HTTP status (StatusCoder, see
// ClassifyStatus) anywhere in its chain is classified by it; timeouts,
// cancellations and connection errors are transient; anything unknown is
// transient.
func ClassifyError(err error) ErrorClass {
	if err == nil {
		return ClassNone
	}
	if c, ok := errors.AsType[Classifier](err); ok {
		return c.ErrorClass()
	}
	if s, ok := errors.AsType[StatusCoder](err); ok {
		if c := ClassifyStatus(s.StatusCode()); c != ClassNone {
			return c
		}
	}
	// Timeouts (context.DeadlineExceeded, os.ErrDeadlineExceeded, a
	// net.Error), cancellations, connection errors (ECONNREFUSED,
	// ECONNRESET, EPIPE, io.ErrUnexpectedEOF) and anything unknown: the
	// effect may not have happened, so it may be tried again.
	return ClassTransient
}
