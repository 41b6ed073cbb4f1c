package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idem-dev/idem/ledger"
)

// fail translates an error of operation op at the boundary: context
// errors pass unchanged, a lost or refused connection and a statement
// timeout match ErrUnavailable, bad data matches ledger.ErrInvalidInput,
// and anything else is wrapped with the operation.
func (s *Store) fail(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, ledger.ErrCorrupt), errors.Is(err, ledger.ErrInvalidInput):
		return fmt.Errorf("ledger/postgres: %s: %w", op, err)
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case pe.Code == "57014": // query_canceled: our statement_timeout
			return fmt.Errorf("ledger/postgres: %s: statement timeout (%v) exceeded: %w", op, s.cfg.StatementTimeout, ErrUnavailable)
		case pe.Code[:2] == "22", pe.Code == "23514": // data exception, check violation
			return fmt.Errorf("ledger/postgres: %s: %w: %s", op, ledger.ErrInvalidInput, pe.Message)
		case isConflict(err):
			return fmt.Errorf("ledger/postgres: %s: %w", op, ledger.ErrConflict)
		}
	}
	if unavailable(err) {
		return fmt.Errorf("ledger/postgres: %s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("ledger/postgres: %s: %w", op, err)
}

// unavailable reports whether err is a lost, refused or failed connection
// (as opposed to an error in the statement).
func unavailable(err error) bool {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case pe.Code[:2] == "08", // connection exception
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // admin/crash shutdown, cannot connect now
			pe.Code == "53300": // too many connections
			return true
		}
		return false
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err)
}

// ambiguous reports whether a write that failed with err may nevertheless
// have committed: the connection broke after the statement was sent.
func ambiguous(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return !pgconn.SafeToRetry(err)
	}
	if _, ok := errors.AsType[*pgconn.PgError](err); ok {
		return false // the server answered: the statement failed and rolled back
	}
	return unavailable(err) && !pgconn.SafeToRetry(err)
}

// isConflict reports a deadlock or serialization failure: the statement
// rolled back and may simply be run again.
func isConflict(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && (pe.Code == "40001" || pe.Code == "40P01")
}

// reconnect reports whether a statement that failed with err may be run
// again on a fresh connection: its connection was dead, and it is a read
// or was never executed. Then it drops every pooled connection (the server
// usually ended them all: a restart, a failover, pg_terminate_backend).
func (s *Store) reconnect(err error, read bool) bool {
	executed := !read
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		// The server ended the session before reading the statement.
		executed = executed && !(pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03")
	} else if !read && pgconn.SafeToRetry(err) {
		executed = false
	}
	if executed || !unavailable(err) {
		return false
	}
	s.log.Info("ledger/postgres: connection lost, reconnecting", "err", err)
	s.pool.Reset()
	return true
}
