package postgres

import (
	"testing"

	"github.com/idem-dev/idem/ledger"
	"github.com/idem-dev/idem/ledger/ledgertest"
)

// TestConformance runs the ledger's conformance suite on PostgreSQL, each
// subtest in a schema of its own.
func TestConformance(t *testing.T) {
	testDSN(t)
	ledgertest.Run(t, func(t *testing.T) ledger.Store { return openStore(t, newSchema(t), nil) })
}
