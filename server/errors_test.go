package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/idem-dev/idem/ledger"
)

// TestRetryableLedgerErrorsAre503: what the caller may simply retry is a
// 503 (sent with Retry-After), with a generic detail.
func TestRetryableLedgerErrorsAre503(t *testing.T) {
	cases := []struct {
		name string
		err  error
	}{
		{"write conflict", fmt.Errorf("claim %q: %w", "k", ledger.ErrConflict)},
		{"session moved", fmt.Errorf("claim %q: %w", "k", &ledger.SessionMovedError{Seen: 3, Last: 5})},
		{"store unavailable", fmt.Errorf("claim %q: %w", "k", ledger.ErrUnavailable)},
		{"deadline", fmt.Errorf("claim %q: %w", "k", context.DeadlineExceeded)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := problemOf(tc.err)
			status, detail := p.Status, p.Detail
			if status != http.StatusServiceUnavailable || detail != "busy: try again" {
				t.Fatalf("statusOf(%v) = %d %q, want 503 %q", tc.err, status, detail, "busy: try again")
			}
		})
	}
	if p := problemOf(errors.ErrUnsupported); p.Status != http.StatusInternalServerError {
		t.Fatalf("an unsupported store maps to %d, want 500", p.Status)
	}
}
